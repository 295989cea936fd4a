package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/collector/gpu"
	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
	"github.com/vllm-exporter/vllm_exporter/slo"
	"github.com/vllm-exporter/vllm_exporter/slo/bottleneck"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files")

// parseFlags parses an exporter command line.
func parseFlags(t *testing.T, args ...string) *flags {
	t.Helper()
	app, f, _ := newApp()
	if _, err := app.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// diagnoseArgs are the command line of the diagnose tests against sim: no
// NVML, no probes (a virtual clock gives them no meaningful timings), the
// roofline from flags.
func diagnoseArgs(sim *vllmsim.Sim, more ...string) []string {
	return append([]string{"--vllm.url=" + sim.URL(), "--no-collector.gpu", "--no-probe.enabled",
		"--model.parameters=8e9", "--model.bytes-per-parameter=2", "--model.memory-bandwidth=2.68e12", "--model.kv-cache-bytes=7e9",
		"--cost.gpu-hour=2.5"}, more...)
}

// onVirtualClock is a watch of d on sim's virtual clock: each of diagnose's
// sleeps advances the simulator.
func onVirtualClock(sim *vllmsim.Sim, d time.Duration, output string) diagnoseOpts {
	return diagnoseOpts{duration: d, output: output, now: sim.Now,
		sleep: func(_ context.Context, d time.Duration) error { sim.Advance(d); return nil }}
}

// diagnoseSim runs `diagnose` for a minute of the simulator's virtual clock
// in one preset, once the regime is under way.
func diagnoseSim(t *testing.T, scenario, output string, args ...string) (bottleneck.Report, string) {
	t.Helper()
	s := startSim(t, scenario, 3)
	s.Advance(30 * time.Second)
	var out bytes.Buffer
	rep, err := runDiagnose(context.Background(), parseFlags(t, diagnoseArgs(s, args...)...), onVirtualClock(s, 90*time.Second, output), &out, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	return rep, out.String()
}

// startSim serves the simulator on loopback under a virtual clock, with its
// load generator running the preset.
func startSim(t *testing.T, scenario string, seed int64) *vllmsim.Sim {
	t.Helper()
	return vllmsimtest.Start(t, vllmsim.Config{VirtualClock: true, LoadGen: true, Seed: seed, Scenario: scenario})
}

var numbers = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

var padding = regexp.MustCompile(`([^ ])  +`)

// maskNumbers replaces every number and squeezes the column padding (whose
// width follows the numbers), so the golden file pins the report's shape,
// verdict, evidence names and recommendation, not the simulator's figures.
func maskNumbers(s string) string {
	s = strings.ReplaceAll(s, "FP8/INT4", "FP8/INT") // keep the knob text readable after masking
	s = numbers.ReplaceAllString(s, "N")
	return padding.ReplaceAllString(s, "$1 ")
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	want := testutil.Golden(t, path, []byte(got), *updateGolden, "run with -update to create")
	if got != string(want) {
		t.Errorf("%s differs (run with -update after checking):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestDiagnoseOnSimulator(t *testing.T) {
	for _, c := range []struct {
		scenario string
		want     bottleneck.Class
	}{
		{"queueing", bottleneck.Queueing},
		{"kv_exhausted", bottleneck.KVCacheExhausted},
	} {
		t.Run(c.scenario, func(t *testing.T) {
			rep, txt := diagnoseSim(t, c.scenario, "text")
			if len(rep.Models) != 1 {
				t.Fatalf("models = %d", len(rep.Models))
			}
			m := rep.Models[0]
			if m.Class != c.want || m.Recommendation == "" || len(m.Evidence) == 0 {
				t.Fatalf("class %s (want %s), recommendation %q, evidence %v", m.Class, c.want, m.Recommendation, m.Evidence)
			}
			if rep.Scrapes != 19 || rep.ScrapeErrors != 0 { // 90 s at 5 s, both ends included
				t.Errorf("scrapes %d, errors %d", rep.Scrapes, rep.ScrapeErrors)
			}
			for _, want := range []string{"BOTTLENECK: " + string(c.want), "RECOMMENDATION: " + m.Recommendation, "Decode roofline", "SLOs (configured",
				"ttft-p99       server ttft <= 1 s for 99% of requests", "tpot-p99       server tpot <= 0.1 s for 99% of requests"} {
				if !strings.Contains(txt, want) {
					t.Errorf("report lacks %q", want)
				}
			}
			checkGolden(t, "diagnose_"+c.scenario+".txt", maskNumbers(txt))
		})
	}
}

func TestDiagnoseJSON(t *testing.T) {
	_, js := diagnoseSim(t, "queueing", "json")
	var rep bottleneck.Report
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, js)
	}
	if len(rep.Models) != 1 || rep.Models[0].Class != bottleneck.Queueing || rep.Models[0].Roofline.Predicted == nil {
		t.Fatalf("JSON report: %+v", rep.Models)
	}
}

func TestDiagnoseUnreachable(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := parseFlags(t, "--vllm.url=http://127.0.0.1:1", "--vllm.timeout=1s", "--no-collector.gpu", "--no-probe.enabled")
	rep, err := runDiagnose(context.Background(), f, diagnoseOpts{duration: 20 * time.Second, output: "text", now: func() time.Time { return now },
		sleep: func(_ context.Context, d time.Duration) error { now = now.Add(d); return nil }}, &out, log.NewNopLogger())
	if !errors.Is(err, errNotDiagnosed) {
		t.Fatalf("err = %v, want errNotDiagnosed (exit status 1) after the report", err)
	}
	if rep.ScrapeErrors != rep.Scrapes || rep.Scrapes == 0 || !strings.Contains(out.String(), "NO DIAGNOSIS") {
		t.Fatalf("unreachable server: %+v\n%s", rep, out.String())
	}
}

// A watch too short for a verdict on full windows says so; a --duration
// too short for two scrapes is a usage error (exit status 2).
func TestDiagnoseShortWatch(t *testing.T) {
	s := startSim(t, "healthy", 4)
	var out bytes.Buffer
	rep, err := runDiagnose(context.Background(), parseFlags(t, diagnoseArgs(s)...), onVirtualClock(s, 20*time.Second, "text"), &out, log.NewNopLogger())
	if err != nil || len(rep.Models) != 1 || !strings.Contains(out.String(), "note: the 20s watch is shorter than 1m15s (bottleneck.window 1m0s and hold_ticks 2 + 1 scrapes)") ||
		!strings.Contains(out.String(), "watched 20s") || rep.Models[0].Throughput.RequestsPerSecond != nil {
		t.Fatalf("err %v, report:\n%s", err, out.String())
	}
	_, err = runDiagnose(context.Background(), parseFlags(t, diagnoseArgs(s)...), onVirtualClock(s, 5*time.Second, "text"), &bytes.Buffer{}, log.NewNopLogger())
	var coded interface{ ExitCode() int }
	if !errors.As(err, &coded) || coded.ExitCode() != 2 {
		t.Fatalf("--duration = --vllm.scrape-interval: err %v, want a usage error (exit 2)", err)
	}
}

func TestCapacityCommand(t *testing.T) {
	var out bytes.Buffer
	if err := runCapacity(&out, "", 5e6, 35, 0, 2.5, ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"57.87 req/s", "GPUs needed:           2", "with 2.0x headroom:    4 GPUs", "240.00 per day"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("capacity output lacks %q:\n%s", want, out.String())
		}
	}
	if err := runCapacity(&out, "", 5e6, 0, 2, 0, ""); err == nil {
		t.Error("zero per-GPU throughput accepted")
	}
}

// TestDiagnoseCommandLine parses the real command line: app-level flags
// (core's --vllm.url, ours --model.*) reach the subcommand.
func TestDiagnoseCommandLine(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"capacity", "--daily-requests=5000000", "--requests-per-second-per-gpu=35", "--cost.gpu-hour=1"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	c := newCLI()
	if _, err := c.app.Parse([]string{"diagnose", "--vllm.url=http://vllm.example:8000", "--cost.gpu-hour=2"}); err != nil {
		t.Fatal(err)
	}
	if c.flags.vllmURL != "http://vllm.example:8000" || c.flags.bottleneck.cost.GPUHour != 2 {
		t.Errorf("core's --vllm.url and --cost.gpu-hour not parsed for diagnose: %q %v", c.flags.vllmURL, c.flags.bottleneck.cost.GPUHour)
	}
}

// cappedNVML is an NVML library with one H100 whose software power cap
// holds its SM clocks at 40% of their maximum (a lowered power limit).
func cappedNVML() nvml.Interface {
	d := &mock.Device{}
	hardFillMock(d, func() nvml.Return { return nvml.ERROR_NOT_SUPPORTED })
	d.GetUUIDFunc = func() (string, nvml.Return) { return "GPU-capped-0", nvml.SUCCESS }
	d.GetNameFunc = func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS }
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 90, Memory: 40}, nvml.SUCCESS }
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: 80e9, Used: 70e9, Free: 10e9}, nvml.SUCCESS
	}
	d.GetMemoryBusWidthFunc = func() (uint32, nvml.Return) { return 5120, nvml.SUCCESS }
	d.GetMaxClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		if c == nvml.CLOCK_MEM {
			return 2619, nvml.SUCCESS
		}
		return 1980, nvml.SUCCESS
	}
	d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		if c == nvml.CLOCK_MEM {
			return 2619, nvml.SUCCESS
		}
		return 800, nvml.SUCCESS
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return 0x4, nvml.SUCCESS } // sw_power_cap
	lib := &mock.Interface{}
	hardFillMock(lib, func() nvml.Return { return nvml.ERROR_NOT_SUPPORTED })
	lib.InitFunc = func() nvml.Return { return nvml.SUCCESS }
	lib.ShutdownFunc = func() nvml.Return { return nvml.SUCCESS }
	lib.ExtensionsFunc = func() nvml.ExtendedInterface {
		return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return nil }}
	}
	lib.DeviceGetCountFunc = func() (int, nvml.Return) { return 1, nvml.SUCCESS }
	lib.DeviceGetHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) { return d, nvml.SUCCESS }
	lib.DeviceGetHandleByUUIDFunc = func(string) (nvml.Device, nvml.Return) { return d, nvml.SUCCESS }
	return lib
}

