package testutil

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestFreeAddrIsLoopback(t *testing.T) {
	host, port, err := net.SplitHostPort(FreeAddr(t))
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("FreeAddr: %s %s %v", host, port, err)
	}
}

func TestScrapeValue(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "# HELP a x\na{b=\"1\"} 2.5\na{b=\"10\"} 7\nvllm_up 1\n")
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for prefix, want := range map[string]float64{`a{b="1"} `: 2.5, `a{b="10"} `: 7, "vllm_up ": 1, "missing ": -1} {
		if got := ScrapeValue(addr, prefix); got != want {
			t.Errorf("ScrapeValue(%q) = %v, want %v", prefix, got, want)
		}
	}
	if got := ScrapeValue(FreeAddr(t), "vllm_up "); got != -1 {
		t.Errorf("scrape of a closed port = %v, want -1", got)
	}
}

func TestSyncBufferConcurrentWriters(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Go(func() {
			for j := 0; j < 100; j++ {
				fmt.Fprint(&b, "x")
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 800) {
		t.Fatalf("%d bytes", len(got))
	}
}

// recorder is a testing.TB that records Skip and Fatal instead of acting
// (Promtool calls nothing else).
type recorder struct {
	testing.TB
	skipped, fatal bool
}

func (r *recorder) Helper()      {}
func (r *recorder) Skip(...any)  { r.skipped = true; runtime.Goexit() }
func (r *recorder) Fatal(...any) { r.fatal = true; runtime.Goexit() }

// runPromtool calls Promtool on a recorder in its own goroutine (Skip and
// Fatal end it) and reports what happened.
func runPromtool() (path string, r *recorder) {
	r = &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		path = Promtool(r)
	}()
	<-done
	return path, r
}

// Without promtool on PATH: skipped locally, a failure under CI=true.
func TestPromtoolMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CI", "")
	if _, r := runPromtool(); !r.skipped || r.fatal {
		t.Fatalf("locally: skipped=%v fatal=%v, want a skip", r.skipped, r.fatal)
	}
	t.Setenv("CI", "true")
	if _, r := runPromtool(); r.skipped || !r.fatal {
		t.Fatalf("CI=true: skipped=%v fatal=%v, want a failure", r.skipped, r.fatal)
	}
}
