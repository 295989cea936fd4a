package vllmsim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// CostModel is the engine step time model, in seconds. A step that schedules
// S sequences reading C context tokens and computing P uncached prompt tokens takes
//
//	StepFactor × (StepBase + S×PerSeq + C×PerContextToken + P×PerPrefillToken)
//
// where StepFactor comes from the scenario (throttled > 1). Decode is
// memory-bound (base = weight read, per-context-token = KV read); prefill is
// compute-bound (per uncached prompt token).
type CostModel struct {
	StepBase        float64
	PerSeq          float64
	PerContextToken float64
	PerPrefillToken float64
}

// DefaultCost approximates an 8B model on one H100.
var DefaultCost = CostModel{StepBase: 0.006, PerSeq: 0.00015, PerContextToken: 40e-9, PerPrefillToken: 50e-6}

// Config configures a simulated vLLM server. Zero fields take the defaults
// listed on each field.
type Config struct {
	// Models are the served model names (default "meta-llama/Llama-3.1-8B-Instruct").
	// Unlike real vLLM (where extra --served-model-name values are aliases)
	// each name is a separate model with its own engines and model_name label.
	Models []string
	// DataParallelSize is the number of engines per model (engine="0".."N-1"); default 1.
	DataParallelSize int
	// MaxNumSeqs caps running sequences per engine (default 128).
	MaxNumSeqs int
	// MaxNumBatchedTokens is the per-step token budget (chunked prefill; default 8192).
	MaxNumBatchedTokens int
	// LongPrefillTokenThreshold is vLLM's --long-prefill-token-threshold:
	// a request's prefill takes at most this many tokens of a step (0 =
	// no cap, vLLM's default), so a long prompt is prefilled in smaller
	// chunks and short requests share its steps.
	LongPrefillTokenThreshold int
	// NumGPUBlocks and BlockSize size each engine's KV cache (defaults 4096
	// and 16). On V1 versions one block is vLLM's null block, so
	// NumGPUBlocks-1 hold tokens and KV usage is 1 - free/(NumGPUBlocks-1).
	NumGPUBlocks int
	BlockSize    int
	// MaxModelLen bounds prompt+max_tokens (default 8192).
	MaxModelLen int
	// DisablePrefixCaching turns off block reuse across requests.
	DisablePrefixCaching bool
	// StreamInterval sends one SSE chunk per N tokens (first token always alone); default 1.
	StreamInterval int
	// Cost is the step time model (default DefaultCost).
	Cost CostModel
	// MetricsVersion selects vLLM's /metrics exposition: MetricsV1
	// (default), MetricsV1_0_10 or MetricsV0.
	MetricsVersion string
	// Engine is the inference server spoken (Engines()): vLLM (default),
	// SGLang or trtllm-serve, each with its own /metrics (MetricsVersion
	// then names the engine) and API routes. trtllm-serve serves one
	// model on one engine.
	Engine string
	// TensorParallelSize and AllSchedulerMetrics are SGLang's --tp-size
	// and --enable-metrics-for-all-schedulers: every tensor-parallel rank
	// then writes its data-parallel rank's scheduler state (default 1, off).
	TensorParallelSize  int
	AllSchedulerMetrics bool
	// APIServerCount > 1 renders V1 /metrics the way vLLM does with
	// --api-server-count > 1 (prometheus_client multiprocess mode: no _created,
	// no python_/process_ families, _sum before buckets). Real vLLM >= 0.15
	// defaults it to --data-parallel-size; here the default is 1.
	APIServerCount int
	// EnablePromptTokensDetails adds usage.prompt_tokens_details.cached_tokens
	// (the prefix-cache hit) to final usage blocks, like
	// --enable-prompt-tokens-details.
	EnablePromptTokensDetails bool
	// APIKey, if set, is required as "Authorization: Bearer <key>" on /v1 paths.
	APIKey string
	// Seed makes generated tokens, EOS positions and the load generator reproducible.
	Seed int64
	// VirtualClock: time advances only through Advance/AdvanceTo. Otherwise a
	// goroutine started by Start advances the clock with wall time.
	VirtualClock bool
	// Start is the virtual clock's start (default 2026-08-10T06:00:00Z).
	Start time.Time
	// MeanOutputTokens sets the EOS chance of API requests without ignore_eos:
	// EOS is drawn geometrically with this mean (default 256).
	MeanOutputTokens int
	// Scenario is the initial scenario (default "healthy").
	Scenario string
	// LoadGen enables the built-in load generator with the scenario's profile.
	LoadGen bool
	// Addr is the listen address for Start (default 127.0.0.1:0).
	Addr string
	// MaxRecords bounds the ground-truth records kept (default 100000; oldest dropped).
	MaxRecords int

	// SchedulingPolicy is vLLM's --scheduling-policy: PolicyFCFS (default) or
	// PolicyPriority (waiting queue ordered by Request.Priority, lower first;
	// preemption picks the least urgent; finished-request families of the
	// newest layout gain the priority label).
	SchedulingPolicy string
	// CustomHistogramBuckets is vLLM's --custom-histogram-buckets: bucket
	// bounds per bucket family (BucketFamilies(); e.g. "time_to_first_token").
	// Newest layout (MetricsLatest) only.
	CustomHistogramBuckets map[string][]float64
	// SpecDecode enables speculative decoding from the start (vLLM
	// --speculative-config); SetSpecDecode changes it at run time.
	SpecDecode SpecDecode
	// EnableMFUMetrics fills vllm:estimated_flops_per_gpu_total and the
	// read/write byte counters (vLLM --enable-mfu-metrics; 0 otherwise).
	EnableMFUMetrics bool
	// ModelParams (default 8.03e9), WeightBytesPerParam (default 2, bf16) and
	// KVBytesPerToken (default 131072: 32 layers × 8 KV heads × 128 × K,V ×
	// 2 bytes) size the MFU/MBU estimates.
	ModelParams, WeightBytesPerParam, KVBytesPerToken float64
	// EnableFaultTolerance renders vllm:engine_healthy (vLLM
	// --enable-fault-tolerance; newest layout).
	EnableFaultTolerance bool
	// HealthStallTimeout > 0 turns on vLLM's stats-based health check
	// (VLLM_HEALTH_CHECK_STALL_TIMEOUT, 60 s in vLLM; newest layout only):
	// /health answers 503 once requests are pending and no engine has
	// completed a step for that long. Only a hung engine (the stalled
	// scenario) stops stepping: a livelocked scheduler keeps running empty
	// steps and a sleeping one is paused on purpose, so both stay 200.
	HealthStallTimeout time.Duration
}