// useNVML makes the exporter's GPU collector read lib for the test.
func useNVML(t *testing.T, lib nvml.Interface) {
	newGPUSampler = func(o gpu.Options, l log.Logger) (*gpu.Sampler, error) { return gpu.New(lib, o, l), nil }
	t.Cleanup(func() { newGPUSampler = gpu.NewFromLibrary })
}

// writeConfig writes a --config.file for the test.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// With the GPU collector on a power-capped GPU and an interactive latency
// contract from --config.file, the simulator's throttled preset reads as
// throttled.
func TestDiagnoseThrottledWithGPU(t *testing.T) {
	useNVML(t, cappedNVML())
	cfg := writeConfig(t, "bottleneck:\n  tpot_target_seconds: 0.015\n")
	s := startSim(t, "throttled", 3)
	s.Advance(30 * time.Second)
	args := slices.DeleteFunc(diagnoseArgs(s, "--config.file="+cfg, "--collector.gpu"), func(a string) bool { return a == "--no-collector.gpu" })
	var out bytes.Buffer
	rep, err := runDiagnose(context.Background(), parseFlags(t, args...), onVirtualClock(s, 90*time.Second, "text"), &out, log.NewNopLogger())
	if err != nil || len(rep.Models) != 1 || rep.Models[0].Class != bottleneck.Throttled {
		t.Fatalf("err %v, report:\n%s", err, out.String())
	}
	if len(rep.GPUs) != 1 || rep.Models[0].Roofline.BandwidthSource != "gpu" || len(rep.Models[0].Unavailable) != 0 {
		t.Errorf("GPU not used: gpus %v, roofline %+v, unavailable %v", rep.GPUs, rep.Models[0].Roofline, rep.Models[0].Unavailable)
	}
	checkGolden(t, "diagnose_throttled_gpu.txt", maskNumbers(out.String()))
}

