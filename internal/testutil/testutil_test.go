package testutil

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
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
