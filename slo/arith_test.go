package slo

import (
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestWindowsScaleWithPeriod(t *testing.T) {
	var names []string
	for _, d := range Windows(30 * 24 * time.Hour) {
		names = append(names, WindowName(d))
	}
	want := []string{"5m", "30m", "1h", "2h", "6h", "1d", "3d"}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("30d windows %v, want %v", names, want)
		}
	}
	w7 := Windows(7 * 24 * time.Hour)
	if w7[0] != 70*time.Second || w7[2] != 14*time.Minute || w7[6] != 16*time.Hour+48*time.Minute {
		t.Fatalf("7d windows %v", w7)
	}
	if fineWidth(30*24*time.Hour) != 30*time.Second || coarseWidth(30*24*time.Hour) != time.Hour {
		t.Fatalf("bucket widths %v %v", fineWidth(30*24*time.Hour), coarseWidth(30*24*time.Hour))
	}
}

func TestIncrementCounterReset(t *testing.T) {
	b, tot, reset := increment(cumulative{Bad: 5, Total: 100}, cumulative{Bad: 7, Total: 150})
	if b != 2 || tot != 50 || reset {
		t.Fatalf("normal increment = %v %v %v", b, tot, reset)
	}
	// Total went down: the server restarted; the new values are the increment.
	b, tot, reset = increment(cumulative{Bad: 5, Total: 100}, cumulative{Bad: 1, Total: 20})
	if b != 1 || tot != 20 || !reset {
		t.Fatalf("reset increment = %v %v %v", b, tot, reset)
	}
	// Only bad went down (cannot happen for one process; still a reset).
	b, tot, reset = increment(cumulative{Bad: 5, Total: 100}, cumulative{Bad: 4, Total: 120})
	if b != 4 || tot != 120 || !reset {
		t.Fatalf("partial reset increment = %v %v %v", b, tot, reset)
	}
}

// Hand-computed: objective 0.99 (budget 0.01), min_events 10.
func TestBurnRateAndBudgetArithmetic(t *testing.T) {
	src := &fakeVLLM{}
	w := New(Options{}, holderFor(t, ttft99), Sources{VLLM: src}, nil)
	tr := &traffic{}

	// No snapshot yet: no results at all.
	w.Tick(t0)
	if len(w.Status()) != 0 {
		t.Fatalf("results before any data: %v", w.Status())
	}
	// First reading is a baseline even though the counters are not zero:
	// the server's history before we started is not "now".
	tr.add(1000, 1000)
	tickAt(w, src, tr, t0)
	r := only(t, w)
	for _, wr := range append(r.Windows, r.PeriodWindow) {
		if wr.Total != 0 || wr.ErrorRatio.OK || wr.BurnRate.OK || wr.Enough {
			t.Fatalf("empty window %s has values: %+v", wr.Name, wr)
		}
	}
	if !r.BudgetRemaining.OK || r.BudgetRemaining.V != 1 || r.Page || r.Ticket {
		t.Fatalf("empty: %v", r)
	}

	// +100 requests, 5 bad, one minute later.
	tr.add(95, 5)
	tickAt(w, src, tr, t0.Add(time.Minute))
	r = only(t, w)
	for _, n := range []string{"5m", "1h", "3d", "30d"} {
		wr := win(t, r, n)
		if wr.Bad != 5 || wr.Total != 100 || !near(wr.ErrorRatio.V, 0.05) || !near(wr.BurnRate.V, 5) || !wr.Enough {
			t.Fatalf("window %s after 1m: %+v", n, wr)
		}
	}
	if !near(r.BudgetRemaining.V, 1-5) { // 0.05 / 0.01 = 5 budgets spent
		t.Fatalf("budget = %v, want -4", r.BudgetRemaining.V)
	}
	// Burn 5x: not above 14.4 or 6 (no page); 1d and 2h are above 3 (ticket).
	if r.Page || !r.Ticket {
		t.Fatalf("after 1m: page=%v ticket=%v", r.Page, r.Ticket)
	}

	// Ten minutes in: +100 requests, none bad. The first minute's events
	// left the 5m window but not the 30m one.
	tr.add(100, 0)
	tickAt(w, src, tr, t0.Add(10*time.Minute))
	r = only(t, w)
	if wr := win(t, r, "5m"); wr.Bad != 0 || wr.Total != 100 || wr.ErrorRatio.V != 0 || wr.BurnRate.V != 0 {
		t.Fatalf("5m after 10m: %+v", wr)
	}
	if wr := win(t, r, "30m"); wr.Bad != 5 || wr.Total != 200 || !near(wr.BurnRate.V, 2.5) {
		t.Fatalf("30m after 10m: %+v", wr)
	}
	if !near(r.BudgetRemaining.V, 1-2.5) {
		t.Fatalf("budget = %v, want -1.5", r.BudgetRemaining.V)
	}

	// Counter reset (vLLM restarted): cumulative drops to 27 good + 3 bad;
	// those 30 are the increment.
	tr2 := &traffic{}
	tr2.add(27, 3)
	src.set(tr2.snap(t0.Add(11 * time.Minute)))
	w.Tick(t0.Add(11 * time.Minute))
	r = only(t, w)
	if wr := win(t, r, "30m"); wr.Bad != 8 || wr.Total != 230 || !near(wr.ErrorRatio.V, 8.0/230) {
		t.Fatalf("30m after reset: %+v", wr)
	}
	if wr := win(t, r, "5m"); wr.Bad != 3 || wr.Total != 130 {
		t.Fatalf("5m after reset: %+v", wr)
	}

	// A scrape that failed adds nothing and keeps the baseline.
	src.set(nil)
	w.Tick(t0.Add(12 * time.Minute))
	tr2.add(10, 0)
	src.set(tr2.snap(t0.Add(13 * time.Minute)))
	w.Tick(t0.Add(13 * time.Minute))
	if wr := win(t, only(t, w), "30m"); wr.Bad != 8 || wr.Total != 240 {
		t.Fatalf("30m after gap: %+v", wr)
	}

	// Four days later everything has left the 3d window; only the period
	// (30d) still holds it. Windows with no events are absent, not zero.
	w.Tick(t0.Add(4 * 24 * time.Hour))
	r = only(t, w)
	for _, wr := range r.Windows {
		if wr.Total != 0 || wr.ErrorRatio.OK || wr.BurnRate.OK {
			t.Fatalf("window %s after 4d: %+v", wr.Name, wr)
		}
	}
	if wr := r.PeriodWindow; wr.Bad != 8 || wr.Total != 240 || !near(r.BudgetRemaining.V, 1-(8.0/240)/0.01) {
		t.Fatalf("period after 4d: %+v budget %v", wr, r.BudgetRemaining)
	}
	if r.Page || r.Ticket {
		t.Fatalf("alerting on empty windows: %v", r)
	}
}

