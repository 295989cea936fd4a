package vllmsim

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// family kinds
const (
	kCounter = "counter"
	kGauge   = "gauge"
	kHist    = "histogram"
)

// famSpec is one row of a version's exposition table: a vLLM family and
// where its value comes from in the simulator.
type famSpec struct {
	name, typ, help string
	// engine-scoped sources (one child per engine, or per engine × extra value)
	gauge    func(e *engine) float64
	counter  func(st *engineStats) float64
	extra    string   // extra label name
	extraVal []string // its values, in child order
	byExtra  func(e *engine, v string) float64
	hist     string
	// onlySeen: multiprocess mode, children appear only once written
	onlySeen bool
	// custom renders a non-engine family (python/process, cache_config_info, http_*).
	custom func(w *expoWriter)
	// process: a default-registry collector, absent in multiprocess mode.
	process bool
	// cond, if set, renders the family only while it holds (families vLLM
	// registers only with a feature on: spec decode, priority policy...).
	cond func(s *Sim) bool
	// extraVals, if set, gives the extra label values at render time.
	extraVals func(s *Sim) []string
	// finished: a finished-request family, which carries the priority label
	// under the priority policy in versions with priorityLabel. prioExtra
	// reads an extra-label family's per-priority value.
	finished  bool
	prioExtra func(ps *prioStats, v string) float64
}

// versionSpec describes one vLLM version's /metrics.
type versionSpec struct {
	name        string
	vllmVersion string
	engineLabel bool
	created     bool // V1 single-process: _created gauge families
	sumFirst    bool // V0 multiprocess histogram order: _sum, buckets, _count
	nestedError bool // error body {"error":{...}} (>=0.10.1) vs flat
	healthDead  int  // /health status when the engine is dead
	main        bool // vLLM main-era API behaviour (2026-08 and later)
	// priorityLabel: finished-request families gain "priority" under the
	// priority policy (late 2026).
	priorityLabel bool
	buckets       bucketSet
	families      func(c *Config) []famSpec
}

var (
	ttftBuckets   = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	ttftBucketsV0 = ttftBuckets[:16]
	itlBuckets    = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	itlBucketsV0  = itlBuckets[:13]
	latBuckets    = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	latBucketsV0  = latBuckets[:15]
	iterBuckets   = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
	nBuckets      = []float64{1, 2, 5, 10, 20}
)

// cudagraphSizes are V0's iteration-token buckets: [1,2,4] + 8,16,...,max_num_seqs (cap 512).
func cudagraphSizes(maxSeqs int) []float64 {
	out := []float64{1, 2, 4}
	for i := 8; i <= maxSeqs && i <= 512; i += 8 {
		out = append(out, float64(i))
	}
	return out
}

var versions = map[string]*versionSpec{
	MetricsV1: {name: MetricsV1, vllmVersion: "0.25.0", engineLabel: true, created: true, nestedError: true,
		healthDead: 503, main: true, families: familiesV1},
	MetricsLatest: {name: MetricsLatest, vllmVersion: "0.33.0", engineLabel: true, created: true, nestedError: true,
		healthDead: 503, main: true, priorityLabel: true, families: familiesLatest},
	MetricsV1_0_10: {name: MetricsV1_0_10, vllmVersion: "0.10.2", engineLabel: true, created: true, nestedError: true,
		healthDead: 500, families: familiesV1_0_10},
	MetricsV0: {name: MetricsV0, vllmVersion: "0.7.3", sumFirst: true, healthDead: 500, families: familiesV0},
}

// bucketsFor fills a version's bucket set for a config.
func bucketsFor(v *versionSpec, c *Config) bucketSet {
	tok := build125(c.MaxModelLen)
	if v.name == MetricsV0 {
		return bucketSet{ttft: ttftBucketsV0, itl: itlBucketsV0, latency: latBucketsV0, tokens: tok, n: nBuckets,
			iteration: cudagraphSizes(c.MaxNumSeqs), preempt: preemptBuckets}
	}
	b := bucketSet{ttft: ttftBuckets, itl: itlBuckets, latency: latBuckets, tokens: tok, n: nBuckets,
		iteration: iterBuckets, preempt: preemptBuckets}
	// --custom-histogram-buckets: bucket family -> the bounds it replaces
	// (kv_cache_residency has no simulated family).
	slots := map[string]*[]float64{"request_latency": &b.latency, "time_to_first_token": &b.ttft,
		"inter_token_latency": &b.itl, "iteration_tokens": &b.iteration, "request_params_n": &b.n,
		"request_num_preemptions": &b.preempt, "request_tokens": &b.tokens}
	for fam, bounds := range c.CustomHistogramBuckets {
		if p := slots[fam]; p != nil {
			*p = append([]float64(nil), bounds...)
		}
	}
	return b
}