// Scheduling policies (Config.SchedulingPolicy).
const (
	PolicyFCFS     = "fcfs"
	PolicyPriority = "priority"
)

// Metrics exposition versions.
const (
	MetricsV1      = "v1"      // vLLM main (2026-08), V1 engine, single API server
	MetricsV1_0_10 = "v1-0.10" // vLLM 0.10.2: deprecated gpu_* names and TPOT still present
	MetricsV0      = "v0"      // vLLM 0.7.3, V0 engine, multiprocess exposition
	// MetricsLatest is the newest layout (vLLM 0.30-0.33, late 2026): v1 plus
	// request_num_preemptions, engine_sleep_resource_state,
	// engine_fully_awake, scheduler_policy_info, the priority label and
	// request_priority under the priority policy, custom histogram buckets,
	// engine_healthy with fault tolerance.
	MetricsLatest = "v1-0.33"
	// MetricsRust is main's Rust front-end (VLLM_USE_RUST_FRONTEND=1):
	// OpenMetrics, one API server, no cache_config_info, sleep state,
	// multimodal cache, iteration tokens, corrupted requests, KV-connector
	// or process families.
	MetricsRust = "v1-rust"
)

// MetricsVersions lists the accepted Config.MetricsVersion values.
func MetricsVersions() []string {
	return []string{MetricsLatest, MetricsV1, MetricsV1_0_10, MetricsV0, MetricsRust}
}

// setDefaults fills the zero fields of c with vLLM's defaults, then checks
// the result.
func (c *Config) setDefaults() error {
	c.applyDefaults()
	return c.validate()
}

