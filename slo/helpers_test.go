package slo

import (
	"sync"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	sharedtest "github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// t0 is an arbitrary virtual start time, aligned to an hour.
var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func holderFor(t testing.TB, yaml string) *config.Holder {
	t.Helper()
	h, _ := sharedtest.ConfigHolder(t, yaml)
	return h
}

// fakeVLLM serves a settable snapshot.
type fakeVLLM struct {
	mu sync.Mutex
	s  *snapshot.VLLM
}

func (f *fakeVLLM) Latest() *snapshot.VLLM {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.s
}
func (f *fakeVLLM) Window(time.Duration) map[string]*snapshot.Derived { return nil }
func (f *fakeVLLM) set(s *snapshot.VLLM) {
	f.mu.Lock()
	f.s = s
	f.mu.Unlock()
}

type fakeProbes struct{ s *snapshot.Probes }

func (f *fakeProbes) Latest() *snapshot.Probes { return f.s }

// traffic is a cumulative request stream for one model: good requests land
// in the lowest bucket, bad ones above every threshold we use in tests
// (TTFT 2.5s bucket: bad for thresholds <= 1s).
type traffic struct {
	good, bad   float64
	preemptions float64
	aborted     float64
}

func (tr *traffic) add(good, bad float64) { tr.good += good; tr.bad += bad }

func ttftHist(good, bad float64) snapshot.Histogram {
	b := config.TTFTBuckets
	h := snapshot.Histogram{Bounds: append([]float64(nil), b...), Counts: make([]float64, len(b)), Count: good + bad}
	for i, x := range b {
		switch {
		case x >= 2.5:
			h.Counts[i] = good + bad
		case x >= 0.001:
			h.Counts[i] = good
		}
	}
	return h
}

// tickAt publishes tr as the scrape at now and ticks w there: one scrape
// followed by one evaluation.
func tickAt(w *Watchdog, src *fakeVLLM, tr *traffic, now time.Time) {
	src.set(tr.snap(now))
	w.Tick(now)
}

// snap renders the traffic as a vLLM snapshot of model "m".
func (tr *traffic) snap(now time.Time) *snapshot.VLLM {
	return &snapshot.VLLM{Time: now, Up: true, Models: map[string]*snapshot.Model{
		"m": {
			Name:             "m",
			Preemptions:      snapshot.Some(tr.preemptions),
			FinishedByReason: map[string]float64{"stop": tr.good + tr.bad - tr.aborted, "length": 0, "abort": tr.aborted, "error": 0},
			Histograms:       snapshot.HistogramsOf(map[snapshot.HistogramName]snapshot.Histogram{snapshot.TTFT: ttftHist(tr.good, tr.bad)}),
		},
	}}
}

const ttft99 = `
slos:
  - name: ttft
    kind: latency
    metric: ttft
    threshold: 1
    objective: 0.99
`

const ttft999 = `
slos:
  - name: ttft
    kind: latency
    metric: ttft
    threshold: 1
    objective: 0.999
`

// only returns the single result, failing otherwise.
func only(t testing.TB, w *Watchdog) Result {
	t.Helper()
	st := w.Status()
	if len(st) != 1 {
		t.Fatalf("want 1 result, got %d: %v", len(st), st)
	}
	return st[0]
}

func win(t testing.TB, r Result, name string) WindowResult {
	t.Helper()
	wr, ok := r.Window(name)
	if !ok {
		t.Fatalf("no window %s in %v", name, r)
	}
	return wr
}

func holderFromPath(p string) (*config.Holder, error) { return config.NewHolder(p) }
