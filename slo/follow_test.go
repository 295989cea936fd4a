package slo_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/slo"
	"github.com/vllm-exporter/vllm_exporter/slo/bottleneck"
)

// tickRecorder is a watchdog hook that reports each tick's time.
type tickRecorder chan time.Time

func (r tickRecorder) Tick(now time.Time) { r <- now }

// next waits for the watchdog's next tick. The deadline only bounds a
// broken build; the tick normally follows the scrape at once.
func (r tickRecorder) next(t *testing.T) time.Time {
	t.Helper()
	select {
	case now := <-r:
		return now
	case <-time.After(time.Minute):
		t.Fatal("the watchdog did not evaluate the new scrape")
		return time.Time{}
	}
}

var kvLine = regexp.MustCompile(`(?m)^(vllm:kv_cache_usage_perc\{[^}]*\}) .*$`)

// The watchdog (and the classifier hooked to it) evaluates each scrape as
// it lands, stamped with the scrape's own time: a verdict's onset falls in
// the interval of the scrape that shows it, never one interval later. The
// scrapes here run on a virtual clock, and the watchdog's fallback timer
// is an hour, so only the scraper's publication can trigger the ticks.
func TestWatchdogEvaluatesEachScrapeInItsOwnInterval(t *testing.T) {
	sim, err := vllmsim.New(vllmsim.Config{VirtualClock: true})
	if err != nil {
		t.Fatal(err)
	}
	base := sim.Metrics()
	var body atomic.Pointer[[]byte]
	setKV := func(v string) {
		b := kvLine.ReplaceAll(base, []byte("${1} "+v))
		body.Store(&b)
	}
	setKV("0.4")
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if down.Load() {
			http.Error(w, "engine dead", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(*body.Load())
	}))
	defer srv.Close()

	const every = 5 * time.Second
	scraper := vllm.New(vllm.Options{URL: srv.URL, Interval: every, Windows: []time.Duration{time.Minute}}, nil)
	holder, err := config.NewHolder("")
	if err != nil {
		t.Fatal(err)
	}
	w := slo.New(slo.Options{Interval: time.Hour}, holder, slo.Sources{VLLM: scraper}, nil)
	th := config.DefaultBottleneck()
	th.HoldTicks = 1 // the onset is then the tick itself
	c := bottleneck.New(bottleneck.Options{Thresholds: &th}, nil, bottleneck.Sources{VLLM: scraper}, nil)
	rec := make(tickRecorder, 16)
	w.AddHook(c)
	w.AddHook(rec)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	rec.next(t) // Run's start-up evaluation, before any scrape

	model := "meta-llama/Llama-3.1-8B-Instruct"
	t0 := time.Date(2026, 8, 10, 6, 0, 0, 0, time.UTC)
	steps := []struct {
		kv   string
		down bool
		want bottleneck.Class
	}{
		{kv: "0.4"}, {kv: "0.4"}, {kv: "0.99", want: bottleneck.KVCacheExhausted},
		{kv: "0.99", want: bottleneck.KVCacheExhausted}, {down: true, want: bottleneck.ServerUnavailable},
	}
	for i, s := range steps {
		setKV(s.kv)
		down.Store(s.down)
		at := t0.Add(time.Duration(i) * every)
		scraper.ScrapeOnce(ctx, at)
		if got := rec.next(t); !got.Equal(at) {
			t.Fatalf("scrape %d at %v was evaluated at %v", i, at, got)
		}
		if s.want == "" {
			continue
		}
		st, ok := c.State(model)
		if !ok || st.Class != s.want {
			t.Fatalf("scrape %d (kv %s, down %v): class %q right after it, want %s", i, s.kv, s.down, st.Class, s.want)
		}
	}
}

// Without any new snapshot (a stuck scraper, or none at all) the watchdog
// still evaluates on its fallback interval, so time-based windows advance.
func TestWatchdogFallsBackToItsIntervalWithoutSnapshots(t *testing.T) {
	scraper := vllm.New(vllm.Options{URL: "http://127.0.0.1:1"}, nil) // never scraped
	holder, err := config.NewHolder("")
	if err != nil {
		t.Fatal(err)
	}
	w := slo.New(slo.Options{Interval: time.Millisecond}, holder, slo.Sources{VLLM: scraper}, nil)
	rec := make(tickRecorder, 16)
	w.AddHook(rec)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	prev := rec.next(t)
	for i := 0; i < 3; i++ {
		if now := rec.next(t); now.Before(prev) {
			t.Fatalf("fallback tick %d at %v is before the previous one %v", i, now, prev)
		} else {
			prev = now
		}
	}
}
