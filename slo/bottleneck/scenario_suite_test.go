package bottleneck

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

// The simulator's DefaultCost approximates an 8B FP16 model on one H100:
// a 6 ms weight read per step (16 GB at ~2.7 TB/s) and 40 ns per context
// token of KV read (~107 KB/token at the same bandwidth). The mock GPU
// below is that H100 (3.35 TB/s peak x 0.8 efficiency), and the KV pool is
// the sim's 4096 blocks x 16 tokens at that per-token size, so the roofline
// the classifier computes is the sim's own decode cost model.
const (
	simPeakBandwidth = 3.35e12
	simKVBytesPerTok = 40e-9 * simPeakBandwidth * 0.8
)

var simSpec = ModelSpec{WeightBytes: 16e9, KVCacheBytes: 4096 * 16 * simKVBytesPerTok}

// mockGPU is a settable GPU source: the simulator has no NVML, so the
// classes that need one get their GPU readings from here.
type mockGPU struct {
	mu  sync.Mutex
	dev func(i int, now time.Time) snapshot.GPUDevice
	n   int
	now time.Time
}

func (m *mockGPU) set(n int, dev func(i int, now time.Time) snapshot.GPUDevice) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n, m.dev = n, dev
}

func (m *mockGPU) Latest() *snapshot.GPU {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := &snapshot.GPU{Time: m.now, Up: true}
	for i := 0; i < m.n; i++ {
		g.Devices = append(g.Devices, m.dev(i, m.now))
	}
	return g
}

// h100 is a healthy, busy H100 reading; mutate fields for a regime.
func h100(i int, n int) snapshot.GPUDevice {
	return snapshot.GPUDevice{
		Index: i, UUID: fmt.Sprintf("GPU-%d", i), Name: "NVIDIA H100 80GB HBM3", Up: true,
		UtilGPU: snapshot.Some(0.8), DRAMBandwidthUtil: snapshot.Some(0.5),
		MemoryTotalBytes: snapshot.Some(80e9), PeakMemBandwidthBytesPerSecond: snapshot.Some(simPeakBandwidth / float64(n)),
		NVLinkTxBytesPerSecond: snapshot.Some(1e9), NVLinkRxBytesPerSecond: snapshot.Some(1e9),
		ThrottleReasons: map[string]bool{"sw_power_cap": false, "hw_slowdown": false},
		SMClockHz:       snapshot.Some(0.9 * h100MaxSMClock), MaxSMClockHz: snapshot.Some(h100MaxSMClock),
	}
}

// simCase is one labeled regime: a simulator preset (or custom scenario)
// plus the GPU readings the class needs.
type simCase struct {
	want     Class
	scenario string            // preset name
	custom   *vllmsim.Scenario // instead of a preset
	gpus     int               // 0: no GPU source readings (NVML absent)
	gpu      func(d *snapshot.GPUDevice, now time.Time)
	before   string // preset to run before the regime (default healthy)
}

// decodeBatch is a large steady decode batch (~80 sequences, ~20 ms steps)
// that neither fills the KV cache nor queues: TPOT over target with nothing
// else wrong. The preset decode_heavy builds its batch over minutes and
// ends in KV pressure, so it cannot be told apart within three ticks.
var decodeBatch = vllmsim.Scenario{Name: "decode_batch", Description: "large steady decode batch", StepFactor: 1,
	Load: vllmsim.LoadProfile{Rate: 9, Burstiness: 1, Prompt: vllmsim.Dist{Mean: 100, CV: 0.2, Min: 16, Max: 200},
		Output: vllmsim.Dist{Mean: 450, CV: 0.1, Min: 300, Max: 600}, MaxTokens: 600, IgnoreEOS: true}}

// kvFull keeps the KV cache full without preemption: fixed 3,000-token
// prompts (the last block keeps 8 free slots) and exactly 8 output tokens,
// so a running request never needs a new block after its prefill, while
// arrivals above the prefill rate keep every block taken and a queue behind.
var kvFull = vllmsim.Scenario{Name: "kv_full", Description: "KV cache full, admission blocked, no preemption", StepFactor: 1,
	Load: vllmsim.LoadProfile{Rate: 10, Burstiness: 1, Prompt: vllmsim.Dist{Mean: 3000, Min: 3000, Max: 3000},
		Output: vllmsim.Dist{Mean: 8, Min: 8, Max: 8}, MaxTokens: 8, IgnoreEOS: true}}