func (c *Config) applyDefaults() {
	if len(c.Models) == 0 {
		c.Models = []string{"meta-llama/Llama-3.1-8B-Instruct"}
	}
	c.DataParallelSize = cmp.Or(c.DataParallelSize, 1)
	c.TensorParallelSize = cmp.Or(c.TensorParallelSize, 1)
	c.MaxNumSeqs = cmp.Or(c.MaxNumSeqs, 128)
	c.MaxNumBatchedTokens = cmp.Or(c.MaxNumBatchedTokens, 8192)
	c.NumGPUBlocks = cmp.Or(c.NumGPUBlocks, 4096)
	c.BlockSize = cmp.Or(c.BlockSize, 16)
	c.MaxModelLen = cmp.Or(c.MaxModelLen, 8192)
	c.StreamInterval = cmp.Or(c.StreamInterval, 1)
	c.APIServerCount = cmp.Or(c.APIServerCount, 1)
	c.MeanOutputTokens = cmp.Or(c.MeanOutputTokens, 256)
	c.MaxRecords = cmp.Or(c.MaxRecords, 100000)
	c.ModelParams = cmp.Or(c.ModelParams, 8.03e9)
	c.WeightBytesPerParam = cmp.Or(c.WeightBytesPerParam, 2)
	c.KVBytesPerToken = cmp.Or(c.KVBytesPerToken, 131072)
	c.SchedulingPolicy = cmp.Or(c.SchedulingPolicy, PolicyFCFS)
	c.Cost = cmp.Or(c.Cost, DefaultCost)
	c.Engine = cmp.Or(c.Engine, EngineVLLM)
	if c.MetricsVersion == "" {
		c.MetricsVersion = MetricsV1
		if c.Engine != EngineVLLM {
			c.MetricsVersion = c.Engine
		}
	}
	if c.Start.IsZero() {
		c.Start = time.Date(2026, 8, 10, 6, 0, 0, 0, time.UTC)
	}
	c.Scenario = cmp.Or(c.Scenario, "healthy")
	c.Addr = cmp.Or(c.Addr, "127.0.0.1:0")
}

// validate rejects a configuration vLLM would not start with, or one the
// simulator cannot run.
func (c *Config) validate() error {
	if c.SchedulingPolicy != PolicyFCFS && c.SchedulingPolicy != PolicyPriority {
		return fmt.Errorf("vllmsim: unknown scheduling policy %q (want fcfs or priority)", c.SchedulingPolicy)
	}
	if c.ModelParams < 0 || c.WeightBytesPerParam < 0 || c.KVBytesPerToken < 0 {
		return errors.New("vllmsim: model size parameters must not be negative")
	}
	if err := c.SpecDecode.validate(); err != nil {
		return fmt.Errorf("vllmsim: %w", err)
	}
	if c.HealthStallTimeout < 0 || (c.HealthStallTimeout > 0 && c.MetricsVersion != MetricsLatest) {
		return fmt.Errorf("vllmsim: the stats-based health check (stall timeout %v) needs metrics version %s", c.HealthStallTimeout, MetricsLatest)
	}
	if len(c.CustomHistogramBuckets) > 0 {
		if c.MetricsVersion != MetricsLatest {
			return fmt.Errorf("vllmsim: custom histogram buckets need metrics version %s", MetricsLatest)
		}
		if err := validateBuckets(c.CustomHistogramBuckets); err != nil {
			return fmt.Errorf("vllmsim: %w", err)
		}
	}
	switch {
	case c.LongPrefillTokenThreshold < 0:
		return errors.New("vllmsim: long_prefill_token_threshold must not be negative")
	case c.DataParallelSize < 1 || c.MaxNumSeqs < 1 || c.MaxNumBatchedTokens < 1 || c.NumGPUBlocks < 1 ||
		c.BlockSize < 1 || c.MaxModelLen < 1 || c.StreamInterval < 1 || c.MeanOutputTokens < 1 || c.APIServerCount < 1:
		return errors.New("vllmsim: sizes must be positive")
	}
	if !slices.Contains(Engines(), c.Engine) {
		return fmt.Errorf("vllmsim: unknown engine %q (want %s)", c.Engine, strings.Join(Engines(), ", "))
	}
	if v := versions[c.MetricsVersion]; v != nil && (v.server != "" || c.Engine != EngineVLLM) && v.server != c.Engine {
		return fmt.Errorf("vllmsim: metrics version %q is not the %s exposition", c.MetricsVersion, c.Engine)
	}
	if c.Engine == EngineTRTLLM && (len(c.Models) > 1 || c.DataParallelSize > 1) {
		return errors.New("vllmsim: trtllm-serve serves one model on one engine")
	}
	if c.TensorParallelSize < 1 {
		return errors.New("vllmsim: sizes must be positive")
	}
	if _, ok := versions[c.MetricsVersion]; !ok {
		return fmt.Errorf("vllmsim: unknown metrics version %q (want %s)", c.MetricsVersion, strings.Join(MetricsVersions(), ", "))
	}
	if usable := c.usableBlocks(); usable*c.BlockSize < c.MaxModelLen {
		return fmt.Errorf("vllmsim: KV cache (%d usable blocks × %d) smaller than max_model_len %d", usable, c.BlockSize, c.MaxModelLen)
	}
	if c.MetricsVersion == MetricsRust && c.APIServerCount > 1 {
		return fmt.Errorf("vllmsim: the Rust front-end runs one API server (--api-server-count %d)", c.APIServerCount)
	}
	if c.MetricsVersion == MetricsV0 && c.DataParallelSize > 1 {
		return errors.New("vllmsim: the V0 engine (metrics version v0) has no data parallelism")
	}
	seen := map[string]bool{}
	for _, m := range c.Models {
		if m == "" || seen[m] {
			return fmt.Errorf("vllmsim: empty or duplicate model name %q", m)
		}
		seen[m] = true
	}
	if _, ok := scenarios[c.Scenario]; !ok {
		return fmt.Errorf("vllmsim: unknown scenario %q", c.Scenario)
	}
	return nil
}

