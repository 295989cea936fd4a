package vllmhealth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	vllmcol "github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/slo/bottleneck"
)

// vllm #53130 reproduced with the simulator (the control behind POST
// /admin/defer {"fraction":0.95,"livelock":true}, at --metrics-version
// v1-0.33) and read by the real scraper and classifier on the simulator's
// virtual clock, one scrape every 5 s: the verdict is serving until the
// scheduler stops admitting, livelocked within two scrapes of the first
// scrape that shows it (nothing running, the deferred pile holding every
// max_num_seqs slot, no token since the previous scrape), and then stays
// livelocked, never stalled, even though the probes' stall detector also
// fires (a livelocked engine answers no probe either).
func TestDeferredLivelockFromSimulator(t *testing.T) {
	sim, err := vllmsim.New(vllmsim.Config{VirtualClock: true, LoadGen: true, Seed: 7, MetricsVersion: vllmsim.MetricsLatest})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(sim.Metrics()) }))
	defer hs.Close()
	th := config.DefaultBottleneck()
	sc := vllmcol.New(vllmcol.Options{URL: hs.URL, Interval: 5 * time.Second, Windows: []time.Duration{th.Window}}, nil)
	c := bottleneck.New(bottleneck.Options{Thresholds: &th}, nil, bottleneck.Sources{VLLM: sc}, nil)
	probes := &fakeProbes{}
	tr := New(Sources{VLLM: sc, Probes: probes, Classes: func() map[string]string {
		out := map[string]string{}
		for _, st := range c.States() {
			out[st.Model] = string(st.Class)
		}
		return out
	}})
	var prev *snapshot.Model
	scrape := func() (State, *snapshot.Model) {
		sim.Advance(5 * time.Second)
		now := sim.Now()
		sc.ScrapeOnce(context.Background(), now)
		c.Tick(now)
		tr.Tick(now)
		var m *snapshot.Model
		if l := sc.Latest(); l != nil && l.Up {
			for _, x := range l.Models {
				m = x
			}
		}
		return tr.Latest().State, m
	}
	for i := 0; i < 36; i++ { // 3 minutes of healthy traffic
		st, m := scrape()
		if i >= 2 && st != Serving {
			t.Fatalf("healthy scrape %d: %s (%s), want serving", i, st, tr.Latest().Reason)
		}
		prev = m
	}
	if err := sim.SetDefer(vllmsim.DeferSpec{Fraction: 0.95, Livelock: true}); err != nil {
		t.Fatal(err)
	}
	maxSeqs := float64(sim.Config().MaxNumSeqs)
	onset, first := -1, -1
	var states []State
	for i := 0; i < 60; i++ { // 5 minutes of the livelock
		st, m := scrape()
		states = append(states, st)
		if onset < 0 && prev != nil && m != nil {
			d := m.WaitingDeferred()
			if m.Running.V == 0 && d.OK && d.V >= maxSeqs && m.GenerationTokens.V == prev.GenerationTokens.V {
				onset = i
				probes.stalled = true // the worst case: the probes see the stall at once
			}
		}
		if first < 0 && st == Livelocked {
			first = i
		}
		prev = m
	}
	if onset < 0 {
		t.Fatalf("the simulator never showed the livelock; states %v", states)
	}
	if first < 0 || first > onset+2 {
		t.Fatalf("livelocked first at scrape %d, the livelock shows at scrape %d (at most 2 later); states %v", first, onset, states)
	}
	for i, st := range states {
		switch {
		case st == Stalled:
			t.Errorf("scrape %d after the defer: stalled; the livelock must never read as stalled; states %v", i, states)
		case i < first && st != Serving:
			t.Errorf("scrape %d before the livelock: %s, want serving", i, st)
		case i >= first && st != Livelocked:
			t.Errorf("scrape %d: %s after livelocked at %d: the verdict flaps; states %v", i, st, first, states)
		}
	}
	v := tr.Latest()
	if v.State.Live() || v.State.Ready() {
		t.Errorf("livelocked must fail both liveness and readiness: %+v", v)
	}
	t.Logf("livelock visible at scrape %d after the defer, livelocked at %d; reason %q", onset, first, v.Reason)
}

// The probes' stall detector firing during a livelock does not turn the
// verdict to stalled: livelocked is checked first.
func TestLivelockOutranksProbeStall(t *testing.T) {
	v := &snapshot.VLLM{Up: true, Models: map[string]*snapshot.Model{"m": {}}}
	got := Evaluate(v, &snapshot.Probes{EngineStalled: true}, map[string]string{"m": classLivelock}, time.Now())
	if got.State != Livelocked {
		t.Errorf("verdict %+v, want livelocked", got)
	}
	if got := Evaluate(v, &snapshot.Probes{EngineStalled: true}, map[string]string{"m": "near_optimal"}, time.Now()); got.State != Stalled {
		t.Errorf("a probe stall without the livelock class: %+v, want stalled", got)
	}
}
