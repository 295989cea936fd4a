package bottleneck

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// fakeSources serves hand-built snapshots to the classifier.
type fakeSources struct {
	vllm   *snapshot.VLLM
	win    map[time.Duration]map[string]*snapshot.Derived
	gpu    *snapshot.GPU
	probes *snapshot.Probes
	// probesSent and probeTimeouts are a third, short-chat profile's
	// cumulative counts (one probe per tick).
	probesSent, probeTimeouts float64
}

func (f *fakeSources) Latest() *snapshot.VLLM { return f.vllm }
func (f *fakeSources) Window(d time.Duration) map[string]*snapshot.Derived {
	return f.win[d]
}

type fakeGPU struct{ f *fakeSources }

func (g fakeGPU) Latest() *snapshot.GPU { return g.f.gpu }

type fakeProbes struct{ f *fakeSources }

func (p fakeProbes) Latest() *snapshot.Probes { return p.f.probes }

// regime is a workload state, expressed as the measurements it produces.
type regime struct {
	kv, waiting, running, preemptPerReq                float64
	ttft95, ttft99, prefill99, queue99, tpot50, tpot95 float64
	hit, hitBase, promptPerReq, rps, tokensPerReq      float64
	gpus                                               int
	util, dram, nvlink                                 float64
	throttle, lost, stalledProbe, stalledScrape, down  bool
	xidAgo                                             time.Duration
	probeCold, probeWarm                               float64
	probeFailRatio                                     float64 // share of the short-chat probes that time out
	smClock                                            float64 // SM clock / max
	// deferred is vllm:num_requests_waiting_by_reason{reason="deferred"};
	// waiting is then the capacity part (a ≈0.20+ server splits them).
	deferred float64
	// Production features (issue 24): admission rejections per second;
	// the mean NIXL KV transfer of a decode pod (seconds) and the pod's
	// role; LoRA slots (max_lora) and the adapters running and waiting;
	// KV block residency medians (idle before eviction, reuse gap).
	rejected, xfer    float64
	role              string
	loraMax           float64
	loraRun, loraWait []string
	idle50, gap90     float64
}

const h100MaxSMClock = 1.98e9

// healthy is a busy, well-tuned server: one H100 (3.35 TB/s peak), 8B FP16
// weights, TPOT near the roofline (efficiency ~0.95), every latency under
// target.
func healthy() regime {
	return regime{
		kv: 0.55, running: 24, ttft95: 0.3, ttft99: 0.45, prefill99: 0.12, queue99: 0.05,
		tpot50: 0.018, tpot95: 0.026, hit: 0.6, hitBase: 0.6, promptPerReq: 300, rps: 8, tokensPerReq: 250,
		gpus: 1, util: 0.8, dram: 0.55, probeCold: 0.45, probeWarm: 0.12, smClock: 0.9,
	}
}

var regimes = map[Class]func(r *regime){
	GPUFault:      func(r *regime) { r.xidAgo = 20 * time.Second },
	EngineStalled: func(r *regime) { r.stalledProbe = true },
	// vllm #53130 as reported: deferred ≈ 473, capacity ≈ 19, KV ≈ 20%,
	// generation ≈ 0.5 tokens/s, TTFT unbounded.
	DeferredLivelock: func(r *regime) {
		r.deferred, r.waiting, r.kv, r.running = 473, 19, 0.2, 2
		r.rps, r.tokensPerReq = 0.01, 50
		r.ttft95, r.ttft99, r.queue99, r.util = 60, 120, 110, 0.05
	},
	Throttled:         func(r *regime) { r.throttle = true; r.smClock = 0.45; r.tpot95 = 0.08; r.tpot50 = 0.05 },
	TooManySequences:  func(r *regime) { r.preemptPerReq = 0.06; r.kv = 0.86; r.waiting = 6; r.tpot50 = 0.027 },
	ServerUnavailable: func(r *regime) { r.down = true },
	KVCacheExhausted:  func(r *regime) { r.kv = 0.985; r.waiting = 12; r.ttft99 = 3; r.tpot50 = 0.027 },
	Queueing:          func(r *regime) { r.waiting = 30; r.ttft95 = 3; r.ttft99 = 5; r.queue99 = 4.5 },
	PrefixCacheMiss:   func(r *regime) { r.probeWarm = 0.44; r.hit = 0.05 },
	PrefillBound:      func(r *regime) { r.ttft95 = 2.4; r.ttft99 = 3; r.prefill99 = 2.6 }, // same prompts, 20x slower prefill
	CommunicationBound: func(r *regime) {
		r.gpus = 4
		r.nvlink = 250e9
		r.tpot95, r.tpot50 = 0.07, 0.05
	},
	MemoryBoundDecode: func(r *regime) { r.kv = 0.9; r.tpot50 = 0.026; r.tpot95 = 0.055; r.dram = 0.9 },
	DecodeOverhead:    func(r *regime) { r.tpot50 = 0.12; r.tpot95 = 0.2; r.dram = 0.15; r.util = 0.3 },
	BatchTooSmall:     func(r *regime) { r.util = 0.2; r.running = 1; r.rps = 0.3 },
	// An underused server whose probes mostly fail: not batch_too_small.
	ProbesFailing: func(r *regime) { r.util = 0.2; r.running = 1; r.rps = 0.3; r.probeFailRatio = 0.9 },
	NearOptimal:   func(r *regime) {},
	// --max-num-queued-requests 64: the queue sits at its cap and a fifth
	// of the arrivals are refused (2 of 10 per second).
	AdmissionLimited: func(r *regime) {
		r.waiting, r.rejected = 64, 2
		r.ttft95, r.ttft99, r.queue99 = 3, 4, 3.6
	},
	// A decode pod whose prompts' KV takes 1.5 s on average to arrive
	// (TCP instead of RDMA): the requests wait deferred, nothing waits for
	// capacity, prefill here is short.
	KVTransferBound: func(r *regime) {
		r.role, r.xfer, r.deferred = snapshot.RoleDecode, 1.5, 12
		r.ttft95, r.ttft99 = 2.2, 2.8
	},
	// max_lora 2, both slots busy with adapters a and b, requests for c
	// and d wait (deferred: skipped for their adapter); KV has room.
	LoRAQueueing: func(r *regime) {
		r.loraMax, r.loraRun, r.loraWait = 2, []string{"a", "b"}, []string{"b", "c", "d"}
		r.deferred, r.ttft95, r.ttft99, r.queue99 = 14, 2.5, 3.5, 3.2
	},
}