// usableBlocks is NumGPUBlocks less the V1 engine's null block.
func (c *Config) usableBlocks() int {
	if c.MetricsVersion == MetricsV0 {
		return c.NumGPUBlocks
	}
	return c.NumGPUBlocks - 1
}

// Sim is a simulated vLLM server: scheduler, KV cache, metrics, HTTP API.
// All methods are safe for concurrent use.
type Sim struct {
	cfg     Config
	version *versionSpec
	buckets map[string][]float64 // histogram bounds by source

	mu  sync.Mutex
	now time.Time
	// lastMetricsLen is the size of the last /metrics body (the next one is
	// rendered into a slice that size).
	lastMetricsLen int // guarded by mu

	started   time.Time // process start (reset by Restart)
	models    map[string][]*engine
	scen      Scenario
	load      *loadGen
	seq       uint64
	records   []RequestRecord
	http      *httpStats
	faults    faultState
	handles   map[*Handle]struct{}
	wake      chan struct{}
	cancelRun context.CancelFunc
	runDone   chan struct{}
	srv       *server
	hanging   atomic.Int64 // requests held by FaultHang now

	// controls.go
	sleep     SleepState
	deferCfg  DeferSpec
	deferAcc  float64
	spec      SpecDecode
	specMaxK  int // most draft positions ever enabled (spec families exist from then on)
	refuse    Refusal
	refuseAcc float64
	// production features (features.go)
	admission              AdmissionLimit
	pd                     PD
	pdFailAcc, pdExpireAcc float64
	lora                   LoRAConfig
	loraAcc                float64       // LoRA LoadFraction accumulator (every)
	loraNext               int           // the adapter the next LoRA request names
	loraSets               []loraInfoSet // multiprocess mode: recent lora_requests_info label sets
	// KV connectors (connectors.go)
	offload                        Offload
	mooncake                       Mooncake
	hf3fs                          HF3FS
	offloadOn, mooncakeOn, hf3fsOn bool
	traffic                        rates
	kvCacheMetrics                 bool
}

// New builds a simulator. It serves nothing until Start (or use Handler).
func New(cfg Config) (*Sim, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Sim{cfg: cfg, version: versions[cfg.MetricsVersion], wake: make(chan struct{}, 1),
		handles: map[*Handle]struct{}{}}
	s.buckets = bucketsFor(s.version, &s.cfg)
	if cfg.VirtualClock {
		s.now = cfg.Start
	} else {
		s.now = time.Now()
	}
	s.resetLocked()
	s.setSpecLocked(cfg.SpecDecode)
	s.scen = scenarios[cfg.Scenario]
	s.load = newLoadGen(s, cfg.Seed)
	s.load.enabled = cfg.LoadGen
	s.load.reset(s.now)
	return s, nil
}

// resetLocked builds fresh engines and statistics (startup and Restart).
func (s *Sim) resetLocked() {
	s.started = s.now
	s.models = map[string][]*engine{}
	for _, m := range s.cfg.Models {
		for i := 0; i < s.cfg.DataParallelSize; i++ {
			e := &engine{sim: s, model: m, index: i, stats: newEngineStats(s.buckets), lastStepAt: s.now}
			e.stats.growSpec(s.specMaxK)
			e.resetPool()
			s.models[m] = append(s.models[m], e)
		}
	}
	s.http = newHTTPStats()
	s.sleep = awakeState // a (re)started process is awake
}

// Config returns the effective configuration (defaults filled in).
func (s *Sim) Config() Config { return s.cfg }

// Now is the simulator's clock.
func (s *Sim) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Advance moves the virtual clock forward by d, running every engine step and
// load-generator arrival that falls inside. It panics in real-time mode.
func (s *Sim) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.cfg.VirtualClock {
		panic("vllmsim: Advance needs Config.VirtualClock")
	}
	s.advanceLocked(s.now.Add(d))
}

