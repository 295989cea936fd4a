// Package vllmsim is a simulated vLLM OpenAI-compatible server for tests,
// demos and fault drills: no GPU, no Python, but timings that emerge from a
// scheduler model and a /metrics body that reproduces vLLM's exposition byte
// for byte.
//
// # Model
//
// Each served model has Config.DataParallelSize engines. An engine is a vLLM
// V1-style scheduler: a FCFS waiting queue, up to MaxNumSeqs running
// sequences, a per-step token budget of MaxNumBatchedTokens (chunked
// prefill: running requests first, then waiting ones), and a paged KV cache
// of NumGPUBlocks blocks of BlockSize tokens (on V1 versions block 0 is
// vLLM's null block: never allocated, left out of KV usage). Full blocks are registered
// under a chained hash of their tokens, so prompts sharing a prefix reuse
// blocks (prefix caching; a cache hit is capped at prompt length - 1 as in
// vLLM); freed blocks stay cached until evicted in LRU order. When a running
// request needs a block and none is free, the most recently admitted running
// request is preempted (blocks freed, recomputed later from the head of the
// waiting queue) and vllm:num_preemptions_total grows. A step's duration
// comes from CostModel (base + per sequence + per context token read + per
// uncached prompt token computed, × the scenario's StepFactor); tokens of a
// step are emitted when the step ends. TTFT, ITL, queueing, preemptions and
// KV usage are therefore consequences of load, never configured sleeps.
//
// # Clock
//
// With Config.VirtualClock the clock only moves in Advance/AdvanceTo, which
// run every step and load-generator arrival in time order. Runs are
// deterministic for a Config.Seed (same Metrics bytes, same Records). HTTP
// handlers work too, but their streams progress only as the test advances.
// Without VirtualClock, Start (or StartClock) runs a goroutine that advances
// the same event loop with wall time, so HTTP streaming behaves like a real
// server.
//
// # Public API
//
//	New(Config) (*Sim, error)            build; nothing served yet
//	(*Sim).Start() error                 listen on Config.Addr (default 127.0.0.1:0) + real-time clock
//	(*Sim).StartClock()                  real-time clock only (with Handler in your own server)
//	(*Sim).URL() / Addr() / Close()
//	(*Sim).Handler() http.Handler        /v1/completions, /v1/chat/completions, /v1/models,
//	                                     /health, /ping, /version, /metrics, /tokenize, /admin/*
//	(*Sim).Now() / Advance(d) / AdvanceTo(t)      clock (Advance panics in real-time mode)
//	(*Sim).Submit(Request) (*Handle, error)       direct submission, no HTTP
//	(*Handle).Next(ctx) / Poll() / Abort() / ID()
//	(*Sim).SetScenario(name) / ApplyScenario(Scenario) / Scenario() / SetLoadGen(bool)
//	Scenarios() []string, ScenarioPreset(name) (Scenario, bool)
//	(*Sim).InjectFault(FaultSpec) / ClearFault(kind) / ClearFaults() / Faults()
//	(*Sim).Restart()                     counters, engines, KV cache reset; in-flight requests dropped
//	(*Sim).Metrics() []byte / WriteMetrics(w)     the /metrics body at Now
//	Engine controls (controls.go, /admin routes in admin.go): Sleep(level) / WakeUp(tags...) /
//	SleepState(); SetDefer(DeferSpec) / ClearDefer() (deferred requests, the #53130 livelock);
//	SetSpecDecode(SpecDecode); SetRefusal(Refusal) (429/503/500 before the engine);
//	SetHistogramBuckets(map) (--custom-histogram-buckets, restarts).
//	Ground truth: (*Sim).Records() []RequestRecord (per finished request: TTFT, TPOT, E2E, queue,
//	prefill, decode, cached tokens, preemptions...), Engines() []EngineState (running, waiting,
//	KV usage, counters, mean step time), PrefillTime(prompt, cached), StepTime(seqs, ctx, prefill),
//	PrefixCachedTokens(model, engine, prompt), Config().
//	Tokenizer stand-in: Tokenize(text) (BOS + pieces), TextTokens(text), ChatTokens(msgs).
//
// # Metrics versions
//
// MetricsV1 renders vLLM main (2026-08) with one API server (python/process
// families, every counter and histogram followed by its _created gauge
// family, engine label, all finished_reason children pre-created, http_*
// instrumentator families). MetricsV1_0_10 renders 0.10.2, which still carries
// vllm:gpu_cache_usage_perc, vllm:gpu_prefix_cache_* and
// vllm:time_per_output_token_seconds next to their replacements.
// MetricsLatest ("v1-0.33") renders the newest layout (vLLM 0.30-0.33, late
// 2026): MetricsV1 plus request_num_preemptions, engine_sleep_resource_state,
// engine_fully_awake, scheduler_policy_info, and, when configured, the
// priority label and request_priority (SchedulingPolicy), custom bucket
// bounds (CustomHistogramBuckets) and engine_healthy (EnableFaultTolerance).
// MetricsV0 renders 0.7.3's V0 multiprocess body (no _created, no
// python/process, _sum first, histograms and finish reasons only after the
// first observation, V0 bucket lists). Config.APIServerCount > 1 renders a V1
// version in multiprocess style. Values always come from the simulated engines:
// histogram counts equal finished requests, token counters equal tokens
// produced (V1: a request's whole prompt when its first token is produced, as
// on main; V0: each prefill chunk when computed, recomputation included), the
// preemption counter equals preemptions that happened, and
// iteration_tokens_total sums to prompt + generation tokens.
package vllmsim
