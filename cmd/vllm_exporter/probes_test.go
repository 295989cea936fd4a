package main

import (
	"context"
	"strings"
	"testing"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	commoncfg "github.com/prometheus/common/config"

	"github.com/vllm-exporter/vllm_exporter/collector"
	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
	"github.com/vllm-exporter/vllm_exporter/probes"
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
	app, f, _ := newApp()
	if _, err := app.Parse([]string{"--no-probe.enabled", "--probe.max-event-bytes=4096"}); err != nil {
		t.Fatal(err)
	}
	if f.probe.enabled || f.probe.maxEventBytes != 4096 {
		t.Fatalf("flags not parsed: %+v", f.probe)
	}
}

// TestStartProbesWiring starts the probes the way wire does and checks they
// reach only --vllm.url, over the shared connection (its API key), and
// register their series and health.
func TestStartProbesWiring(t *testing.T) {
	sim := vllmsimtest.Start(t, vllmsim.Config{Addr: "127.0.0.1:0", APIKey: "k3y", Seed: 9})
	h, _ := testutil.ConfigHolder(t, "probes:\n  profiles:\n    - {name: wired, endpoint: completions, input_tokens: 16, output_tokens: 4, interval: 1m, timeout: 5s, jitter: 0s}\n")
	cfg := upstream.DefaultHTTPClientConfig()
	cfg.Authorization = &commoncfg.Authorization{Type: "Bearer", Credentials: "k3y"}
	up, err := upstream.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	x := &exporter{logger: log.NewNopLogger(), registry: prometheus.NewPedanticRegistry(), config: h,
		health: collector.NewHealth(), vllmURL: sim.URL() + "/metrics", upstream: up}
	scraper := vllm.New(vllm.Options{URL: sim.URL()}, log.NewNopLogger())
	x.registry.MustRegister(x.health)
	if x.probes, err = startProbes(&probeFlags{enabled: true, maxEventBytes: 1 << 20}, x, up, scraper); err != nil {
		t.Fatal(err)
	}
	if x.probes == nil || len(x.loops) != 1 {
		t.Fatalf("probes not wired: source %v, %d loops", x.probes, len(x.loops))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { x.loops[0](ctx); close(done) }()
	waitFor(t, "the first probe", func() bool { return x.probes.Latest().Profiles["wired"].Requests > 0 })
	cancel()
	<-done
	p := x.probes.Latest().Profiles["wired"]
	if p.Requests != 1 || !p.LastSuccess {
		t.Fatalf("probe through the wiring: %+v", p)
	}
	var found bool
	for _, r := range sim.Records() {
		found = found || strings.HasPrefix(r.ID, probes.RequestIDPrefix+"wired-")
	}
	if !found {
		t.Fatal("the simulator saw no probe request (wrong URL or API key?)")
	}
	mfs, err := x.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{"vllm_probe_requests_total", "vllm_engine_stalled", "vllm_exporter_collector_up"} {
		if !names[n] {
			t.Errorf("%s not registered", n)
		}
	}

	y := &exporter{vllmURL: "ftp://nope"}
	if p, err := startProbes(&probeFlags{enabled: false}, y, nil, scraper); err != nil || p != nil {
		t.Fatalf("--no-probe.enabled still started probes: %v", err)
	}
	if _, err := startProbes(&probeFlags{enabled: true}, y, nil, scraper); err == nil {
		t.Fatal("a non-http vLLM URL was accepted")
	}
}