// AdvanceTo moves the virtual clock to t (no-op if t is not after Now).
func (s *Sim) AdvanceTo(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.cfg.VirtualClock {
		panic("vllmsim: AdvanceTo needs Config.VirtualClock")
	}
	s.advanceLocked(t)
}

func (s *Sim) allEngines() []*engine {
	var out []*engine
	for _, m := range s.cfg.Models {
		out = append(out, s.models[m]...)
	}
	return out
}

// nextEventLocked finds the earliest pending event: a load-generator arrival,
// a busy engine's step end, or an idle engine with schedulable work (now).
// Zero time means nothing is pending.
func (s *Sim) nextEventLocked() (next time.Time, eng *engine, arrival bool) {
	if s.load.enabled && !s.load.next.IsZero() {
		next, arrival = s.load.next, true
	}
	if s.scen.Stalled {
		return next, nil, arrival
	}
	for _, e := range s.allEngines() {
		e.releaseDeferred(s.now)
		var t time.Time
		switch {
		case e.busy:
			t = e.stepEnd
		case e.hasWork() && !e.blocked && e.canStart():
			t = s.now
		default:
			t = e.nextDeferExpiry()
			if t.IsZero() {
				continue
			}
		}
		if t.Before(s.now) {
			t = s.now
		}
		if next.IsZero() || t.Before(next) {
			next, eng, arrival = t, e, false
		}
	}
	return next, eng, arrival
}

// lockNow locks s and, on the real-time clock, runs events up to now.
func (s *Sim) lockNow() {
	s.mu.Lock()
	if !s.cfg.VirtualClock {
		s.advanceLocked(time.Now())
	}
}

// advanceLocked is the discrete-event loop: events run in time order until
// the next one lies after target; then the clock is set to target.
func (s *Sim) advanceLocked(target time.Time) {
	for {
		next, e, arrival := s.nextEventLocked()
		if next.IsZero() || next.After(target) {
			break
		}
		if next.After(s.now) {
			s.now = next
		}
		if arrival {
			s.load.fire(s.now)
			continue
		}
		if e.busy {
			e.completeStep(s.now)
		}
		e.releaseDeferred(s.now)
		if e.hasWork() && e.canStart() {
			e.startStep(s.now)
		}
	}
	if target.After(s.now) {
		s.now = target
	}
}

func (s *Sim) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// runRealtime advances the clock with wall time until ctx ends.
func (s *Sim) runRealtime(ctx context.Context) {
	defer close(s.runDone)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		s.mu.Lock()
		s.advanceLocked(time.Now())
		next, _, _ := s.nextEventLocked()
		s.mu.Unlock()
		d := 100 * time.Millisecond
		if !next.IsZero() {
			if w := time.Until(next); w < d {
				d = w
			}
		}
		if d < 0 {
			d = 0
		}
		timer.Reset(d)
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		}
	}
}

func (s *Sim) costLocked(seqs, ctx, prefill int) time.Duration {
	c := s.cfg.Cost
	pf := s.scen.PrefillFactor
	if pf <= 0 {
		pf = 1
	}
	sec := c.StepBase + float64(seqs)*c.PerSeq + float64(ctx)*c.PerContextToken + float64(prefill)*c.PerPrefillToken*pf
	return s.scaledLocked(sec)
}

// scaledLocked converts model seconds to a step duration under the scenario's StepFactor.
func (s *Sim) scaledLocked(sec float64) time.Duration {
	f := s.scen.StepFactor
	if f <= 0 {
		f = 1
	}
	return time.Duration(sec * f * float64(time.Second))
}

// StepTime is the cost model's duration of one engine step under the current
// scenario: seqs scheduled sequences, ctx context tokens read, prefill
// uncached prompt tokens computed.
func (s *Sim) StepTime(seqs, ctx, prefill int) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.costLocked(seqs, ctx, prefill)
}

// PrefillTime is the model's time for an otherwise idle engine to prefill a
// prompt of promptTokens of which cachedTokens hit the prefix cache: the sum of
// its chunked-prefill steps (max_num_batched_tokens per step, at most
// long_prefill_token_threshold when set). This is the
// minimum server-side TTFT for that prompt.
func (s *Sim) PrefillTime(promptTokens, cachedTokens int) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Duration
	done := cachedTokens
	for done < promptTokens {
		n := promptTokens - done
		if n > s.cfg.MaxNumBatchedTokens {
			n = s.cfg.MaxNumBatchedTokens
		}
		if th := s.cfg.LongPrefillTokenThreshold; th > 0 && n > th {
			n = th
		}
		done += n
		d += s.costLocked(1, done, n)
	}
	return d
}

