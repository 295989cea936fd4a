package bottleneck

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// The seed's worked example: an 8B model in FP16 is ~16 GB of weights; at
// ~600 GB/s effective bandwidth the weight stream predicts ~37 tokens/s, and a
// measured TPOT of ~27 ms is "close to the prediction".
func TestRooflineSeedExample(t *testing.T) {
	spec := ModelSpec{Parameters: 8e9, BytesPerParameter: 2}
	if spec.Weights() != 16e9 {
		t.Fatalf("weights = %v, want 16e9", spec.Weights())
	}
	got, err := PredictDecodeTokensPerSecond(spec.Weights(), 0, 600e9)
	if err != nil || !near(got, 37.5, 1e-9) {
		t.Fatalf("predicted = %v, %v; want 37.5", got, err)
	}
	// The same through ComputeRoofline: a GPU whose peak is 750 GB/s at the
	// default 0.8 efficiency is 600 GB/s effective; TPOT 27 ms measured.
	gpu := &snapshot.GPU{Up: true, Devices: []snapshot.GPUDevice{{Up: true,
		PeakMemBandwidthBytesPerSecond: snapshot.Some(750e9)}}}
	w := &snapshot.Derived{Quantiles: map[snapshot.HistogramName]map[float64]snapshot.Value{
		snapshot.InterTokenLatency: {0.5: snapshot.Some(0.027)}}}
	r := ComputeRoofline(spec, nil, w, gpu, 0.8)
	if !r.Predicted.OK || !near(r.Predicted.V, 37.5, 1e-9) || r.BandwidthSource != "gpu" {
		t.Fatalf("roofline = %+v", r)
	}
	if !near(r.Measured.V, 37.04, 0.01) || !near(r.Efficiency.V, 0.988, 0.001) {
		t.Fatalf("measured %v efficiency %v, want ~37.04 and ~0.988", r.Measured, r.Efficiency)
	}
	// KV traffic lowers the prediction: half of a 20 GB pool in use adds
	// 10 GB per step → 600/26 = 23.08 tokens/s.
	spec.KVCacheBytes = 20e9
	m := &snapshot.Model{KVUsage: snapshot.Some(0.5)}
	r = ComputeRoofline(spec, m, w, gpu, 0.8)
	if r.KVSource != "flag" || !near(r.KVBytes, 10e9, 1) || !near(r.Predicted.V, 600e9/26e9, 1e-9) {
		t.Fatalf("with KV: %+v", r)
	}
	// Pool derived from GPU memory: 80 GB x 0.9 - 16 GB - 1.5 GB = 54.5 GB.
	gpu.Devices[0].MemoryTotalBytes = snapshot.Some(80e9)
	spec.KVCacheBytes = 0
	m.CacheConfig = map[string]string{"gpu_memory_utilization": "0.9"}
	r = ComputeRoofline(spec, m, w, gpu, 0.8)
	if r.KVSource != "gpu_memory" || !near(r.KVBytes, 0.5*54.5e9, 1) {
		t.Fatalf("derived pool: %+v", r)
	}
	// No weight flags: with the KV pool given, vLLM's process memory minus
	// the pool and 1.5 GB overhead is the weights (71.5 - 54 - 1.5 = 16 GB).
	gpu.Devices[0].ProcessMemoryBytes = map[uint32]float64{4242: 71.5e9}
	r = ComputeRoofline(ModelSpec{KVCacheBytes: 54e9}, m, w, gpu, 0.8)
	if r.WeightSource != "process_memory" || !near(r.WeightBytes, 16e9, 1) || !r.Predicted.OK {
		t.Fatalf("weights from process memory: %+v", r)
	}
	// Without the pool they cannot be separated: no weights, no prediction.
	if r := ComputeRoofline(ModelSpec{}, m, w, gpu, 0.8); r.WeightBytes != 0 || r.Predicted.OK {
		t.Fatalf("process memory without a KV pool size: %+v", r)
	}
	// Nothing known: no prediction, no efficiency, no panic.
	if r := ComputeRoofline(ModelSpec{}, nil, nil, nil, 0.8); r.Predicted.OK || r.Efficiency.OK {
		t.Fatalf("empty roofline = %+v", r)
	}
}

