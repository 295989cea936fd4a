package main

import (
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

func TestServerMedianTTFT(t *testing.T) {
	q := func(v float64) *snapshot.Derived {
		return &snapshot.Derived{Quantiles: map[snapshot.HistogramName]map[float64]snapshot.Value{
			snapshot.TTFT: {0.5: snapshot.Some(v), 0.9: snapshot.Some(9)}}}
	}
	if v := serverMedianTTFT(map[string]*snapshot.Derived{"a": q(0.1), "b": q(0.2)}, "b"); !v.OK || v.V != 0.2 {
		t.Fatalf("named model: %+v", v)
	}
	if v := serverMedianTTFT(map[string]*snapshot.Derived{"only": q(0.3)}, ""); !v.OK || v.V != 0.3 {
		t.Fatalf("single model before discovery: %+v", v)
	}
	if v := serverMedianTTFT(map[string]*snapshot.Derived{"a": q(0.1), "b": q(0.2)}, ""); v.OK {
		t.Fatalf("ambiguous model gave %+v", v)
	}
	if v := serverMedianTTFT(nil, "a"); v.OK {
		t.Fatalf("no window gave %+v", v)
	}
}

func TestProbeFlags(t *testing.T) {
	app, _, _ := newApp()
	addProbeFlags(app)
	if _, err := app.Parse([]string{"--no-probe.enabled", "--probe.max-event-bytes=4096"}); err != nil {
		t.Fatal(err)
	}
	if probeFlags.enabled || probeFlags.maxEventBytes != 4096 {
		t.Fatalf("flags not parsed: %+v", probeFlags)
	}
}
