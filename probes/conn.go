package probes

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
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
// wrapper exposing NetConn); nil if there is none (a caller-supplied client).
func stamperOf(c net.Conn) *stampConn {
	for range 8 {
		switch x := c.(type) {
		case *stampConn:
			return x
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// newClient is the probes' own HTTP client: HTTP/1.1 only, the shared
// proxy policy (upstream.Access.Proxy: nil = direct), redirects never
// followed, and connections that timestamp every read with now. wrap, if
// set, wraps each stamped connection (tests).
func newClient(now func() time.Time, wrap func(net.Conn) net.Conn, proxy func(*http.Request) (*url.URL, error)) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = proxy
	tr.ForceAttemptHTTP2 = false
	var protos http.Protocols
	protos.SetHTTP1(true)
	tr.Protocols = &protos
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		var sc net.Conn = &stampConn{Conn: c, now: now}
		if wrap != nil {
			sc = wrap(sc)
		}
		return sc, nil
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