// TestStartBottleneck starts the serve-side classifier the way wire
// does and checks it registers, schedules its loop and classifies on a tick.
func TestStartBottleneck(t *testing.T) {
	s := startSim(t, "queueing", 5)
	holder, err := config.NewHolder("")
	if err != nil {
		t.Fatal(err)
	}
	x := &exporter{logger: log.NewNopLogger(), registry: prometheus.NewRegistry(), config: holder,
		vllm: vllm.New(vllm.Options{URL: s.URL(), Interval: 10 * time.Second, Windows: []time.Duration{time.Minute}}, log.NewNopLogger())}
	b := &bottleneckFlags{spec: bottleneck.ModelSpec{WeightBytes: 16e9, MemoryBandwidth: 2.68e12}}
	// No watchdog: the classifier runs its own loop.
	classifier, err := startBottleneck(b, slo.DefaultInterval, x, classifierSources(x.vllm, nil, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(x.loops) != 1 {
		t.Fatalf("loops = %d, want the classifier's", len(x.loops))
	}
	for i := 0; i < 9; i++ {
		s.Advance(10 * time.Second)
		x.vllm.ScrapeOnce(context.Background(), s.Now())
	}
	classifier.Tick(s.Now())
	mfs, err := x.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ones := 0
	for _, mf := range mfs {
		if mf.GetName() != "vllm_bottleneck" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetGauge().GetValue() == 1 {
				ones++
			}
		}
	}
	if ones != 1 {
		t.Fatalf("vllm_bottleneck series at 1: %d, want exactly 1", ones)
	}
	b.spec.WeightBytes = -1
	if _, err := startBottleneck(b, slo.DefaultInterval, x, classifierSources(x.vllm, nil, nil), nil); err == nil {
		t.Error("negative --model.weight-bytes accepted")
	}
}

// With the SLO watchdog running, the classifier is its hook: a watchdog tick
// classifies, and no loop of its own is scheduled.
func TestStartBottleneckAsWatchdogHook(t *testing.T) {
	s := startSim(t, "healthy", 5)
	holder, err := config.NewHolder("")
	if err != nil {
		t.Fatal(err)
	}
	scraper := vllm.New(vllm.Options{URL: s.URL(), Interval: 10 * time.Second, Windows: []time.Duration{time.Minute}}, log.NewNopLogger())
	w := slo.New(slo.Options{Interval: 10 * time.Second}, holder, slo.Sources{VLLM: scraper}, log.NewNopLogger())
	x := &exporter{logger: log.NewNopLogger(), registry: prometheus.NewRegistry(), config: holder, vllm: scraper}
	classifier, err := startBottleneck(&bottleneckFlags{}, slo.DefaultInterval, x, classifierSources(scraper, nil, nil), w)
	if err != nil {
		t.Fatal(err)
	}
	if len(x.loops) != 0 {
		t.Fatalf("loops = %d, want none (ticked by the watchdog)", len(x.loops))
	}
	s.Advance(10 * time.Second)
	scraper.ScrapeOnce(context.Background(), s.Now())
	w.Tick(s.Now())
	if sts := classifier.States(); len(sts) != 1 || sts[0].Ticks != 1 {
		t.Fatalf("after one watchdog tick: %+v", sts)
	}
}

type fakeStatus []slo.Result

func (f fakeStatus) Status() []slo.Result { return f }

func TestSLOHoldsFromWatchdog(t *testing.T) {
	win := func(burn float64, enough bool) []slo.WindowResult {
		return []slo.WindowResult{{Name: "5m", BurnRate: snapshot.Some(burn), Enough: enough}}
	}
	st := fakeStatus{
		{SLO: "ttft", Model: "a", Windows: win(0.5, true)},
		{SLO: "tpot", Model: "a", Windows: win(3, false)}, // too few events: ignored
		{SLO: "ttft", Model: "b", Windows: win(2, true)},
		{SLO: "probe", Model: "", Windows: win(0.9, true)},
	}
	f := sloHolds(st)
	if holds, known := f("a", time.Time{}); !holds || !known {
		t.Errorf("model a: holds %v known %v", holds, known)
	}
	if holds, known := f("b", time.Time{}); holds || !known {
		t.Errorf("model b (burning 2x): holds %v known %v", holds, known)
	}
	if _, known := sloHolds(fakeStatus{})("a", time.Time{}); known {
		t.Error("no SLO results should be unknown")
	}
}

// Without --requests-per-second-per-gpu, capacity measures it. The healthy
// preset (2 req/s offered, nothing waiting, KV ~2%) is not saturated and
// too far from it to extrapolate (more than 10x): its throughput is offered
// load, so the figure is labelled a lower bound and says so, never stated
// as a measured capacity (the extrapolation has its own test). An overloaded server sustains nothing within the
// SLOs.
func TestCapacityMeasured(t *testing.T) {
	measure := func(scenario string) (perGPUMeasure, error) {
		s := startSim(t, scenario, 4)
		s.Advance(30 * time.Second)
		return measurePerGPU(context.Background(), parseFlags(t, diagnoseArgs(s)...), onVirtualClock(s, 90*time.Second, "text"), log.NewNopLogger())
	}
	m, err := measure("healthy")
	if err != nil || m.perGPU < 1 || !strings.Contains(m.basis, "LOWER BOUND") || !strings.Contains(m.basis, "not saturated") {
		t.Fatalf("healthy preset (2 req/s offered): %+v, %v", m, err)
	}
	var out bytes.Buffer
	if err := runCapacity(&out, "", 1e6, m.perGPU, 0, 0, m.basis); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "per-GPU (LOWER BOUND):") || !strings.Contains(out.String(), "GPUs needed is an upper bound") {
		t.Errorf("an unsaturated measurement is not labelled:\n%s", out.String())
	}
	t.Logf("healthy preset:\n%s", out.String())
	if _, err := measure("queueing"); err == nil || !strings.Contains(err.Error(), "--requests-per-second-per-gpu") {
		t.Fatalf("queueing preset: err = %v", err)
	}
}

