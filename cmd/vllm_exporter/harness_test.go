package main

// In-process harness for the hardening tests: the whole exporter (serveMain,
// every component wired) on a loopback port, driven over HTTP, with
// its logs captured, and checks for leaked goroutines and retained heap.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// hardExtraStart, when set by a test, runs on the wired exporter before
// it serves (to register a test collector).
var hardExtraStart atomic.Pointer[func(context.Context, *exporter) error]

// hardExporter is one running in-process exporter.
type hardExporter struct {
	t      *testing.T
	base   string // scheme://127.0.0.1:port
	client *http.Client
	logs   *testutil.SyncBuffer
	x      *exporter
	cancel context.CancelFunc
	done   chan error
}

// hardStart parses args the way run does and runs serveMain until the test
// (or h.stop) cancels it. The listen address is chosen here; client talks to
// it (nil: a plain HTTP client without keep-alive).
func hardStart(t *testing.T, client *http.Client, args ...string) *hardExporter {
	t.Helper()
	addr := testutil.FreeAddr(t)
	app, f, _ := newApp()
	if _, err := app.Parse(append([]string{"--web.listen-address=" + addr}, args...)); err != nil {
		t.Fatalf("flags %q: %v", args, err)
	}
	logs := &testutil.SyncBuffer{}
	logger, slogger := newLogger(f.logLevel, f.logFormat, logs, f.scrubber())
	if client == nil {
		client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	}
	scheme := "http"
	if wc := *f.web.WebConfigFile; wc != "" {
		if b, err := os.ReadFile(wc); err == nil && strings.Contains(string(b), "tls_server_config") {
			scheme = "https"
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &hardExporter{t: t, base: scheme + "://" + addr, client: client, logs: logs, cancel: cancel, done: make(chan error, 1)}
	wired := make(chan *exporter, 1)
	go func() {
		h.done <- serveWired(ctx, f, logger, slogger, func(x *exporter) error {
			wired <- x
			if fn := hardExtraStart.Load(); fn != nil {
				return (*fn)(ctx, x)
			}
			return nil
		})
	}()
	t.Cleanup(func() { h.stop() })
	// Up when the listener answers anything at all.
	h.eventually("listener up", func() (bool, string) {
		select {
		case err := <-h.done:
			h.done <- err
			t.Fatalf("exporter exited early: %v\n%s", err, logs)
		default:
		}
		resp, err := client.Get(h.base + "/-/healthy")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return true, ""
	})
	select {
	case h.x = <-wired:
	default: // exited early: reported by the wait above
	}
	return h
}

// stop cancels the exporter and waits for serveMain to return; it fails the
// test if shutdown is not clean. Idempotent.
func (h *hardExporter) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("serveMain returned %v on shutdown", err)
		}
	case <-time.After(30 * time.Second):
		h.t.Fatalf("exporter did not shut down\n%s", goroutineDump{})
	}
	if tr, ok := h.client.Transport.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
}

// goroutineDump prints every goroutine's stack when formatted (only when a
// test fails).
type goroutineDump struct{}

func (goroutineDump) String() string {
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.String()
}

// eventually polls cond until it holds (testutil.Eventually: a liveness
// bound, not a timing assertion), showing the exporter's logs on failure.
func (h *hardExporter) eventually(what string, cond func() (bool, string)) {
	h.t.Helper()
	testutil.Eventually(h.t, what, h.logs, cond)
}

// get fetches path and returns status and body.
func (h *hardExporter) get(path string) (int, string) {
	h.t.Helper()
	return h.do(http.MethodGet, path)
}

// post sends an empty POST.
func (h *hardExporter) post(path string) (int, string) {
	h.t.Helper()
	return h.do(http.MethodPost, path)
}

// do sends an empty request; a failed request fails the test.
func (h *hardExporter) do(method, path string) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.base+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "text/plain")
	}
	code, body, err := testutil.Do(h.client, req)
	if err != nil && code == 0 {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, body
}

// hardMetrics is one parsed /metrics page.
type hardMetrics = testutil.Metrics

// metrics scrapes /metrics; it must always answer 200 with valid text.
func (h *hardExporter) metrics() hardMetrics {
	h.t.Helper()
	code, body := h.get("/metrics")
	if code != http.StatusOK {
		h.t.Fatalf("/metrics answered %d: %s", code, body)
	}
	fams, err := testutil.ParseMetrics(body)
	if err != nil {
		h.t.Fatalf("/metrics is not valid text exposition: %v", err)
	}
	return fams
}

// waitMetric waits until cond holds on a fresh /metrics page, and returns that page.
func (h *hardExporter) waitMetric(what string, cond func(m hardMetrics) (bool, string)) hardMetrics {
	h.t.Helper()
	var page hardMetrics
	h.eventually(what, func() (bool, string) {
		page = h.metrics()
		return cond(page)
	})
	return page
}

// is builds a waitMetric condition "name{kv} == want".
func hardIs(name string, want float64, kv ...string) func(hardMetrics) (bool, string) {
	return func(m hardMetrics) (bool, string) {
		v, ok := m.Value(name, kv...)
		return ok && v == want, fmt.Sprintf("%s%v = %v (present %v), want %v", name, kv, v, ok, want)
	}
}

// atLeast builds a waitMetric condition "name{kv} >= want".
func hardAtLeast(name string, want float64, kv ...string) func(hardMetrics) (bool, string) {
	return func(m hardMetrics) (bool, string) {
		v, ok := m.Value(name, kv...)
		return ok && v >= want, fmt.Sprintf("%s%v = %v (present %v), want >= %v", name, kv, v, ok, want)
	}
}

func hardAll(conds ...func(hardMetrics) (bool, string)) func(hardMetrics) (bool, string) {
	return func(m hardMetrics) (bool, string) {
		for _, c := range conds {
			if ok, why := c(m); !ok {
				return false, why
			}
		}
		return true, ""
	}
}

// hardBaseline is the process state a case must return to.
type hardBaseline struct {
	goroutines int
	heap       uint64
}

func hardSnapshot() hardBaseline {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return hardBaseline{goroutines: runtime.NumGoroutine(), heap: ms.HeapAlloc}
}

// hardCheckLeaks waits (a settle loop polling the real sockets' and
// servers' goroutines, which testing/synctest cannot see; not a timing
// assertion) for the goroutine count to fall back to the baseline, and
// checks that the heap retained after a GC grew by less than maxHeapGrowth.
func hardCheckLeaks(t *testing.T, before hardBaseline, maxHeapGrowth uint64) {
	t.Helper()
	var now hardBaseline
	testutil.Poll(t, 20*time.Second, 50*time.Millisecond, "goroutines back to the baseline", goroutineDump{}, func() (bool, string) {
		now = hardSnapshot()
		return now.goroutines <= before.goroutines, fmt.Sprintf("goroutine leak: %d before, %d after", before.goroutines, now.goroutines)
	})
	if now.heap > before.heap && now.heap-before.heap > maxHeapGrowth {
		t.Fatalf("heap retained after the case grew by %d bytes (> %d)", now.heap-before.heap, maxHeapGrowth)
	}
}
