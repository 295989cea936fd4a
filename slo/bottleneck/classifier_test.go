package bottleneck

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	vllmcol "github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

const qwen = "Qwen/Qwen3-32B"

// qs names a fixture series; extra labels sort after model_name.
func qs(name string, engine string, extra ...string) string {
	return name + "{" + strings.Join(append([]string{`engine="` + engine + `"`, `model_name="` + qwen + `"`}, extra...), ",") + "}"
}

// runLate scrapes the fixture every 15 s for ticks ticks, the generation
// counters growing by genPerTick tokens per engine, and classifies on each.
func runLate(t *testing.T, vals map[string]string, genPerTick float64, ticks int) ModelState {
	t.Helper()
	raw := testutil.VLLMBody(t, "vllm-late-2026-dp2-priority-spec.txt")
	srv := testutil.NewBodyServer(t, raw)
	s := vllmcol.New(vllmcol.Options{URL: srv.URL, Interval: 15 * time.Second, Windows: []time.Duration{time.Minute}}, nil)
	c := New(Options{}, nil, Sources{VLLM: s}, nil)
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	gen := [2]float64{300000, 290000}
	for i := 0; i < ticks; i++ {
		v := map[string]string{
			qs("vllm:generation_tokens_total", "0"): strconvF(gen[0] + genPerTick*float64(i)),
			qs("vllm:generation_tokens_total", "1"): strconvF(gen[1] + genPerTick*float64(i)),
		}
		for k, x := range vals {
			v[k] = x
		}
		srv.Set(testutil.WithValues(t, raw, v))
		s.ScrapeOnce(context.Background(), now)
		c.Tick(now)
		now = now.Add(15 * time.Second)
	}
	st, ok := c.State(qwen)
	if !ok {
		t.Fatal("no state for the fixture's model")
	}
	return st
}