func zero(*engineStats) float64 { return 0 }

func running(e *engine) float64 { return float64(len(e.running)) }
func waiting(e *engine) float64 { return float64(len(e.waiting)) }

// waitingTotal is vllm:num_requests_waiting since #38435 (≈0.20): capacity
// plus deferred (skipped) waiting requests. Older versions count only the
// capacity queue (waiting).
func waitingTotal(e *engine) float64 { return float64(len(e.waiting) + len(e.deferred)) }
func kvUsage(e *engine) float64      { return e.pool.usage() }

func successBy(e *engine, v string) float64 { return e.stats.success[v] }

// Shared HELP texts.
const (
	helpPromptTokens = "Number of prefill tokens processed."
	helpGenTokens    = "Number of generation tokens processed."
	helpPreempt      = "Cumulative number of preemption from the engine."
	helpSuccess      = "Count of successfully processed requests."
	helpIter         = "Histogram of number of tokens per engine_step."
	helpMaxGen       = "Histogram of maximum number of requested generation tokens."
	helpN            = "Histogram of the n request parameter."
	helpMaxTokens    = "Histogram of the max_tokens request parameter."
	helpTTFT         = "Histogram of time to first token in seconds."
	helpTPOT         = "Histogram of time per output token in seconds."
	helpITL          = "Histogram of inter-token latency in seconds."
	helpQueue        = "Histogram of time spent in WAITING phase for request."
	helpInference    = "Histogram of time spent in RUNNING phase for request."
	helpPrefill      = "Histogram of time spent in PREFILL phase for request."
	helpDecode       = "Histogram of time spent in DECODE phase for request."
	helpCacheCfg     = "Information of the LLMEngine CacheConfig"
	helpKVUsage      = "KV-cache usage. 1 means 100 percent usage."
	helpGPUUsage     = "GPU KV-cache usage. 1 means 100 percent usage."
	helpWaiting      = "Number of requests waiting to be processed."
	helpRunningV1    = "Number of requests in model execution batches."
	helpPQ           = "Prefix cache queries, in terms of number of queried tokens."
	helpPH           = "Prefix cache hits, in terms of number of cached tokens."
)

// tokenHists are the per-request token histograms shared by V1 versions.
func tokenHists() []famSpec {
	return []famSpec{
		{name: "vllm:request_prompt_tokens", typ: kHist, help: helpPromptTokens, hist: hReqPrompt},
		{name: "vllm:request_generation_tokens", typ: kHist, help: helpGenTokens, hist: hReqGen},
		{name: "vllm:iteration_tokens_total", typ: kHist, help: helpIter, hist: hIteration},
		{name: "vllm:request_max_num_generation_tokens", typ: kHist, help: helpMaxGen, hist: hMaxGen},
		{name: "vllm:request_params_n", typ: kHist, help: helpN, hist: hParamsN},
		{name: "vllm:request_params_max_tokens", typ: kHist, help: helpMaxTokens, hist: hParamsMaxTokens},
	}
}

func phaseHists(e2eHelp string) []famSpec {
	return []famSpec{
		{name: "vllm:e2e_request_latency_seconds", typ: kHist, help: e2eHelp, hist: hE2E},
		{name: "vllm:request_queue_time_seconds", typ: kHist, help: helpQueue, hist: hQueue},
		{name: "vllm:request_inference_time_seconds", typ: kHist, help: helpInference, hist: hInference},
		{name: "vllm:request_prefill_time_seconds", typ: kHist, help: helpPrefill, hist: hPrefill},
		{name: "vllm:request_decode_time_seconds", typ: kHist, help: helpDecode, hist: hDecode},
	}
}