// legacySeed keeps each regime's noise seed as it was tuned with (the seeds
// were list positions before unavailable and deferred_livelock were added).
var legacySeed = map[Class]int64{
	GPUFault: 0, ServerUnavailable: 0, EngineStalled: 1, Throttled: 2, KVCacheExhausted: 3, TooManySequences: 4,
	Queueing: 5, PrefixCacheMiss: 6, PrefillBound: 7, CommunicationBound: 8, MemoryBoundDecode: 9,
	DecodeOverhead: 10, BatchTooSmall: 11, NearOptimal: 12, DeferredLivelock: 13,
	AdmissionLimited: 14, KVTransferBound: 15, LoRAQueueing: 16, ProbesFailing: 17,
}

var testSpec = ModelSpec{Parameters: 8e9, BytesPerParameter: 2}

const model = "llama-8b"

// noisy returns v scaled by up to ±amp, deterministic per rng.
func noisy(rng *rand.Rand, v, amp float64) float64 { return v * (1 + amp*(2*rng.Float64()-1)) }

// apply publishes the regime's measurements (with noise) into f.
func (r regime) apply(f *fakeSources, now time.Time, rng *rand.Rand, th config.Bottleneck) {
	n := func(v float64) float64 { return noisy(rng, v, 0.1) }
	waiting := r.waiting
	if roll := rng.Float64(); waiting == 0 && roll < 0.15 && r.rps >= 1 {
		waiting = 1 // a busy healthy server queues a request now and then
	}
	running := r.running
	if r.stalledScrape {
		running = 5
	}
	m := &snapshot.Model{
		Name: model, Running: snapshot.Some(running), Waiting: snapshot.Some(waiting + r.deferred),
		WaitingByReason: map[string]float64{"capacity": waiting, "deferred": r.deferred},
		KVUsage:         snapshot.Some(min(r.kv+0.04*rng.Float64()-0.03, 1)),
		CacheConfig:     map[string]string{"gpu_memory_utilization": "0.9", "enable_prefix_caching": "True"},
		Role:            r.role,
	}
	if r.loraMax > 0 {
		m.LoRA = snapshot.LoRA{Known: true, Max: snapshot.Some(r.loraMax), Running: map[string]float64{}, Waiting: map[string]float64{}}
		for _, a := range r.loraRun {
			m.LoRA.Running[a] = 1
		}
		for _, a := range r.loraWait {
			m.LoRA.Waiting[a] = 1
		}
	}
	f.vllm = &snapshot.VLLM{Time: now, Up: true, Models: map[string]*snapshot.Model{model: m}}
	if r.down {
		f.vllm, f.win = &snapshot.VLLM{Time: now, Error: "connect"}, nil
	}
	qs := func(p50, p95, p99 float64) map[float64]snapshot.Value {
		return map[float64]snapshot.Value{0.5: snapshot.Some(n(p50)), 0.9: snapshot.Some(n(p95)), 0.95: snapshot.Some(n(p95)), 0.99: snapshot.Some(n(p99))}
	}
	gen := r.rps * r.tokensPerReq
	prompt := r.rps * r.promptPerReq
	if r.stalledScrape {
		gen, prompt = 0, 0
	}
	d := func(hit float64) *snapshot.Derived {
		prefills := r.rps * 60
		return &snapshot.Derived{
			Start: now.Add(-time.Minute), End: now,
			Deltas: map[snapshot.HistogramName]snapshot.Histogram{
				snapshot.PrefillTime: {Count: prefills, Sum: prefills * n(r.prefill99/3)},
				// Little's law: as many in flight on average as running.
				snapshot.E2E: {Count: prefills, Sum: 60 * running},
			},
			PreemptionsPerRequest:     snapshot.Some(r.preemptPerReq),
			PreemptionsPerSecond:      snapshot.Some(r.preemptPerReq * r.rps),
			PrefixCacheHitRatio:       snapshot.Some(n(hit)),
			PromptTokensPerSecond:     snapshot.Some(n(prompt)),
			GenerationTokensPerSecond: snapshot.Some(n(gen)),
			RequestsPerSecond:         snapshot.Some(n(r.rps)),
			Quantiles: map[snapshot.HistogramName]map[float64]snapshot.Value{
				snapshot.TTFT:        qs(r.ttft95/2, r.ttft95, r.ttft99),
				snapshot.RequestTPOT: qs(r.tpot50, r.tpot95, r.tpot95*1.2),
				snapshot.PrefillTime: qs(r.prefill99/3, r.prefill99*0.8, r.prefill99),
				snapshot.QueueTime:   qs(r.queue99/4, r.queue99*0.8, r.queue99),
			},
		}
	}
	f.win = map[time.Duration]map[string]*snapshot.Derived{
		th.Window:         {model: r.production(d(r.hit), n)},
		th.BaselineWindow: {model: r.production(d(r.hitBase), n)},
	}
	if r.gpus > 0 {
		g := &snapshot.GPU{Time: now, Up: true}
		for i := 0; i < r.gpus; i++ {
			dev := snapshot.GPUDevice{
				Index: i, UUID: fmt.Sprintf("GPU-%d", i), Name: "NVIDIA H100 80GB HBM3", Up: !(r.lost && i == 0),
				UtilGPU: snapshot.Some(min(n(r.util), 1)), DRAMBandwidthUtil: snapshot.Some(min(n(r.dram), 1)),
				MemoryTotalBytes:               snapshot.Some(80e9 / float64(r.gpus)),
				PeakMemBandwidthBytesPerSecond: snapshot.Some(3.35e12 / float64(r.gpus)),
				NVLinkTxBytesPerSecond:         snapshot.Some(n(r.nvlink / 2)), NVLinkRxBytesPerSecond: snapshot.Some(n(r.nvlink / 2)),
				ThrottleReasons: map[string]bool{"sw_power_cap": r.throttle, "gpu_idle": false},
				SMClockHz:       snapshot.Some(r.smClock * h100MaxSMClock), MaxSMClockHz: snapshot.Some(h100MaxSMClock),
			}
			if r.xidAgo > 0 {
				dev.LastFatalXidTime = now.Add(-r.xidAgo)
			}
			g.Devices = append(g.Devices, dev)
		}
		f.gpu = g
	} else {
		f.gpu = nil
	}
	f.probesSent++
	failed := rng.Float64() < r.probeFailRatio
	if failed {
		f.probeTimeouts++
	}
	f.probes = &snapshot.Probes{Time: now, EngineStalled: r.stalledProbe, Profiles: map[string]*snapshot.ProbeProfile{
		"cold": probeProfile("cold", n(r.probeCold)), "warm": probeProfile("warm", n(r.probeWarm)),
		"short-chat": {Name: "short-chat", Prefix: "cold", Requests: f.probesSent, Failures: map[string]float64{"timeout": f.probeTimeouts},
			LastTime: now, LastSuccess: !failed},
	}}
}