// slowPrefill is the healthy load with prefill 10x slower than the cost
// model's hardware: same prompts, slower prefill (not longer prompts).
var slowPrefill = vllmsim.Scenario{Name: "slow_prefill", Description: "healthy load, prefill 10x slower than the hardware allows",
	StepFactor: 1, PrefillFactor: 10, Load: mustPreset("healthy").Load}

func simCases() []simCase {
	capped := func(d *snapshot.GPUDevice, _ time.Time) {
		d.ThrottleReasons["sw_power_cap"] = true
		d.SMClockHz = snapshot.Some(0.4 * h100MaxSMClock) // the preset's 2.5x step time
		d.DRAMBandwidthUtil = snapshot.Some(0.3)
	}
	return []simCase{
		{want: NearOptimal, scenario: "healthy", gpus: 1},
		{want: KVCacheExhausted, scenario: "kv_exhausted", gpus: 1},
		{want: KVCacheExhausted, custom: &kvFull, gpus: 1},
		{want: Queueing, scenario: "queueing", gpus: 1},
		{want: PrefillBound, custom: &slowPrefill, gpus: 1},
		{want: EngineStalled, scenario: "stalled", gpus: 1},
		{want: Throttled, scenario: "throttled", gpus: 1, gpu: capped},
		{want: PrefixCacheMiss, scenario: "prefix_cold", before: "prefix_warm", gpus: 1},
		{want: GPUFault, scenario: "healthy", gpus: 1, gpu: func(d *snapshot.GPUDevice, now time.Time) { d.LastFatalXidTime = now.Add(-30 * time.Second) }},
		{want: CommunicationBound, scenario: "throttled", gpus: 2, gpu: func(d *snapshot.GPUDevice, _ time.Time) {
			d.NVLinkTxBytesPerSecond, d.NVLinkRxBytesPerSecond = snapshot.Some(150e9), snapshot.Some(150e9)
		}},
		{want: DecodeOverhead, scenario: "throttled", gpus: 1, gpu: func(d *snapshot.GPUDevice, _ time.Time) { d.DRAMBandwidthUtil = snapshot.Some(0.2) }},
		{want: MemoryBoundDecode, custom: &decodeBatch, gpus: 1, gpu: func(d *snapshot.GPUDevice, _ time.Time) { d.DRAMBandwidthUtil = snapshot.Some(0.9) }},
		{want: BatchTooSmall, scenario: "healthy", gpus: 1, gpu: func(d *snapshot.GPUDevice, _ time.Time) { d.UtilGPU = snapshot.Some(0.15) }},
	}
}

// simThresholds are the shipped defaults with the latency contract of an
// interactive service on this small simulated model (the sim's prefill of
// a 5,000-token prompt takes 250 ms, so a 1 s TTFT target never breaks).
func simThresholds() config.Bottleneck {
	th := config.DefaultBottleneck()
	th.TTFTTargetSeconds = 0.25
	th.TPOTTargetSeconds = 0.015
	th.BaselineWindow = 5 * time.Minute
	return th
}

type simRig struct {
	t       *testing.T
	sim     *vllmsim.Sim
	scraper *vllm.Scraper
	gpu     *mockGPU
	c       *Classifier
	ctx     context.Context
}

const (
	simScrapeEvery = 15 * time.Second
	simTickEvery   = 15 * time.Second
)