func familiesV1(c *Config) []famSpec {
	fs := pythonProcessFamilies()
	mfu := "(for Model Flops Utilization calculations)."
	fs = append(fs,
		famSpec{name: "vllm:estimated_flops_per_gpu_total", typ: kCounter, help: "Estimated number of floating point operations per GPU " + mfu, counter: func(st *engineStats) float64 { return st.flops }},
		famSpec{name: "vllm:estimated_read_bytes_per_gpu_total", typ: kCounter, help: "Estimated number of bytes read from memory per GPU " + mfu, counter: func(st *engineStats) float64 { return st.readBytes }},
		famSpec{name: "vllm:estimated_write_bytes_per_gpu_total", typ: kCounter, help: "Estimated number of bytes written to memory per GPU " + mfu, counter: func(st *engineStats) float64 { return st.writeBytes }},
		famSpec{name: "vllm:num_requests_running", typ: kGauge, help: helpRunningV1, gauge: running},
		famSpec{name: "vllm:num_requests_waiting", typ: kGauge, help: helpWaiting, gauge: waitingTotal},
		famSpec{name: "vllm:num_requests_waiting_by_reason", typ: kGauge,
			help:  "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
			extra: "reason", extraVal: []string{"capacity", "deferred"},
			byExtra: func(e *engine, v string) float64 {
				blocked := e.loraBlocked() // skipped by the LoRA budget
				if v == "capacity" {
					return waiting(e) - float64(blocked)
				}
				return float64(len(e.deferred) + blocked)
			}},
		famSpec{name: "vllm:engine_sleep_state", typ: kGauge,
			help:  "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
			extra: "sleep_state", extraVal: []string{"awake", "weights_offloaded", "discard_all"},
			byExtra: func(e *engine, v string) float64 { return e.sim.sleep.legacy(v) }},
		famSpec{name: "vllm:kv_cache_usage_perc", typ: kGauge, help: helpKVUsage, gauge: kvUsage},
		famSpec{name: "vllm:prefix_cache_queries_total", typ: kCounter, help: helpPQ, counter: func(st *engineStats) float64 { return st.prefixQueries }},
		famSpec{name: "vllm:prefix_cache_hits_total", typ: kCounter, help: helpPH, counter: func(st *engineStats) float64 { return st.prefixHits }},
		famSpec{name: "vllm:external_prefix_cache_queries_total", typ: kCounter, help: "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.", counter: zero},
		famSpec{name: "vllm:external_prefix_cache_hits_total", typ: kCounter, help: "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.", counter: zero},
		famSpec{name: "vllm:mm_cache_queries_total", typ: kCounter, help: "Multi-modal cache queries, in terms of number of queried items.", counter: zero},
		famSpec{name: "vllm:mm_cache_hits_total", typ: kCounter, help: "Multi-modal cache hits, in terms of number of cached items.", counter: zero},
		famSpec{name: "vllm:num_preemptions_total", typ: kCounter, help: helpPreempt, counter: func(st *engineStats) float64 { return st.preemptions }},
		famSpec{name: "vllm:prompt_tokens_total", typ: kCounter, help: helpPromptTokens, counter: func(st *engineStats) float64 { return st.promptTokens }},
		famSpec{name: "vllm:prompt_tokens_by_source_total", typ: kCounter, help: "Number of prompt tokens by source.",
			extra: "source", extraVal: []string{"local_compute", "local_cache_hit", "external_kv_transfer"},
			byExtra: func(e *engine, v string) float64 {
				switch v {
				case "local_compute":
					return e.stats.promptCompute
				case "local_cache_hit":
					return e.stats.promptCacheHit
				}
				return 0
			}},
		famSpec{name: "vllm:prompt_tokens_cached_total", typ: kCounter, help: "Number of cached prompt tokens (local + external).", counter: func(st *engineStats) float64 { return st.promptCacheHit }},
		famSpec{name: "vllm:generation_tokens_total", typ: kCounter, help: helpGenTokens, counter: func(st *engineStats) float64 { return st.generationTokens }},
		famSpec{name: "vllm:request_success_total", typ: kCounter, help: helpSuccess, extra: "finished_reason",
			extraVal: []string{"stop", "length", "abort", "error", "repetition"}, byExtra: successBy,
			finished: true, prioExtra: func(ps *prioStats, v string) float64 { return ps.success[v] }},
	)
	fs = append(fs, tokenHists()...)
	fs = append(fs,
		famSpec{name: "vllm:time_to_first_token_seconds", typ: kHist, help: helpTTFT, hist: hTTFT},
		famSpec{name: "vllm:inter_token_latency_seconds", typ: kHist, help: helpITL, hist: hITL},
		famSpec{name: "vllm:request_time_per_output_token_seconds", typ: kHist, help: "Histogram of time_per_output_token_seconds per request.", hist: hReqTPOT},
	)
	fs = append(fs, phaseHists("Histogram of e2e request latency in seconds.")...)
	fs = append(fs,
		famSpec{name: "vllm:request_prefill_kv_computed_tokens", typ: kHist, help: "Histogram of new KV tokens computed during prefill (excluding cached tokens).", hist: hPrefillKV},
	)
	fs = append(fs, specDecodeFamilies()...)
	fs = append(fs,
		famSpec{name: "vllm:cache_config_info", typ: kGauge, help: helpCacheCfg, custom: cacheConfigV1},
	)
	return append(fs, httpFamilies()...)
}

