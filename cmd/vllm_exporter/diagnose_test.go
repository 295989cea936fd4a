package main

import (
	"bufio"
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
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

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

// diagnoseSim runs `diagnose` for a minute of the simulator's virtual clock
// in one preset.
func diagnoseSim(t *testing.T, scenario, output string) (bottleneck.Report, string) {
	t.Helper()
	return diagnoseSimWith(t, scenario, diagnoseOpts{output: output})
}

func diagnoseSimWith(t *testing.T, scenario string, o diagnoseOpts) (bottleneck.Report, string) {
	t.Helper()
	s := startSim(t, scenario, 3)
	s.Advance(30 * time.Second) // the regime is under way when diagnose starts
	var out bytes.Buffer
	o.url, o.timeout, o.duration, o.interval, o.window = s.URL(), 5*time.Second, time.Minute, 5*time.Second, 30*time.Second
	o.spec = bottleneck.ModelSpec{Parameters: 8e9, BytesPerParameter: 2, MemoryBandwidth: 2.68e12, KVCacheBytes: 7e9}
	o.cost = bottleneck.CostSpec{GPUHour: 2.5}
	o.now = s.Now
	o.sleep = func(_ context.Context, d time.Duration) error {
		s.Advance(d)
		return nil
	}
	rep, err := runDiagnose(context.Background(), o, &out, log.NewNopLogger())
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
			if rep.Scrapes != 13 || rep.ScrapeErrors != 0 {
				t.Errorf("scrapes %d, errors %d", rep.Scrapes, rep.ScrapeErrors)
			}
			for _, want := range []string{"BOTTLENECK: " + string(c.want), "RECOMMENDATION: " + m.Recommendation, "Decode roofline", "SLO at p95"} {
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
	rep, err := runDiagnose(context.Background(), diagnoseOpts{
		url: "http://127.0.0.1:1", timeout: time.Second, duration: 20 * time.Second, interval: 5 * time.Second, window: 10 * time.Second,
		output: "text", now: func() time.Time { return now },
		sleep: func(_ context.Context, d time.Duration) error { now = now.Add(d); return nil },
	}, &out, log.NewNopLogger())
	if !errors.Is(err, errNotDiagnosed) {
		t.Fatalf("err = %v, want errNotDiagnosed (exit status 1) after the report", err)
	}
	if rep.ScrapeErrors != rep.Scrapes || rep.Scrapes == 0 || !strings.Contains(out.String(), "NO DIAGNOSIS") {
		t.Fatalf("unreachable server: %+v\n%s", rep, out.String())
	}
}

// A --window longer than --duration is fitted to the watch (and said so);
// a --duration too short for two scrapes is a usage error (exit status 2).
func TestDiagnoseFitsTheWindowToTheDuration(t *testing.T) {
	s := startSim(t, "healthy", 4)
	var out bytes.Buffer
	rep, err := runDiagnose(context.Background(), diagnoseOpts{url: s.URL(), timeout: 5 * time.Second, duration: 20 * time.Second,
		interval: 5 * time.Second, window: time.Minute, output: "text", now: s.Now,
		sleep: func(_ context.Context, d time.Duration) error { s.Advance(d); return nil }}, &out, log.NewNopLogger())
	if err != nil || len(rep.Models) != 1 || !strings.Contains(out.String(), "note: --window 1m0s is longer than --duration") ||
		!strings.Contains(out.String(), "watched 20s") || rep.Models[0].Throughput.RequestsPerSecond == nil {
		t.Fatalf("err %v, report:\n%s", err, out.String())
	}
	_, err = runDiagnose(context.Background(), diagnoseOpts{url: s.URL(), duration: 5 * time.Second,
		interval: 5 * time.Second, window: time.Minute}, &bytes.Buffer{}, log.NewNopLogger())
	var coded interface{ ExitCode() int }
	if !errors.As(err, &coded) || coded.ExitCode() != 2 {
		t.Fatalf("--duration = --interval: err %v, want a usage error (exit 2)", err)
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

// cappedGPU is one H100 sampled per tick with its power cap active.
type cappedGPU struct{ last *snapshot.GPU }

func (g *cappedGPU) SampleOnce(now time.Time) *snapshot.GPU {
	g.last = &snapshot.GPU{Time: now, Up: true, Devices: []snapshot.GPUDevice{{
		Index: 0, Name: "NVIDIA H100 80GB HBM3", Up: true, UtilGPU: snapshot.Some(0.9),
		PeakMemBandwidthBytesPerSecond: snapshot.Some(3.35e12), MemoryTotalBytes: snapshot.Some(80e9),
		ThrottleReasons: map[string]bool{"sw_power_cap": true},
		SMClockHz:       snapshot.Some(0.8e9), MaxSMClockHz: snapshot.Some(1.98e9), // a lowered power limit
	}}}
	return g.last
}
func (g *cappedGPU) Latest() *snapshot.GPU { return g.last }

// With a GPU sampled each tick and an interactive latency contract from
// --config.file, the simulator's throttled preset reads as throttled.
func TestDiagnoseThrottledWithGPU(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(cfg, []byte("bottleneck:\n  tpot_target_seconds: 0.015\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, txt := diagnoseSimWith(t, "throttled", diagnoseOpts{output: "text", configFile: cfg, gpu: &cappedGPU{}})
	if len(rep.Models) != 1 || rep.Models[0].Class != bottleneck.Throttled {
		t.Fatalf("report:\n%s", txt)
	}
	if len(rep.GPUs) != 1 || rep.Models[0].Roofline.BandwidthSource != "gpu" || len(rep.Models[0].Unavailable) != 0 {
		t.Errorf("GPU not used: gpus %v, roofline %+v, unavailable %v", rep.GPUs, rep.Models[0].Roofline, rep.Models[0].Unavailable)
	}
	checkGolden(t, "diagnose_throttled_gpu.txt", maskNumbers(txt))
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

// firstChunkDelay measures how late this machine, now, delivers the first
// streamed chunk of a request whose own simulated work is one ~6 ms engine
// step: the slowest of a few streamed one-token completions against a
// real-time simulator. That is the scheduling delay any probe TTFT of the
// same run may carry on top of the simulated time.
func firstChunkDelay(t *testing.T) time.Duration {
	t.Helper()
	s := vllmsimtest.Start(t, vllmsim.Config{Seed: 1})
	body := fmt.Sprintf(`{"model":%q,"prompt":"x","max_tokens":1,"stream":true}`, s.Config().Models[0])
	var worst time.Duration
	for range 10 {
		start := time.Now()
		resp, err := http.Post(s.URL()+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		d := time.Since(start)
		resp.Body.Close()
		if err != nil || !strings.HasPrefix(line, "data: ") {
			t.Fatalf("baseline request: %q, %v", line, err)
		}
		worst = max(worst, d)
	}
	return worst
}

// TestDiagnoseProbePairRealTime runs diagnose with the cold/warm probe pair
// against the simulator on its real-time clock (probe timings need one),
// once with prefix caching and once without: only the second is a
// prefix_cache_miss, decided by the probe pair.
//
// Its margins come from a baseline measured in the same run. A probe's TTFT
// is the simulated time plus this machine's delivery delay L (measured by
// firstChunkDelay): a cached probe's ~0.01 s + L, an uncached one's prefill
// time P + L. The simulator's prefill is slowed so that P is at least 8 L
// (and at least 6x the default speed, ~0.3 s, which keeps the default
// 0.06/0.08/0.1 s probe buckets out of play), so the warm/cold ratio is
// below ~0.2 with prefix caching and above ~0.9 without, whatever the load,
// either side of warm_cold_ttft_ratio_max 0.5. The run lasts long enough
// for at least 3 pairs at that speed.
func TestDiagnoseProbePairRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time simulator run")
	}
	// (The default ratio, 0.8, is pinned by the synthetic suite, which has
	// no wall clock.)
	cfg := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(cfg, []byte("bottleneck:\n  warm_cold_ttft_ratio_max: 0.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const inputTokens = 1024 // probePairYAML's input_tokens
	delay := firstChunkDelay(t).Seconds()
	cost := vllmsim.DefaultCost
	defaultPrefill := inputTokens * cost.PerPrefillToken
	prefill := max(6*defaultPrefill, 8*delay)
	if prefill > 4 {
		// The pair's probes time out at 10 s; a machine this slow cannot
		// run the test meaningfully.
		t.Fatalf("this machine delivers a first chunk %.2fs late: too loaded for a real-time probe test", delay)
	}
	cost.PerPrefillToken *= prefill / defaultPrefill
	pair := 2*(prefill+delay) + 0.2 // two probes, each with 8 decode steps
	duration := max(6*time.Second, time.Duration(4*pair*float64(time.Second)))
	t.Logf("baseline first-chunk delay %.3fs: uncached prefill %.2fs, run %v", delay, prefill, duration)
	for _, disable := range []bool{false, true} {
		s := vllmsimtest.Start(t, vllmsim.Config{Seed: 9, DisablePrefixCaching: disable, Cost: cost})
		rep, err := runDiagnose(context.Background(), diagnoseOpts{
			url: s.URL(), timeout: 5 * time.Second, duration: duration, interval: 500 * time.Millisecond,
			window: time.Second, output: "text", probes: true, probeEvery: 1, configFile: cfg,
		}, &bytes.Buffer{}, log.NewNopLogger())
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]float64{}
		for _, l := range rep.Probes {
			seen[l.Prefix] += l.Requests
		}
		if seen["cold"] < 3 || seen["warm"] < 3 || len(rep.Models) != 1 {
			t.Fatalf("prefix caching disabled=%v: probes %+v, models %d", disable, rep.Probes, len(rep.Models))
		}
		medians := map[string]float64{}
		for _, l := range rep.Probes {
			if l.MedianTTFT != nil {
				medians[l.Prefix] = *l.MedianTTFT
			}
		}
		t.Logf("prefix caching disabled=%v: probes sent %v, median TTFT %v", disable, seen, medians)
		// The pair decides the last tick's verdict, which the one-shot
		// report states (no hysteresis in a report).
		m := rep.Models[0]
		if miss := m.Class == bottleneck.PrefixCacheMiss; miss != disable {
			t.Errorf("prefix caching disabled=%v: class %s (also %v), evidence %+v, probes %+v, median TTFT %v", disable, m.Class, m.AlsoHeld, m.Evidence, rep.Probes, medians)
		}
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
		return measurePerGPU(context.Background(), diagnoseOpts{url: s.URL(), timeout: 5 * time.Second,
			duration: time.Minute, interval: 5 * time.Second, window: 30 * time.Second, now: s.Now,
			sleep: func(_ context.Context, d time.Duration) error { s.Advance(d); return nil }}, log.NewNopLogger())
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
	rep, err := runDiagnose(context.Background(), diagnoseOpts{url: s.URL(), timeout: 5 * time.Second, duration: time.Minute,
		interval: 5 * time.Second, window: 30 * time.Second, output: "text", now: s.Now,
		sleep: func(_ context.Context, d time.Duration) error { s.Advance(d); return nil }}, &out, log.NewNopLogger())
	if err != nil || len(rep.Models) != 1 {
		t.Fatalf("err %v, models %d", err, len(rep.Models))
	}
	m := rep.Models[0]
	if m.Class == bottleneck.NearOptimal || len(m.CannotRuleOut) == 0 || !strings.Contains(out.String(), "CANNOT RULE OUT: a throttled, degraded or slower-than-expected GPU") {
		t.Fatalf("slow GPU without NVML: class %s, cannot rule out %v\n%s", m.Class, m.CannotRuleOut, out.String())
	}
	t.Logf("20x slower GPU, no NVML: %s; cannot rule out: %v", m.Class, m.CannotRuleOut)
}

// diagnose against a model with a 1,024-token context. A server that lists
// max_model_len (the simulator, like vLLM): the cold/warm pair (1,024 + 8
// tokens) is shrunk to 1,016 + 8, the report says so and the probes
// succeed. A third-party simulator that lists no limit and answers the
// oversized pair with an in-stream error: the first pair fails, the report
// gives the reason (context_length) and the server's error text, not only
// "N sent, N failed", and the length that error names fits the later pairs.
func TestDiagnoseProbePairFitsSmallContext(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time simulator run")
	}
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
		rep, err := runDiagnose(context.Background(), diagnoseOpts{
			url: srv.URL, timeout: 5 * time.Second, duration: 3 * time.Second, interval: 500 * time.Millisecond,
			window: time.Second, output: "text", probes: true, probeEvery: 1,
		}, &out, log.NewNopLogger())
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
		// The first pair fails; the length its error names fits the rest.
		if failed < 1 || failed >= sent || !strings.Contains(txt, "failed (context_length ") ||
			!strings.Contains(txt, "last error: context_length: in-stream error: This model's maximum context length is 1024 tokens. However, you requested 1032 tokens.") ||
			!strings.Contains(txt, "input_tokens 1024 -> 1016, output_tokens 8") {
			t.Errorf("unlisted max_model_len: %v of %v failed; the report must give the reason, the server's text and the fit:\n%s", failed, sent, txt)
		}
		t.Logf("report of the failing pair:\n%s", txt[strings.Index(txt, "Probes:"):])
	}
}
