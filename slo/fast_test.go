package slo

import (
	"math"
	"path/filepath"
	"testing"
	"time"
)

// The watchdog's fast tier: after an hour of healthy traffic at 2
// requests/s, half of the requests bad sets the page within 90 seconds
// (the workbook's pairs alone would take about 17 minutes), a one-minute
// spike with a third bad does not, a handful of bad requests at low
// traffic does not, and the fast ring survives a checkpoint.
func TestWatchdogFastTier(t *testing.T) {
	h := holderFor(t, ttft99)
	src := &fakeVLLM{}
	state := filepath.Join(t.TempDir(), "state.json")
	w := New(Options{Interval: 10 * time.Second, StateFile: state}, h, Sources{VLLM: src}, nil)
	tr := &traffic{}
	now := t0
	step := func(good, bad float64) Result {
		now = now.Add(10 * time.Second)
		tr.add(good, bad)
		tickAt(w, src, tr, now)
		return only(t, w)
	}
	for i := 0; i < 360; i++ { // 1h healthy, 0.5% bad
		if r := step(19.9, 0.1); r.Page {
			t.Fatalf("healthy traffic pages: %v", r)
		}
	}
	// a one-minute spike, a third of the requests slow
	for i := 0; i < 6; i++ {
		if r := step(13.3, 6.7); r.Page {
			t.Fatalf("a one-minute spike pages: %v", r)
		}
	}
	for i := 0; i < 36; i++ {
		step(19.9, 0.1)
	}
	// hard breach: half bad
	var paged time.Duration
	for i := 1; i <= 30; i++ {
		r := step(10, 10)
		if r.Page {
			if !r.FastPage {
				t.Fatalf("paged by the workbook's pairs, not the fast tier: %v", r)
			}
			paged = time.Duration(i) * 10 * time.Second
			break
		}
	}
	if paged == 0 || paged > 90*time.Second {
		t.Fatalf("hard breach: page after %v, want within 90s", paged)
	}
	t.Logf("watchdog fast tier paged %v after the onset of a 50%% breach", paged)
	r := only(t, w)
	if f := r.Fast[1]; f.Name != "1m" || f.Total < 100 || f.Total > 140 {
		t.Errorf("fast 1m window holds %v events, want about 120: %+v", f.Total, r.Fast)
	}
	w.mu.Lock()
	err := w.saveLocked(now) // at the virtual time: a model is idle relative to it
	w.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	w2 := New(Options{Interval: 10 * time.Second, StateFile: state}, h, Sources{VLLM: src}, nil)
	tickAt(w2, src, tr, now)
	if r2 := only(t, w2); !r2.FastPage || r2.Fast[1].Total != r.Fast[1].Total {
		t.Errorf("restored fast ring: %+v, want %+v", r2.Fast, r.Fast)
	} else if want := now.Sub(t0.Add(10*time.Second)).Seconds() / (30 * 24 * 3600); math.Abs(r2.PeriodCovered-want) > 1e-9 || r2.PeriodCovered != r.PeriodCovered {
		// vllm_slo_period_covered_ratio: the first reading survives a restart
		t.Errorf("period covered %v (before the restart %v), want %v", r2.PeriodCovered, r.PeriodCovered, want)
	}

	// Low traffic: 6 requests a minute, one of them bad every 10 minutes:
	// the last minute is 1/6 bad, but the 5m window holds 30 events (the
	// guard) with one bad (3%).
	w3 := New(Options{Interval: 10 * time.Second}, holderFor(t, ttft99), Sources{VLLM: src}, nil)
	tr, now = &traffic{}, t0
	tickAt(w3, src, tr, now)
	for i := 0; i < 120; i++ {
		now = now.Add(10 * time.Second)
		if i%60 == 59 {
			tr.add(0, 1)
		} else {
			tr.add(1, 0)
		}
		tickAt(w3, src, tr, now)
		if r := only(t, w3); r.FastPage {
			t.Fatalf("low traffic: the fast tier fired: %v %+v", r, r.Fast)
		}
	}
}