// Request is a generation request submitted directly to the scheduler.
type Request struct {
	// Model is a served model name ("" = the first).
	Model string
	// Prompt is the prompt's token IDs (use Tokenize or ChatTokens for text).
	Prompt []int
	// MaxTokens is the output limit (finish_reason "length"); must be >= 1.
	MaxTokens int
	// MinTokens suppresses EOS before this many tokens.
	MinTokens int
	// IgnoreEOS never stops on EOS.
	IgnoreEOS bool
	// EOSAt forces EOS as output token number EOSAt (0: drawn from the seed with
	// mean Config.MeanOutputTokens). Ignored with IgnoreEOS.
	EOSAt int
	// Seed, if non-nil, fixes the generated tokens and EOS draw for this request
	// independently of other traffic.
	Seed *int64
	// ID is the request id ("" = generated).
	ID string
	// Priority orders the waiting queue under the priority policy (lower =
	// more urgent, vLLM's convention); must be 0 under FCFS.
	Priority int
}

// Errors returned by Submit.
var (
	ErrUnknownModel = errors.New("model does not exist")
	ErrBadRequest   = errors.New("bad request")
)

// Submit enqueues a request at the current clock and returns a handle that
// delivers its outputs. In virtual mode nothing happens until Advance.
func (s *Sim) Submit(r Request) (*Handle, error) {
	h := &Handle{notify: make(chan struct{}, 1), s: s}
	if err := s.submit(r, h); err != nil {
		return nil, err
	}
	return h, nil
}

func (s *Sim) submit(r Request, h *Handle) error {
	if r.MaxTokens < 1 {
		return fmt.Errorf("%w: max_tokens must be at least 1, got %d", ErrBadRequest, r.MaxTokens)
	}
	if len(r.Prompt) == 0 {
		return fmt.Errorf("%w: prompt is empty", ErrBadRequest)
	}
	s.lockNow()
	defer s.mu.Unlock()
	return s.submitLocked(r, h)
}

// submitLocked enqueues r on the least-loaded engine of its model at s.now.
func (s *Sim) submitLocked(r Request, h *Handle) error {
	r.Model = cmp.Or(r.Model, s.cfg.Models[0])
	adapter := ""
	if base := s.loraBase(r.Model); base != "" {
		adapter, r.Model = r.Model, base
	}
	engines, ok := s.models[r.Model]
	if !ok {
		return fmt.Errorf("%w: the model `%s` does not exist", ErrUnknownModel, r.Model)
	}
	if r.Priority != 0 && s.cfg.SchedulingPolicy != PolicyPriority {
		return fmt.Errorf("%w: Got priority %d but Priority scheduling is not enabled.", ErrBadRequest, r.Priority)
	}
	if len(r.Prompt)+r.MaxTokens > s.cfg.MaxModelLen {
		return fmt.Errorf("%w: This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion)",
			ErrBadRequest, s.cfg.MaxModelLen, len(r.Prompt)+r.MaxTokens, len(r.Prompt), r.MaxTokens)
	}
	e := slices.MinFunc(engines, func(a, b *engine) int { return cmp.Compare(a.load(), b.load()) })
	if err := s.admit(e, len(r.Prompt)); err != nil {
		return err
	}
	s.seq++
	if r.ID == "" {
		r.ID = fmt.Sprintf("%016x", s.seq)
	}
	var rng uint64
	if r.Seed != nil {
		rng = uint64(*r.Seed) ^ promptHash(r.Prompt)
	} else {
		rng = uint64(s.cfg.Seed)*0x9E3779B97F4A7C15 + s.seq
	}
	q := &req{id: r.ID, eng: e, tokens: append([]int(nil), r.Prompt...), promptLen: len(r.Prompt),
		maxTokens: r.MaxTokens, minTokens: r.MinTokens, ignoreEOS: r.IgnoreEOS, eosAt: r.EOSAt,
		rng: rng, arrival: s.now, sink: h, priority: r.Priority, seq: s.seq, lora: adapter}
	if q.eosAt == 0 && !q.ignoreEOS {
		q.eosAt = geometric(&q.rng, float64(s.cfg.MeanOutputTokens))
	}
	if h != nil {
		h.r = q
		s.handles[h] = struct{}{}
	}
	if wait := s.transferKV(e, q); wait > 0 {
		// A decode pod defers the request until its KV has arrived.
		q.deferUntil = s.now.Add(wait)
		e.deferred = append(e.deferred, q)
	} else if every(&s.deferAcc, s.deferCfg.Fraction) {
		if s.deferCfg.Hold > 0 {
			q.deferUntil = s.now.Add(s.deferCfg.Hold)
		}
		e.deferred = append(e.deferred, q)
	} else {
		e.enqueue(q)
	}
	e.blocked = false
	s.poke()
	return nil
}