func TestRooflineRejectsBadInput(t *testing.T) {
	for _, c := range [][3]float64{{0, 0, 1}, {1, -1, 1}, {1, 0, 0}, {math.NaN(), 0, 1}, {1, 0, math.Inf(1)}} {
		if _, err := PredictDecodeTokensPerSecond(c[0], c[1], c[2]); err == nil {
			t.Errorf("PredictDecodeTokensPerSecond%v: no error", c)
		}
	}
	if err := (ModelSpec{Parameters: 8e9}).Validate(); err == nil {
		t.Error("parameters without bytes per parameter accepted")
	}
	if err := (ModelSpec{WeightBytes: -1}).Validate(); err == nil || !strings.Contains(err.Error(), "--model.weight-bytes") {
		t.Errorf("negative weight bytes: %v", err)
	}
}

// The seed's capacity example: 5,000,000 items/day at 35 req/s per A40 →
// ~58 req/s → ceil(58/35) = 2 GPUs, 4 with the standard 2x headroom.
func TestPlanGPUsSeedExample(t *testing.T) {
	p, err := PlanGPUs(5e6, 35, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !near(p.RequiredPerSecond, 57.87, 0.01) || p.GPUs != 2 || p.GPUsWithHeadroom != 4 {
		t.Fatalf("plan = %+v", p)
	}
	if _, err := PlanGPUs(5e6, 0, 2); err == nil {
		t.Error("zero throughput accepted")
	}
	if _, err := PlanGPUs(5e6, 35, 0.5); err == nil {
		t.Error("headroom < 1 accepted")
	}
}

func TestCostPerMillion(t *testing.T) {
	// $2/GPU-hour, 1 GPU, 1,000 output tokens/s = 3.6M tokens/hour → $0.556/M.
	v, err := CostPerMillionOutputTokens(2, 1, 1000)
	if err != nil || !near(v, 0.5556, 0.0001) {
		t.Fatalf("cost = %v, %v", v, err)
	}
	// Every GPU serving the model is paid for: two GPUs double it.
	if v2, err := CostPerMillionOutputTokens(2, 2, 1000); err != nil || !near(v2, 2*v, 1e-9) {
		t.Fatalf("cost with 2 GPUs = %v, %v; want %v", v2, err, 2*v)
	}
	if _, err := CostPerMillionOutputTokens(2, 0, 1000); err == nil {
		t.Error("0 GPUs accepted")
	}
}

// TestCollect checks the exposition: exactly one class at 1, evidence with
// thresholds, the roofline trio, capacity and cost.
func TestCollect(t *testing.T) {
	f := &fakeSources{}
	c := New(Options{Model: testSpec, Cost: CostSpec{GPUHour: 3.5}}, nil, Sources{VLLM: f, GPU: fakeGPU{f}, Probes: fakeProbes{f}}, nil)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := healthy()
	r.kv = 0.99
	r.waiting = 9
	r.apply(f, now, newRand(7), defaultTh())
	c.Tick(now)

	if n := testutil.CollectAndCount(c, "vllm_bottleneck"); n != len(Classes) {
		t.Fatalf("vllm_bottleneck series = %d, want %d", n, len(Classes))
	}
	want := `
# HELP vllm_bottleneck Bottleneck class state set (exactly one class is 1 per model), from the classifier on the watchdog tick.
# TYPE vllm_bottleneck gauge
vllm_bottleneck{class="admission_limited",model="llama-8b"} 0
vllm_bottleneck{class="batch_too_small",model="llama-8b"} 0
vllm_bottleneck{class="communication_bound",model="llama-8b"} 0
vllm_bottleneck{class="decode_overhead",model="llama-8b"} 0
vllm_bottleneck{class="deferred_livelock",model="llama-8b"} 0
vllm_bottleneck{class="engine_stalled",model="llama-8b"} 0
vllm_bottleneck{class="gpu_fault",model="llama-8b"} 0
vllm_bottleneck{class="kv_transfer_bound",model="llama-8b"} 0
vllm_bottleneck{class="lora_queueing",model="llama-8b"} 0
vllm_bottleneck{class="kv_cache_exhausted",model="llama-8b"} 1
vllm_bottleneck{class="memory_bound_decode",model="llama-8b"} 0
vllm_bottleneck{class="near_optimal",model="llama-8b"} 0
vllm_bottleneck{class="prefill_bound",model="llama-8b"} 0
vllm_bottleneck{class="prefix_cache_miss",model="llama-8b"} 0
vllm_bottleneck{class="probes_failing",model="llama-8b"} 0
vllm_bottleneck{class="queueing",model="llama-8b"} 0
vllm_bottleneck{class="throttled",model="llama-8b"} 0
vllm_bottleneck{class="too_many_sequences",model="llama-8b"} 0
vllm_bottleneck{class="unavailable",model="llama-8b"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "vllm_bottleneck"); err != nil {
		t.Fatal(err)
	}
	st, _ := c.State(model)
	kv := st.Evidence()[0]
	wantEv := `
# HELP vllm_bottleneck_evidence Signals behind the current bottleneck class: the measured value (signal) and the threshold it was compared to (signal_threshold), in the signal's base unit.
# TYPE vllm_bottleneck_evidence gauge
vllm_bottleneck_evidence{class="kv_cache_exhausted",model="llama-8b",signal="kv_cache_usage_ratio"} ` + ftoa(kv.Value) + `
vllm_bottleneck_evidence{class="kv_cache_exhausted",model="llama-8b",signal="kv_cache_usage_ratio_threshold"} 0.95
vllm_bottleneck_evidence{class="kv_cache_exhausted",model="llama-8b",signal="requests_waiting"} 9
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(wantEv), "vllm_bottleneck_evidence"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"vllm_decode_roofline_tokens_per_second", "vllm_decode_measured_tokens_per_second",
		"vllm_decode_efficiency_ratio", "vllm_capacity_output_tokens_per_second", "vllm_capacity_requests_per_second",
		"vllm_cost_per_million_output_tokens"} {
		if n := testutil.CollectAndCount(c, name); n != 1 {
			t.Errorf("%s: %d series, want 1", name, n)
		}
	}
	// Not configured: no GPUs-needed series; no GPU missing: no unavailable.
	if n := testutil.CollectAndCount(c, "vllm_capacity_gpus_needed", "vllm_bottleneck_class_unavailable"); n != 0 {
		t.Errorf("unexpected series: %d", n)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// With bottleneck.daily_requests set, the plan uses the per-GPU capacity
// measured at saturation (a request waiting) and vllm_capacity_gpus_needed
// is exported.
func TestGPUsNeededSeries(t *testing.T) {
	th := defaultTh()
	th.DailyRequests = 5e6
	f := &fakeSources{}
	c := New(Options{Model: testSpec, Thresholds: &th}, nil, Sources{VLLM: f, GPU: fakeGPU{f}}, nil)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := healthy()
	r.rps, r.waiting = 35, 1
	r.apply(f, now, newRand(2), th)
	c.Tick(now)
	st, _ := c.State(model)
	p := st.Capacity.Plan
	if p == nil || p.PerGPURequestsPerSecond != st.Capacity.RequestsPerSecond.V || p.GPUsWithHeadroom != 2*p.GPUs {
		t.Fatalf("plan = %+v, capacity %+v", p, st.Capacity)
	}
	want := fmt.Sprintf(`
# HELP vllm_capacity_gpus_needed GPUs needed for bottleneck.daily_requests at the per-GPU request capacity measured while saturated (requests waiting, KV full or preemptions) with the SLOs held, with bottleneck.headroom applied; absent until such a measurement exists.
# TYPE vllm_capacity_gpus_needed gauge
vllm_capacity_gpus_needed{model="llama-8b"} %d
`, p.GPUsWithHeadroom)
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "vllm_capacity_gpus_needed"); err != nil {
		t.Fatal(err)
	}
}

// TestCacheConfigFloat reads cache_config values as fmt.Sscan did, except
// a token with trailing garbage, which Sscan read up to the garbage.
func TestCacheConfigFloat(t *testing.T) {
	m := &snapshot.Model{CacheConfig: map[string]string{"gpu_memory_utilization": "0.9x"}}
	if f, ok := cacheConfigFloat(m, "gpu_memory_utilization"); ok {
		t.Errorf("0.9x read as %v", f)
	}
	for _, v := range []string{"0.9", " 0.85", "0.9 ", "1", "1.0", "0.5\tx", "1e-1", "0x1p-1", "0", "-0.5", "1.01", "None", "", "inf", "NaN", ".5"} {
		m := &snapshot.Model{CacheConfig: map[string]string{"gpu_memory_utilization": v}}
		got, ok := cacheConfigFloat(m, "gpu_memory_utilization")
		var want float64
		_, err := fmt.Sscan(v, &want)
		wantOK := err == nil && want > 0 && want <= 1
		if ok != wantOK || (ok && got != want) {
			t.Errorf("%q: %v, %v; fmt.Sscan read %v, %v", v, got, ok, want, wantOK)
		}
	}
}
