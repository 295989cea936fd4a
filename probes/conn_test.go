package probes

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/rawconn"
	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
)

// readLog sits above the probe's stamped connection: it logs every socket
// read (bytes and the clock at the stamp) and then moves the clock on by a
// second, standing in for whatever time the HTTP and SSE layers take before
// the probe gets to the bytes.
type readLog struct {
	net.Conn
	clk  *fakeClock
	mu   sync.Mutex
	raw  []byte
	ends []int       // cumulative offset in raw after each read
	at   []time.Time // clock when each read returned (= its stamp)
}

func (r *readLog) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	if n > 0 {
		r.mu.Lock()
		r.raw = append(r.raw, p[:n]...)
		r.ends = append(r.ends, len(r.raw))
		r.at = append(r.at, r.clk.Now())
		r.mu.Unlock()
		r.clk.Add(time.Second)
	}
	return n, err
}

func (r *readLog) NetConn() net.Conn { return r.Conn }

// arrival is when the read that delivered raw[:end] returned.
func (r *readLog) arrival(t *testing.T, end int) time.Time {
	t.Helper()
	for i, e := range r.ends {
		if e >= end {
			return r.at[i]
		}
	}
	t.Fatalf("offset %d never read", end)
	return time.Time{}
}

func TestChunksStampedAtSocketRead(t *testing.T) {
	srv := newFakeVLLM(t, func(w http.ResponseWriter, r *http.Request, req request) {
		writeStream(w, r.URL.Path, req, streamSpec{multi: 2})
	})
	clk := newFakeClock()
	var logs []*readLog
	var mu sync.Mutex
	client := mustNewClient(t, clk.Now, func(c net.Conn) net.Conn {
		l := &readLog{Conn: c, clk: clk}
		mu.Lock()
		logs = append(logs, l)
		mu.Unlock()
		return l
	})
	h, _ := writeConfig(t, probesYAML("m", profile("p", "completions", 8, 6, "")))
	s := New(Options{URL: srv.URL, Clock: clk, Client: client}, h, nil)
	res, err := s.ProbeOnce(context.Background(), "p")
	if err != nil || res.Reason != "" {
		t.Fatalf("probe: %v %q", err, res.Reason)
	}
	if len(logs) != 1 {
		t.Fatalf("%d connections", len(logs))
	}
	l := logs[0]
	// Where each content event ends in the raw bytes (headers and chunked
	// framing included), and so which read delivered it.
	var arrivals []time.Time
	for off := 0; ; {
		i := bytes.Index(l.raw[off:], []byte(`"choices":[{`))
		if i < 0 {
			break
		}
		end := off + i + bytes.Index(l.raw[off+i:], []byte("\n\n")) + 2
		arrivals = append(arrivals, l.arrival(t, end))
		off = end
	}
	if len(arrivals) != res.Chunks || res.Chunks != 5 {
		t.Fatalf("%d content events in the bytes, probe saw %d chunks", len(arrivals), res.Chunks)
	}
	if want := arrivals[0].Sub(res.Start); res.TTFT != want {
		t.Errorf("TTFT %v, want %v (the socket read of the first chunk)", res.TTFT, want)
	}
	if want := arrivals[len(arrivals)-1].Sub(res.Start); res.E2E != want {
		t.Errorf("E2E %v, want %v (the socket read of the last chunk)", res.E2E, want)
	}
	for i, g := range res.ITL {
		if want := arrivals[i+1].Sub(arrivals[i]); g != want {
			t.Errorf("ITL[%d] %v, want %v", i, g, want)
		}
	}
	if want := (res.E2E - res.TTFT) / 5; res.TPOT != want {
		t.Errorf("TPOT %v, want (e2e-ttft)/(6-1) = %v", res.TPOT, want)
	}
	t.Logf("%d socket reads; TTFT %v E2E %v", len(l.at), res.TTFT, res.E2E)
}

func TestProbeClientHTTP1AndStampThroughTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 1 {
			t.Errorf("probe spoke %s", r.Proto)
		}
		w.WriteHeader(204)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	var stamped *stampConn
	var mu sync.Mutex
	// The server's certificate is trusted through the shared connection's
	// tls_config (a CA file), as an operator would configure it.
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := upstream.DefaultHTTPClientConfig()
	cfg.TLSConfig.CAFile = caFile
	up, err := upstream.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := newClient(time.Now, func(c net.Conn) net.Conn {
		mu.Lock()
		stamped = c.(*stampConn)
		mu.Unlock()
		return c
	}, up)
	if err != nil {
		t.Fatal(err)
	}
	// What the probe sees (GotConn's connection, TLS over go-conntrack's
	// wrapper over the stamped one) leads to the stamp.
	var got atomic.Pointer[stampConn]
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		got.Store(stamperOf(info.Conn))
	}})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 {
		t.Fatalf("response over %s", resp.Proto)
	}
	mu.Lock()
	defer mu.Unlock()
	if stamped == nil || stamped.lastRead().IsZero() {
		t.Fatal("no stamped read on the TLS connection")
	}
	if got.Load() != stamped {
		t.Fatal("stamperOf does not find the stamp under the client's TLS connection")
	}
	if raw := rawconn.Raw(stamped.Conn); raw != rawconn.Enabled {
		t.Fatalf("the probe connection reads raw: %v, want %v (internal/rawconn)", raw, rawconn.Enabled)
	}
	if got := stamperOf(tls.Client(stamped, &tls.Config{})); got != stamped {
		t.Fatal("stamperOf does not see through TLS")
	}
	if stamperOf(&net.TCPConn{}) != nil {
		t.Fatal("stamperOf found a stamp on a plain connection")
	}
}

// mustNewClient is newClient on the default connection to vLLM.
func mustNewClient(t testing.TB, now func() time.Time, wrap func(net.Conn) net.Conn) *http.Client {
	t.Helper()
	c, err := newClient(now, wrap, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
