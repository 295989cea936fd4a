package main

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

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

// By default the runtime and process series are the ones the Overview
// dashboard's exporter row reads; the flags bring the rest back, and the
// exporter's own families always pass.
func TestRuntimeFilterKeepsWhatPanelsRead(t *testing.T) {
	names := func(all, memStats bool) map[string]bool {
		reg := prometheus.NewRegistry()
		own := prometheus.NewGauge(prometheus.GaugeOpts{Name: "vllm_exporter_own", Help: "h"})
		reg.MustRegister(goCollector(memStats), processCollector(all, log.NewNopLogger()), own)
		mfs, err := runtimeFilter(reg, all, memStats).Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, mf := range mfs {
			got[mf.GetName()] = true
		}
		return got
	}
	def := names(false, false)
	want := map[string]bool{"vllm_exporter_own": true}
	for n := range runtimeSeriesRead {
		want[n] = true
	}
	if !maps.Equal(def, want) {
		t.Errorf("default families %v, want %v", slices.Sorted(maps.Keys(def)), slices.Sorted(maps.Keys(want)))
	}
	all := names(true, false)
	for _, n := range []string{"go_gc_duration_seconds", "go_threads", "process_start_time_seconds", "process_virtual_memory_bytes", "vllm_exporter_own"} {
		if !all[n] {
			t.Errorf("--web.all-runtime-series: no %s", n)
		}
	}
	mem := names(false, true)
	if !mem["go_memstats_alloc_bytes"] || !mem["go_memstats_last_gc_time_seconds"] || mem["go_threads"] {
		t.Errorf("--web.go-memstats alone: %v", slices.Sorted(maps.Keys(mem)))
	}
}
