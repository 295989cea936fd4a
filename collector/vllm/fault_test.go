package vllm

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-exporter/vllm_exporter/collector"
	sharedtest "github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// TestFaults scrapes a good body, then the fault: vllm_up must drop to 0,
// the reason be counted, no series from vLLM be shown as fresh, and every
// other collector on the registry keep being served.
func TestFaults(t *testing.T) {
	good := fixture(t, "vllm-main-2026-08-v1.txt")
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	blockUntilDone := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-hang:
		}
	}
	// Compressed once: compressing per request made the case slow enough,
	// under -race on a loaded machine, to hit the scrape timeout first.
	bomb := gzipped(t, bytes.Repeat([]byte("# padding comment\n"), 100_000))
	cases := []struct {
		name    string
		handler http.HandlerFunc
		down    bool // point the scraper at a closed port
		opts    func(*Options)
		reason  string
	}{
		{name: "vLLM down", down: true, reason: ReasonConnect},
		{name: "hang beyond timeout", handler: blockUntilDone, reason: ReasonTimeout},
		{name: "hang in the middle of the body", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Write(good[:1000])
			w.(http.Flusher).Flush()
			blockUntilDone(w, r)
		}, reason: ReasonTimeout},
		{name: "503 engine dead", handler: func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "engine dead", http.StatusServiceUnavailable)
		}, reason: ReasonHTTP5xx},
		{name: "404 wrong path", handler: http.NotFound, reason: ReasonHTTP4xx},
		{name: "304 not a body", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusNotModified)
		}, reason: ReasonHTTPStatus},
		{name: "garbage text", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte("<html><body>Hello, this is not Prometheus { at all</body></html>\n"))
		}, reason: ReasonParse},
		{name: "binary garbage", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte{0x00, 0xff, 0x13, 0x37, '\n', 'v', ' ', 0x01})
		}, reason: ReasonParse},
		{name: "truncated mid-line", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte(`vllm:num_requests_running{engine="0",model_name="m`))
		}, reason: ReasonParse},
		// The limit admits the good body; the fault doubles it.
		{name: "oversize with Content-Length", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(2*len(good)))
			w.Write(good)
			w.Write(good)
		}, opts: func(o *Options) { o.MaxBodyBytes = int64(len(good)) }, reason: ReasonBodyTooLarge},
		{name: "oversize chunked", handler: func(w http.ResponseWriter, _ *http.Request) {
			for range 2 {
				for i := 0; i < len(good); i += 1000 {
					w.Write(good[i:min(i+1000, len(good))])
					w.(http.Flusher).Flush()
				}
			}
		}, opts: func(o *Options) { o.MaxBodyBytes = int64(len(good)) }, reason: ReasonBodyTooLarge},
		{name: "gzip bomb", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(bomb)
		}, opts: func(o *Options) { o.MaxBodyBytes = 64 << 10 }, reason: ReasonBodyTooLarge},
		{name: "corrupt gzip", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(good[:100])
		}, reason: ReasonParse},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newFakeVLLM(t, good, "text/plain; version=0.0.4")
			url := srv.URL
			if c.down {
				dead := httptest.NewServer(http.NotFoundHandler())
				url = dead.URL
				dead.Close()
			}
			health := collector.NewHealth()
			s := newTestScraper(t, url, func(o *Options) {
				// Only the cases that must time out get a short timeout; the
				// others must fail for their own reason, however slow the machine.
				o.Timeout = 5 * time.Second
				if c.reason == ReasonTimeout {
					o.Timeout = 200 * time.Millisecond
				}
				o.Health = health
				if c.opts != nil {
					c.opts(o)
				}
			})
			// Another source on the same registry: it must keep being served.
			other := prometheus.NewGauge(prometheus.GaugeOpts{Name: "vllm_gpu_up", Help: "test stand-in for another collector"})
			other.Set(1)
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(s, health, other)

			if !c.down {
				scrapeAt(s, t0)
				if !s.Latest().Up {
					t.Fatalf("good scrape failed: %s", s.Latest().Error)
				}
				srv.set(nil, c.handler)
			}
			scrapeAt(s, t0.Add(5*time.Second))

			latest := s.Latest()
			if latest.Up || latest.Error != c.reason || latest.Models != nil {
				t.Fatalf("Latest() = up %v, error %q, models %v; want down with %q", latest.Up, latest.Error, latest.Models, c.reason)
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP vllm_up 1 if the last scrape of vLLM's /metrics was fetched and parsed, else 0.
# TYPE vllm_up gauge
vllm_up 0
# HELP vllm_gpu_up test stand-in for another collector
# TYPE vllm_gpu_up gauge
vllm_gpu_up 1
# HELP vllm_exporter_collector_up 1 if the collector's last run succeeded, 0 if it failed.
# TYPE vllm_exporter_collector_up gauge
vllm_exporter_collector_up{collector="vllm"} 0
`), "vllm_up", "vllm_gpu_up", "vllm_exporter_collector_up"); err != nil {
				t.Fatal(err)
			}
			if got := testutil.ToFloat64(counterFor(t, reg, "vllm_exporter_scrape_errors_total", c.reason)); got != 1 {
				t.Fatalf("scrape_errors_total{reason=%q} = %v, want 1", c.reason, got)
			}
			if n, err := testutil.GatherAndCount(reg, vllmSeries...); err != nil || n != 0 {
				t.Fatalf("%d series from vLLM still exported after a failed scrape (err %v)", n, err)
			}
			if !c.down {
				// The last good scrape's time stays visible.
				if n, _ := testutil.GatherAndCount(reg, "vllm_exporter_last_successful_scrape_timestamp_seconds"); n != 1 {
					t.Fatal("last successful scrape timestamp lost")
				}
				// And it comes back.
				srv.set(good, nil)
				scrapeAt(s, t0.Add(10*time.Second))
				if !s.Latest().Up {
					t.Fatalf("no recovery: %s", s.Latest().Error)
				}
			}
		})
	}
}

// counterFor extracts one labelled scrape-error counter as a Collector for
// testutil.ToFloat64.
func counterFor(t *testing.T, g prometheus.Gatherer, name, reason string) prometheus.Collector {
	t.Helper()
	v, ok := sharedtest.Gather(t, g).Value(name, "reason", reason)
	if !ok {
		t.Fatalf("%s{reason=%q} not exported", name, reason)
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x", Help: "x"})
	c.Add(v)
	return c
}

func TestGzipBodyAccepted(t *testing.T) {
	good := fixture(t, "vllm-0.7.3-v0-multiprocess.txt")
	var sawGzipAsk bool
	srv := newFakeVLLM(t, nil, "")
	srv.set(nil, func(w http.ResponseWriter, r *http.Request) {
		sawGzipAsk = strings.Contains(r.Header.Get("Accept-Encoding"), "gzip")
		// As prometheus_client's make_asgi_app does when asked.
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(gzipped(t, good))
	})
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	if !sawGzipAsk {
		t.Error("scraper did not send Accept-Encoding: gzip")
	}
	if l := s.Latest(); !l.Up || l.Models[llama].Running.V != 7 {
		t.Fatalf("gzip body: up %v error %q", l.Up, l.Error)
	}
}

// --vllm.url may carry basic-auth credentials for a proxy: they are sent,
// and never logged.
func TestURLPasswordNotLogged(t *testing.T) {
	var gotUser, gotPass string
	srv := newFakeVLLM(t, nil, "")
	srv.set(nil, func(w http.ResponseWriter, r *http.Request) {
		gotUser, gotPass, _ = r.BasicAuth()
		http.Error(w, "", http.StatusBadGateway)
	})
	var logs bytes.Buffer
	u := strings.Replace(srv.URL, "http://", "http://scraper:s3cret@", 1)
	s := New(Options{URL: u, Timeout: 2 * time.Second}, log.NewLogfmtLogger(&logs))
	scrapeAt(s, t0)
	srv.set(fixture(t, "vllm-main-2026-08-v1.txt"), nil)
	scrapeAt(s, t0.Add(5*time.Second)) // logs the recovery
	if gotUser != "scraper" || gotPass != "s3cret" {
		t.Errorf("basic auth not sent: %q %q", gotUser, gotPass)
	}
	if !strings.Contains(logs.String(), "scraper:xxxxx@") || strings.Contains(logs.String(), "s3cret") {
		t.Fatalf("logs:\n%s", logs.String())
	}
}

// A Prometheus scrape of the exporter does no I/O and no work: it never
// reaches vLLM, and two scrapes (two Prometheus replicas) read the same.
func TestCollectDoesNoIO(t *testing.T) {
	var hits atomic.Int32
	body := fixture(t, "vllm-main-2026-08-v1.txt")
	srv := newFakeVLLM(t, nil, "")
	srv.set(nil, func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Write(body)
	})
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	scrapeAt(s, t0.Add(time.Minute))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	first := gatherText(t, reg)
	for range 5 {
		if again := gatherText(t, reg); !bytes.Equal(again, first) {
			t.Fatal("two gathers without a scrape in between differ")
		}
	}
	// The two scrapes and the one detection before them (/v1/models).
	if n := hits.Load(); n != 3 {
		t.Fatalf("vLLM saw %d requests for 2 scrapes and 6 gathers", n)
	}
}

// Scrapes that fail in every way (5xx, timeouts mid-body, oversize) leave no
// goroutine or connection behind.
func TestNoGoroutineLeak(t *testing.T) {
	good := fixture(t, "vllm-main-2026-08-v1.txt")
	srv := newFakeVLLM(t, good, "text/plain")
	s := newTestScraper(t, srv.URL, func(o *Options) {
		o.Timeout = 50 * time.Millisecond
		o.MaxBodyBytes = int64(len(good))
	})
	scrapeAt(s, t0)
	base := runtime.NumGoroutine()
	faults := []http.HandlerFunc{
		func(w http.ResponseWriter, _ *http.Request) { // an error page longer than what is drained
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write(good[:10000])
		},
		func(w http.ResponseWriter, r *http.Request) {
			w.Write(good[:100])
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		},
		func(w http.ResponseWriter, _ *http.Request) { w.Write(good); w.Write(good) },
		nil, // good again
	}
	for i := range 40 {
		srv.set(good, faults[i%len(faults)])
		scrapeAt(s, t0.Add(time.Duration(i+1)*5*time.Second))
	}
	// The goroutines are the real transport's and the test server's, on
	// real sockets: testing/synctest cannot wait for them (it needs
	// in-bubble I/O), so poll until they are gone.
	sharedtest.Poll(t, 10*time.Second, 20*time.Millisecond, "goroutines of 40 failing scrapes gone", nil, func() (bool, string) {
		n := runtime.NumGoroutine()
		return n <= base+4, fmt.Sprintf("%d goroutines, %d before", n, base)
	})
}
