package slo

import (
	"slices"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

// The shipped SLOs on SGLang and trtllm-serve, through the real scraper,
// against vLLM's run of the same seed (the simulator's scheduler is the
// same under every engine; only what it exposes differs). SGLang's TTFT,
// e2e, preemption (its retractions) and availability events are vLLM's;
// it has no per-request TPOT, so tpot-p99 is unmeasurable with the
// reason. trtllm-serve has no preemption counter: the preemption SLO is
// unmeasurable, never computed from zeros, while its TPOT is measured.
func TestDefaultSLOsOfEachServer(t *testing.T) {
	var model string
	run := func(engine string) (*Watchdog, map[string][]string) {
		r := newSimRigWith(t, vllmsim.Config{VirtualClock: true, LoadGen: true, Seed: 7, Scenario: "kv_exhausted", Engine: engine})
		w := New(Options{}, holderFor(t, string(config.DefaultYAML)), Sources{VLLM: r.sc}, nil)
		r.ws, model = []*Watchdog{w}, r.sim.Config().Models[0]
		for range 40 {
			r.step(10 * time.Second)
		}
		return w, w.Unmeasurable()
	}
	ref, refUM := run(vllmsim.EngineVLLM)
	if len(refUM) != 0 {
		t.Fatalf("vLLM's SLOs unmeasurable: %v", refUM)
	}
	period := func(w *Watchdog, slo string) WindowResult { return resultFor(t, w, slo, model).PeriodWindow }
	if p := period(ref, "preemption"); p.Bad == 0 || p.Total == 0 {
		t.Fatalf("kv_exhausted preempted nothing on vLLM: %+v", p)
	}

	sg, sgUM := run(vllmsim.EngineSGLang)
	for _, slo := range []string{"ttft-p99", "e2e-p99", "preemption", "availability"} {
		if got, want := period(sg, slo), period(ref, slo); got.Bad != want.Bad || got.Total != want.Total {
			t.Errorf("SGLang %s: %v bad of %v, vLLM %v of %v", slo, got.Bad, got.Total, want.Bad, want.Total)
		}
	}
	if !slices.Contains(sgUM["tpot-p99"], UnmeasurableNoSeries) || len(sgUM) != 1 {
		t.Errorf("SGLang unmeasurable %v: want tpot-p99 (%s) only", sgUM, UnmeasurableNoSeries)
	}

	tr, trUM := run(vllmsim.EngineTRTLLM)
	if !slices.Contains(trUM["preemption"], UnmeasurableNoSeries) || len(trUM) != 1 {
		t.Errorf("trtllm-serve unmeasurable %v: want preemption (%s) only", trUM, UnmeasurableNoSeries)
	}
	for _, r := range tr.Status() {
		if r.SLO == "preemption" && r.PeriodWindow.Total > 0 {
			t.Errorf("trtllm-serve's preemption SLO counted events without a counter: %+v", r)
		}
	}
	if p := period(tr, "tpot-p99"); p.Total == 0 {
		t.Errorf("trtllm-serve's tpot-p99 measured nothing: %+v", p)
	}
}