func familiesV1_0_10(c *Config) []famSpec {
	fs := pythonProcessFamilies()
	fs = append(fs,
		famSpec{name: "vllm:num_requests_running", typ: kGauge, help: helpRunningV1, gauge: running},
		famSpec{name: "vllm:num_requests_waiting", typ: kGauge, help: helpWaiting, gauge: waiting},
		famSpec{name: "vllm:gpu_cache_usage_perc", typ: kGauge, help: helpGPUUsage + "DEPRECATED: Use vllm:kv_cache_usage_perc instead.", gauge: kvUsage},
		famSpec{name: "vllm:kv_cache_usage_perc", typ: kGauge, help: helpKVUsage, gauge: kvUsage},
		famSpec{name: "vllm:gpu_prefix_cache_queries_total", typ: kCounter, help: "GPU prefix cache queries, in terms of number of queriedtokens. DEPRECATED: Use vllm:prefix_cache_queries instead.", counter: func(st *engineStats) float64 { return st.prefixQueries }},
		famSpec{name: "vllm:gpu_prefix_cache_hits_total", typ: kCounter, help: "GPU prefix cache hits, in terms of number of cached tokens. DEPRECATED: Use vllm:prefix_cache_hits instead.", counter: func(st *engineStats) float64 { return st.prefixHits }},
		famSpec{name: "vllm:prefix_cache_queries_total", typ: kCounter, help: helpPQ, counter: func(st *engineStats) float64 { return st.prefixQueries }},
		famSpec{name: "vllm:prefix_cache_hits_total", typ: kCounter, help: helpPH, counter: func(st *engineStats) float64 { return st.prefixHits }},
		famSpec{name: "vllm:num_preemptions_total", typ: kCounter, help: helpPreempt, counter: func(st *engineStats) float64 { return st.preemptions }},
		famSpec{name: "vllm:prompt_tokens_total", typ: kCounter, help: helpPromptTokens, counter: func(st *engineStats) float64 { return st.promptTokens }},
		famSpec{name: "vllm:generation_tokens_total", typ: kCounter, help: helpGenTokens, counter: func(st *engineStats) float64 { return st.generationTokens }},
		famSpec{name: "vllm:request_success_total", typ: kCounter, help: helpSuccess, extra: "finished_reason",
			extraVal: []string{"stop", "length", "abort"}, byExtra: successBy},
	)
	fs = append(fs, tokenHists()...)
	fs = append(fs,
		famSpec{name: "vllm:time_to_first_token_seconds", typ: kHist, help: helpTTFT, hist: hTTFT},
		famSpec{name: "vllm:time_per_output_token_seconds", typ: kHist, help: helpTPOT + "DEPRECATED: Use vllm:inter_token_latency_seconds instead.", hist: hITL},
		famSpec{name: "vllm:inter_token_latency_seconds", typ: kHist, help: helpITL, hist: hITL},
	)
	fs = append(fs, phaseHists("Histogram of e2e request latency in seconds.")...)
	fs = append(fs, famSpec{name: "vllm:cache_config_info", typ: kGauge, help: helpCacheCfg, custom: cacheConfigV1_0_10})
	return append(fs, httpFamilies()...)
}

