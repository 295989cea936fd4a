package slo

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

// simRig is the simulated vLLM on a virtual clock, scraped over HTTP by the
// real scraper (collector/vllm), feeding watchdogs: the whole server-side
// path, with time advanced by the test.
type simRig struct {
	t   *testing.T
	sim *vllmsim.Sim
	sc  *vllm.Scraper
	ws  []*Watchdog
}

func newSimRig(t *testing.T, scenario string) *simRig {
	t.Helper()
	sim, err := vllmsim.New(vllmsim.Config{VirtualClock: true, LoadGen: true, Seed: 7, Scenario: scenario})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	sc := vllm.New(vllm.Options{URL: sim.URL(), Interval: 10 * time.Second, Windows: []time.Duration{time.Minute}}, log.NewNopLogger())
	return &simRig{t: t, sim: sim, sc: sc}
}

// step advances the virtual clock by d, scrapes once and ticks every
// watchdog at the new time.
func (r *simRig) step(d time.Duration) time.Time {
	r.sim.Advance(d)
	now := r.sim.Now()
	r.sc.ScrapeOnce(context.Background(), now)
	if v := r.sc.Latest(); v == nil || !v.Up {
		r.t.Fatalf("scrape of the simulator failed: %+v", v)
	}
	for _, w := range r.ws {
		w.Tick(now)
	}
	return now
}

// Healthy simulated traffic with its natural noise, through the real
// scraper and the shipped default SLOs, never pages or tickets; a vLLM
// restart in the middle (every counter reset) is absorbed; the
// availability SLO's events match the simulator's ground truth; and a
// watchdog killed and re-created from its checkpoint ends up identical to
// one that ran throughout.
func TestSimHealthyDefaultSLOs(t *testing.T) {
	r := newSimRig(t, "healthy")
	holder := holderFor(t, string(config.DefaultYAML))
	stateFile := filepath.Join(t.TempDir(), "slo.state")
	ref := New(Options{}, holder, Sources{VLLM: r.sc}, nil)
	victim := New(Options{StateFile: stateFile}, holder, Sources{VLLM: r.sc}, nil)
	r.ws = []*Watchdog{ref, victim}
	const step = 10 * time.Second
	base := r.step(step) // baseline scrape
	for i := 0; i < 90; i++ {
		if i == 45 {
			r.sim.Restart() // vLLM restarts: counters go back to zero
		}
		if i == 30 {
			// kill -9 of the exporter: the victim misses one tick and is
			// re-created from its checkpoint.
			r.ws = []*Watchdog{ref}
			r.step(step)
			victim = New(Options{StateFile: stateFile}, holder, Sources{VLLM: r.sc}, nil)
			r.ws = []*Watchdog{ref, victim}
			continue
		}
		r.step(step)
		for _, res := range ref.Status() {
			if res.Page || res.Ticket {
				t.Fatalf("healthy simulated traffic alerted at step %d: %v", i, res)
			}
		}
	}
	end := r.sim.Now()
	if got := stripTime(victim.Status()); !reflect.DeepEqual(got, stripTime(ref.Status())) {
		t.Fatalf("restarted watchdog diverged:\n got %v\nwant %v", got, stripTime(ref.Status()))
	}
	got := map[string]bool{}
	for _, res := range ref.Status() {
		got[res.SLO] = true
	}
	for _, s := range []string{"ttft-p99", "tpot-p99", "e2e-p99", "preemption", "availability"} {
		if !got[s] {
			t.Errorf("no result for default SLO %s: %v", s, ref.Status())
		}
	}
	// Ground truth: every request the simulator finished after the baseline
	// scrape is one availability event, across the vLLM restart.
	var want float64
	for _, rec := range r.sim.Records() {
		if rec.LastToken.After(base) && !rec.LastToken.After(end) {
			want++
		}
	}
	avail := only2(t, ref, "availability")
	if pw := avail.PeriodWindow; pw.Total != want || pw.Bad != 0 || want < 500 {
		t.Fatalf("availability events %v/%v, simulator finished %v requests", pw.Bad, pw.Total, want)
	}
}

// A hard breach in the simulator (arrivals far above capacity: the queue
// grows and every TTFT exceeds 1s) pages within the short window.
func TestSimHardBreachPages(t *testing.T) {
	r := newSimRig(t, "healthy")
	w := New(Options{}, holderFor(t, ttft99), Sources{VLLM: r.sc}, nil)
	r.ws = []*Watchdog{w}
	r.step(10 * time.Second)
	for i := 0; i < 60; i++ {
		r.step(10 * time.Second)
		if res := only(t, w); res.Page || res.Ticket {
			t.Fatalf("healthy phase alerted: %v", res)
		}
	}
	if err := r.sim.SetScenario("queueing"); err != nil {
		t.Fatal(err)
	}
	breach := r.sim.Now()
	for {
		now := r.step(10 * time.Second)
		if only(t, w).Page {
			if d := now.Sub(breach); d > 5*time.Minute {
				t.Fatalf("paged %v after the breach began, want within the 5m short window", d)
			}
			break
		}
		if now.Sub(breach) > 5*time.Minute {
			t.Fatalf("no page 5m into the breach: %v", w.Status())
		}
	}
}
