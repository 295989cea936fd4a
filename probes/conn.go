package probes

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	commoncfg "github.com/prometheus/common/config"

	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
)

// stampConn is a client connection that remembers when its latest Read
// returned bytes. A probe stamps each SSE event with the socket read that
// delivered the event's last byte, not with the moment the HTTP and SSE
// layers above got round to handing the bytes over.
//
// Why this is exact for HTTP/1.1: one response is read by one goroutine at
// a time, with no read-ahead beyond what the socket already delivered, and
// Go's chunked-body reader returns once it holds data and the next chunk
// header is not yet in (it only waits for the rest of a chunk it has begun).
// So when the response body's Read returns n > 0, the latest socket read is
// the one that brought the last of those bytes (for bytes that came with
// the headers, the read that brought them). vLLM flushes each SSE event as
// its own chunk. HTTP/2 would read frames ahead on its own goroutine, so
// probe clients speak HTTP/1.1 only.
type stampConn struct {
	net.Conn
	now func() time.Time

	mu   sync.Mutex
	last time.Time
}

func (c *stampConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		t := c.now()
		c.mu.Lock()
		c.last = t
		c.mu.Unlock()
	}
	return n, err
}

// lastRead is when the latest Read that returned bytes returned (zero
// before any).
func (c *stampConn) lastRead() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// stamperOf finds the stampConn under c, looking through TLS (and any other
// wrapper exposing NetConn) and through wrappers that embed the connection
// as an exported Conn field (go-conntrack's, which common/config's
// transport puts around every dialled connection); nil if there is none (a
// caller-supplied client).
func stamperOf(c net.Conn) *stampConn {
	for range 8 {
		if x, ok := c.(*stampConn); ok {
			return x
		}
		if c = upstream.InnerConn(c); c == nil {
			return nil
		}
	}
	return nil
}

// newClient is the probes' own HTTP client on the shared connection to vLLM
// (TLS, credentials, proxy and redirect policy from u): HTTP/1.1 only, and
// connections that timestamp every read with now. wrap, if set, wraps each
// stamped connection (tests).
func newClient(now func() time.Time, wrap func(net.Conn) net.Conn, u *upstream.Upstream) (*http.Client, error) {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		// Raw: a chunk wakes only the goroutine that reads it (see
		// internal/rawconn for the thread wake-ups it saves per chunk).
		c, err := upstream.DialRaw(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		var sc net.Conn = &stampConn{Conn: c, now: now}
		if wrap != nil {
			sc = wrap(sc)
		}
		return sc, nil
	}
	return u.Client("vllm_probe", commoncfg.WithDialContextFunc(dial), commoncfg.WithHTTP2Disabled())
}
