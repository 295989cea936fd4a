package bottleneck

import (
	"fmt"
	"math/rand"
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
	throttle, lost, stalledProbe, stalledScrape        bool
	xidAgo                                             time.Duration
	probeCold, probeWarm                               float64
}

// healthy is a busy, well-tuned server: one H100 (3.35 TB/s peak), 8B FP16
// weights, TPOT near the roofline (efficiency ~0.95), every latency under
// target.
func healthy() regime {
	return regime{
		kv: 0.55, running: 24, ttft95: 0.3, ttft99: 0.45, prefill99: 0.12, queue99: 0.05,
		tpot50: 0.018, tpot95: 0.026, hit: 0.6, hitBase: 0.6, promptPerReq: 300, rps: 8, tokensPerReq: 250,
		gpus: 1, util: 0.8, dram: 0.55, probeCold: 0.45, probeWarm: 0.12,
	}
}

var regimes = map[Class]func(r *regime){
	GPUFault:         func(r *regime) { r.xidAgo = 20 * time.Second },
	EngineStalled:    func(r *regime) { r.stalledProbe = true },
	Throttled:        func(r *regime) { r.throttle = true; r.tpot95 = 0.08; r.tpot50 = 0.05 },
	TooManySequences: func(r *regime) { r.preemptPerReq = 0.06; r.kv = 0.97; r.waiting = 6; r.tpot50 = 0.027 },
	KVCacheExhausted: func(r *regime) { r.kv = 0.985; r.waiting = 12; r.ttft99 = 3; r.tpot50 = 0.027 },
	Queueing:         func(r *regime) { r.waiting = 30; r.ttft95 = 3; r.ttft99 = 5; r.queue99 = 4.5 },
	PrefixCacheMiss:  func(r *regime) { r.probeWarm = 0.44; r.hit = 0.05 },
	PrefillBound:     func(r *regime) { r.ttft95 = 2.4; r.ttft99 = 3; r.prefill99 = 2.6; r.promptPerReq = 6000 },
	CommunicationBound: func(r *regime) {
		r.gpus = 4
		r.nvlink = 250e9
		r.tpot95, r.tpot50 = 0.07, 0.05
	},
	MemoryBoundDecode: func(r *regime) { r.kv = 0.9; r.tpot50 = 0.026; r.tpot95 = 0.055; r.dram = 0.9 },
	DecodeOverhead:    func(r *regime) { r.tpot50 = 0.12; r.tpot95 = 0.2; r.dram = 0.15; r.util = 0.3 },
	BatchTooSmall:     func(r *regime) { r.util = 0.2; r.running = 1; r.rps = 0.3 },
	NearOptimal:       func(r *regime) {},
}

var testSpec = ModelSpec{Parameters: 8e9, BytesPerParameter: 2}

const model = "llama-8b"

// noisy returns v scaled by up to ±amp, deterministic per rng.
func noisy(rng *rand.Rand, v, amp float64) float64 { return v * (1 + amp*(2*rng.Float64()-1)) }

// apply publishes the regime's measurements (with noise) into f.
func (r regime) apply(f *fakeSources, now time.Time, rng *rand.Rand, th config.Bottleneck) {
	n := func(v float64) float64 { return noisy(rng, v, 0.1) }
	waiting := r.waiting
	if waiting == 0 && rng.Float64() < 0.15 {
		waiting = 1 // a healthy server queues a request now and then
	}
	running := r.running
	if r.stalledScrape {
		running = 5
	}
	m := &snapshot.Model{
		Name: model, Running: snapshot.Some(running), Waiting: snapshot.Some(waiting),
		KVUsage:     snapshot.Some(min(r.kv+0.04*rng.Float64()-0.03, 1)),
		CacheConfig: map[string]string{"gpu_memory_utilization": "0.9", "enable_prefix_caching": "True"},
	}
	f.vllm = &snapshot.VLLM{Time: now, Up: true, Models: map[string]*snapshot.Model{model: m}}
	qs := func(p50, p95, p99 float64) map[float64]snapshot.Value {
		return map[float64]snapshot.Value{0.5: snapshot.Some(n(p50)), 0.9: snapshot.Some(n(p95)), 0.95: snapshot.Some(n(p95)), 0.99: snapshot.Some(n(p99))}
	}
	gen := r.rps * r.tokensPerReq
	prompt := r.rps * r.promptPerReq
	if r.stalledScrape {
		gen, prompt = 0, 0
	}
	d := func(hit float64) *snapshot.Derived {
		return &snapshot.Derived{
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
		th.Window:         {model: d(r.hit)},
		th.BaselineWindow: {model: d(r.hitBase)},
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
	f.probes = &snapshot.Probes{Time: now, EngineStalled: r.stalledProbe, Profiles: map[string]*snapshot.ProbeProfile{
		"cold": probeProfile("cold", n(r.probeCold)), "warm": probeProfile("warm", n(r.probeWarm)),
	}}
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
		rng := rand.New(rand.NewSource(int64(ci)))
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
	for i := 0; i < 3000; i++ {
		now = now.Add(15 * time.Second)
		r := healthy()
		if rng.Float64() < 0.03 { // a single-tick tail spike
			r.ttft99, r.waiting = 4, 3
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

func TestVLLMDownKeepsState(t *testing.T) {
	f := &fakeSources{}
	c := newTestClassifier(f, testSpec)
	th := config.DefaultBottleneck()
	rng := rand.New(rand.NewSource(3))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	healthy().apply(f, now, rng, th)
	c.Tick(now)
	f.vllm = &snapshot.VLLM{Time: now, Up: false, Error: "connect"}
	c.Tick(now.Add(time.Minute))
	if st, ok := c.State(model); !ok || st.Class != NearOptimal || st.Ticks != 1 {
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