func TestRingWrapAndSums(t *testing.T) {
	r := newRing(time.Second, 5*time.Second) // 6 buckets
	base := time.Unix(1000, 0)
	for i := 0; i < 20; i++ {
		r.add(base.Add(time.Duration(i)*time.Second), float64(i%2), 1)
	}
	// last 3 buckets: i=17,18,19 -> bad 1+0+1
	b, tot := r.sums(base.Add(19*time.Second), []time.Duration{3 * time.Second, 6 * time.Second, time.Hour})
	if b[0] != 2 || tot[0] != 3 || b[1] != 3 || tot[1] != 6 || tot[2] != 6 {
		t.Fatalf("sums %v %v", b, tot)
	}
	// Late event older than the ring is dropped, one inside is kept.
	r.add(base.Add(2*time.Second), 1, 1)
	r.add(base.Add(18*time.Second), 1, 1)
	b, tot = r.sums(base.Add(19*time.Second), []time.Duration{time.Hour})
	if b[0] != 4 || tot[0] != 7 {
		t.Fatalf("after late adds %v %v", b, tot)
	}
	// A jump past the whole ring clears it.
	b, tot = r.sums(base.Add(100*time.Second), []time.Duration{time.Hour})
	if tot[0] != 0 {
		t.Fatalf("stale buckets counted: %v %v", b, tot)
	}
}

// tpot reads vLLM's per-request histogram when the server has it and the
// inter-token latency otherwise; switching between them (a vLLM upgrade)
// only takes a new baseline instead of counting one histogram's history.
func TestTPOTHistogramChoice(t *testing.T) {
	src := &fakeVLLM{}
	w := New(Options{}, holderFor(t, `
slos:
  - {name: tpot, kind: latency, metric: tpot, threshold: 0.1, objective: 0.99}
`), Sources{VLLM: src}, nil)
	hist := func(good, bad float64) snapshot.Histogram {
		b := config.TokenLatencyBuckets
		h := snapshot.Histogram{Bounds: b, Counts: make([]float64, len(b)), Count: good + bad}
		for i, x := range b {
			if x >= 0.1 {
				h.Counts[i] = good
			}
			if x >= 0.5 {
				h.Counts[i] = good + bad
			}
		}
		return h
	}
	snap := func(now time.Time, hs map[snapshot.HistogramName]snapshot.Histogram) {
		src.set(&snapshot.VLLM{Time: now, Up: true, Models: map[string]*snapshot.Model{"m": {Name: "m", Histograms: snapshot.HistogramsOf(hs)}}})
		w.Tick(now)
	}
	// Old vLLM: only ITL.
	snap(t0, map[snapshot.HistogramName]snapshot.Histogram{snapshot.InterTokenLatency: hist(1000, 0)})
	snap(t0.Add(time.Minute), map[snapshot.HistogramName]snapshot.Histogram{snapshot.InterTokenLatency: hist(1090, 10)})
	if wr := win(t, only(t, w), "5m"); wr.Bad != 10 || wr.Total != 100 {
		t.Fatalf("itl: %+v", wr)
	}
	// Upgraded vLLM exposes both: the per-request histogram wins; its
	// first reading is a baseline.
	both := func(good, bad float64) map[snapshot.HistogramName]snapshot.Histogram {
		return map[snapshot.HistogramName]snapshot.Histogram{snapshot.InterTokenLatency: hist(5000, 5000), snapshot.RequestTPOT: hist(good, bad)}
	}
	snap(t0.Add(2*time.Minute), both(50, 0))
	if wr := win(t, only(t, w), "5m"); wr.Bad != 10 || wr.Total != 100 {
		t.Fatalf("switch counted history: %+v", wr)
	}
	snap(t0.Add(3*time.Minute), both(70, 30))
	if wr := win(t, only(t, w), "5m"); wr.Bad != 40 || wr.Total != 150 {
		t.Fatalf("request tpot: %+v", wr)
	}
}