func familiesV0(c *Config) []famSpec {
	h := func(name, help, key string) famSpec {
		return famSpec{name: name, typ: kHist, help: help, hist: key, onlySeen: true}
	}
	fs := []famSpec{
		h("vllm:iteration_tokens_total", helpIter, hIteration),
		h("vllm:time_to_first_token_seconds", helpTTFT, hTTFT),
		h("vllm:time_per_output_token_seconds", helpTPOT, hITL),
	}
	for _, p := range phaseHists("Histogram of end to end request latency in seconds.") {
		p.onlySeen = true
		fs = append(fs, p)
	}
	fs = append(fs,
		h("vllm:time_in_queue_requests", "Histogram of time the request spent in the queue in seconds.", hQueue),
		h("vllm:request_prompt_tokens", helpPromptTokens, hReqPrompt),
		h("vllm:request_generation_tokens", helpGenTokens, hReqGen),
		h("vllm:request_params_n", helpN, hParamsN),
		h("vllm:request_max_num_generation_tokens", helpMaxGen, hMaxGen),
		h("vllm:request_params_max_tokens", helpMaxTokens, hParamsMaxTokens),
		famSpec{name: "vllm:num_preemptions_total", typ: kCounter, help: helpPreempt, counter: func(st *engineStats) float64 { return st.preemptions }},
		famSpec{name: "vllm:prompt_tokens_total", typ: kCounter, help: helpPromptTokens, counter: func(st *engineStats) float64 { return st.promptTokens }},
		famSpec{name: "vllm:generation_tokens_total", typ: kCounter, help: helpGenTokens, counter: func(st *engineStats) float64 { return st.generationTokens }},
		famSpec{name: "vllm:request_success_total", typ: kCounter, help: helpSuccess, extra: "finished_reason",
			extraVal: []string{"stop", "length", "abort"}, byExtra: successBy, onlySeen: true},
		famSpec{name: "vllm:cache_config_info", typ: kGauge, help: helpCacheCfg, custom: cacheConfigV0},
		famSpec{name: "vllm:lora_requests_info", typ: kGauge, help: "Running stats on lora requests.", custom: func(w *expoWriter) {
			w.header("vllm:lora_requests_info", kGauge, "Running stats on lora requests.")
			w.sample("vllm:lora_requests_info", []label{{"max_lora", "0"}, {"running_lora_adapters", ""}, {"waiting_lora_adapters", ""}}, unixSeconds(w.s.now))
		}},
		famSpec{name: "vllm:num_requests_running", typ: kGauge, help: "Number of requests currently running on GPU.", gauge: running},
		famSpec{name: "vllm:num_requests_swapped", typ: kGauge, help: "Number of requests swapped to CPU.", gauge: func(*engine) float64 { return 0 }},
		famSpec{name: "vllm:num_requests_waiting", typ: kGauge, help: helpWaiting, gauge: waiting},
		famSpec{name: "vllm:gpu_cache_usage_perc", typ: kGauge, help: helpGPUUsage, gauge: kvUsage},
		famSpec{name: "vllm:cpu_cache_usage_perc", typ: kGauge, help: "CPU KV-cache usage. 1 means 100 percent usage.", gauge: func(*engine) float64 { return 0 }},
		famSpec{name: "vllm:cpu_prefix_cache_hit_rate", typ: kGauge, help: "CPU prefix cache block hit rate.", gauge: func(*engine) float64 { return -1 }},
		famSpec{name: "vllm:gpu_prefix_cache_hit_rate", typ: kGauge, help: "GPU prefix cache block hit rate.", gauge: func(e *engine) float64 {
			if !e.pool.caching {
				return -1
			}
			if e.stats.prefixQueries == 0 {
				return 0
			}
			return e.stats.prefixHits / e.stats.prefixQueries
		}},
	)
	return fs
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// expoWriter renders one scrape.
type expoWriter struct {
	s       *Sim
	v       *versionSpec
	b       []byte  // the body so far
	sorted  []label // scratch of appendLabels
	les     map[float64]string
	created int // children rendered so far: spaces _created timestamps apart
}

func (w *expoWriter) header(name, typ, help string) {
	w.b = append(w.b, "# HELP "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, ' ')
	w.b = append(w.b, helpEscaper.Replace(help)...)
	w.b = append(w.b, "\n# TYPE "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, ' ')
	w.b = append(w.b, typ...)
	w.b = append(w.b, '\n')
}

// sample writes one sample line; extra, when its name is set, is one more
// label (a histogram bucket's le).
func (w *expoWriter) sample(name string, ls []label, v float64) {
	w.sampleWith(name, ls, label{}, v)
}

func (w *expoWriter) sampleWith(name string, ls []label, extra label, v float64) {
	w.b = append(w.b, name...)
	w.sorted = append(w.sorted[:0], ls...)
	if extra.name != "" {
		w.sorted = append(w.sorted, extra)
	}
	w.b = appendLabels(w.b, w.sorted)
	w.b = append(w.b, ' ')
	w.b = appendGoFloat(w.b, v)
	w.b = append(w.b, '\n')
}

// createdValue is the creation time of the next child: process start plus
// 21.2µs per child (prometheus_client children are created one after another).
func (w *expoWriter) createdValue() float64 {
	w.created++
	return unixSeconds(w.s.started) + float64(w.created)*21.2e-6
}

func (w *expoWriter) engineLabels(e *engine) []label {
	ls := []label{{"model_name", e.model}}
	if w.v.engineLabel {
		ls = append(ls, label{"engine", fmt.Sprint(e.index)})
	}
	return ls
}

func createdName(name string) string {
	return strings.TrimSuffix(name, "_total") + "_created"
}

type child struct {
	ls []label
	v  float64
	h  *histogram
}

func (w *expoWriter) family(f famSpec) {
	if f.cond != nil && !f.cond(w.s) {
		return
	}
	if f.custom != nil {
		f.custom(w)
		return
	}
	vals := f.extraVal
	if f.extraVals != nil {
		vals = f.extraVals(w.s)
	}
	var children []child
	for _, e := range w.s.allEngines() {
		base := w.engineLabels(e)
		if (f.finished || isFinishedHist(f.hist)) && w.v.priorityLabel && e.priorityPolicy() {
			children = append(children, w.priorityChildren(f, e, base, vals)...)
			continue
		}
		switch {
		case f.hist != "":
			h := e.stats.hist[f.hist]
			if f.onlySeen && h.count == 0 {
				continue
			}
			children = append(children, child{ls: base, h: h})
		case f.extra != "":
			for _, x := range vals {
				v := f.byExtra(e, x)
				if f.onlySeen && v == 0 {
					continue
				}
				children = append(children, child{ls: append(append([]label(nil), base...), label{f.extra, x}), v: v})
			}
		case f.gauge != nil:
			children = append(children, child{ls: base, v: f.gauge(e)})
		default:
			children = append(children, child{ls: base, v: f.counter(e.stats)})
		}
	}
	w.render(f, children)
}

// render writes family f's children (none: nothing, as prometheus_client
// writes no family without children) and their _created samples.
func (w *expoWriter) render(f famSpec, children []child) {
	if len(children) == 0 {
		return
	}
	w.header(f.name, f.typ, f.help)
	for _, c := range children {
		if c.h != nil {
			w.histogram(f.name, c.ls, c.h)
		} else {
			w.sample(f.name, c.ls, c.v)
		}
	}
	w.createdFamily(f, children)
}

func isFinishedHist(key string) bool {
	for _, k := range finishedHists {
		if k == key {
			return true
		}
	}
	return false
}

// priorityChildren are a finished-request family's children under the
// priority policy: one per priority label seen on this engine, in
// priorityLabels order (vLLM creates a priority child when a request with
// that priority finishes; no child exists before).
func (w *expoWriter) priorityChildren(f famSpec, e *engine, base []label, vals []string) []child {
	var out []child
	for _, pl := range priorityLabels {
		ps := e.stats.prio[pl]
		if ps == nil {
			continue
		}
		ls := append(append([]label(nil), base...), label{"priority", pl})
		if f.hist != "" {
			out = append(out, child{ls: ls, h: ps.hist[f.hist]})
			continue
		}
		for _, x := range vals {
			out = append(out, child{ls: append(append([]label(nil), ls...), label{f.extra, x}), v: f.prioExtra(ps, x)})
		}
	}
	return out
}

// createdFamily renders the _created gauge family of a counter or histogram
// (V1 single-process mode).
func (w *expoWriter) createdFamily(f famSpec, children []child) {
	if w.v.created && f.typ != kGauge {
		cn := f.name + "_created"
		if f.typ == kCounter {
			cn = createdName(f.name)
		}
		w.header(cn, kGauge, f.help)
		for _, c := range children {
			w.sample(cn, c.ls, w.createdValue())
		}
	}
}

func (w *expoWriter) histogram(name string, ls []label, h *histogram) {
	if w.v.sumFirst {
		w.sample(name+"_sum", ls, h.sum)
	}
	bucket := name + "_bucket"
	var c float64
	for i, n := range h.counts {
		c += n
		le := math.Inf(1)
		if i < len(h.bounds) {
			le = h.bounds[i]
		}
		w.sampleWith(bucket, ls, label{"le", w.leString(le)}, c)
	}
	w.sample(name+"_count", ls, h.count)
	if !w.v.sumFirst {
		w.sample(name+"_sum", ls, h.sum)
	}
}

// leString is goFloat(le), made once per bound and render.
func (w *expoWriter) leString(le float64) string {
	if s, ok := w.les[le]; ok {
		return s
	}
	if w.les == nil {
		w.les = map[float64]string{}
	}
	s := goFloat(le)
	w.les[le] = s
	return s
}

// renderMetricsLocked renders the whole /metrics body.
func (s *Sim) renderMetricsLocked() []byte {
	// The body is written into one slice the size of the last one (a 16
	// models x 8 engines body is 4 MB: growing it by doubling, and
	// rendering each label set and value into its own string, once cost
	// more than the rest of the render).
	w := &expoWriter{s: s, v: s.version, b: make([]byte, 0, s.lastMetricsLen+s.lastMetricsLen/8+4096)}
	mp := s.cfg.APIServerCount > 1 && s.version.name != MetricsV0
	if mp {
		// --api-server-count > 1: prometheus_client multiprocess mode.
		v := *s.version
		v.created, v.sumFirst = false, true
		w.v = &v
	}
	for _, f := range s.families {
		if mp && f.process {
			continue
		}
		w.family(f)
	}
	s.lastMetricsLen = len(w.b)
	return w.b
}

// Metrics renders /metrics as the configured vLLM version would, at Now.
func (s *Sim) Metrics() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.cfg.VirtualClock {
		s.advanceLocked(time.Now())
	}
	return s.renderMetricsLocked()
}