func promptHash(p []int) uint64 {
	hh := fnv.New64a()
	for _, t := range p {
		_, _ = hh.Write([]byte{byte(t), byte(t >> 8), byte(t >> 16), byte(t >> 24)})
	}
	return hh.Sum64()
}

// geometric draws a positive integer with the given mean from rng.
func geometric(rng *uint64, mean float64) int {
	p := 1 / mean
	n := 1
	for {
		u := float64(splitmix(rng)>>11) / (1 << 53)
		if u < p || n > 1<<20 {
			return n
		}
		n++
	}
}

// Output is one engine output of a request: the token(s) generated in one step.
type Output struct {
	TokenIDs []int
	Text     string
	Time     time.Time
	// FinishReason is "" until the last output ("stop", "length", "abort").
	FinishReason string
	// Cumulative token counts (the usage block).
	PromptTokens, CompletionTokens, CachedTokens int
	// Err is set when the request was dropped (restart) instead of finishing.
	Err error
}

// ErrRestarted ends the outputs of requests in flight when the server restarts.
var ErrRestarted = errors.New("vllmsim: server restarted")

// Handle delivers a submitted request's outputs in order.
type Handle struct {
	s      *Sim
	r      *req
	mu     sync.Mutex
	queue  []Output
	done   bool
	notify chan struct{}
}

func (h *Handle) push(o Output) {
	h.mu.Lock()
	h.queue = append(h.queue, o)
	if o.FinishReason != "" || o.Err != nil {
		h.done = true
	}
	h.mu.Unlock()
	select {
	case h.notify <- struct{}{}:
	default:
	}
	if h.done {
		delete(h.s.handles, h)
	}
}

// Next returns the next output, waiting for it; ok is false when ctx ended
// first or all outputs were consumed.
func (h *Handle) Next(ctx context.Context) (o Output, ok bool) {
	for {
		h.mu.Lock()
		if len(h.queue) > 0 {
			o = h.queue[0]
			h.queue = h.queue[1:]
			h.mu.Unlock()
			return o, true
		}
		done := h.done
		h.mu.Unlock()
		if done {
			return Output{}, false
		}
		select {
		case <-ctx.Done():
			return Output{}, false
		case <-h.notify:
		}
	}
}

// Poll returns the outputs available now without waiting.
func (h *Handle) Poll() []Output {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.queue
	h.queue = nil
	return out
}

// Abort cancels the request like a client disconnect: no finished-request
// statistics are recorded (vLLM frontend-side abort).
func (h *Handle) Abort() {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if h.r != nil && h.r.state != stateFinished {
		h.r.eng.abort(h.r)
		h.s.poke()
	}
	delete(h.s.handles, h)
	h.mu.Lock()
	h.done = true
	h.mu.Unlock()
	select {
	case h.notify <- struct{}{}:
	default:
	}
}

// ID is the request id.
func (h *Handle) ID() string { return h.r.id }

// RequestRecord is the ground truth of one finished request, as the scheduler produced it.
type RequestRecord struct {
	ID           string
	Model        string
	Engine       int
	PromptTokens int
	CachedTokens int // prefix-cache hit at first scheduling
	OutputTokens int
	FinishReason string
	Preemptions  int
	Priority     int
	Arrival      time.Time
	Scheduled    time.Time
	FirstToken   time.Time
	LastToken    time.Time
	// Derived exactly as vLLM's histograms observe them.
	TTFT, E2E, Queue, Prefill, Decode, Inference time.Duration
	TPOT                                         time.Duration // Decode/(OutputTokens-1), 0 if <= 1 token
	MeanITL, MaxITL                              time.Duration
	FromLoadGen                                  bool
}

func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