// A live histogram without the threshold's bucket boundary (an old vLLM)
// is reported, not guessed, and other SLOs still evaluate.
func TestMissingBoundaryIsAnError(t *testing.T) {
	src := &fakeVLLM{}
	w := New(Options{}, holderFor(t, ttft99+`
  - {name: avail, kind: availability, objective: 0.99}
`), Sources{VLLM: src}, nil)
	tr := &traffic{}
	s := tr.snap(t0)
	h := s.Models["m"].Histograms.Get(snapshot.TTFT)
	h.Bounds = []float64{0.5, 2.5}
	h.Counts = []float64{0, 0}
	s.Models["m"].Histograms.Set(snapshot.TTFT, h)
	src.set(s)
	w.Tick(t0)
	if len(w.Status()) != 1 || w.Status()[0].SLO != "avail" {
		t.Fatalf("status %v", w.Status())
	}
	if got := w.self.evalErrors.snapshot()["ttft"]; got != 1 {
		t.Fatalf("evaluation errors for ttft: %v", got)
	}
}

// The windows up to 2h are summed from 30 s buckets and those from 6h from
// 5-minute ones (30-day period): each window's sum is exactly its buckets'
// (now's bucket and the ones before it, ceil(span/width) in all), so it
// holds every event of (now-span+width, now] and none before now-span.
func TestWindowSumsAtTwoResolutions(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	src := &fakeVLLM{}
	w := New(Options{}, holderFor(t, ttft99), Sources{VLLM: src}, nil)
	tr := &traffic{}
	type event struct {
		at       time.Time
		bad, all float64
	}
	var events []event
	period := 30 * 24 * time.Hour
	windows := Windows(period)
	fw, mw := fineWidth(period), mediumWidth(period)
	if fw != 30*time.Second || mw != 5*time.Minute {
		t.Fatalf("bucket widths %v and %v, want 30s and 5m", fw, mw)
	}
	bucketSum := func(now time.Time, span, width time.Duration) (bad, all float64) {
		end := floorDiv(now.UnixNano(), int64(width))
		n := int64((span + width - 1) / width)
		for _, e := range events {
			if i := floorDiv(e.at.UnixNano(), int64(width)); i <= end && i > end-n {
				bad, all = bad+e.bad, all+e.all
			}
		}
		return
	}
	timeSum := func(from, to time.Time) (all float64) {
		for _, e := range events {
			if e.at.After(from) && !e.at.After(to) {
				all += e.all
			}
		}
		return
	}
	now := t0.Add(17 * time.Second)
	tickAt(w, src, tr, now) // the baseline
	for step := 0; now.Sub(t0) < 4*24*time.Hour; step++ {
		now = now.Add(time.Duration(20+rng.Intn(200)) * time.Second)
		good, bad := float64(rng.Intn(50)), float64(rng.Intn(3))
		tr.add(good, bad)
		events = append(events, event{now, bad, good + bad})
		tickAt(w, src, tr, now)
		if step%37 != 0 {
			continue
		}
		r := only(t, w)
		for i, span := range windows {
			width := fw
			if i >= firstMediumWindow {
				width = mw
			}
			got := r.Windows[i]
			wantBad, wantAll := bucketSum(now, span, width)
			if got.Bad != wantBad || got.Total != wantAll {
				t.Fatalf("%v in, window %s: %v bad of %v, want %v of %v (%v buckets)", now.Sub(t0), got.Name, got.Bad, got.Total, wantBad, wantAll, width)
			}
			if lo, hi := timeSum(now.Add(-span+width), now), timeSum(now.Add(-span), now); got.Total < lo || got.Total > hi {
				t.Fatalf("%v in, window %s: %v events, outside [%v, %v]", now.Sub(t0), got.Name, got.Total, lo, hi)
			}
		}
	}
}