// WriteMetrics writes Metrics() to out.
func (s *Sim) WriteMetrics(out io.Writer) error {
	_, err := out.Write(s.Metrics())
	return err
}

func boolPy(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func (w *expoWriter) cacheConfig(extra func(e *engine) []label) {
	w.header("vllm:cache_config_info", kGauge, helpCacheCfg)
	seen := false
	for _, e := range w.s.allEngines() {
		if !w.v.engineLabel && seen {
			break // V0: one child, no engine label
		}
		seen = true
		c := w.s.cfg
		ls := []label{{"block_size", fmt.Sprint(c.BlockSize)}, {"cache_dtype", "auto"},
			{"enable_prefix_caching", boolPy(!c.DisablePrefixCaching)}, {"gpu_memory_utilization", "0.9"},
			{"is_attention_free", "False"}, {"num_gpu_blocks", fmt.Sprint(c.NumGPUBlocks)},
			{"num_gpu_blocks_override", "None"}, {"sliding_window", "None"}}
		if w.v.engineLabel {
			ls = append(ls, label{"engine", fmt.Sprint(e.index)})
		}
		w.sample("vllm:cache_config_info", append(ls, extra(e)...), 1)
	}
}

func cacheConfigV1(w *expoWriter) {
	c := w.s.cfg
	tokens := c.NumGPUBlocks * c.BlockSize
	w.cacheConfig(func(*engine) []label {
		return []label{{"kv_cache_dtype_skip_layers", "[]"},
			{"kv_cache_max_concurrency", fmt.Sprintf("%.2f", float64(tokens)/float64(c.MaxModelLen))},
			{"kv_cache_memory_bytes", "None"}, {"kv_cache_size_tokens", fmt.Sprint(tokens)},
			{"kv_offloading_backend", "native"}, {"kv_offloading_size", "None"}, {"kv_sharing_fast_prefill", "False"},
			{"mamba_block_size", "None"}, {"mamba_cache_dtype", "auto"}, {"mamba_cache_mode", "none"},
			{"mamba_page_size_padded", "None"}, {"mamba_ssm_cache_dtype", "auto"}, {"num_cpu_blocks", "0"},
			{"prefix_cache_retention_interval", "0"}, {"prefix_caching_hash_algo", "sha256"}, {"prefix_match_unit", "None"},
			{"replayssm_buffer_len", "16"}, {"skip_page_size_padded", "None"}, {"use_kda_recoverssm", "False"},
			{"use_replayssm", "False"}, {"user_specified_block_size", "False"}, {"user_specified_mamba_block_size", "False"}}
	})
}

func cacheConfigV1_0_10(w *expoWriter) {
	w.cacheConfig(func(*engine) []label {
		return []label{{"calculate_kv_scales", "False"}, {"cpu_offload_gb", "0"}, {"kv_sharing_fast_prefill", "False"},
			{"mamba_cache_dtype", "auto"}, {"mamba_ssm_cache_dtype", "auto"}, {"num_cpu_blocks", "None"},
			{"prefix_caching_hash_algo", "builtin"}, {"swap_space", "4"}}
	})
}

func cacheConfigV0(w *expoWriter) {
	w.cacheConfig(func(*engine) []label {
		return []label{{"calculate_kv_scales", "False"}, {"cpu_offload_gb", "0"}, {"num_cpu_blocks", "2048"},
			{"swap_space_bytes", "4294967296"}}
	})
}

// pythonProcessFamilies are prometheus_client's default collectors (V1
// single-process mode). Values are plausible and grow with uptime.
func pythonProcessFamilies() []famSpec {
	gen := []string{"0", "1", "2"}
	up := func(w *expoWriter) float64 { return math.Max(0, w.s.now.Sub(w.s.started).Seconds()) }
	perGen := func(name, help string, base [3]float64, perSec [3]float64) famSpec {
		return famSpec{name: name, typ: kCounter, help: help, process: true, custom: func(w *expoWriter) {
			w.header(name, kCounter, help)
			for i, g := range gen {
				w.sample(name, []label{{"generation", g}}, math.Floor(base[i]+perSec[i]*up(w)))
			}
		}}
	}
	simple := func(name, typ, help string, v func(w *expoWriter) float64) famSpec {
		return famSpec{name: name, typ: typ, help: help, process: true, custom: func(w *expoWriter) {
			w.header(name, typ, help)
			w.sample(name, nil, v(w))
		}}
	}
	return []famSpec{
		perGen("python_gc_objects_collected_total", "Objects collected during gc", [3]float64{12286, 1244, 1326}, [3]float64{2.1, 0.3, 0.05}),
		perGen("python_gc_objects_uncollectable_total", "Uncollectable objects found during GC", [3]float64{}, [3]float64{}),
		perGen("python_gc_collections_total", "Number of times this generation was collected", [3]float64{1203, 109, 7}, [3]float64{0.25, 0.02, 0.001}),
		{name: "python_info", typ: kGauge, help: "Python platform information", process: true, custom: func(w *expoWriter) {
			w.header("python_info", kGauge, "Python platform information")
			w.sample("python_info", []label{{"implementation", "CPython"}, {"major", "3"}, {"minor", "12"}, {"patchlevel", "11"}, {"version", "3.12.11"}}, 1)
		}},
		simple("process_virtual_memory_bytes", kGauge, "Virtual memory size in bytes.", func(*expoWriter) float64 { return 1.576312832e+10 }),
		simple("process_resident_memory_bytes", kGauge, "Resident memory size in bytes.", func(*expoWriter) float64 { return 2.14308864e+09 }),
		simple("process_start_time_seconds", kGauge, "Start time of the process since unix epoch in seconds.", func(w *expoWriter) float64 {
			return math.Round(unixSeconds(w.s.started)*100) / 100
		}),
		simple("process_cpu_seconds_total", kCounter, "Total user and system CPU time spent in seconds.", func(w *expoWriter) float64 {
			return math.Round((31.5+0.35*up(w))*100) / 100
		}),
		simple("process_open_fds", kGauge, "Number of open file descriptors.", func(*expoWriter) float64 { return 118 }),
		simple("process_max_fds", kGauge, "Maximum number of open file descriptors.", func(*expoWriter) float64 { return 1048576 }),
	}
}