// A GPU 20x slower than it should be, with no NVML to see it: the server
// queues and its KV cache fills, and the verdict (whichever scheduler-side
// class it is) must say it cannot rule out a slow GPU rather than send the
// operator to a scheduler knob alone.
func TestDiagnoseSlowGPUWithoutNVMLSaysWhatItCannotRuleOut(t *testing.T) {
	s := startSim(t, "healthy", 3)
	sc, _ := vllmsim.ScenarioPreset("healthy")
	sc.Name, sc.StepFactor = "slow_gpu", 20
	if err := s.ApplyScenario(sc); err != nil {
		t.Fatal(err)
	}
	s.Advance(2 * time.Minute)
	var out bytes.Buffer
	rep, err := runDiagnose(context.Background(), parseFlags(t, diagnoseArgs(s)...), onVirtualClock(s, 90*time.Second, "text"), &out, log.NewNopLogger())
	if err != nil || len(rep.Models) != 1 {
		t.Fatalf("err %v, models %d", err, len(rep.Models))
	}
	m := rep.Models[0]
	if m.Class == bottleneck.NearOptimal || len(m.CannotRuleOut) == 0 || !strings.Contains(out.String(), "CANNOT RULE OUT: a throttled, degraded or slower-than-expected GPU") {
		t.Fatalf("slow GPU without NVML: class %s, cannot rule out %v\n%s", m.Class, m.CannotRuleOut, out.String())
	}
	t.Logf("20x slower GPU, no NVML: %s; cannot rule out: %v", m.Class, m.CannotRuleOut)
}