func (s *Sim) recordFinished(e *engine, r *req, tpot float64) {
	rec := RequestRecord{ID: r.id, Model: e.model, Engine: e.index, PromptTokens: r.promptLen,
		CachedTokens: r.cachedTokens, OutputTokens: r.outputs(), FinishReason: r.finish,
		Preemptions: r.preemptions, Priority: r.priority, Arrival: r.arrival, Scheduled: r.scheduled, FirstToken: r.firstTok,
		LastToken: r.lastTok, TTFT: r.firstTok.Sub(r.arrival), E2E: r.lastTok.Sub(r.arrival),
		Queue: r.scheduled.Sub(r.arrival), Prefill: r.firstTok.Sub(r.scheduled), Decode: r.lastTok.Sub(r.firstTok),
		Inference: r.lastTok.Sub(r.scheduled), TPOT: secs(tpot), MaxITL: secs(r.itlMax), FromLoadGen: r.sink == nil}
	if r.itlN > 0 {
		rec.MeanITL = secs(r.itlSum / float64(r.itlN))
	}
	if len(s.records) >= s.cfg.MaxRecords {
		s.records = s.records[1:]
	}
	s.records = append(s.records, rec)
}

// Records returns the finished requests' ground truth, oldest first.
func (s *Sim) Records() []RequestRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RequestRecord(nil), s.records...)
}

// EngineState is a point-in-time view of one engine.
type EngineState struct {
	Model            string         `json:"model"`
	Engine           int            `json:"engine"`
	Running          int            `json:"running"`
	Waiting          int            `json:"waiting"`  // capacity-waiting (schedulable)
	Deferred         int            `json:"deferred"` // deferred by a transient constraint
	KVUsage          float64        `json:"kv_usage"` // 1 - free/usable blocks, as vllm:kv_cache_usage_perc
	FreeBlocks       int            `json:"free_blocks"`
	Preemptions      int            `json:"preemptions"`
	PromptTokens     int            `json:"prompt_tokens"` // V1: whole prompt at the first token; V0: per computed prefill chunk, recompute included
	GenerationTokens int            `json:"generation_tokens"`
	PrefixQueries    int            `json:"prefix_queries"`
	PrefixHits       int            `json:"prefix_hits"`
	Finished         map[string]int `json:"finished"` // by finish reason
	Steps            int            `json:"steps"`
	MeanStepTime     time.Duration  `json:"mean_step_time_ns"`
	LastStepTime     time.Duration  `json:"last_step_time_ns"`
	// BusyTime is the total duration of completed steps: the engine's
	// (GPU's) busy time, for utilization over a window.
	BusyTime time.Duration `json:"busy_time_ns"`
}

// Engines returns the state of every engine, by model then engine index.
func (s *Sim) Engines() []EngineState {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []EngineState
	for _, e := range s.allEngines() {
		st := e.stats
		es := EngineState{Model: e.model, Engine: e.index, Running: len(e.running), Waiting: len(e.waiting), Deferred: len(e.deferred),
			KVUsage: e.pool.usage(), FreeBlocks: e.pool.numFree, Preemptions: int(st.preemptions),
			PromptTokens: int(st.promptTokens), GenerationTokens: int(st.generationTokens),
			PrefixQueries: int(st.prefixQueries), PrefixHits: int(st.prefixHits),
			Finished: map[string]int{}, Steps: int(st.steps), LastStepTime: e.stepDur}
		for k, v := range st.success {
			es.Finished[k] = int(v)
		}
		es.BusyTime = secs(st.stepSeconds)
		if st.steps > 0 {
			es.MeanStepTime = secs(st.stepSeconds / st.steps)
		}
		out = append(out, es)
	}
	return out
}

// PrefixCachedTokens is how many tokens of prompt would hit the prefix cache
// of the given model's engine right now.
func (s *Sim) PrefixCachedTokens(model string, engine int, prompt []int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	model = cmp.Or(model, s.cfg.Models[0])
	es := s.models[model]
	if engine < 0 || engine >= len(es) {
		return 0
	}
	bs := s.cfg.BlockSize
	return es[engine].pool.peek(chainHashes(nil, prompt, bs), (len(prompt)-1)/bs) * bs
}

// Restart simulates a process restart: every request in flight is dropped
// (its handle gets ErrRestarted), engines, KV cache and all counters reset, and
// process start / _created timestamps move to now.
func (s *Sim) Restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restartLocked()
}

func (s *Sim) restartLocked() {
	for _, h := range slices.SortedFunc(maps.Keys(s.handles), func(a, b *Handle) int { return cmp.Compare(a.r.id, b.r.id) }) {
		h.push(Output{Err: ErrRestarted, Time: s.now})
	}
	s.handles = map[*Handle]struct{}{}
	s.resetLocked()
	s.poke()
}
