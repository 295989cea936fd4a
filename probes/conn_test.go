package probes

import (
	"bytes"
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
)

// readLog is the probe's dialled connection: it logs every socket read
// (bytes, and the clock when it returned) and moves the clock on by a
// second before each read returns, standing in for the wait on the
// network, so every read has a time of its own.
type readLog struct {
	net.Conn
	clk  *fakeClock
	read chan<- struct{} // told of each read
	mu   sync.Mutex
	raw  []byte
	ends []int       // cumulative offset in raw after each read
	at   []time.Time // clock when each read returned
}

func (r *readLog) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	if n > 0 {
		at := r.clk.Add(time.Second)
		r.mu.Lock()
		r.raw = append(r.raw, p[:n]...)
		r.ends = append(r.ends, len(r.raw))
		r.at = append(r.at, at)
		r.mu.Unlock()
		select {
		case r.read <- struct{}{}:
		default:
		}
	}
	return n, err
}

// halves writes each event in two parts (its "data: " and the rest), each
// flushed and then held until the client has read something, so an
// event's bytes come in over two reads and no two events share one.
type halves struct {
	http.ResponseWriter
	ctx  context.Context
	read <-chan struct{}
}

func (h halves) Write(p []byte) (int, error) {
	k := min(len(p), len("data: "))
	n, err := h.ResponseWriter.Write(p[:k])
	if err != nil {
		return n, err
	}
	h.Flush()
	m, err := h.ResponseWriter.Write(p[k:])
	return n + m, err
}

func (h halves) Flush() {
	h.ResponseWriter.(http.Flusher).Flush()
	select {
	case <-h.read:
	case <-h.ctx.Done():
	}
}

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

// Each chunk is stamped with the read that delivered its last byte: not an
// earlier one (an event split over reads), not a later one (events the
// transport buffered together), and the probe's TTFT, ITL and E2E are
// differences of those stamps.
func TestChunksStampedByTheReadThatDeliversThem(t *testing.T) {
	read := make(chan struct{}, 64)
	srv := newFakeVLLM(t, func(w http.ResponseWriter, r *http.Request, req request) {
		for len(read) > 0 {
			<-read // the request's own reads
		}
		writeStream(halves{w, r.Context(), read}, r.URL.Path, req, streamSpec{multi: 2})
	})
	clk := newFakeClock()
	var logs []*readLog
	var mu sync.Mutex
	client := mustNewClient(t, func(c net.Conn) net.Conn {
		l := &readLog{Conn: c, clk: clk, read: read}
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
		t.Errorf("TTFT %v, want %v (the read that delivered the first chunk)", res.TTFT, want)
	}
	if want := arrivals[len(arrivals)-1].Sub(res.Start); res.E2E != want {
		t.Errorf("E2E %v, want %v (the read that delivered the last chunk)", res.E2E, want)
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

// The probe client speaks HTTP/1.1 even to a server offering HTTP/2, over
// TLS trusted through the shared connection's tls_config, and dials through
// the test's wrapper.
func TestProbeClientSpeaksHTTP1OverTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 1 {
			t.Errorf("probe spoke %s", r.Proto)
		}
		w.WriteHeader(204)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
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
	var read atomic.Int64
	client, err := newClient(func(c net.Conn) net.Conn { return &countConn{Conn: c, in: &read, out: new(atomic.Int64)} }, up)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 {
		t.Fatalf("response over %s", resp.Proto)
	}
	if read.Load() == 0 {
		t.Fatal("the TLS connection was not dialled through the wrapper")
	}
}

// mustNewClient is newClient on the default connection to vLLM.
func mustNewClient(t testing.TB, wrap func(net.Conn) net.Conn) *http.Client {
	t.Helper()
	c, err := newClient(wrap, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