func newSimRig(t *testing.T, th config.Bottleneck, spec ModelSpec) *simRig {
	t.Helper()
	s, err := vllmsim.New(vllmsim.Config{VirtualClock: true, LoadGen: true, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	r := &simRig{t: t, sim: s, gpu: &mockGPU{}, ctx: context.Background()}
	r.scraper = vllm.New(vllm.Options{URL: s.URL(), Interval: simScrapeEvery, Timeout: 5 * time.Second,
		Windows: []time.Duration{th.Window}}, log.NewNopLogger())
	r.c = New(Options{Model: spec, Thresholds: &th}, nil, Sources{VLLM: r.scraper, GPU: r.gpu}, nil)
	return r
}

// run advances the sim by d in scrape steps and ticks the classifier every
// simTickEvery; it returns the published class after each tick.
func (r *simRig) run(d time.Duration) []ModelState {
	var out []ModelState
	for elapsed := time.Duration(0); elapsed < d; elapsed += simScrapeEvery {
		r.sim.Advance(simScrapeEvery)
		now := r.sim.Now()
		r.gpu.mu.Lock()
		r.gpu.now = now
		r.gpu.mu.Unlock()
		r.scraper.ScrapeOnce(r.ctx, now)
		if (elapsed+simScrapeEvery)%simTickEvery == 0 {
			r.c.Tick(now)
			sts := r.c.States()
			if len(sts) != 1 {
				r.t.Fatalf("classifier has %d models, want 1", len(sts))
			}
			out = append(out, sts[0])
		}
	}
	return out
}

func (r *simRig) switchTo(sc simCase) error {
	if sc.custom != nil {
		return r.sim.ApplyScenario(*sc.custom)
	}
	return r.sim.SetScenario(sc.scenario)
}

func (r *simRig) setGPU(n int, mut func(d *snapshot.GPUDevice, now time.Time)) {
	r.gpu.set(n, func(i int, now time.Time) snapshot.GPUDevice {
		d := h100(i, max(n, 1))
		if mut != nil {
			mut(&d, now)
		}
		return d
	})
}

// TestSimScenarioSuite is the labeled suite on the simulated vLLM: each
// regime starts after a healthy lead-in (under the real scraper and the
// sim's virtual clock), must be classified right by its third tick and stay
// right; a confusion table of every tick from the third on is printed.
func TestSimScenarioSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("simulator suite")
	}
	th := simThresholds()
	confusion := map[Class]map[Class]int{}
	for _, sc := range simCases() {
		t.Run(string(sc.want), func(t *testing.T) {
			r := newSimRig(t, th, simSpec)
			r.setGPU(1, nil)
			before := sc.before
			if before == "" {
				before = "healthy"
			}
			if err := r.sim.SetScenario(before); err != nil {
				t.Fatal(err)
			}
			lead := r.run(th.BaselineWindow)
			if before == "healthy" {
				if got := lead[len(lead)-1].Class; got != NearOptimal {
					t.Fatalf("healthy lead-in ended as %s", got)
				}
			}
			if err := r.switchTo(sc); err != nil {
				t.Fatal(err)
			}
			r.setGPU(sc.gpus, sc.gpu)
			sts := r.run(2 * time.Minute)
			confusion[sc.want] = map[Class]int{}
			for i, st := range sts {
				if i+1 < th.HoldTicks {
					continue
				}
				confusion[sc.want][st.Class]++
				if st.Class != sc.want {
					t.Errorf("tick %d after switching to %s%s: %s (raw %s); evidence %v", i+1, sc.scenario, customName(sc), st.Class, st.Raw, rawEvidence(st))
				}
			}
		})
	}
	t.Log("confusion table on the simulator (regime \\ published class, ticks from hold_ticks on):\n" + confusionTable(confusion))
}

func rawEvidence(st ModelState) []Evidence {
	for _, f := range st.Findings {
		if f.Class == st.Raw {
			return f.Evidence
		}
	}
	return nil
}

// TestSimHealthyLongRunNeverFlaps drives 30 minutes of the healthy preset
// (Poisson arrivals, log-normal lengths: real noise) and requires one class
// throughout.
func TestSimHealthyLongRunNeverFlaps(t *testing.T) {
	if testing.Short() {
		t.Skip("simulator suite")
	}
	th := simThresholds()
	r := newSimRig(t, th, simSpec)
	r.setGPU(1, nil)
	sts := r.run(30 * time.Minute)
	raw := 0
	for i, st := range sts {
		if st.Class != NearOptimal {
			t.Fatalf("tick %d of a healthy hour: class %s (raw %s) evidence %v", i, st.Class, st.Raw, st.Evidence())
		}
		if st.Raw != NearOptimal {
			raw++
		}
	}
	t.Logf("%d healthy ticks, %d single-tick raw deviations, published class constant", len(sts), raw)
}

func customName(sc simCase) string {
	if sc.custom != nil {
		return sc.custom.Name
	}
	return ""
}