// diagnose runs the configured probe profiles, as the exporter does,
// against a model with a 1,024-token context. A server that lists
// max_model_len (the simulator, like vLLM): the 1,024 + 8-token profile is
// shrunk to 1,016 + 8, the report says so and the probes succeed. A
// third-party simulator that lists no limit and answers the oversized
// probe with an in-stream error: the first probe fails, the report gives
// the reason (context_length) and the server's error text, not only "N
// sent, N failed", and the length that error names fits the later probes.
func TestDiagnoseProbesFitSmallContext(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time simulator run")
	}
	cfg := writeConfig(t, `probes:
  max_requests_per_minute: 600
  profiles:
    - {name: long, endpoint: completions, input_tokens: 1024, output_tokens: 8, prefix: cold, interval: 2s, jitter: 0s, timeout: 1500ms}
`)
	for _, listed := range []bool{true, false} {
		sim, err := vllmsim.New(vllmsim.Config{Seed: 5, MaxModelLen: 1024})
		if err != nil {
			t.Fatal(err)
		}
		sim.StartClock()
		h := sim.Handler()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case listed:
			case r.URL.Path == "/v1/models":
				fmt.Fprint(w, `{"object":"list","data":[{"id":"meta-llama/Llama-3.1-8B-Instruct","object":"model"}]}`)
				return
			case r.URL.Path == "/v1/completions":
				var req struct {
					Prompt    []int `json:"prompt"`
					MaxTokens int   `json:"max_tokens"`
				}
				b, _ := io.ReadAll(r.Body)
				_ = json.Unmarshal(b, &req)
				if n := len(req.Prompt) + req.MaxTokens; n > 1024 {
					w.Header().Set("Content-Type", "text/event-stream")
					fmt.Fprintf(w, `data: {"error":{"message":"This model's maximum context length is 1024 tokens. However, you requested %d tokens.","type":"BadRequestError","code":400}}`+"\n\ndata: [DONE]\n\n", n)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(b))
			}
			h.ServeHTTP(w, r)
		}))
		var out bytes.Buffer
		f := parseFlags(t, "--vllm.url="+srv.URL, "--vllm.scrape-interval=500ms", "--vllm.timeout=400ms", "--no-collector.gpu", "--config.file="+cfg)
		rep, err := runDiagnose(context.Background(), f, diagnoseOpts{duration: 5 * time.Second, output: "text"}, &out, log.NewNopLogger())
		srv.Close()
		sim.Close()
		if err != nil {
			t.Fatal(err)
		}
		txt := out.String()
		var sent, failed float64
		for _, l := range rep.Probes {
			sent, failed = sent+l.Requests, failed+l.Failures
		}
		if sent < 2 {
			t.Fatalf("listed=%v: %v probes sent; report:\n%s", listed, sent, txt)
		}
		if listed {
			if failed != 0 || !strings.Contains(txt, "input_tokens 1024 -> 1016, output_tokens 8") {
				t.Errorf("listed max_model_len: %v of %v failed, or no fit note; report:\n%s", failed, sent, txt)
			}
			continue
		}
		// The first probe fails; the length its error names fits the rest.
		if failed < 1 || failed >= sent || !strings.Contains(txt, "failed (context_length ") ||
			!strings.Contains(txt, "last error: context_length: in-stream error: This model's maximum context length is 1024 tokens. However, you requested 1032 tokens.") ||
			!strings.Contains(txt, "input_tokens 1024 -> 1016, output_tokens 8") {
			t.Errorf("unlisted max_model_len: %v of %v failed; the report must give the reason, the server's text and the fit:\n%s", failed, sent, txt)
		}
		t.Logf("report of the failing probes:\n%s", txt[strings.Index(txt, "Probes:"):])
	}
}