func strconvF(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func approxEq(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// vllm #53130 as reported (deferred 473, capacity 19, KV 20%, generation
// about 0.5 tokens/s, /health 200) is its own class, with the knob.
func TestDeferredLivelockFromFixture(t *testing.T) {
	st := runLate(t, nil, 4, 10) // 8 tokens per 15 s over both engines: ~0.5 tokens/s
	if st.Class != DeferredLivelock {
		t.Fatalf("class %s (raw %s), want deferred_livelock; findings %+v", st.Class, st.Raw, st.Findings)
	}
	ev := map[string]float64{}
	for _, e := range st.Evidence() {
		ev[e.Signal] = e.Value
	}
	if ev["requests_waiting_deferred"] != 473 || ev["requests_waiting_capacity"] != 19 {
		t.Errorf("evidence %v, want 473 deferred and 19 waiting for capacity", ev)
	}
	if !strings.Contains(AdviceFor(DeferredLivelock).Recommendation, "restart") {
		t.Error("the livelock's knob must say restart")
	}

	// The same queue waiting for capacity is not the livelock: queueing
	// reads the capacity part only.
	st = runLate(t, map[string]string{
		qs("vllm:num_requests_waiting_by_reason", "0", `reason="capacity"`): "231.0",
		qs("vllm:num_requests_waiting_by_reason", "0", `reason="deferred"`): "9.0",
		qs("vllm:num_requests_waiting_by_reason", "1", `reason="capacity"`): "242.0",
		qs("vllm:num_requests_waiting_by_reason", "1", `reason="deferred"`): "10.0",
	}, 4, 10)
	if st.Class == DeferredLivelock {
		t.Errorf("a capacity queue classified as the deferred livelock")
	}

	// A healthy generation rate with the same deferred pile is not a livelock.
	st = runLate(t, nil, 3000, 10)
	if st.Class == DeferredLivelock {
		t.Errorf("generation at 400 tokens/s classified as the deferred livelock")
	}
}

// Deferred requests alone never make a queueing verdict: the queueing and
// batch rules read the capacity part of the queue.
func TestQueueingReadsCapacityWaiting(t *testing.T) {
	th := config.DefaultBottleneck()
	w := &snapshot.Derived{Quantiles: map[snapshot.HistogramName]map[float64]snapshot.Value{
		snapshot.TTFT: {0.99: snapshot.Some(5), 0.95: snapshot.Some(4)},
	}}
	m := &snapshot.Model{Waiting: snapshot.Some(40), WaitingByReason: map[string]float64{"capacity": 0, "deferred": 40}}
	if f := (rules{in: Inputs{Model: m, Window: w}, th: th}).queueing(); f.Holds {
		t.Errorf("40 deferred, 0 waiting for capacity: queueing holds %+v", f)
	}
	m.WaitingByReason = map[string]float64{"capacity": 40, "deferred": 0}
	if f := (rules{in: Inputs{Model: m, Window: w}, th: th}).queueing(); !f.Holds {
		t.Errorf("40 waiting for capacity: queueing does not hold %+v", f)
	}
}

// A deliberately sleeping engine with requests queued and no token progress
// is not stalled.
func TestSleepingEngineIsNotStalled(t *testing.T) {
	th := config.DefaultBottleneck()
	m := &snapshot.Model{Running: snapshot.Some(0), Waiting: snapshot.Some(3), Sleep: snapshot.Sleep{Known: true, Awake: false, Level: snapshot.Some(1)}}
	in := Inputs{Model: m, NoProgress: snapshot.Some(600)}
	if f := (rules{in: in, th: th}).engineStalled(); f.Holds {
		t.Errorf("sleeping engine classified stalled: %+v", f)
	}
	m.Sleep.Awake = true
	if f := (rules{in: in, th: th}).engineStalled(); !f.Holds {
		t.Errorf("awake engine with no progress for 600 s not stalled: %+v", f)
	}
}

// With speculative decoding, one inter-token-latency observation covers a
// whole step: the measured decode rate, the TPOT the rules read from ITL
// and the roofline all scale by the mean acceptance length.
func TestSpecDecodeScalesDecode(t *testing.T) {
	spec := ModelSpec{WeightBytes: 16e9, MemoryBandwidth: 1.6e12}
	w := &snapshot.Derived{
		Deltas: map[snapshot.HistogramName]snapshot.Histogram{snapshot.InterTokenLatency: {Count: 1000, Sum: 30}},
		Quantiles: map[snapshot.HistogramName]map[float64]snapshot.Value{
			snapshot.InterTokenLatency: {0.95: snapshot.Some(0.06)},
		},
	}
	plain := ComputeRoofline(spec, &snapshot.Model{}, w, nil, 0.8)
	w.SpecMeanAcceptanceLength = snapshot.Some(3)
	sd := ComputeRoofline(spec, &snapshot.Model{}, w, nil, 0.8)
	if !approxEq(plain.Measured.V, 1/0.03) || !approxEq(sd.Measured.V, 3/0.03) {
		t.Errorf("measured %v -> %v, want 33.3 -> 100 tokens/s", plain.Measured.V, sd.Measured.V)
	}
	if !approxEq(sd.Predicted.V, 3*plain.Predicted.V) || !approxEq(sd.Efficiency.V, plain.Efficiency.V) {
		t.Errorf("predicted %v -> %v (efficiency %v -> %v), want x3 with the same efficiency", plain.Predicted.V, sd.Predicted.V, plain.Efficiency.V, sd.Efficiency.V)
	}
	if !sd.AcceptanceLength.OK || sd.AcceptanceLength.V != 3 {
		t.Errorf("acceptance length %+v", sd.AcceptanceLength)
	}
	if v := decodeStepSeconds(w, 0.95); !approxEq(v.V, 0.02) {
		t.Errorf("TPOT from ITL with acceptance length 3 = %v, want 0.02", v.V)
	}
	// The per-request TPOT histogram is already per token: not scaled.
	w2 := &snapshot.Derived{SpecMeanAcceptanceLength: snapshot.Some(3),
		Deltas: map[snapshot.HistogramName]snapshot.Histogram{snapshot.RequestTPOT: {Count: 10, Sum: 0.2}}}
	if r := ComputeRoofline(spec, &snapshot.Model{}, w2, nil, 0.8); !approxEq(r.Measured.V, 50) {
		t.Errorf("measured from request TPOT = %v, want 50 (unscaled)", r.Measured.V)
	}
}

// vLLM's stated KV pool replaces the memory arithmetic; its MFU/MBU
// estimates are divided by the peak, and MBU stands in for GPM.
func TestStatedPoolAndVLLMUtilization(t *testing.T) {
	m := &snapshot.Model{KVUsage: snapshot.Some(0.5), KVCacheSizeTokens: snapshot.Some(409600),
		CacheConfig: map[string]string{"gpu_memory_utilization": "0.9", "kv_cache_memory_bytes": "None"}}
	gpu := &snapshot.GPU{Up: true, Devices: []snapshot.GPUDevice{{Up: true, MemoryTotalBytes: snapshot.Some(80e9),
		PeakMemBandwidthBytesPerSecond: snapshot.Some(3.35e12)}}}
	spec := ModelSpec{WeightBytes: 16e9, KVBytesPerToken: 131072, PeakFLOPS: 989e12}
	w := &snapshot.Derived{EstimatedFlopsPerSecond: snapshot.Some(197.8e12), EstimatedBytesPerSecond: snapshot.Some(2.68e12)}
	r := ComputeRoofline(spec, m, w, gpu, 0.8)
	if r.KVSource != "cache_config" || !approxEq(r.KVBytes, 0.5*409600*131072) {
		t.Errorf("KV %v from %s, want %v from cache_config", r.KVBytes, r.KVSource, 0.5*409600*131072)
	}
	if !approxEq(r.MFU.V, 0.2) || !approxEq(r.MBU.V, 0.8) {
		t.Errorf("MFU %+v MBU %+v, want 0.2 and 0.8", r.MFU, r.MBU)
	}
	// Without the per-token size the memory arithmetic still applies.
	spec.KVBytesPerToken = 0
	if r := ComputeRoofline(spec, m, w, gpu, 0.8); r.KVSource != "gpu_memory" {
		t.Errorf("KV source %s without bytes per token, want gpu_memory", r.KVSource)
	}
	// Zero counters (no --enable-mfu-metrics): no utilization.
	if r := ComputeRoofline(spec, m, &snapshot.Derived{}, gpu, 0.8); r.MFU.OK || r.MBU.OK {
		t.Errorf("MFU/MBU without estimates: %+v %+v", r.MFU, r.MBU)
	}

	// No GPM: memory_bound_decode is judged on vLLM's MBU.
	th := config.DefaultBottleneck()
	win := &snapshot.Derived{Quantiles: map[snapshot.HistogramName]map[float64]snapshot.Value{
		snapshot.InterTokenLatency: {th.SLOQuantile: snapshot.Some(0.08)}}}
	in := Inputs{Model: m, Window: win, Roofline: Roofline{MBU: snapshot.Some(0.85)}}
	if f := (rules{in: in, th: th}).memoryBoundDecode(); !f.Holds {
		t.Errorf("memory_bound_decode on MBU 0.85 without GPM does not hold: %+v", f)
	}
	in.Roofline.MBU = snapshot.Some(0.1)
	if f := (rules{in: in, th: th}).decodeOverhead(); !f.Holds {
		t.Errorf("decode_overhead on MBU 0.1 without GPM does not hold: %+v", f)
	}
}

// The prefill speed the prefill rule compares is the computed prompt
// tokens per prefill second where vLLM reports them: tokens served from
// the prefix cache (local or external) are no prefill work.
func TestPrefillSpeedReadsComputedTokens(t *testing.T) {
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	w := &snapshot.Derived{
		Start: start, End: start.Add(time.Minute),
		PromptTokensPerSecond: snapshot.Some(8000), PrefixCacheHitRatio: snapshot.Some(0.5),
		Deltas: map[snapshot.HistogramName]snapshot.Histogram{snapshot.PrefillTime: {Count: 20, Sum: 10}},
	}
	if v := PrefillSpeed(w); !approxEq(v.V, 8000*60*0.5/10) {
		t.Errorf("prefill speed from the hit ratio = %v, want %v", v.V, 8000*60*0.5/10)
	}
	w.PromptTokensComputedPerSecond = snapshot.Some(400)
	w.PromptTokensCachedPerSecond = snapshot.Some(7600)
	if v := PrefillSpeed(w); !approxEq(v.V, 400*60/10) {
		t.Errorf("prefill speed from computed tokens = %v, want %v", v.V, 400*60/10)
	}
	// The cache-miss rule's ratio is the cached share of prompt tokens.
	if v := HitRatio(w); !approxEq(v.V, 0.95) {
		t.Errorf("hit ratio = %v, want 0.95 (7600 cached of 8000)", v.V)
	}
}

// Deferred requests are not a saturated server: the capacity model's
// saturation reads the capacity part of the queue. And the pool vLLM
// states lets the weights be read from process memory without a flag.
func TestCapacityReadsCapacityWaitingAndStatedPool(t *testing.T) {
	th := config.DefaultBottleneck()
	m := &snapshot.Model{Waiting: snapshot.Some(40), WaitingByReason: map[string]float64{"capacity": 0, "deferred": 40}}
	if l := saturation(m, nil, snapshot.Some(0.3), th); l.saturated {
		t.Error("40 deferred requests counted as a saturated server")
	}
	m.WaitingByReason["capacity"] = 5
	if l := saturation(m, nil, snapshot.Some(0.3), th); !l.saturated {
		t.Error("5 requests waiting for capacity: not saturated")
	}

	pm := &snapshot.Model{KVUsage: snapshot.Some(0.5), KVCacheSizeTokens: snapshot.Some(409600)}
	gpu := &snapshot.GPU{Up: true, Devices: []snapshot.GPUDevice{{Up: true, MemoryTotalBytes: snapshot.Some(80e9),
		PeakMemBandwidthBytesPerSecond: snapshot.Some(3.35e12), ProcessMemoryBytes: map[uint32]float64{1: 72e9}}}}
	r := ComputeRoofline(ModelSpec{KVBytesPerToken: 131072}, pm, nil, gpu, 0.8)
	wantW := 72e9 - 409600*131072 - kvOverheadBytesPerGPU
	if r.WeightSource != "process_memory" || !approxEq(r.WeightBytes, wantW) {
		t.Errorf("weights %v from %q, want %v from process_memory (stated pool)", r.WeightBytes, r.WeightSource, wantW)
	}
}
