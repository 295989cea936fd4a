package main

import (
	"context"
	"testing"

	"github.com/go-kit/log"

	"github.com/vllm-exporter/vllm_exporter/collector/gpu"
	"github.com/vllm-exporter/vllm_exporter/probes"
	"github.com/vllm-exporter/vllm_exporter/slo"
)

// TestPresentIsNilForAbsentComponents: a component that does not run
// reaches its consumers as a nil interface (they test src.GPU != nil), not
// as a nil pointer inside one.
func TestPresentIsNilForAbsentComponents(t *testing.T) {
	if g := present[slo.GPUSource]((*gpu.Sampler)(nil)); g != nil {
		t.Fatalf("absent GPU sampler is a non-nil interface %#v", g)
	}
	if p := present[slo.ProbeSource]((*probes.Scheduler)(nil)); p != nil {
		t.Fatalf("absent probes are a non-nil interface %#v", p)
	}
	s := probes.New(probes.Options{URL: "http://127.0.0.1:1"}, nil, nil)
	if p := present[slo.ProbeSource](s); p == nil {
		t.Fatal("a running scheduler was dropped")
	}
}

// TestWireBuildsEveryComponent: wire builds each component from the
// command line, in order, and hooks the consumers to the watchdog (no
// loops of their own); a disabled component is nil and nothing reads it.
func TestWireBuildsEveryComponent(t *testing.T) {
	for _, c := range []struct {
		args      []string
		probes    bool
		pprof     bool
		wantLoops int // scraper, probes, watchdog
	}{
		{[]string{"--no-collector.gpu"}, true, false, 3},
		{[]string{"--no-collector.gpu", "--no-probe.enabled", "--web.enable-pprof"}, false, true, 2},
	} {
		app, f, _ := newApp()
		if _, err := app.Parse(append([]string{"--vllm.url=http://127.0.0.1:1"}, c.args...)); err != nil {
			t.Fatal(err)
		}
		x, stop, err := newExporter(context.Background(), f, log.NewNopLogger())
		if err != nil {
			t.Fatal(err)
		}
		if err := x.wire(f); err != nil {
			t.Fatal(err)
		}
		stop()
		if x.vllm == nil || x.gpu != nil || (x.probes != nil) != c.probes || x.slo == nil || x.classifier == nil || x.verdict == nil {
			t.Errorf("%v: components vllm %v gpu %v probes %v slo %v classifier %v verdict %v", c.args,
				x.vllm != nil, x.gpu != nil, x.probes != nil, x.slo != nil, x.classifier != nil, x.verdict != nil)
		}
		if len(x.loops) != c.wantLoops {
			t.Errorf("%v: %d loops, want %d (the classifier and the verdict tick from the watchdog)", c.args, len(x.loops), c.wantLoops)
		}
		_, hasPprof := x.handlers["GET /debug/pprof/"]
		if _, ok := x.handlers["GET /-/vllm/healthy"]; !ok || hasPprof != c.pprof {
			t.Errorf("%v: routes %v", c.args, x.handlers)
		}
	}
}