// production adds the windowed readings of the production features the
// regime has to w.
func (r regime) production(w *snapshot.Derived, n func(float64) float64) *snapshot.Derived {
	requests := r.rps * 60
	if r.rejected > 0 {
		w.RejectedPerSecond = snapshot.Some(n(r.rejected))
	}
	if r.xfer > 0 {
		// Every request is one transfer; TTFT's mean is about its median.
		w.Deltas[snapshot.KVTransferTime] = snapshot.Histogram{Count: requests, Sum: requests * n(r.xfer)}
		w.Deltas[snapshot.TTFT] = snapshot.Histogram{Count: requests, Sum: requests * n(r.ttft95/2+r.xfer/2)}
		w.KVTransferBytesPerSecond = snapshot.Some(n(r.rps * r.promptPerReq * 131072))
	}
	if r.idle50 > 0 {
		w.Deltas[snapshot.KVBlockIdleBeforeEvict] = snapshot.Histogram{Count: 500}
		w.Deltas[snapshot.KVBlockReuseGap] = snapshot.Histogram{Count: 200}
		w.Quantiles[snapshot.KVBlockIdleBeforeEvict] = map[float64]snapshot.Value{0.5: snapshot.Some(n(r.idle50))}
		w.Quantiles[snapshot.KVBlockReuseGap] = map[float64]snapshot.Value{0.9: snapshot.Some(n(r.gap90))}
	}
	return w
}

