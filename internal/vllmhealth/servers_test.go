package vllmhealth

import (
	"context"
	"testing"
	"time"

	vllmcol "github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
	"github.com/vllm-exporter/vllm_exporter/slo/bottleneck"
)

// /-/vllm/healthy's verdict on SGLang and trtllm-serve, each simulated and
// read by the real scraper (defaults: the server, its metrics path and
// model learnt) and classifier: serving while healthy; when the engine
// hangs, SGLang reads stalled from the scrape (its realtime token counter
// moves every step), while trtllm-serve, whose counters move only when a
// request finishes, is stalled only by the probes' detector, never by a
// scrape that merely saw no completion.
func TestVerdictOfEachServer(t *testing.T) {
	for _, engine := range []string{vllmsim.EngineSGLang, vllmsim.EngineTRTLLM} {
		t.Run(engine, func(t *testing.T) {
			sim := vllmsimtest.Start(t, vllmsim.Config{Engine: engine, VirtualClock: true, LoadGen: true, Seed: 5})
			th := config.DefaultBottleneck()
			sc := vllmcol.New(vllmcol.Options{URL: sim.URL(), Interval: 5 * time.Second, Windows: []time.Duration{th.Window}}, nil)
			c := bottleneck.New(bottleneck.Options{Thresholds: &th}, nil, bottleneck.Sources{VLLM: sc}, nil)
			probes := &fakeProbes{}
			tr := New(Sources{VLLM: sc, Probes: probes, Classes: func() map[string]string {
				out := map[string]string{}
				for _, st := range c.States() {
					out[st.Model] = string(st.Class)
				}
				return out
			}})
			scrape := func() State {
				sim.Advance(5 * time.Second)
				now := sim.Now()
				sc.ScrapeOnce(context.Background(), now)
				c.Tick(now)
				tr.Tick(now)
				return tr.Latest().State
			}
			for i := range 24 {
				if st := scrape(); i >= 2 && st != Serving {
					t.Fatalf("healthy scrape %d: %s (%s)", i, st, tr.Latest().Reason)
				}
			}
			if err := sim.SetScenario("stalled"); err != nil {
				t.Fatal(err)
			}
			stalledAt := -1
			for i := range 12 { // a minute of the hang, stall_after 10 s
				if st := scrape(); st == Stalled && stalledAt < 0 {
					stalledAt = i
				}
			}
			switch {
			case engine == vllmsim.EngineSGLang && stalledAt < 0:
				t.Fatalf("SGLang's hang never read stalled: %+v", tr.Latest())
			case engine == vllmsim.EngineTRTLLM && stalledAt >= 0:
				t.Fatalf("trtllm-serve read stalled at scrape %d from counters that move only at completion", stalledAt)
			case engine == vllmsim.EngineTRTLLM:
				probes.stalled = true
				if st := scrape(); st != Stalled {
					t.Fatalf("trtllm-serve with the probes' stall detector firing: %s", st)
				}
			}
		})
	}
}
