package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/vllm-exporter/vllm_exporter/collector/gpu"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
	"github.com/vllm-exporter/vllm_exporter/probes"
	"github.com/vllm-exporter/vllm_exporter/slo"
	"github.com/vllm-exporter/vllm_exporter/slo/bottleneck"
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
		reg.MustRegister(goCollector(memStats), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), own)
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

// TestScraperHistoryFollowsItsReaders: the scraper's history reaches as far
// back as the windows read from it (bottleneck.window, the probes'
// ttft_gap_window), following a reload, and no further: the classifier's
// baseline_window is a high-water mark of its own, and holding 15 minutes
// of snapshots for it cost two thirds more history for nothing.
func TestScraperHistoryFollowsItsReaders(t *testing.T) {
	sim := startSim(t, "", 1)
	path := filepath.Join(t.TempDir(), "config.yml")
	writeConfig := func(body string) {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig("{}\n")
	x, f := wiredExporter(t, "--vllm.url="+sim.URL(), "--config.file="+path, "--no-collector.gpu")
	scrapeFor := func(d time.Duration) {
		for range int(d / f.interval) {
			sim.Advance(f.interval)
			x.vllm.ScrapeOnce(context.Background(), sim.Now())
		}
	}
	reaches := func(d time.Duration) bool { return x.vllm.Window(d) != nil }
	scrapeFor(20 * time.Minute)
	if !reaches(5*time.Minute) || reaches(10*time.Minute) || reaches(15*time.Minute) {
		t.Errorf("defaults (windows 1m,5m, ttft_gap_window 5m): history reaches 5m %v, 10m %v, 15m %v; want only 5m",
			reaches(5*time.Minute), reaches(10*time.Minute), reaches(15*time.Minute))
	}
	for _, reader := range []struct {
		config, what string
		window       time.Duration
	}{
		{"bottleneck:\n  window: 10m\n", "the classifier's bottleneck.window", 10 * time.Minute},
		{"probes:\n  ttft_gap_window: 12m\n", "vLLM's TTFT over probes.ttft_gap_window", 12 * time.Minute},
	} {
		writeConfig(reader.config)
		if err := x.config.Reload(); err != nil {
			t.Fatal(err)
		}
		scrapeFor(reader.window + time.Minute)
		if !reaches(reader.window) {
			t.Errorf("%s after a reload: the %v window is not answered", reader.what, reader.window)
		}
		// Derived by the scrape, not again at each tick or probe.
		if a, b := x.vllm.Window(reader.window), x.vllm.Window(reader.window); reflect.ValueOf(a).UnsafePointer() != reflect.ValueOf(b).UnsafePointer() {
			t.Errorf("%s after a reload: the %v window is derived again on each read", reader.what, reader.window)
		}
	}
}

// /metrics serves every component from the one registry, in name order,
// and the registry refuses a collector that would clash with the scraper's
// series.
func TestMetricsServesEveryComponentFromTheRegistry(t *testing.T) {
	x, _ := wiredExporter(t, "--vllm.url=http://127.0.0.1:1", "--no-collector.gpu", "--no-probe.enabled")
	clash := prometheus.NewGauge(prometheus.GaugeOpts{Name: "vllm_up", Help: "not the scraper's"})
	if err := x.registry.Register(clash); err == nil {
		t.Error("the registry took a second vllm_up beside the scraper's")
	}
	x.vllm.ScrapeOnce(context.Background(), time.Now()) // vLLM is down: vllm_up 0
	mfs, err := x.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	if !slices.IsSorted(names) {
		t.Errorf("families not in name order: %v", names)
	}
	for _, want := range []string{"vllm_up", "vllm_exporter_scrapes_total", "vllm_exporter_collector_up", "vllm_health_verdict", "vllm_exporter_slo_state_restored"} {
		if !slices.Contains(names, want) {
			t.Errorf("/metrics lacks %s: %v", want, names)
		}
	}
}

// wiredExporter is the exporter that args describe, wired, stopped at the
// end of the test.
func wiredExporter(t testing.TB, args ...string) (*exporter, *flags) {
	t.Helper()
	app, f, _ := newApp()
	if _, err := app.Parse(args); err != nil {
		t.Fatal(err)
	}
	x, stop, err := newExporter(context.Background(), f, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := x.wire(f); err != nil {
		t.Fatal(err)
	}
	return x, f
}

// The scraper, the SLO watchdog and the classifier gather cleanly on a
// pedantic registry (every series checked against its Desc, none twice):
// on a simulator with several models and engines, with every optional SLO
// series on, before the first scrape, while the SLOs burn and the
// classifier's verdicts move, and after vLLM goes down (every verdict
// unavailable).
func TestComponentsGatherPedantically(t *testing.T) {
	sim := vllmsimtest.Start(t, vllmsim.Config{VirtualClock: true, LoadGen: true, Seed: 11, Scenario: "kv_exhausted",
		Models: []string{"model-a", "model-b", "model-c"}, DataParallelSize: 2})
	x, _ := wiredExporter(t, "--vllm.url="+sim.URL(), "--no-collector.gpu", "--no-probe.enabled",
		"--slo.window-events", "--slo.period-window-series", "--slo.error-ratio-series", "--vllm.opt-in=window-series")
	if x.slo == nil || x.classifier == nil {
		t.Fatal("want the watchdog and the classifier wired")
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(x.vllm, x.slo, x.classifier)
	compare := func(what string, wantSeries int, wantFamilies ...string) {
		t.Helper()
		got, err := reg.Gather()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		series := 0
		for _, mf := range got {
			series += len(mf.Metric)
		}
		t.Logf("%s: %d series", what, series)
		for _, name := range wantFamilies {
			if !slices.ContainsFunc(got, func(mf *dto.MetricFamily) bool { return mf.GetName() == name }) {
				t.Errorf("%s: no %s gathered", what, name)
			}
		}
		if series < wantSeries {
			t.Fatalf("%s: %d series, want at least %d (a state with nothing in it proves little)", what, series, wantSeries)
		}
	}
	compare("before the first scrape", 10)
	for i := range 30 {
		sim.Advance(15 * time.Second)
		x.vllm.ScrapeOnce(context.Background(), sim.Now())
		x.slo.Tick(sim.Now())
		switch i {
		case 0:
			compare("after the first scrape", 400, "vllm_slo_objective_ratio", "vllm_bottleneck", "vllm_time_to_first_token_seconds")
		case 29:
			st, _ := x.classifier.State("model-a")
			t.Logf("model-a after 30 scrapes: %s", st.Class)
			compare("after 30 scrapes", 800, "vllm_slo_burn_rate", "vllm_slo_events", "vllm_slo_error_ratio",
				"vllm_slo_alert_state", "vllm_bottleneck", "vllm_bottleneck_evidence", "vllm_time_to_first_token_seconds",
				"vllm_time_to_first_token_window_seconds", "vllm_engine_requests_waiting")
		}
	}
	if err := sim.InjectFault(vllmsim.FaultSpec{Kind: vllmsim.Fault5xx}); err != nil {
		t.Fatal(err)
	}
	for range 4 { // past the classifier's hold ticks
		sim.Advance(15 * time.Second)
		x.vllm.ScrapeOnce(context.Background(), sim.Now())
		x.slo.Tick(sim.Now())
	}
	st, ok := x.classifier.State("model-a")
	if !ok || st.Class != bottleneck.ServerUnavailable {
		t.Fatalf("after vLLM answered 500: class %q, want %s", st.Class, bottleneck.ServerUnavailable)
	}
	compare("after vLLM answered 500", 100, "vllm_bottleneck", "vllm_up", "vllm_slo_burn_rate")
}

// BenchmarkMetricsRender is what /metrics renders of the scraper, the SLO
// watchdog and the classifier: one registry Gather of their const metrics,
// after 70 scrapes and ticks of the simulator under load, for a one-model
// pod and for 16 models x 8 engines, side by side in one run.
func BenchmarkMetricsRender(b *testing.B) {
	for _, size := range []struct {
		name            string
		models, engines int
	}{{"1x1", 1, 1}, {"16x8", 16, 8}} {
		b.Run(size.name, func(b *testing.B) {
			var models []string
			for i := range size.models {
				models = append(models, fmt.Sprintf("model-%d", i))
			}
			sim := vllmsimtest.Start(b, vllmsim.Config{VirtualClock: true, LoadGen: true, Seed: 3, Models: models, DataParallelSize: size.engines})
			x, _ := wiredExporter(b, "--vllm.url="+sim.URL(), "--no-collector.gpu", "--no-probe.enabled")
			for range 70 {
				sim.Advance(15 * time.Second)
				x.vllm.ScrapeOnce(context.Background(), sim.Now())
				x.slo.Tick(sim.Now())
			}
			if !x.vllm.Latest().Up {
				b.Fatal(x.vllm.Latest().Error)
			}
			testutil.BenchmarkGather(b, x.vllm, x.slo, x.classifier)
		})
	}
}