// probeProfile is a cumulative TTFT histogram of 10 probes at about ttft.
func probeProfile(prefix string, ttft float64) *snapshot.ProbeProfile {
	bounds := []float64{0.025, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5}
	counts := make([]float64, len(bounds))
	for i, b := range bounds {
		if ttft <= b {
			counts[i] = 10
		}
	}
	return &snapshot.ProbeProfile{Name: prefix, Prefix: prefix, Requests: 10,
		TTFT: snapshot.Histogram{Bounds: bounds, Counts: counts, Count: 10, Sum: 10 * ttft}}
}

func newTestClassifier(f *fakeSources, spec ModelSpec) *Classifier {
	return New(Options{Model: spec}, nil, Sources{VLLM: f, GPU: fakeGPU{f}, Probes: fakeProbes{f}}, nil)
}

// TestScenarioSuite drives every class's regime after a healthy lead-in and
// checks the class is right by the third tick and stays right, then prints a
// confusion table (rows: regime, columns: published class, counting ticks
// from the third tick of the regime on).
func TestScenarioSuite(t *testing.T) {
	th := config.DefaultBottleneck()
	confusion := map[Class]map[Class]int{}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for ci, want := range Classes {
		f := &fakeSources{}
		c := newTestClassifier(f, testSpec)
		// Seeded per class (legacySeed), not by list position, so adding or
		// reordering classes leaves every other regime's noise as it was.
		seed := int64(ci)
		if old, ok := legacySeed[want]; ok {
			seed = old
		}
		rng := rand.New(rand.NewSource(seed))
		now := start
		tick := func(r regime) Class {
			now = now.Add(15 * time.Second)
			r.apply(f, now, rng, th)
			c.Tick(now)
			st, _ := c.State(model)
			return st.Class
		}
		for i := 0; i < 20; i++ {
			if got := tick(healthy()); got != NearOptimal {
				t.Fatalf("%s: healthy lead-in tick %d classified %s", want, i, got)
			}
		}
		r := healthy()
		regimes[want](&r)
		confusion[want] = map[Class]int{}
		for i := 1; i <= 12; i++ {
			got := tick(r)
			if i >= th.HoldTicks {
				confusion[want][got]++
				if got != want {
					st, _ := c.State(model)
					t.Errorf("%s: regime tick %d classified %s (raw %s)", want, i, got, st.Raw)
				}
			} else if want != NearOptimal && got != NearOptimal {
				t.Errorf("%s: switched to %s at regime tick %d, before hold_ticks=%d", want, got, i, th.HoldTicks)
			}
		}
		// Back to healthy: the class returns to near_optimal within hold_ticks.
		var got Class
		for i := 0; i < th.HoldTicks; i++ {
			got = tick(healthy())
		}
		if got != NearOptimal {
			t.Errorf("%s: %d healthy ticks after the regime still %s", want, th.HoldTicks, got)
		}
	}
	t.Log("confusion table (regime \\ published class, ticks from hold_ticks on):\n" + confusionTable(confusion))
}