// tickHook reports each SLO watchdog tick.
type tickHook chan time.Time

func (h tickHook) Tick(now time.Time) { h <- now }

// servingExporter is the serving exporter wired from args, its SLO
// watchdog following the scraper as it does when serving (its loop
// evaluates each scrape as it lands and ticks the classifier); its scrape,
// GPU and probe loops are stepped on the simulator's clock instead.
type servingExporter struct {
	t      *testing.T
	x      *exporter
	ticked tickHook
}

func startServingExporter(t *testing.T, args ...string) *servingExporter {
	t.Helper()
	x, _ := wiredExporter(t, args...)
	e := &servingExporter{t: t, x: x, ticked: make(tickHook, 16)}
	x.slo.AddHook(e.ticked)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { x.slo.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	<-e.ticked // the start-up evaluation
	return e
}

// step runs the exporter's due probes, samples its GPUs and scrapes at now,
// and waits for the watchdog to evaluate that scrape.
func (e *servingExporter) step(ctx context.Context, now time.Time) {
	if e.x.probes != nil {
		e.x.probes.Tick(ctx, now)
	}
	if e.x.gpu != nil {
		e.x.gpu.SampleOnce(now)
	}
	e.x.vllm.ScrapeOnce(ctx, now)
	deadline := time.After(time.Minute)
	for {
		select {
		case at := <-e.ticked:
			if at.Equal(now) {
				return
			}
		case <-deadline:
			e.t.Fatalf("the watchdog did not evaluate the scrape at %v", now)
		}
	}
}

// One classifier, one verdict: `diagnose` and the serving exporter, wired
// from the same command line against the same simulated server and stepped
// through the same 90 s of its clock (one scrape every 5 s), publish the
// same class, and it is the scenario's. The exporter evaluates each scrape
// as its watchdog loop sees it land; diagnose drives the same components
// tick by tick.
func TestDiagnoseNamesTheExportersClass(t *testing.T) {
	probeCfg := "probes:\n  max_requests_per_minute: 60\n  backoff_max: 5s\n  profiles:\n" +
		"    - {name: short-chat, endpoint: chat, input_tokens: 128, output_tokens: 32, prefix: cold, interval: 5s, jitter: 0s, timeout: 4s}\n"
	trickle, _ := vllmsim.ScenarioPreset("healthy")
	trickle.Name, trickle.Load.Rate = "trickle", 0.3
	cases := []struct {
		name     string
		scenario string            // preset
		custom   *vllmsim.Scenario // instead of a preset
		want     bottleneck.Class
		config   string   // --config.file contents
		args     []string // beside diagnoseArgs
		gpu      bool     // a power-capped GPU instead of no NVML
		at45s    func(*vllmsim.Sim) error
		start    func(*vllmsim.Sim) error
	}{
		{name: "healthy underloaded", custom: &trickle, want: bottleneck.BatchTooSmall},
		{name: "healthy loaded", scenario: "healthy", want: bottleneck.NearOptimal},
		{name: "queueing", scenario: "queueing", want: bottleneck.Queueing},
		{name: "kv exhausted", scenario: "kv_exhausted", want: bottleneck.KVCacheExhausted},
		{name: "prefix miss", scenario: "prefix_warm", want: bottleneck.PrefixCacheMiss,
			at45s: func(s *vllmsim.Sim) error { return s.SetScenario("prefix_cold") }},
		{name: "throttled", scenario: "throttled", want: bottleneck.Throttled, gpu: true,
			config: "bottleneck:\n  tpot_target_seconds: 0.015\n"},
		{name: "stalled", scenario: "stalled", want: bottleneck.EngineStalled},
		// Every probe answered 500 (a gateway in front of vLLM) while
		// the users' traffic flows: not "send more load".
		{name: "probes failing", custom: &trickle, want: bottleneck.ProbesFailing, config: probeCfg, args: []string{"--probe.enabled"},
			start: func(s *vllmsim.Sim) error { return s.SetRefusal(vllmsim.Refusal{Status: 500, Fraction: 1}) }},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The virtual clock starts now: the probe scheduler times its
			// first probes on the wall clock, the later ones on the watch's.
			s := vllmsimtest.Start(t, vllmsim.Config{VirtualClock: true, LoadGen: true, Seed: int64(20 + i), Start: time.Now()})
			var err error
			if c.custom != nil {
				err = s.ApplyScenario(*c.custom)
			} else {
				err = s.SetScenario(c.scenario)
			}
			if err == nil && c.start != nil {
				err = c.start(s)
			}
			if err != nil {
				t.Fatal(err)
			}
			args := append(diagnoseArgs(s), c.args...)
			if c.config != "" {
				args = append(args, "--config.file="+writeConfig(t, c.config))
			}
			if c.gpu {
				useNVML(t, cappedNVML())
				args = append(slices.DeleteFunc(args, func(a string) bool { return a == "--no-collector.gpu" }), "--collector.gpu")
			}
			if slices.Contains(c.args, "--probe.enabled") {
				args = slices.DeleteFunc(args, func(a string) bool { return a == "--no-probe.enabled" })
			}
			s.Advance(30 * time.Second) // the regime is under way
			ctx := context.Background()
			exp := startServingExporter(t, args...)
			start := s.Now()
			exp.step(ctx, start)
			o := onVirtualClock(s, 90*time.Second, "text")
			o.sleep = func(ctx context.Context, d time.Duration) error {
				s.Advance(d)
				if c.at45s != nil && s.Now().Sub(start) == 45*time.Second {
					if err := c.at45s(s); err != nil {
						return err
					}
				}
				exp.step(ctx, s.Now())
				return nil
			}
			var out bytes.Buffer
			rep, err := runDiagnose(ctx, parseFlags(t, args...), o, &out, log.NewNopLogger())
			if err != nil {
				t.Fatal(err)
			}
			sts := exp.x.classifier.States()
			if len(rep.Models) != 1 || len(sts) != 1 {
				t.Fatalf("diagnose models %d, exporter models %d", len(rep.Models), len(sts))
			}
			got, served := rep.Models[0], sts[0]
			t.Logf("%s: exporter %s (raw %s), diagnose %s (pending %q)", c.name, served.Class, served.Raw, got.Class, got.Pending)
			if got.Class != served.Class || got.Pending != served.Candidate {
				t.Errorf("diagnose says %s (pending %q), the exporter publishes %s (pending %q)", got.Class, got.Pending, served.Class, served.Candidate)
			}
			if got.Class != c.want {
				t.Errorf("class %s, want %s; report:\n%s", got.Class, c.want, out.String())
			}
		})
	}
}
