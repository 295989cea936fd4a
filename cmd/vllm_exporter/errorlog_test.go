package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
)

// abortedWriter is the response of a client that hung up after the first
// write: every later write fails as a write on a reset connection does.
type abortedWriter struct {
	header http.Header
	port   int
	writes int
}

func (w *abortedWriter) Header() http.Header { return w.header }
func (w *abortedWriter) WriteHeader(int)     {}
func (w *abortedWriter) Write(p []byte) (int, error) {
	if w.writes++; w.writes == 1 {
		return len(p), nil
	}
	return 0, &net.OpError{Op: "write", Net: "tcp",
		Source: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9470},
		Addr:   &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: w.port},
		Err:    os.NewSyscallError("write", syscall.EPIPE)}
}

// TestMetricsAbortsLoggedOnce: clients that drop their connections while
// /metrics answers make promhttp fail the write of every family; nine such
// answers, each from another client port, log one error line, not one per
// family and answer.
func TestMetricsAbortsLoggedOnce(t *testing.T) {
	holder, err := config.NewHolder("")
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	x := &exporter{logger: log.NewLogfmtLogger(log.NewSyncWriter(&logs)), registry: prometheus.NewRegistry(), config: holder,
		vllmURL: "http://127.0.0.1:1", vllm: vllm.New(vllm.Options{URL: "http://127.0.0.1:1"}, nil)}
	for i := range 60 {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: fmt.Sprintf("test_family_%d", i), Help: "A family."})
		x.registry.MustRegister(g)
	}
	h, err := x.routes(&flags{telemetryPath: "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i := range 9 {
		w := &abortedWriter{header: http.Header{}, port: 50000 + i}
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		failed += w.writes - 1
	}
	if n := strings.Count(logs.String(), "level=error"); failed < 9*50 || n != 1 || !strings.Contains(logs.String(), "broken pipe") {
		t.Fatalf("%d failed writes logged %d error lines, want 1 (naming the error):\n%s", failed, n, logs.String())
	}
}

// TestErrorLogCountsHeldLines: after the interval the next line of a kind
// is logged with the number held back since the last; another kind is
// logged at once; net/http's server writes its lines through it.
func TestErrorLogCountsHeldLines(t *testing.T) {
	var logs strings.Builder
	l := newErrorLog(log.NewLogfmtLogger(&logs))
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }
	for i := range 513 {
		l.Println("error encoding and sending metric family:", fmt.Sprintf("write tcp 127.0.0.1:9470->127.0.0.1:%d: write: broken pipe", 40000+i))
	}
	srv := newHTTPServer(http.NotFoundHandler(), log.NewLogfmtLogger(&logs))
	for i := range 5 {
		srv.ErrorLog.Printf("http: TLS handshake error from 127.0.0.1:%d: client sent an HTTP request to an HTTPS server", 50000+i)
	}
	now = now.Add(errorLogEvery)
	l.Println("error encoding and sending metric family:", "write tcp 127.0.0.1:9470->127.0.0.1:1: write: broken pipe")
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `family: write tcp`) || !strings.Contains(lines[0], "suppressed=0") ||
		!strings.Contains(lines[1], "TLS handshake error") || !strings.Contains(lines[2], "suppressed=512") {
		t.Fatalf("want the first line, one TLS line, then one with 512 held back:\n%s", logs.String())
	}
}