func confusionTable(conf map[Class]map[Class]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-20s", "")
	for _, c := range Classes {
		fmt.Fprintf(&b, " %4.4s", abbrev(c))
	}
	b.WriteString("\n")
	for _, row := range Classes {
		if conf[row] == nil {
			continue
		}
		fmt.Fprintf(&b, "%-20s", row)
		for _, col := range Classes {
			fmt.Fprintf(&b, " %4d", conf[row][col])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// abbrev shortens a class to its initials for the table header.
func abbrev(c Class) string {
	var s string
	for _, p := range strings.Split(string(c), "_") {
		s += p[:1]
	}
	return s
}

// TestHealthyNoiseNeverFlaps runs a long healthy period with noise (and the
// occasional one-tick spike) and requires no class change at all.
func TestHealthyNoiseNeverFlaps(t *testing.T) {
	th := config.DefaultBottleneck()
	f := &fakeSources{}
	c := newTestClassifier(f, testSpec)
	rng := rand.New(rand.NewSource(42))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rawDiffers := 0
	spiked := false
	for i := 0; i < 3000; i++ {
		now = now.Add(15 * time.Second)
		r := healthy()
		// A single-tick tail spike (never two in a row: that is a
		// regime lasting hold_ticks, which should change the class).
		if roll := rng.Float64(); roll < 0.03 && !spiked {
			r.ttft99, r.waiting = 4, 3
			spiked = true
		} else {
			spiked = false
		}
		r.apply(f, now, rng, th)
		c.Tick(now)
		st, _ := c.State(model)
		if st.Class != NearOptimal {
			t.Fatalf("tick %d: healthy run changed class to %s", i, st.Class)
		}
		if st.Raw != NearOptimal {
			rawDiffers++
		}
	}
	if rawDiffers == 0 {
		t.Fatal("the noise never produced a single-tick raw verdict: the test does not exercise hysteresis")
	}
	t.Logf("3000 healthy ticks: raw verdict differed on %d single ticks, published class never changed", rawDiffers)
}

func TestScrapeSideStallAndNoGPU(t *testing.T) {
	th := config.DefaultBottleneck()
	f := &fakeSources{}
	// No GPU: bandwidth comes from the flag.
	spec := testSpec
	spec.MemoryBandwidth = 3.84e12
	spec.KVCacheBytes = 54e9
	c := New(Options{Model: spec}, nil, Sources{VLLM: f}, nil)
	rng := rand.New(rand.NewSource(1))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	run := func(r regime, ticks int) ModelState {
		for i := 0; i < ticks; i++ {
			now = now.Add(15 * time.Second)
			r.apply(f, now, rng, th)
			f.gpu, f.probes = nil, nil
			c.Tick(now)
		}
		st, _ := c.State(model)
		return st
	}
	r := healthy()
	r.gpus = 0
	st := run(r, 5)
	if st.Class != NearOptimal {
		t.Fatalf("healthy without GPU: %s", st.Class)
	}
	for _, cl := range []Class{GPUFault, Throttled, CommunicationBound} {
		if st.Unavailable[cl] != ReasonNoGPU {
			t.Errorf("without a GPU %s should be unavailable (no_gpu), got %q", cl, st.Unavailable[cl])
		}
	}
	if _, ok := st.Unavailable[MemoryBoundDecode]; ok {
		t.Errorf("roofline from the bandwidth flag should keep memory_bound_decode available")
	}
	if st.Roofline.BandwidthSource != "flag" || !st.Roofline.Efficiency.OK {
		t.Errorf("roofline = %+v, want flag bandwidth and an efficiency", st.Roofline)
	}

	stalled := r
	stalled.stalledScrape = true
	if st := run(stalled, 3); st.Class != EngineStalled {
		t.Errorf("scrape-side stall: %s (raw %s)", st.Class, st.Raw)
	}
	small := r
	small.running, small.rps = 1, 0.3
	if st := run(small, 3); st.Class != BatchTooSmall {
		t.Errorf("no-GPU batch_too_small proxy: %s (raw %s)", st.Class, st.Raw)
	}
	mem := r
	mem.kv, mem.tpot50, mem.tpot95 = 0.9, 0.019, 0.055
	if st := run(mem, 3); st.Class != MemoryBoundDecode {
		t.Errorf("no-GPU memory-bound from roofline alone: %s (raw %s, eff %+v)", st.Class, st.Raw, st.Roofline.Efficiency)
	}

	// Without GPU and without any roofline input the decode classes are unavailable.
	c2 := New(Options{}, nil, Sources{VLLM: f}, nil)
	c2.Tick(now)
	st2, _ := c2.State(model)
	if st2.Unavailable[MemoryBoundDecode] != ReasonNoDecodeReference || st2.Unavailable[DecodeOverhead] != ReasonNoDecodeReference {
		t.Errorf("no roofline, no GPU: unavailable = %v", st2.Unavailable)
	}
}

func TestHysteresis(t *testing.T) {
	st := &modelState{}
	now := time.Unix(0, 0)
	seq := []struct {
		raw, want Class
	}{
		{NearOptimal, NearOptimal}, // first verdict adopted at once
		{Queueing, NearOptimal},
		{Queueing, NearOptimal},
		{NearOptimal, NearOptimal}, // a healthy tick resets the candidate
		{Queueing, NearOptimal},
		{KVCacheExhausted, NearOptimal},
		{KVCacheExhausted, KVCacheExhausted}, // three disagreeing ticks: the most frequent wins
		{NearOptimal, KVCacheExhausted},
		{Queueing, KVCacheExhausted},
		{KVCacheExhausted, KVCacheExhausted}, // agreement resets the count
		{Queueing, KVCacheExhausted},
		{Queueing, KVCacheExhausted},
		{Queueing, Queueing},
	}
	for i, s := range seq {
		st.advance(s.raw, now.Add(time.Duration(i)*time.Second), 3)
		if st.Class != s.want {
			t.Fatalf("step %d (raw %s): class %s, want %s", i, s.raw, st.Class, s.want)
		}
	}
	if !st.Since.Equal(now.Add(12 * time.Second)) {
		t.Errorf("since = %v, want the tick the class was adopted", st.Since)
	}
}

// One failed scrape does not change the published class (hysteresis), but
// the raw verdict is unavailable at once and the scrape-derived state is
// withdrawn.
func TestVLLMDownIsRawUnavailableAtOnce(t *testing.T) {
	f := &fakeSources{}
	c := newTestClassifier(f, testSpec)
	th := config.DefaultBottleneck()
	rng := rand.New(rand.NewSource(3))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	healthy().apply(f, now, rng, th)
	c.Tick(now)
	f.vllm = &snapshot.VLLM{Time: now.Add(time.Minute), Up: false, Error: "connect"}
	c.Tick(now.Add(time.Minute))
	if st, ok := c.State(model); !ok || st.Class != NearOptimal || st.Raw != ServerUnavailable || st.Window != nil || st.Roofline.Predicted.OK {
		t.Fatalf("state after a failed scrape = %+v, %v", st, ok)
	}
	// A model that vanishes from a good scrape is dropped.
	f.vllm = &snapshot.VLLM{Time: now, Up: true, Models: map[string]*snapshot.Model{}}
	c.Tick(now.Add(2 * time.Minute))
	if _, ok := c.State(model); ok {
		t.Fatal("vanished model kept")
	}
	// No sources at all: Tick is a no-op.
	New(Options{}, nil, Sources{}, nil).Tick(now)
}

func newRand(seed int64) *rand.Rand { return rand.New(rand.NewSource(seed)) }
func defaultTh() config.Bottleneck  { return config.DefaultBottleneck() }
func ftoa(v float64) string         { return strconv.FormatFloat(v, 'g', -1, 64) }

// Capacity is the highest throughput seen while the SLOs held; an external
// verdict (the SLO watchdog's) overrides the classifier's own targets.
func TestCapacityTracksOnlyWhileSLOsHold(t *testing.T) {
	th := defaultTh()
	f := &fakeSources{}
	holds := true
	c := New(Options{Model: testSpec, Cost: CostSpec{GPUHour: 2}, SLOHolds: func(model string, _ time.Time) (bool, bool) {
		return holds, model == "llama-8b"
	}}, nil, Sources{VLLM: f}, nil)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	step := func(rps float64) ModelState {
		now = now.Add(15 * time.Second)
		r := healthy()
		r.gpus, r.rps = 0, rps
		r.apply(f, now, newRand(1), th)
		c.Tick(now)
		st, _ := c.State(model)
		return st
	}
	step(4)
	st := step(8)
	if !st.Capacity.RequestsPerSecond.OK || st.Capacity.RequestsPerSecond.V < 7 {
		t.Fatalf("capacity after 8 req/s held: %+v", st.Capacity)
	}
	holds = false
	st = step(50) // SLOs broken: not capacity
	if st.Capacity.RequestsPerSecond.V > 9 {
		t.Fatalf("throughput while SLOs failed counted: %+v", st.Capacity.RequestsPerSecond)
	}
	if !st.Capacity.CostPerMillionOutput.OK || st.Capacity.GPUs != 1 {
		t.Fatalf("cost: %+v", st.Capacity)
	}
	// Beyond the horizon the maximum is forgotten.
	now = now.Add(th.CapacityHorizon + time.Hour)
	holds = true
	st = step(2)
	if st.Capacity.RequestsPerSecond.V > 3 {
		t.Fatalf("capacity older than the horizon kept: %+v", st.Capacity.RequestsPerSecond)
	}
}

// newSynthetic is a classifier on fake sources with the shipped thresholds.
func newSynthetic(seed int64) (config.Bottleneck, *fakeSources, *Classifier, *rand.Rand) {
	f := &fakeSources{}
	return config.DefaultBottleneck(), f, newTestClassifier(f, testSpec), newRand(seed)
}

// syntheticStart is where the synthetic tests' clocks start.
var syntheticStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// A GPU at its power cap is routine under load: throttled needs degraded
// TPOT too, so a capped GPU whose TPOT meets its target is not a diagnosis.
func TestThrottledNeedsDegradedTPOT(t *testing.T) {
	th, f, c, rng := newSynthetic(11)
	now := syntheticStart
	r := healthy()
	r.throttle = true // sw_power_cap active; TPOT p95 ~26 ms < 40 ms
	for i := 0; i < 10; i++ {
		now = now.Add(15 * time.Second)
		r.apply(f, now, rng, th)
		c.Tick(now)
		if st, _ := c.State(model); st.Raw == Throttled || st.Class == Throttled {
			t.Fatalf("tick %d: power cap with TPOT on target classified %s (raw %s)", i, st.Class, st.Raw)
		}
	}
}

// "Sustained" KV usage is the larger of the latest reading and the mean
// over the window, so the dips of a cache that preempts to make room do not
// clear a cache that is full on average; readings older than the window
// are forgotten.
func TestSustainedKVRidesOutDips(t *testing.T) {
	st := &modelState{}
	at := syntheticStart
	read := func(v float64) snapshot.Value {
		at = at.Add(5 * time.Second)
		sustained, _ := st.sustainedKV(snapshot.Some(v), at, time.Minute)
		return sustained
	}
	for _, v := range []float64{0.99, 0.99, 0.99, 0.99} {
		read(v)
	}
	if got := read(0.92); !(got.OK && got.V > 0.95) {
		t.Fatalf("after four 0.99 and a 0.92: sustained %+v, want the mean 0.976", got)
	}
	// A reading that rises shows at once.
	st = &modelState{}
	read(0.5)
	if got := read(0.97); got.V != 0.97 {
		t.Fatalf("rise: sustained %+v, want 0.97", got)
	}
	// A minute of 0.5 later, the 0.97 has left the window.
	for i := 0; i < 12; i++ {
		read(0.5)
	}
	if got := read(0.5); got.V != 0.5 {
		t.Fatalf("after a minute at 0.5: sustained %+v", got)
	}
}

// The serving classifier reads its thresholds from --config.file's
// bottleneck section through the holder on every tick, so a reload applies
// without a restart.
func TestThresholdsFromConfigHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("bottleneck:\n  kv_cache_usage_high: 0.5\n") // healthy runs its cache at ~0.55
	holder, err := config.NewHolder(path)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSources{}
	c := New(Options{Model: testSpec}, holder, Sources{VLLM: f, GPU: fakeGPU{f}, Probes: fakeProbes{f}}, nil)
	rng := newRand(5)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tick := func() ModelState {
		now = now.Add(15 * time.Second)
		healthy().apply(f, now, rng, holder.Get().Bottleneck)
		c.Tick(now)
		st, _ := c.State(model)
		return st
	}
	if st := tick(); st.Class != KVCacheExhausted {
		t.Fatalf("kv_cache_usage_high 0.5 from the file: class %s, evidence %v", st.Class, st.Evidence())
	}
	write("bottleneck:\n  kv_cache_usage_high: 0.95\n")
	if err := holder.Reload(); err != nil {
		t.Fatal(err)
	}
	var st ModelState
	for i := 0; i < config.DefaultBottleneck().HoldTicks; i++ {
		st = tick()
	}
	if st.Class != NearOptimal {
		t.Fatalf("after reloading 0.95: class %s (raw %s)", st.Class, st.Raw)
	}
}

// Each class's recommendation names the seeds' knob and its direction.
func TestAdviceNamesTheSeedKnobs(t *testing.T) {
	want := map[Class][]string{
		GPUFault:           {"Xid", "drain"},
		ServerUnavailable:  {"process is running", "port"},
		EngineStalled:      {"restart"},
		Throttled:          {"power limit", "cooling"},
		TooManySequences:   {"lower --max-num-seqs", "--gpu-memory-utilization"},
		KVCacheExhausted:   {"--kv-cache-dtype fp8", "higher --gpu-memory-utilization", "lower --max-num-seqs", "--max-model-len"},
		Queueing:           {"replicas", "raise --max-num-seqs only if"},
		PrefixCacheMiss:    {"--enable-prefix-caching", "byte-identical", "CPU offload tier", "cache-aware routing"},
		AdmissionLimited:   {"scale out", "raise --max-num-queued-requests / --max-num-queued-tokens"},
		KVTransferBound:    {"NIXL", "RDMA", "P:D ratio"},
		LoRAQueueing:       {"raise --max-loras", "route by adapter"},
		PrefillBound:       {"chunked prefill", "raise --max-num-batched-tokens", "prefix caching", "separate pool", "--long-prefill-token-threshold"},
		CommunicationBound: {"reduce the TP degree", "--tensor-parallel-size"},
		MemoryBoundDecode:  {"quantize", "faster memory", "raise --max-num-seqs"},
		DecodeOverhead:     {"CUDA graphs", "--async-scheduling", "sampling"},
		BatchTooSmall:      {"send more load", "consolidate"},
		NearOptimal:        {"baseline"},
		DeferredLivelock:   {"restart the vLLM engine", "#53130", "--max-num-seqs"},
		ProbesFailing:      {"before tuning anything", "credentials", "max_model_len", "vLLM log", "probe timeout"},
	}
	for _, c := range Classes {
		a := AdviceFor(c)
		if a.Summary == "" || a.Recommendation == "" {
			t.Errorf("%s: empty advice %+v", c, a)
		}
		if len(want[c]) == 0 {
			t.Errorf("%s: no expected knob listed", c)
		}
		for _, w := range want[c] {
			if !strings.Contains(a.Recommendation, w) {
				t.Errorf("%s: recommendation %q lacks %q", c, a.Recommendation, w)
			}
		}
	}
}

// The cold/warm probe medians are over the recent probes (baseline_window),
// not the prober's lifetime: after an hour of a working prefix cache, ten
// minutes of warm probes as slow as cold ones is a prefix_cache_miss, though
// the lifetime median of the warm probes is still fast.
func TestProbePairMediansAreRecent(t *testing.T) {
	th, f, c, rng := newSynthetic(8)
	now := syntheticStart
	bounds := []float64{0.025, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5}
	cum := map[string]*snapshot.Histogram{
		"cold": {Bounds: bounds, Counts: make([]float64, len(bounds))},
		"warm": {Bounds: bounds, Counts: make([]float64, len(bounds))},
	}
	observe := func(h *snapshot.Histogram, v float64) {
		counts := append([]float64(nil), h.Counts...) // published histograms are never mutated
		for i, b := range h.Bounds {
			if v <= b {
				counts[i]++
			}
		}
		*h = snapshot.Histogram{Bounds: h.Bounds, Counts: counts, Count: h.Count + 1, Sum: h.Sum + v}
	}
	tick := func(warm float64) ModelState {
		now = now.Add(15 * time.Second)
		healthy().apply(f, now, rng, th) // hit ratio steady: only the probes can tell
		observe(cum["cold"], 0.45)
		observe(cum["warm"], warm)
		f.probes = &snapshot.Probes{Time: now, Profiles: map[string]*snapshot.ProbeProfile{}}
		for prefix, h := range cum {
			f.probes.Profiles[prefix] = &snapshot.ProbeProfile{Name: prefix, Prefix: prefix, Requests: h.Count, TTFT: *h}
		}
		c.Tick(now)
		st, _ := c.State(model)
		return st
	}
	for i := 0; i < 240; i++ { // an hour with the cache hitting
		if st := tick(0.08); st.Class != NearOptimal {
			t.Fatalf("healthy tick %d: %s", i, st.Class)
		}
	}
	var st ModelState
	for i := 0; i < 40; i++ { // ten minutes of misses
		st = tick(0.44)
	}
	if lifetime := cum["warm"].Quantile(0.5); !(lifetime.V < 0.1) {
		t.Fatalf("test setup: lifetime warm median %v should still be fast", lifetime)
	}
	if st.Class != PrefixCacheMiss {
		t.Fatalf("after 10 minutes of slow warm probes: class %s (raw %s), evidence %v", st.Class, st.Raw, st.Evidence())
	}
}

// A busy GPU at its power cap with SM clocks a little below maximum is
// routine and barely slows memory-bound decode: the decode class stands. A
// deep cut (a lowered power limit) or any thermal slowdown is throttling.
func TestRoutinePowerCapIsNotThrottled(t *testing.T) {
	for _, c := range []struct {
		name    string
		smClock float64
		reason  string
		want    Class
	}{
		{"power cap, clocks at 85% of max", 0.85, "sw_power_cap", MemoryBoundDecode},
		{"power cap, clocks at 50% of max", 0.5, "sw_power_cap", Throttled},
		{"thermal slowdown, clocks at 85% of max", 0.85, "hw_thermal_slowdown", Throttled},
	} {
		th, f, cl, rng := newSynthetic(12)
		now := syntheticStart
		r := healthy()
		regimes[MemoryBoundDecode](&r)
		r.smClock = c.smClock
		var st ModelState
		for i := 0; i < th.HoldTicks+1; i++ {
			now = now.Add(15 * time.Second)
			r.apply(f, now, rng, th)
			for j := range f.gpu.Devices {
				f.gpu.Devices[j].ThrottleReasons = map[string]bool{c.reason: true}
			}
			cl.Tick(now)
			st, _ = cl.State(model)
		}
		if st.Class != c.want {
			t.Errorf("%s: class %s, want %s; evidence %v", c.name, st.Class, c.want, st.Evidence())
		}
	}
}
