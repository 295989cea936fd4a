package testutil

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

func TestLogKeepsOrderAndCopies(t *testing.T) {
	var l Log[int]
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() { defer wg.Done(); l.Add(i) }()
	}
	wg.Wait()
	all := l.All()
	if len(all) != 50 {
		t.Fatalf("%d items, want 50", len(all))
	}
	all[0] = -1
	if l.All()[0] == -1 {
		t.Fatal("All returned the log's own slice")
	}
}

func TestPollWaitsForTheCondition(t *testing.T) {
	n := 0
	Poll(t, 10*time.Second, time.Millisecond, "third call", nil, func() (bool, string) {
		n++
		return n == 3, "not yet"
	})
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

func TestDoReadsStatusAndBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		w.Write([]byte(r.Method + " " + r.URL.Path))
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/x", nil)
	if code, body, err := Do(nil, req); code != http.StatusTeapot || body != "POST /x" || err != nil {
		t.Fatalf("Do: %d %q %v", code, body, err)
	}
	srv.Close()
	req, _ = http.NewRequest(http.MethodGet, srv.URL, nil)
	if code, _, err := Do(nil, req); code != 0 || err == nil {
		t.Fatalf("Do on a closed server: %d %v", code, err)
	}
}

func TestGoldenUpdatesThenReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.txt")
	if got := Golden(t, path, []byte("new"), true, "hint"); string(got) != "new" {
		t.Fatalf("after update: %q", got)
	}
	if err := os.WriteFile(path, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := Golden(t, path, []byte("other"), false, "hint"); string(got) != "kept" {
		t.Fatalf("without update the file must be read as it is: %q", got)
	}
}

func TestGatherAndText(t *testing.T) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x."}, []string{"k"})
	c.WithLabelValues("a").Add(2)
	c.WithLabelValues("b").Add(5)
	fams := GatherAll(t, c)
	if len(fams) != 1 || fams[0].GetName() != "x_total" {
		t.Fatalf("GatherAll: %v", fams)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	if v, ok := Gather(t, reg).Value("x_total", "k", "b"); !ok || v != 5 {
		t.Fatalf("Gather.Value: %v %v", v, ok)
	}
	want := "# HELP x_total x.\n# TYPE x_total counter\nx_total{k=\"a\"} 2\nx_total{k=\"b\"} 5\n"
	if got := GatherText(t, reg); got != want {
		t.Fatalf("GatherText:\n%s\nwant:\n%s", got, want)
	}
	if got := Encode(t, fams); got != want {
		t.Fatalf("Encode:\n%s", got)
	}
}

func TestConfigHolderLoadsTheFile(t *testing.T) {
	h, path := ConfigHolder(t, "slos:\n- {name: a, kind: availability, objective: 0.99}\n")
	if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), "name: a") {
		t.Fatalf("file at %s: %v", path, err)
	}
	if s := h.Get().SLOs; len(s) != 1 || s[0].Name != "a" {
		t.Fatalf("holder: %+v", s)
	}
}
