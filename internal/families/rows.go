package families

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// Schemas the detector reports (vllm_exporter_vllm_schema_info{schema}).
const (
	SchemaV0       = "v0"        // V0 engine (default through 0.7.x, optional to 0.10.x)
	SchemaV1Legacy = "v1-legacy" // V1 engine before the 0.9.2 renames (gpu_cache_usage_perc, gpu_prefix_cache_*)
	SchemaV1       = "v1"        // V1 engine with kv_cache_usage_perc (0.9.2+)
	SchemaNone     = "none"      // no vllm:* family at all (--disable-log-stats, or not vLLM)
)

// Bounds on label values the rows keep, and the drop reasons they count
// under (vllm_exporter_samples_dropped_total{reason}).
const (
	// MaxFinishedReasons: vLLM has five finished reasons (2026).
	MaxFinishedReasons      = 16
	DropFinishedReasonLimit = "finished_reason_limit"
	// MaxLoRAAdapters bounds the adapters kept per list of
	// vllm:lora_requests_info (running, waiting).
	MaxLoRAAdapters      = 32
	DropLoRAAdapterLimit = "lora_adapter_limit"
	// MaxMapLabels bounds the other label-keyed maps (waiting reasons,
	// prompt-token sources, HTTP statuses, sleep resources).
	MaxMapLabels = 16
)

// MapLimit is the bound of the label-keyed maps that are not vLLM's own
// enumerations.
var MapLimit = Limit{Max: MaxMapLabels}

func always(string, func(string) bool) bool { return true }
func v1Only(s string, _ func(string) bool) bool {
	return s == SchemaV1Legacy || s == SchemaV1
}

// afterGPUNamesGone: the per-request TPOT histogram arrived (≈0.11) together
// with the hiding of the gpu_* names, so its absence is only news once
// gpu_cache_usage_perc is gone too.
func afterGPUNamesGone(s string, has func(string) bool) bool {
	return s == SchemaV1 && !has("vllm:gpu_cache_usage_perc")
}

// cacheConfigLabels are the vllm:cache_config_info labels re-exported. vLLM
// changes that label set every release; these five exist in all of them.
var cacheConfigLabels = []string{"block_size", "num_gpu_blocks", "gpu_memory_utilization", "enable_prefix_caching", "cache_dtype"}

// The states vLLM documents, most awake first. Sleep level n is
// sleepStates[n]; a resource in one of servingStates serves.
var (
	sleepStates    = []string{"awake", "weights_offloaded", "discard_all"}
	resourceStates = []string{"running", "resident", "paused", "offloaded", "released", "discarded", "unknown"}
	servingStates  = resourceStates[:2]
)

// vLLM's label values and default bucket bounds the rows name.
var (
	// finishedReasons are V1's (FINISH_REASON_STRINGS), created ahead of use.
	finishedReasons = []string{"stop", "length", "abort", "error", "repetition"}
	// transferTypes are the older offload layout's: a load from the CPU
	// tier, a store to it.
	transferTypes   = []string{"CPU_to_GPU", "GPU_to_CPU"}
	ttftBuckets     = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets      = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	latencyBuckets  = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	kvBlockBuckets  = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800}
	nixlPostBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0}
	// nixlByteBuckets: 2 KiB to 8 GiB by powers of 4.
	nixlByteBuckets = func() []float64 {
		var out []float64
		for i := 1; i < 25; i += 2 {
			out = append(out, math.Ldexp(1, 10+i))
		}
		return out
	}()
	mooncakeBuckets = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2}
)

// families is the family table: one row per vLLM family the exporter reads
// (see family). docs/exporter.md shows it rendered by MarkdownTable, so code
// and documentation cannot drift apart. Rows without Expected are never
// reported missing: they come with a feature, a flag or a newer version.
var Rows = []Family{
	{Exported: "vllm_requests_running", Names: []Name{{Name: "vllm:num_requests_running", Help: "Number of requests in model execution batches.", Sim: Sim{Source: "running"}},
		{Server: ServerSGLang, Name: "sglang:num_running_reqs", Help: "The number of running requests", Sim: Sim{Source: "running"}, Keep: priorityTotal, Note: "the `priority=\"\"` total; one series per `dp_rank`"},
		{Server: ServerSGLang, Name: "sglang:num_requests_running", Help: "Number of requests currently running on GPU", Note: "2024 releases (label `name`)"},
		{Server: ServerTRTLLM, Name: "trtllm_num_requests_running", Help: "Number of requests currently running.", Sim: Sim{Source: "running_at_finish"}, Note: "as of the last request completion (iteration stats)"}}, Type: Gauge, Scope: ScopeEngine, Agg: Sum,
		Value:  func(m *snapshot.Model) *snapshot.Value { return &m.Running },
		Engine: func(e *snapshot.EngineGauges) *snapshot.Value { return &e.Running },
		Help:   "Requests running on the engine, summed over engines; from vllm:num_requests_running.", EngineHelp: "Requests running on one data-parallel engine; from vllm:num_requests_running.",
		Expected: always, Versions: "all versions"},
	{Exported: "vllm_requests_waiting", Names: []Name{{Name: "vllm:num_requests_waiting", Help: "Number of requests waiting to be processed.", Sim: Sim{Source: "waiting"}},
		{Server: ServerSGLang, Name: "sglang:num_queue_reqs", Help: "The number of requests in the waiting queue", Sim: Sim{Source: "waiting"}, Keep: priorityTotal},
		{Server: ServerSGLang, Name: "sglang:num_prefill_bootstrap_queue_reqs", Help: "The number of requests in the prefill bootstrap queue", Sim: Sim{Source: "zero"}, Plus: true, Keep: priorityTotal, Note: "plus the P/D queues (bootstrap, prealloc, inflight, transfer)"},
		{Server: ServerSGLang, Name: "sglang:num_prefill_prealloc_queue_reqs", Help: "The number of requests in the prefill prealloc queue", Sim: Sim{Source: "zero"}, Plus: true, Keep: priorityTotal},
		{Server: ServerSGLang, Name: "sglang:num_prefill_inflight_queue_reqs", Help: "The number of requests in the prefill inflight queue", Sim: Sim{Source: "zero"}, Plus: true, Keep: priorityTotal},
		{Server: ServerSGLang, Name: "sglang:num_decode_prealloc_queue_reqs", Help: "The number of requests in the decode prealloc queue", Sim: Sim{Source: "zero"}, Plus: true, Keep: priorityTotal},
		{Server: ServerSGLang, Name: "sglang:num_decode_transfer_queue_reqs", Help: "The number of requests in the decode transfer queue", Sim: Sim{Source: "zero"}, Plus: true, Keep: priorityTotal},
		{Server: ServerSGLang, Name: "sglang:num_requests_waiting", Help: "Number of requests waiting to be processed.", Note: "2024 releases"},
		{Server: ServerTRTLLM, Name: "trtllm_num_requests_waiting", Help: "Number of requests waiting to be scheduled.", Sim: Sim{Source: "waiting_at_finish"}, Note: "as of the last request completion"}}, Type: Gauge, Scope: ScopeEngine, Agg: Sum,
		Value:  func(m *snapshot.Model) *snapshot.Value { return &m.Waiting },
		Engine: func(e *snapshot.EngineGauges) *snapshot.Value { return &e.Waiting },
		Help:   "Requests waiting to be scheduled, summed over engines; from vllm:num_requests_waiting.", EngineHelp: "Requests waiting on one data-parallel engine; from vllm:num_requests_waiting.",
		Expected: always, Versions: "all versions (≈0.20+: includes deferred requests)"},
	{Exported: "vllm_requests_swapped", Names: []Name{{Name: "vllm:num_requests_swapped", Help: "Number of requests swapped to CPU.", Sim: Sim{Source: "zero"}}}, Type: Gauge, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.Swapped },
		Help:     "Requests swapped to CPU (V0 engine only); from vllm:num_requests_swapped.",
		OptIn:    true,
		Versions: "V0 only, ≤0.9.0"},
	{Exported: "vllm_kv_cache_usage_ratio", Names: []Name{{Name: "vllm:kv_cache_usage_perc", Help: "KV-cache usage. 1 means 100 percent usage.", Sim: Sim{Source: "kv_usage"}}, {Name: "vllm:gpu_cache_usage_perc", Help: "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead.", Sim: Sim{Source: "kv_usage"}},
		{Server: ServerSGLang, Name: "sglang:token_usage", Help: "The token usage", Sim: Sim{Source: "kv_usage"}, Note: "a ratio in every release (max over the pools)"},
		{Server: ServerTRTLLM, Name: "trtllm_kv_cache_utilization", Help: "KV cache utilization (used / max blocks).", Sim: Sim{Source: "kv_at_finish"}, Note: "as of the last request completion"}}, Type: Gauge, Scope: ScopeEngine, Agg: Max,
		Value:      func(m *snapshot.Model) *snapshot.Value { return &m.KVUsage },
		Engine:     func(e *snapshot.EngineGauges) *snapshot.Value { return &e.KVUsage },
		Help:       "GPU KV-cache usage 0..1, max over engines; from vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc.",
		EngineHelp: "GPU KV-cache usage 0..1 of one data-parallel engine; from vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc.",
		Expected:   always, Versions: "`kv_cache_usage_perc` 0.9.2+; `gpu_cache_usage_perc` V0 and V1 ≤0.11 (hidden ≈0.11, removed ≈0.12)"},
	{Exported: "vllm_cpu_kv_cache_usage_ratio", Names: []Name{{Name: "vllm:cpu_cache_usage_perc", Help: "CPU KV-cache usage. 1 means 100 percent usage.", Sim: Sim{Source: "zero"}}}, Type: Gauge, Agg: Max,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.CPUKVUsage },
		Help:     "CPU KV-cache usage 0..1 (V0 engine only); from vllm:cpu_cache_usage_perc.",
		OptIn:    true,
		Versions: "V0 only, ≤0.9.0"},
	{Exported: "vllm_preemptions_total", Names: []Name{{Name: "vllm:num_preemptions_total", Help: "Cumulative number of preemption from the engine.", Sim: Sim{Source: "preemptions"}},
		{Server: ServerSGLang, Name: "sglang:num_retracted_requests_total", Help: "The number of retracted requests", Sim: Sim{Source: "preemptions"}, Note: "retractions, SGLang's preemptions (≈2025-12+)"},
		{Server: ServerSGLang, Name: "sglang:total_retracted_reqs", Help: "The total number of retracted requests due to kvcache full", Note: "a gauge holding the cumulative count (2025-10 releases)"}}, Type: Counter, Agg: Sum,
		NotFrom:  map[string]string{ServerTRTLLM: "no preemption counter (`trtllm_num_paused_requests` is a gauge): the preemption SLO and too_many_sequences are unavailable"},
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.Preemptions },
		Help:     "Preemptions, summed over engines; from vllm:num_preemptions_total.",
		Expected: always, Versions: "all versions",
		Windows: []Window{
			PerSecond("vllm_preemptions_per_second", "Preemptions per second over the window; derived from vllm:num_preemptions_total.",
				func(d *snapshot.Derived) *snapshot.Value { return &d.PreemptionsPerSecond }),
			{Series: "vllm_preemptions_per_request_ratio", Help: "Preemptions per finished request over the window (can exceed 1: a request may be preempted several times), absent when no request finished; from vllm:num_preemptions_total and vllm:request_success_total.",
				Field: func(d *snapshot.Derived) *snapshot.Value { return &d.PreemptionsPerRequest },
				Of:    func(w Span) snapshot.Value { return Ratio(w.Inc(""), w.Inc("vllm_requests_finished_total")) }},
		}},
	{Exported: "vllm_prompt_tokens_total", Names: []Name{{Name: "vllm:prompt_tokens_total", Help: "Number of prefill tokens processed.", Sim: Sim{Source: "prompt_tokens"}},
		{Server: ServerSGLang, Name: "sglang:realtime_tokens_total", Help: "The number of tokens processed in real time, by mode", Sim: Sim{Source: "realtime_tokens", Label: "mode", Values: []string{"prefill_compute", "prefill_cache", "decode"}}, Keep: labelIs("mode", "prefill_compute", "prefill_cache"), Note: "`mode` prefill_compute + prefill_cache, counted per step"},
		{Server: ServerSGLang, Name: "sglang:prompt_tokens_total", Help: "Number of prefill tokens processed.", Sim: Sim{Source: "finished_prompt_tokens", Label: "is_streaming", Values: []string{"true"}, PerModel: true}, AtCompletion: true, Note: "else per finished request"},
		{Server: ServerTRTLLM, Name: "trtllm_prompt_tokens_total", Help: "Number of prefill tokens processed.", Sim: Sim{Source: "finished_prompt_tokens"}, AtCompletion: true, Note: "per finished request"}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.PromptTokens },
		Help:     "Prompt (prefill) tokens processed, summed over engines; from vllm:prompt_tokens_total.",
		Expected: always, Versions: "all versions",
		Windows: []Window{
			PerSecond("vllm_prompt_tokens_per_second", "Prompt tokens per second over the window; derived from vllm:prompt_tokens_total.",
				func(d *snapshot.Derived) *snapshot.Value { return &d.PromptTokensPerSecond }),
		}},
	{Exported: "vllm_generation_tokens_total", Names: []Name{{Name: "vllm:generation_tokens_total", Help: "Number of generation tokens processed.", Sim: Sim{Source: "generation_tokens"}},
		{Server: ServerSGLang, Name: "sglang:realtime_tokens_total", Keep: labelIs("mode", "decode"), Note: "`mode` decode, counted per step"},
		{Server: ServerSGLang, Name: "sglang:generation_tokens_total", Help: "Number of generation tokens processed.", Sim: Sim{Source: "finished_generation_tokens", Label: "is_streaming", Values: []string{"true"}, PerModel: true}, AtCompletion: true, Note: "else per finished request"},
		{Server: ServerTRTLLM, Name: "trtllm_generation_tokens_total", Help: "Number of generation tokens processed.", Sim: Sim{Source: "finished_generation_tokens"}, AtCompletion: true, Note: "per finished request"}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.GenerationTokens },
		Help:     "Generated tokens, summed over engines; from vllm:generation_tokens_total.",
		Expected: always, Versions: "all versions",
		Windows: []Window{
			PerSecond("vllm_generation_tokens_per_second", "Generated tokens per second over the window; derived from vllm:generation_tokens_total.",
				func(d *snapshot.Derived) *snapshot.Value { return &d.GenerationTokensPerSecond }),
		}},
	{Exported: "vllm_prefix_cache_queries_total", Names: []Name{{Name: "vllm:prefix_cache_queries_total", Help: "Prefix cache queries, in terms of number of queried tokens.", Sim: Sim{Source: "prefix_queries"}}, {Name: "vllm:gpu_prefix_cache_queries_total", Help: "GPU prefix cache queries, in terms of number of queriedtokens. DEPRECATED: Use vllm:prefix_cache_queries instead.", Sim: Sim{Source: "prefix_queries"}},
		{Server: ServerSGLang, Name: "sglang:realtime_tokens_total", Keep: labelIs("mode", "prefill_compute", "prefill_cache"), Note: "prompt tokens looked up: prefill_compute + prefill_cache"},
		{Server: ServerSGLang, Name: "sglang:prompt_tokens_total", AtCompletion: true, Note: "else prompt tokens of finished requests"},
		{Server: ServerTRTLLM, Name: "trtllm_prompt_tokens_total", AtCompletion: true, Note: "prompt tokens of finished requests"}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.PrefixQueries },
		Help:     "Prefix-cache queries in tokens (blocks before vLLM 0.9.0), summed over engines; from vllm:prefix_cache_queries_total or vllm:gpu_prefix_cache_queries_total.",
		Expected: v1Only, Versions: "V1 only: `gpu_prefix_cache_*` 0.8.0–≈0.11 (blocks before 0.9.0, tokens after); `prefix_cache_*` 0.9.2+. V0 has no counters"},
	{Exported: "vllm_prefix_cache_hits_total", Names: []Name{{Name: "vllm:prefix_cache_hits_total", Help: "Prefix cache hits, in terms of number of cached tokens.", Sim: Sim{Source: "prefix_hits"}}, {Name: "vllm:gpu_prefix_cache_hits_total", Help: "GPU prefix cache hits, in terms of number of cached tokens. DEPRECATED: Use vllm:prefix_cache_hits instead.", Sim: Sim{Source: "prefix_hits"}},
		{Server: ServerSGLang, Name: "sglang:realtime_tokens_total", Keep: labelIs("mode", "prefill_cache"), Note: "`mode` prefill_cache"},
		{Server: ServerSGLang, Name: "sglang:cached_tokens_total", Help: "Number of cached prompt tokens", Sim: Sim{Source: "finished_cached_tokens", Label: "cache_source", Values: []string{"device"}, PerModel: true}, Keep: localCache, AtCompletion: true, Note: "else `cache_source` device (or total); appears with the first hit"},
		{Server: ServerTRTLLM, Name: "trtllm_prompt_cached_tokens_total", Help: "Number of prompt tokens served from the KV cache.", Sim: Sim{Source: "finished_cached_tokens"}, AtCompletion: true}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.PrefixHits },
		Help:     "Prefix-cache hits in tokens (blocks before vLLM 0.9.0), summed over engines; from vllm:prefix_cache_hits_total or vllm:gpu_prefix_cache_hits_total.",
		Expected: v1Only, Versions: "as prefix_cache_queries",
		Windows: []Window{
			RatioTo("vllm_prefix_cache_queries_total", "vllm_prefix_cache_hit_ratio", "Prefix-cache hit ratio 0..1 (hits / queries) over the window, absent without queries; from vllm:prefix_cache_hits_total and vllm:prefix_cache_queries_total (or the gpu_ names).",
				func(d *snapshot.Derived) *snapshot.Value { return &d.PrefixCacheHitRatio }),
		}},
	{Exported: "vllm_requests_finished_total", Names: []Name{{Name: "vllm:request_success_total", Help: "Count of successfully processed requests.", Sim: Sim{Source: "success", Label: "finished_reason", Values: finishedReasons}},
		{Server: ServerSGLang, Name: "sglang:num_requests_total", Help: "Number of requests processed", Sim: Sim{Source: "finished_requests", Label: "is_streaming", Values: []string{"true"}, PerModel: true}, Note: "no finish reason: `finished_reason=\"unknown\"`"},
		{Server: ServerSGLang, Name: "sglang:num_aborted_requests_total", Help: "Number of requests aborted", Sim: Sim{Source: "aborted_requests", PerModel: true}, Plus: true, Note: "plus client aborts as `abort` (one aborted while running is also among SGLang's finished: counted twice in the total)"},
		{Server: ServerTRTLLM, Name: "trtllm_request_success_total", Help: "Count of successfully processed requests.", Sim: Sim{Source: "trtllm_success", Label: "finished_reason", Values: trtllmFinishedReasons}, Note: "`cancelled` as `abort`"},
		{Server: ServerTRTLLM, Name: "trtllm_request_error_total", Help: "Count of requests that failed, by HTTP status code.", Plus: true, Note: "plus failed requests as `error`"},
		{Server: ServerTRTLLM, Name: "request_success_total", Help: "Count of successfully processed requests.", Note: "the first releases (no prefix)"}}, Type: Counter, Agg: Sum,
		Label: "finished_reason", Limit: Limit{Max: MaxFinishedReasons, Drop: DropFinishedReasonLimit}, Key: finishedReason,
		Map:      func(m *snapshot.Model) *map[string]float64 { return &m.FinishedByReason },
		Help:     "Finished requests by finish reason, summed over engines; from vllm:request_success_total.",
		Expected: always, Versions: "all versions, label `finished_reason` (V1 pre-creates stop/length/abort/error/repetition; V0 only after first use)",
		Windows: []Window{
			{Series: "vllm_requests_finished_per_second", Help: "Finished requests per second over the window by finish reason; derived from vllm:request_success_total.",
				ByLabel: func(d *snapshot.Derived) *map[string]float64 { return &d.FinishedPerSecondByReason }},
			PerSecond("", "", func(d *snapshot.Derived) *snapshot.Value { return &d.RequestsPerSecond }),
		}},
	{Exported: "vllm_requests_corrupted_total", Names: []Name{{Name: "vllm:corrupted_requests_total", Help: "Corrupted requests, in terms of total number of requests with NaNs in logits.", Sim: Sim{}}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.CorruptedRequests },
		Help:     "Requests whose logits contained NaNs (corrupted output), summed over engines; from vllm:corrupted_requests_total.",
		OptIn:    true,
		Versions: "≈0.12+ (#27306, 2025-11), only with the environment variable `VLLM_COMPUTE_NANS_IN_LOGITS` set"},
	{Exported: "vllm_requests_rejected_total", Names: []Name{{Name: "vllm:admission_rejections_total", Help: "Number of requests rejected at admission because the waiting queue is full.", Sim: Sim{Source: "admission_rejections", Label: "reason", Values: []string{"max_num_queued_reqs", "max_num_queued_tokens"}, When: "admission"}}}, Type: Counter, Agg: Sum,
		Label: "reason", Limit: MapLimit,
		Map:      func(m *snapshot.Model) *map[string]float64 { return &m.RejectedByReason },
		Help:     "Requests refused at admission (HTTP 503) because the waiting queue was at --max-num-queued-requests or --max-num-queued-tokens, by reason, summed over engines; from vllm:admission_rejections_total.",
		Versions: "0.32+ (admission control, flags from 2026-07), label `reason` (`max_num_queued_reqs`, `max_num_queued_tokens`); rejected requests never reach `request_success_total`",
		Windows: []Window{
			PerSecond("", "", func(d *snapshot.Derived) *snapshot.Value { return &d.RejectedPerSecond }),
		}},
	{Exported: "vllm_kv_transfer_failures_total", Names: []Name{{Name: "vllm:nixl_num_failed_transfers_total", Help: "Number of failed NIXL KV Cache transfers.", Sim: Sim{Source: "nixl_failed_transfers", When: "nixl"}}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.KVTransferFailures },
		Help:     "Failed KV-cache transfers of the NIXL connector (disaggregated prefill/decode), summed over engines; from vllm:nixl_num_failed_transfers_total.",
		Versions: nixlVersions,
		Windows: []Window{
			PerSecond("", "", func(d *snapshot.Derived) *snapshot.Value { return &d.KVTransferFailuresPerSecond }),
		}},
	{Exported: "vllm_kv_transfer_notification_failures_total", Names: []Name{{Name: "vllm:nixl_num_failed_notifications_total", Help: "Number of failed NIXL KV Cache notifications.", Sim: Sim{Source: "nixl_failed_notifications", When: "nixl"}}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.KVTransferNotificationFailures },
		Help:     "Failed KV-transfer notifications of the NIXL connector, summed over engines; from vllm:nixl_num_failed_notifications_total.",
		Versions: nixlVersions},
	{Exported: "vllm_kv_transfer_expired_requests_total", Names: []Name{{Name: "vllm:nixl_num_kv_expired_reqs_total", Help: "Number of requests that had their KV expire.", Sim: Sim{Source: "nixl_expired", When: "nixl"}}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.KVTransferExpiredRequests },
		Help:     "Requests whose KV blocks expired on the prefill side before the decode side read them (NIXL connector), summed over engines; from vllm:nixl_num_kv_expired_reqs_total.",
		Versions: nixlVersions + "; added after the other nixl_* families",
		Windows: []Window{
			PerSecond("", "", func(d *snapshot.Derived) *snapshot.Value { return &d.KVTransferExpiredPerSecond }),
		}},
	{Exported: "vllm_kv_offload_load_bytes_total", Names: []Name{{Name: "vllm:kv_offload_load_bytes_total", Help: "Total bytes loaded from offload storage to GPU.", Sim: Sim{Source: "offload_load_bytes", When: "offload"}}, {Name: "vllm:kv_offload_total_bytes_total", Help: "Number of bytes offloaded by KV connector", Sim: Sim{Source: "offload_bytes_by_type", Label: "transfer_type", Values: transferTypes, When: "offload_older"}}}, Type: Counter, Agg: Sum,
		Label: "tier", Limit: MapLimit, Key: offloadTier(offloadLoad),
		Map:      func(m *snapshot.Model) *map[string]float64 { return &m.KVOffloadLoadBytes },
		Help:     "Bytes of KV cache loaded from an offload tier into GPU memory, by tier, summed over engines; from vllm:kv_offload_load_bytes_total or vllm:kv_offload_total_bytes_total{transfer_type=\"CPU_to_GPU\"}.",
		Versions: offloadVersions},
	{Exported: "vllm_kv_offload_store_bytes_total", Names: []Name{{Name: "vllm:kv_offload_store_bytes_total", Help: "Total bytes stored from GPU to offload storage.", Sim: Sim{Source: "offload_store_bytes", When: "offload"}}, {Name: "vllm:kv_offload_total_bytes_total"}}, Type: Counter, Agg: Sum,
		Label: "tier", Limit: MapLimit, Key: offloadTier(offloadStore),
		Map:      func(m *snapshot.Model) *map[string]float64 { return &m.KVOffloadStoreBytes },
		Help:     "Bytes of KV cache stored from GPU memory to an offload tier, by tier, summed over engines; from vllm:kv_offload_store_bytes_total or vllm:kv_offload_total_bytes_total{transfer_type=\"GPU_to_CPU\"}.",
		Versions: offloadVersions},
	{Exported: "vllm_kv_offload_load_seconds_total", Names: []Name{{Name: "vllm:kv_offload_load_time_total", Help: "Total load time from offload storage to GPU, in seconds.", Sim: Sim{Source: "offload_load_seconds", When: "offload"}}, {Name: "vllm:kv_offload_total_time_total", Help: "Total time measured by all KV offloading operations", Sim: Sim{Source: "offload_seconds_by_type", Label: "transfer_type", Values: transferTypes, When: "offload_older"}}}, Type: Counter, Agg: Sum,
		Label: "tier", Limit: MapLimit, Key: offloadTier(offloadLoad),
		Map:      func(m *snapshot.Model) *map[string]float64 { return &m.KVOffloadLoadSeconds },
		Help:     "Seconds spent loading KV cache from an offload tier into GPU memory, by tier, summed over engines; from vllm:kv_offload_load_time_total or vllm:kv_offload_total_time_total{transfer_type=\"CPU_to_GPU\"}.",
		Versions: offloadVersions},
	{Exported: "vllm_kv_offload_store_seconds_total", Names: []Name{{Name: "vllm:kv_offload_store_time_total", Help: "Total store time from GPU to offload storage, in seconds.", Sim: Sim{Source: "offload_store_seconds", When: "offload"}}, {Name: "vllm:kv_offload_total_time_total"}}, Type: Counter, Agg: Sum,
		Label: "tier", Limit: MapLimit, Key: offloadTier(offloadStore),
		Map:      func(m *snapshot.Model) *map[string]float64 { return &m.KVOffloadStoreSeconds },
		Help:     "Seconds spent storing KV cache from GPU memory to an offload tier, by tier, summed over engines; from vllm:kv_offload_store_time_total or vllm:kv_offload_total_time_total{transfer_type=\"GPU_to_CPU\"}.",
		Versions: offloadVersions},
	mooncakeRow("vllm_mooncake_store_operations_total", Name{Name: "vllm:mooncake_store_operation_total", Help: "Number of Mooncake store communication operations.", Sim: Sim{Source: "mooncake_ops", When: "mooncake"}}, "",
		func(m *snapshot.Model) *map[string]float64 { return &m.MooncakeOps },
		"Mooncake store operations (KV cache get/put against the Mooncake pool) by operation, summed over status and engines"),
	mooncakeRow("vllm_mooncake_store_operation_errors_total", Name{Name: "vllm:mooncake_store_operation_total"}, "error",
		func(m *snapshot.Model) *map[string]float64 { return &m.MooncakeOpErrors },
		"Mooncake store operations that ended in error (status=\"error\"), by operation, summed over engines"),
	mooncakeRow("vllm_mooncake_store_keys_total", Name{Name: "vllm:mooncake_store_operation_keys_total", Help: "Number of Mooncake store keys touched by operations.", Sim: Sim{Source: "mooncake_keys", When: "mooncake"}}, "",
		func(m *snapshot.Model) *map[string]float64 { return &m.MooncakeKeys },
		"Keys (KV blocks) the Mooncake store operations touched, by operation, summed over status and engines"),
	mooncakeRow("vllm_mooncake_store_bytes_total", Name{Name: "vllm:mooncake_store_operation_bytes_total", Help: "Number of bytes transferred by Mooncake store operations.", Sim: Sim{Source: "mooncake_bytes", When: "mooncake"}}, "",
		func(m *snapshot.Model) *map[string]float64 { return &m.MooncakeBytes },
		"Bytes the Mooncake store operations moved, by operation, summed over status and engines"),
	mooncakeRow("vllm_mooncake_store_failed_keys_total", Name{Name: "vllm:mooncake_store_operation_failed_keys_total", Help: "Number of Mooncake store keys that failed in operations.", Sim: Sim{Source: "mooncake_failed_keys", When: "mooncake"}}, "",
		func(m *snapshot.Model) *map[string]float64 { return &m.MooncakeFailedKeys },
		"Keys that failed in Mooncake store operations, by operation, summed over status and engines"),
	{Exported: "vllm_external_prefix_cache_queries_total", Names: []Name{{Name: "vllm:external_prefix_cache_queries_total", Help: "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.", Sim: Sim{Source: "external_queries"}}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.ExternalPrefixQueries },
		Help:     "Prompt tokens looked up in the external cache of a KV connector (offload tier, P/D peer, LMCache), summed over engines; from vllm:external_prefix_cache_queries_total.",
		Versions: "≈0.11.1+ (#26245, 2025-10-23); registered always, moves only with a KV connector"},
	{Exported: "vllm_external_prefix_cache_hits_total", Names: []Name{{Name: "vllm:external_prefix_cache_hits_total", Help: "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.", Sim: Sim{Source: "external_hits"}}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.ExternalPrefixHits },
		Help:     "Prompt tokens found in the external cache of a KV connector, summed over engines; from vllm:external_prefix_cache_hits_total.",
		Versions: "as external_prefix_cache_queries",
		Windows: []Window{
			RatioTo("vllm_external_prefix_cache_queries_total", "vllm_external_prefix_cache_hit_ratio", "Hit ratio 0..1 of the external cache of a KV connector (offload tier, P/D peer) over the window, in prompt tokens, absent without queries; from vllm:external_prefix_cache_hits_total and vllm:external_prefix_cache_queries_total.", nil),
		}},
	{Exported: "vllm_mm_cache_queries_total", Names: []Name{{Name: "vllm:mm_cache_queries_total", Help: "Multi-modal cache queries, in terms of number of queried items.", Sim: Sim{Source: "zero"}}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.MMCacheQueries },
		Help:     "Multimodal items looked up in the multimodal cache, summed over engines; from vllm:mm_cache_queries_total.",
		OptIn:    true,
		Versions: "≈0.11.1+ (#26285, 2025-10-10)"},
	{Exported: "vllm_mm_cache_hits_total", Names: []Name{{Name: "vllm:mm_cache_hits_total", Help: "Multi-modal cache hits, in terms of number of cached items.", Sim: Sim{Source: "zero"}}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.MMCacheHits },
		Help:     "Multimodal items found in the multimodal cache, summed over engines; from vllm:mm_cache_hits_total.",
		OptIn:    true,
		Versions: "as mm_cache_queries",
		Windows: []Window{
			RatioTo("vllm_mm_cache_queries_total", "vllm_mm_cache_hit_ratio", "Hit ratio 0..1 of the multimodal cache over the window, in items, absent without queries; from vllm:mm_cache_hits_total and vllm:mm_cache_queries_total.", nil),
		}},
	{Exported: "vllm_lora_slots", Names: []Name{{Name: "vllm:lora_requests_info", Help: "Running stats on lora requests.", Sim: Sim{Source: "lora_info", When: "lora"}}}, Type: Gauge, Scope: ScopeServer, Agg: Latest,
		NotFrom: map[string]string{ServerSGLang: "`sglang:lora_pool_slots_*` count pool slots, not adapters per batch"},
		Label:   "adapter", Limit: loraLimit, ReadLabels: readLoRA, Share: shareLoRA,
		Out:      func(_ *snapshot.VLLM, m *snapshot.Model) snapshot.Value { return known(m.LoRA.Known, m.LoRA.Max) },
		Help:     "LoRA adapters one batch can hold (max_lora); from vllm:lora_requests_info.",
		Versions: loraVersions},
	{Exported: "vllm_lora_slots_used", Names: []Name{{Name: "vllm:lora_requests_info"}}, Type: Gauge, Scope: ScopeServer, Agg: Latest,
		Label: "adapter", Limit: loraLimit, ReadLabels: readLoRA, Share: shareLoRA,
		Out: func(_ *snapshot.VLLM, m *snapshot.Model) snapshot.Value {
			return known(m.LoRA.Known, snapshot.Some(float64(len(m.LoRA.Running))))
		},
		Help:     "LoRA adapters with running requests, against vllm_lora_slots; from vllm:lora_requests_info's running_lora_adapters.",
		Versions: loraVersions},
	{Exported: "vllm_lora_adapter_running", Names: []Name{{Name: "vllm:lora_requests_info"}}, Type: Gauge, Scope: ScopeServer, Agg: Latest,
		Label: "adapter", Limit: loraLimit, ReadLabels: readLoRA, Share: shareLoRA,
		Map:      func(m *snapshot.Model) *map[string]float64 { return &m.LoRA.Running },
		Help:     "Per LoRA adapter with running requests, the times vLLM lists it in running_lora_adapters (1: it is in the batch); from vllm:lora_requests_info.",
		Versions: loraVersions},
	{Exported: "vllm_lora_adapter_waiting", Names: []Name{{Name: "vllm:lora_requests_info"}}, Type: Gauge, Scope: ScopeServer, Agg: Latest,
		Label: "adapter", Limit: loraLimit, ReadLabels: readLoRA, Share: shareLoRA,
		Map:      func(m *snapshot.Model) *map[string]float64 { return &m.LoRA.Waiting },
		Help:     "Per LoRA adapter with waiting requests, the times vLLM lists it in waiting_lora_adapters (1: requests wait for it); from vllm:lora_requests_info.",
		Versions: loraVersions},
	{Exported: "vllm_cache_config_info", Names: []Name{{Name: "vllm:cache_config_info", Help: "Information of the LLMEngine CacheConfig", Sim: Sim{Source: "cache_config"}}}, Type: Info, Scope: ScopeServer, Agg: First,
		InfoLabels: cacheConfigLabels,
		Info:       func(m *snapshot.Model) *map[string]string { return &m.CacheConfig },
		Help:       "vLLM's KV-cache configuration as labels, value 1; from vllm:cache_config_info.",
		OptIn:      true,
		Expected:   always, Versions: "all versions; label set changes every release (five are re-exported)"},
	{Exported: "vllm_kv_cache_size_tokens", Names: []Name{{Name: "vllm:cache_config_info", FromLabel: "kv_cache_size_tokens"},
		{Server: ServerSGLang, Name: "sglang:max_total_num_tokens", Help: "Maximum total number of tokens", Sim: Sim{Source: "kv_pool_tokens"}, Note: "its value"}}, Type: Gauge, Scope: ScopeServer, Agg: First,
		NotFrom:  map[string]string{ServerTRTLLM: "only blocks and tokens per block (`trtllm_kv_cache_max_blocks`, `_tokens_per_block`)"},
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.KVCacheSizeTokens },
		Help:     "Tokens the KV-cache pool holds, as vLLM states it; from vllm:cache_config_info's kv_cache_size_tokens label.",
		Versions: "label `kv_cache_size_tokens` ≈0.24+ (#42206, 2026-06); preferred over memory arithmetic in the roofline"},
	{Exported: "vllm_kv_cache_max_concurrency", Names: []Name{{Name: "vllm:cache_config_info", FromLabel: "kv_cache_max_concurrency"}}, Type: Gauge, Scope: ScopeServer, Agg: First,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.KVCacheMaxConcurrency },
		Help:     "Requests of max_model_len tokens the KV-cache pool holds at once, as vLLM states it; from vllm:cache_config_info's kv_cache_max_concurrency label.",
		Versions: "label `kv_cache_max_concurrency` ≈0.24+ (#42206)"},
	{Exported: "vllm_requests_waiting_by_reason", Names: []Name{{Name: "vllm:num_requests_waiting_by_reason", Help: "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.", Sim: Sim{Source: "waiting_by_reason", Label: "reason", Values: []string{"capacity", "deferred"}}},
		{Server: ServerSGLang, Name: "sglang:num_queue_reqs", Keep: priorityTotal, Note: "`capacity`: the waiting queue"},
		{Server: ServerSGLang, Name: "sglang:num_prefill_bootstrap_queue_reqs", Plus: true, Keep: priorityTotal, Note: "`deferred`: the P/D queues"},
		{Server: ServerSGLang, Name: "sglang:num_prefill_prealloc_queue_reqs", Plus: true, Keep: priorityTotal},
		{Server: ServerSGLang, Name: "sglang:num_prefill_inflight_queue_reqs", Plus: true, Keep: priorityTotal},
		{Server: ServerSGLang, Name: "sglang:num_decode_prealloc_queue_reqs", Plus: true, Keep: priorityTotal},
		{Server: ServerSGLang, Name: "sglang:num_decode_transfer_queue_reqs", Plus: true, Keep: priorityTotal}}, Type: Gauge, Agg: Sum,
		Label: "reason", Limit: MapLimit, Key: waitingReason,
		Map:      func(m *snapshot.Model) *map[string]float64 { return &m.WaitingByReason },
		Help:     "Waiting requests by reason (capacity: waiting for scheduling capacity; deferred: held by a transient constraint such as LoRA budget or KV transfer), summed over engines; from vllm:num_requests_waiting_by_reason.",
		Versions: "≈0.20+ (#38435), label `reason` (`capacity`, `deferred`); queueing uses `capacity`"},
	{Exported: "vllm_engine_sleep_level", Names: []Name{{Name: "vllm:engine_sleep_state", Help: "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.", Sim: Sim{Source: "sleep_state", Label: "sleep_state", Values: sleepStates}}}, Type: Gauge, Agg: LeastAwake,
		StateLabel: "sleep_state", States: sleepStates,
		State:    func(m *snapshot.Model) *string { return &m.Sleep.State },
		Settle:   settleSleep,
		Out:      func(_ *snapshot.VLLM, m *snapshot.Model) snapshot.Value { return known(m.Sleep.Known, m.Sleep.Level) },
		Help:     "Deepest sleep level of the model's engines: 0 awake, 1 weights offloaded, 2 weights discarded; from vllm:engine_sleep_state.",
		Versions: "≈0.11.1/0.12+, label `sleep_state` (`awake`, `weights_offloaded` = level 1, `discard_all` = level 2); also read for `vllm_engine_awake`"},
	{Exported: "vllm_engine_awake", Names: []Name{{Name: "vllm:engine_fully_awake", Help: "Whether the engine is fully awake: 1 when scheduling is running and weights and KV cache are resident.", Sim: Sim{Source: "fully_awake"}}}, Type: Gauge, Agg: Min,
		Value:  func(m *snapshot.Model) *snapshot.Value { return &m.Sleep.FullyAwake },
		Settle: settleSleep,
		Out: func(_ *snapshot.VLLM, m *snapshot.Model) snapshot.Value {
			return known(m.Sleep.Known, snapshot.Some(b2f(m.Sleep.Awake)))
		},
		Help:     "1 if every engine of the model is awake, 0 while one is deliberately asleep (sleep mode); from vllm:engine_sleep_state and vllm:engine_fully_awake / engine_sleep_resource_state.",
		Versions: "late 2026 (per-resource sleep model): 0 while any resource sleeps; without it, from `engine_sleep_state`"},
	{Exported: "vllm_engine_sleep_resource_state", Names: []Name{{Name: "vllm:engine_sleep_resource_state", Help: "Engine sleep state per resource; 1 for the resource's current state, 0 for its other states.", Sim: Sim{Source: "sleep_resources"}}}, Type: StateSet, Agg: LeastAwake,
		KeyLabel: "resource", StateLabel: "state", States: resourceStates,
		StateMap: func(m *snapshot.Model) *map[string]string { return &m.Sleep.Resources },
		Settle:   settleSleep,
		Help:     "1 for each engine resource's current sleep state (least awake over engines); from vllm:engine_sleep_resource_state.",
		Versions: "late 2026, labels `resource` (`scheduler`, `weights`, `kv_cache`), `state`"},
	{Exported: "vllm_engine_healthy", Names: []Name{{Name: "vllm:engine_healthy", Help: "Whether the engine reports healthy under fault tolerance.", Sim: Sim{Source: "engine_healthy", When: "fault_tolerance"}}}, Type: Gauge, Scope: ScopeModelOrServer, Agg: Min,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.EngineHealthy },
		Help:     "1 if every engine reports a healthy cached state, else 0 (vLLM --enable-fault-tolerance only); from vllm:engine_healthy.",
		Versions: "late 2026, only with `--enable-fault-tolerance`; labelled by `engine` only, so it applies to every model"},
	{Exported: "vllm_spec_decode_drafts_total", Names: []Name{{Name: "vllm:spec_decode_num_drafts_total", Help: "Number of spec decoding drafts.", Sim: Sim{Source: "spec_drafts", When: "spec_decode"}}}, Type: Counter, Agg: Sum,
		NotFrom:  map[string]string{ServerSGLang: "speculative decoding only as batch-average gauges (`spec_accept_length`, `spec_accept_rate`)", ServerTRTLLM: "drafts are not counted, only draft tokens"},
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.SpecDrafts },
		Help:     "Speculative-decoding drafts, summed over engines; from vllm:spec_decode_num_drafts_total.",
		Versions: "V1 0.8.5+, only with speculative decoding"},
	{Exported: "vllm_spec_decode_draft_tokens_total", Names: []Name{{Name: "vllm:spec_decode_num_draft_tokens_total", Help: "Number of draft tokens.", Sim: Sim{Source: "spec_draft_tokens", When: "spec_decode"}},
		{Server: ServerTRTLLM, Name: "trtllm_spec_decode_drafted_tokens_total", Help: "Number of draft tokens proposed, by token position.", Note: "summed over `token_position`"}}, Type: Counter, Agg: Sum,
		NotFrom:  map[string]string{ServerSGLang: "speculative decoding only as batch-average gauges"},
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.SpecDraftTokens },
		Help:     "Speculative-decoding draft tokens proposed, summed over engines; from vllm:spec_decode_num_draft_tokens_total.",
		Versions: "V1 0.8.3+, only with speculative decoding"},
	{Exported: "vllm_spec_decode_accepted_tokens_total", Names: []Name{{Name: "vllm:spec_decode_num_accepted_tokens_total", Help: "Number of accepted tokens.", Sim: Sim{Source: "spec_accepted", When: "spec_decode"}},
		{Server: ServerTRTLLM, Name: "trtllm_spec_decode_accepted_tokens_total", Help: "Number of draft tokens accepted, by token position.", Note: "summed over `token_position`"}}, Type: Counter, Agg: Sum,
		NotFrom:  map[string]string{ServerSGLang: "speculative decoding only as batch-average gauges"},
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.SpecAcceptedTokens },
		Help:     "Speculative-decoding draft tokens accepted, summed over engines; from vllm:spec_decode_num_accepted_tokens_total.",
		Versions: "V1 0.8.3+, only with speculative decoding",
		Windows: []Window{
			RatioTo("vllm_spec_decode_draft_tokens_total", "vllm_spec_decode_acceptance_ratio", "Accepted / proposed draft tokens over the window, absent without drafts; from vllm:spec_decode_num_accepted_tokens_total and vllm:spec_decode_num_draft_tokens_total.", nil),
			{Series: "vllm_spec_decode_mean_acceptance_length", Help: "Mean tokens a stream gains per decode step over the window, 1 + accepted / drafts (the factor between per-step inter-token latency and per-token time); from vllm:spec_decode_num_accepted_tokens_total and vllm:spec_decode_num_drafts_total.",
				Field: func(d *snapshot.Derived) *snapshot.Value { return &d.SpecMeanAcceptanceLength },
				Of: func(w Span) snapshot.Value {
					r := Ratio(w.Inc(""), w.Inc("vllm_spec_decode_drafts_total"))
					return known(r.OK, snapshot.Some(1+r.V))
				}},
		}},
	{Exported: "vllm_prompt_tokens_by_source_total", Names: []Name{{Name: "vllm:prompt_tokens_by_source_total", Help: "Number of prompt tokens by source.", Sim: Sim{Source: "prompt_by_source", Label: "source", Values: []string{"local_compute", "local_cache_hit", "external_kv_transfer"}}}}, Type: Counter, Agg: Sum,
		Label: "source", Limit: MapLimit,
		Map:      func(m *snapshot.Model) *map[string]float64 { return &m.PromptTokensBySource },
		Help:     "Prompt tokens by source (local_compute, local_cache_hit, external_kv_transfer), summed over engines; from vllm:prompt_tokens_by_source_total.",
		Versions: "≈0.16+ (#33290), label `source` (`local_compute`, `local_cache_hit`, `external_kv_transfer`)"},
	{Exported: "vllm_prompt_tokens_cached_total", Names: []Name{{Name: "vllm:prompt_tokens_cached_total", Help: "Number of cached prompt tokens (local + external).", Sim: Sim{Source: "prompt_cached"}},
		{Server: ServerSGLang, Name: "sglang:realtime_tokens_total", Keep: labelIs("mode", "prefill_cache")},
		{Server: ServerSGLang, Name: "sglang:cached_tokens_total", AtCompletion: true, Note: "else every `cache_source`"},
		{Server: ServerTRTLLM, Name: "trtllm_prompt_cached_tokens_total", AtCompletion: true}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.PromptTokensCached },
		Help:     "Prompt tokens served from the local or external prefix cache, summed over engines; from vllm:prompt_tokens_cached_total.",
		OptIn:    true,
		Versions: "≈0.16+ (#33290)",
		Windows: []Window{
			{Series: "vllm_prompt_tokens_cached_per_second", Help: "Prompt tokens per second served from a prefix cache over the window; from vllm:prompt_tokens_cached_total, else vllm:prompt_tokens_by_source_total (cache hit + KV transfer).",
				Field: func(d *snapshot.Derived) *snapshot.Value { return &d.PromptTokensCachedPerSecond }, Of: cachedTokens},
		}},
	{Exported: "vllm_prompt_tokens_computed_per_second", Names: []Name{{Name: "vllm:request_prefill_kv_computed_tokens", Help: "Histogram of new KV tokens computed during prefill (excluding cached tokens).", Sim: Sim{Source: "prefill_kv_computed", Tokens: true, Custom: "request_tokens"}}}, Type: Gauge, Agg: SumCount,
		NotFrom:    map[string]string{ServerSGLang: "yes, over a window: prompt tokens less the cached ones", ServerTRTLLM: "yes, over a window: prompt tokens less the cached ones"},
		WindowOnly: true,
		Value:      func(m *snapshot.Model) *snapshot.Value { return &m.PrefillKVComputedSum },
		Count:      func(m *snapshot.Model) *snapshot.Value { return &m.PrefillKVComputedCount },
		Versions:   "≈0.13+ (#30189); the computed-token rate's fallback when `prompt_tokens_by_source` is absent",
		Windows: []Window{
			{Series: "vllm_prompt_tokens_computed_per_second", Help: "Prompt tokens per second actually computed in prefill (cache and KV-transfer hits excluded) over the window; from vllm:prompt_tokens_by_source_total{source=\"local_compute\"}, else vllm:prompt_tokens_total minus vllm:prompt_tokens_cached_total, else vllm:request_prefill_kv_computed_tokens_sum.",
				Field: func(d *snapshot.Derived) *snapshot.Value { return &d.PromptTokensComputedPerSecond }, Of: computedTokens},
		}},
	{Exported: "vllm_estimated_flops_per_gpu_total", Names: []Name{{Name: "vllm:estimated_flops_per_gpu_total", Help: "Estimated number of floating point operations per GPU (for Model Flops Utilization calculations).", Sim: Sim{Source: "flops"}},
		{Server: ServerSGLang, Name: "sglang:estimated_flops_per_gpu_total", Help: "The estimated number of floating point operations per GPU", Note: "with --enable-mfu-metrics"}}, Type: Counter, Agg: Mean,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.EstimatedFlops },
		Help:     "vLLM's estimate of floating-point operations per GPU (mean over engines), 0 without --enable-mfu-metrics; from vllm:estimated_flops_per_gpu_total.",
		OptIn:    true,
		Versions: "≈0.17+ (#30950); 0 unless `--enable-mfu-metrics`",
		Windows: []Window{
			{Series: "vllm_estimated_flops_per_second_per_gpu", Help: "vLLM's estimated floating-point operations per second per GPU over the window, absent while the counter does not move; from vllm:estimated_flops_per_gpu_total.",
				Field: func(d *snapshot.Derived) *snapshot.Value { return &d.EstimatedFlopsPerSecond },
				Of: func(w Span) snapshot.Value {
					f := w.Inc("")
					return known(f.OK && f.V > 0, w.Rate(f)) // 0 without --enable-mfu-metrics
				}},
		}},
	{Exported: "vllm_estimated_read_bytes_per_gpu_total", Names: []Name{{Name: "vllm:estimated_read_bytes_per_gpu_total", Help: "Estimated number of bytes read from memory per GPU (for Model Flops Utilization calculations).", Sim: Sim{Source: "read_bytes"}},
		{Server: ServerSGLang, Name: "sglang:estimated_read_bytes_per_gpu_total", Help: "The estimated number of bytes read from memory per GPU", Note: "with --enable-mfu-metrics"}}, Type: Counter, Agg: Mean,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.EstimatedReadBytes },
		Help:     "vLLM's estimate of bytes read from GPU memory per GPU (mean over engines); from vllm:estimated_read_bytes_per_gpu_total.",
		OptIn:    true,
		Versions: "≈0.17+; 0 unless `--enable-mfu-metrics`",
		Windows: []Window{
			{Series: "vllm_estimated_memory_bytes_per_second_per_gpu", Help: "vLLM's estimated GPU-memory bytes read plus written per second per GPU over the window, absent while the counters do not move; from vllm:estimated_read_bytes_per_gpu_total and vllm:estimated_write_bytes_per_gpu_total.",
				Field: func(d *snapshot.Derived) *snapshot.Value { return &d.EstimatedBytesPerSecond },
				Of: func(w Span) snapshot.Value {
					r, wr := w.Inc(""), w.Inc("vllm_estimated_write_bytes_per_gpu_total")
					return known(r.OK && wr.OK && r.V+wr.V > 0, w.Rate(snapshot.Some(r.V+wr.V)))
				}},
		}},
	{Exported: "vllm_estimated_write_bytes_per_gpu_total", Names: []Name{{Name: "vllm:estimated_write_bytes_per_gpu_total", Help: "Estimated number of bytes written to memory per GPU (for Model Flops Utilization calculations).", Sim: Sim{Source: "write_bytes"}},
		{Server: ServerSGLang, Name: "sglang:estimated_write_bytes_per_gpu_total", Help: "The estimated number of bytes written to memory per GPU", Note: "with --enable-mfu-metrics"}}, Type: Counter, Agg: Mean,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.EstimatedWriteBytes },
		Help:     "vLLM's estimate of bytes written to GPU memory per GPU (mean over engines); from vllm:estimated_write_bytes_per_gpu_total.",
		OptIn:    true,
		Versions: "≈0.17+; 0 unless `--enable-mfu-metrics`"},
	{Exported: "vllm_requests_refused_total", Names: []Name{{Name: "http_requests_total", Help: "Total number of requests by method, status and handler.", Sim: Sim{Source: "http_requests"}}}, Type: Counter, Scope: ScopeServer, Agg: Sum,
		Label: "status", Limit: MapLimit,
		Server:   func(v *snapshot.VLLM) *map[string]float64 { return &v.HTTPRequests },
		Out:      refused,
		Help:     "Requests the vLLM server answered with a 5xx (or 429 where status codes are not grouped) before or instead of the engine, summed over handlers and counted for every model of the server; from http_requests_total (vLLM's HTTP instrumentator).",
		Versions: "0.8.3+ (HTTP instrumentator); `status` 5xx (and 429 when codes are not grouped) summed over handlers"},
	{Exported: "vllm_kv_transfer_time_seconds", Names: []Name{{Name: "vllm:nixl_xfer_time_seconds", Help: "Histogram of transfer duration for NIXL KV Cache transfers.", Sim: Sim{Source: "nixl_xfer_time", Buckets: nixlPostBuckets[1:], When: "nixl"}}}, Type: Histogram, Agg: Buckets,
		Hist: snapshot.KVTransferTime, Unit: "seconds", Help: "Duration of NIXL KV-cache transfers (disaggregated prefill/decode)",
		Versions: nixlVersions + "; buckets 0.005–5 s"},
	{Exported: "vllm_kv_transfer_post_time_seconds", Names: []Name{{Name: "vllm:nixl_post_time_seconds", Help: "Histogram of transfer post time for NIXL KV Cache transfers.", Sim: Sim{Source: "nixl_post_time", Buckets: nixlPostBuckets, When: "nixl"}}}, Type: Histogram, Agg: Buckets,
		Hist: snapshot.KVTransferPostTime, Unit: "seconds", Help: "Time to post NIXL KV-cache transfers",
		Versions: nixlVersions + "; buckets 0.001–5 s"},
	{Exported: "vllm_kv_transfer_size_bytes", Names: []Name{{Name: "vllm:nixl_bytes_transferred", Help: "Histogram of bytes transferred per NIXL KV Cache transfers.", Sim: Sim{Source: "nixl_bytes", Buckets: nixlByteBuckets, When: "nixl"}}}, Type: Histogram, Agg: Buckets,
		Hist: snapshot.KVTransferSize, Unit: "bytes", Help: "Bytes per NIXL KV-cache transfer",
		Versions: nixlVersions + "; buckets 2 KiB–8 GiB (powers of 4); its _sum over a window is `vllm_kv_transfer_bytes_per_second`",
		Windows: []Window{
			{Series: "vllm_kv_transfer_bytes_per_second", Help: "NIXL KV-cache transfer throughput in bytes per second over the window (disaggregated prefill/decode); derived from vllm:nixl_bytes_transferred_sum.",
				Field: func(d *snapshot.Derived) *snapshot.Value { return &d.KVTransferBytesPerSecond },
				Of: func(w Span) snapshot.Value {
					d, ok := w.Delta(snapshot.KVTransferSize)
					return known(ok, w.Rate(snapshot.Some(d.Sum)))
				}},
		}},
	{Exported: "vllm_kv_transfer_descriptors", Names: []Name{{Name: "vllm:nixl_num_descriptors", Help: "Histogram of number of descriptors per NIXL  KV Cache transfers.", Sim: Sim{Source: "nixl_descriptors", Buckets: []float64{10, 20, 30, 50, 75, 100, 200, 400, 1000, 2000, 4000, 10000, 20000, 50000}, When: "nixl"}}}, Type: Histogram, Agg: Buckets,
		Hist: snapshot.KVTransferDescriptors, Help: "Descriptors per NIXL KV-cache transfer",
		OptIn:    true,
		Versions: nixlVersions + "; buckets 10–50000"},
	{Exported: "vllm_mooncake_store_operation_seconds", Names: []Name{{Name: "vllm:mooncake_store_operation_time_seconds", Help: "Histogram of Mooncake store communication time.", Sim: Sim{Source: "mooncake_time", Buckets: mooncakeBuckets, When: "mooncake"}}}, Type: Histogram, Agg: Buckets,
		Hist: snapshot.MooncakeStoreOperation, Unit: "seconds", Help: "Duration of Mooncake store operations, all operations and statuses together",
		Versions: mooncakeVersions + "; buckets 0.0001–2 s"},
	{Exported: "vllm_kv_block_lifetime_seconds", Names: []Name{{Name: "vllm:kv_block_lifetime_seconds", Help: "Histogram of KV cache block lifetime from allocation to eviction. Sampled metrics (controlled by --kv-cache-metrics-sample).", Sim: Sim{Source: "kv_block_lifetime", Buckets: kvBlockBuckets, When: "kv_cache_metrics", Custom: "kv_cache_residency"}}}, Type: Histogram, Agg: Buckets,
		Hist: snapshot.KVBlockLifetime, Unit: "seconds", Help: "Lifetime of sampled KV-cache blocks from allocation to eviction",
		Versions: kvBlockVersions},
	{Exported: "vllm_kv_block_idle_before_evict_seconds", Names: []Name{{Name: "vllm:kv_block_idle_before_evict_seconds", Help: "Histogram of idle time before KV cache block eviction. Sampled metrics (controlled by --kv-cache-metrics-sample).", Sim: Sim{Source: "kv_block_idle_before_evict", Buckets: kvBlockBuckets, When: "kv_cache_metrics", Custom: "kv_cache_residency"}}}, Type: Histogram, Agg: Buckets,
		Hist: snapshot.KVBlockIdleBeforeEvict, Unit: "seconds", Help: "Idle time of sampled KV-cache blocks before their eviction",
		Versions: kvBlockVersions},
	{Exported: "vllm_kv_block_reuse_gap_seconds", Names: []Name{{Name: "vllm:kv_block_reuse_gap_seconds", Help: "Histogram of time gaps between consecutive KV cache block accesses. Only the most recent accesses are recorded (ring buffer). Sampled metrics (controlled by --kv-cache-metrics-sample).", Sim: Sim{Source: "kv_block_reuse_gap", Buckets: kvBlockBuckets, When: "kv_cache_metrics", Custom: "kv_cache_residency"}}}, Type: Histogram, Agg: Buckets,
		Hist: snapshot.KVBlockReuseGap, Unit: "seconds", Help: "Time between consecutive accesses of sampled KV-cache blocks",
		Versions: kvBlockVersions},
	{Exported: "vllm_time_to_first_token_seconds", Names: []Name{{Name: "vllm:time_to_first_token_seconds", Help: "Histogram of time to first token in seconds.", Sim: Sim{Source: "ttft", Buckets: ttftBuckets, Custom: "time_to_first_token"}},
		{Server: ServerSGLang, Name: "sglang:time_to_first_token_seconds", Help: "Histogram of time to first token in seconds.", Sim: Sim{Source: "ttft", Buckets: sglangTTFTBuckets, Label: "is_streaming", Values: []string{"true"}, PerModel: true}, Note: "summed over `is_streaming`; buckets 0.1–400 s (2024–2025 releases 0.001–30 s)"},
		{Server: ServerTRTLLM, Name: "trtllm_time_to_first_token_seconds", Help: "Histogram of time to first token in seconds.", Sim: Sim{Source: "ttft_at_finish", Buckets: ttftBuckets}, Note: "observed when the request finishes"},
		{Server: ServerTRTLLM, Name: "time_to_first_token_seconds", Help: "Histogram of time to first token in seconds.", Note: "the first releases (no prefix)"}}, Type: Histogram, Agg: Buckets,
		Hist: snapshot.TTFT, Unit: "seconds", Help: "Time from request arrival to the first output token",
		ByPriority:     "vllm_time_to_first_token_by_priority_seconds",
		ByPriorityHelp: "Time from request arrival to the first output token in seconds per request priority (--vllm.per-priority; vLLM --scheduling-policy priority); from vllm:time_to_first_token_seconds.",
		Expected:       always, Versions: "all versions; buckets extended to 2560 s in 0.8.4"},
	{Exported: "vllm_inter_token_latency_seconds", Names: []Name{{Name: "vllm:inter_token_latency_seconds", Help: "Histogram of inter-token latency in seconds.", Sim: Sim{Source: "itl", Buckets: itlBuckets, Custom: "inter_token_latency"}}, {Name: "vllm:time_per_output_token_seconds", Help: "Histogram of time per output token in seconds.DEPRECATED: Use vllm:inter_token_latency_seconds instead.", Sim: Sim{Source: "itl", Buckets: itlBuckets, Custom: "inter_token_latency"}}}, Type: Histogram, Agg: Buckets,
		NotFrom: map[string]string{ServerSGLang: "`sglang:inter_token_latency_seconds` is observed per token (vLLM per engine step): not the same measure, not read", ServerTRTLLM: "no per-step inter-token latency"},
		Hist:    snapshot.InterTokenLatency, Unit: "seconds", Help: "Time between successive output tokens (per engine step)",
		Expected: always, Versions: "`inter_token_latency_seconds` 0.10.2+; `time_per_output_token_seconds` (same per-step observations) up to ≈0.14"},
	{Exported: "vllm_request_time_per_output_token_seconds", Names: []Name{{Name: "vllm:request_time_per_output_token_seconds", Help: "Histogram of time_per_output_token_seconds per request.", Sim: Sim{Source: "request_tpot", Buckets: itlBuckets, Custom: "inter_token_latency"}},
		{Server: ServerTRTLLM, Name: "trtllm_time_per_output_token_seconds", Help: "Histogram of time per output token in seconds.", Sim: Sim{Source: "request_tpot", Buckets: itlBuckets}, Note: "per request, as vLLM's"},
		{Server: ServerTRTLLM, Name: "time_per_output_token_seconds", Help: "Histogram of time per output token in seconds.", Note: "the first releases (no prefix)"}}, Type: Histogram, Agg: Buckets,
		NotFrom: map[string]string{ServerSGLang: "no per-request TPOT histogram (`sglang:time_per_output_token_seconds` of 2024–2025 releases is observed per token): the TPOT SLO and the decode classes are unavailable"},
		Hist:    snapshot.RequestTPOT, Unit: "seconds", Help: "Per-request mean time per output token after the first",
		Expected: afterGPUNamesGone, Versions: "V1 ≈0.11+"},
	{Exported: "vllm_e2e_request_latency_seconds", Names: []Name{{Name: "vllm:e2e_request_latency_seconds", Help: "Histogram of e2e request latency in seconds.", Sim: Sim{Source: "e2e", Buckets: latencyBuckets, Custom: "request_latency"}},
		{Server: ServerSGLang, Name: "sglang:e2e_request_latency_seconds", Help: "Histogram of End-to-end request latency in seconds", Sim: Sim{Source: "e2e", Buckets: sglangE2EBuckets, Label: "is_streaming", Values: []string{"true"}, PerModel: true}, Note: "summed over `is_streaming`"},
		{Server: ServerTRTLLM, Name: "trtllm_e2e_request_latency_seconds", Help: "Histogram of end to end request latency in seconds.", Sim: Sim{Source: "e2e", Buckets: latencyBuckets}},
		{Server: ServerTRTLLM, Name: "e2e_request_latency_seconds", Help: "Histogram of end to end request latency in seconds.", Note: "the first releases (no prefix)"}}, Type: Histogram, Agg: Buckets,
		Hist: snapshot.E2E, Unit: "seconds", Help: "End-to-end request latency",
		ByPriority:     "vllm_e2e_request_latency_by_priority_seconds",
		ByPriorityHelp: "End-to-end request latency in seconds per request priority (--vllm.per-priority); from vllm:e2e_request_latency_seconds.",
		Expected:       always, Versions: "all versions"},
	{Exported: "vllm_request_queue_time_seconds", Names: []Name{{Name: "vllm:request_queue_time_seconds", Help: "Histogram of time spent in WAITING phase for request.", Sim: Sim{Source: "queue", Buckets: latencyBuckets, Custom: "request_latency"}},
		{Server: ServerSGLang, Name: "sglang:queue_time_seconds", Help: "Histogram of queueing time in seconds.", Sim: Sim{Source: "queue", Buckets: sglangQueueBuckets}, Note: "one series per `dp_rank`"},
		{Server: ServerSGLang, Name: "sglang:waiting_request_latency_seconds", Help: "Histogram of request waiting time in seconds", Note: "2024 releases"},
		{Server: ServerTRTLLM, Name: "trtllm_request_queue_time_seconds", Help: "Histogram of time spent in WAITING phase for request.", Sim: Sim{Source: "queue", Buckets: latencyBuckets}},
		{Server: ServerTRTLLM, Name: "request_queue_time_seconds", Help: "Histogram of time spent in WAITING phase for request.", Note: "the first releases (no prefix)"}}, Type: Histogram, Agg: Buckets,
		Hist: snapshot.QueueTime, Unit: "seconds", Help: "Time requests spent waiting in the queue",
		Expected: always, Versions: "V0 0.6.4+, V1 0.8.0+"},
	{Exported: "vllm_request_prefill_time_seconds", Names: []Name{{Name: "vllm:request_prefill_time_seconds", Help: "Histogram of time spent in PREFILL phase for request.", Sim: Sim{Source: "prefill", Buckets: latencyBuckets, Custom: "request_latency"}},
		{Server: ServerTRTLLM, Name: "trtllm_request_prefill_time_seconds", Help: "Histogram of time spent in PREFILL phase for request.", Sim: Sim{Source: "prefill", Buckets: trtllmPrefillBuckets}}}, Type: Histogram, Agg: Buckets,
		NotFrom: map[string]string{ServerSGLang: "only `per_stage_req_latency_seconds` by stage"},
		Hist:    snapshot.PrefillTime, Unit: "seconds", Help: "Time requests spent in prefill",
		Expected: always, Versions: "V0 0.6.4+, V1 0.8.0+"},
	{Exported: "vllm_request_decode_time_seconds", Names: []Name{{Name: "vllm:request_decode_time_seconds", Help: "Histogram of time spent in DECODE phase for request.", Sim: Sim{Source: "decode", Buckets: latencyBuckets, Custom: "request_latency"}},
		{Server: ServerTRTLLM, Name: "trtllm_request_decode_time_seconds", Help: "Histogram of time spent in DECODE phase for request.", Sim: Sim{Source: "decode", Buckets: latencyBuckets}}}, Type: Histogram, Agg: Buckets,
		NotFrom: map[string]string{ServerSGLang: "only `per_stage_req_latency_seconds` by stage"},
		Hist:    snapshot.DecodeTime, Unit: "seconds", Help: "Time requests spent in decode",
		Expected: always, Versions: "V0 0.6.4+, V1 0.8.0+"},
	{Exported: "vllm_request_inference_time_seconds", Names: []Name{{Name: "vllm:request_inference_time_seconds", Help: "Histogram of time spent in RUNNING phase for request.", Sim: Sim{Source: "inference", Buckets: latencyBuckets, Custom: "request_latency"}},
		{Server: ServerTRTLLM, Name: "trtllm_request_inference_time_seconds", Help: "Histogram of time spent in RUNNING phase for request.", Sim: Sim{Source: "inference", Buckets: latencyBuckets}}}, Type: Histogram, Agg: Buckets,
		Hist: snapshot.InferenceTime, Unit: "seconds", Help: "Time requests spent running (prefill plus decode)",
		// prefill + decode, both exported: nothing shipped reads the sum.
		OptIn:    true,
		Expected: always, Versions: "V0 0.6.4+, V1 0.8.0+"},
}

// Versions shared by several rows.
const (
	offloadVersions  = "offloading connector only: `kv_offload_load_*` / `kv_offload_store_*` (2026, preferred) or the older `kv_offload_total_bytes` / `kv_offload_total_time` by `transfer_type` (`CPU_to_GPU` load, `GPU_to_CPU` store), which vLLM keeps beside the newer names for its CPU tier; the newer names carry no tier and count as tier `cpu`"
	loraVersions     = "0.6.4+ with LoRA enabled (V0 also without: `max_lora=\"0\"`, exported as nothing); labels `max_lora`, `running_lora_adapters`, `waiting_lora_adapters` (comma-joined), no `model_name`; value a timestamp, the latest label set wins; at most 32 adapters per list"
	nixlVersions     = "only with the NIXL KV connector (disaggregated prefill/decode; llm-d, Dynamo); labels `model_name`, `engine`"
	mooncakeVersions = "only with the MooncakeStoreConnector (2026); labels `model_name`, `engine`, `operation`, `status` (`ok`, `error`); a child appears with its first operation"
	kvBlockVersions  = "≈0.13+ (#27793, 2025-12-01), only with `--kv-cache-metrics` (sampled, `--kv-cache-metrics-sample`); buckets 0.001–1800 s"
)

// Directions of a KV offload transfer.
const (
	offloadLoad  = "load"  // offload tier -> GPU
	offloadStore = "store" // GPU -> offload tier
)

// offloadTier keys a kv_offload sample of direction dir by its tier. The
// newer names (kv_offload_load_*, kv_offload_store_*) hold one direction
// and carry no tier: vLLM's native offloading tier, cpu. The older ones
// hold both directions in transfer_type: "CPU_to_GPU" is a load from tier
// cpu, "GPU_to_CPU" a store to it; a sample of the other direction is not
// this row's.
func offloadTier(dir string) func(fam string, l Labels) (string, bool) {
	return func(_ string, l Labels) (string, bool) {
		tt, old := l.Lookup("transfer_type")
		if !old {
			return "cpu", true
		}
		from, to, ok := strings.Cut(strings.ToLower(tt), "_to_")
		switch {
		case !ok || from == "" || to == "":
			return "", false
		case dir == offloadLoad && to == "gpu" && from != "gpu":
			return from, true
		case dir == offloadStore && from == "gpu" && to != "gpu":
			return to, true
		}
		return "", false
	}
}

// mooncakeRow is one counter row of the Mooncake store connector, by
// operation (only samples of status, when status is not "").
func mooncakeRow(exported string, name Name, status string, field func(m *snapshot.Model) *map[string]float64, help string) Family {
	return Family{Exported: exported, Names: []Name{name}, Type: Counter, Agg: Sum,
		Label: "operation", Limit: MapLimit, Key: mooncakeOperation(status), Map: field,
		Help: help + "; from " + name.Name + ".", Versions: mooncakeVersions}
}

// mooncakeOperation keys a Mooncake store sample by its operation label,
// only samples of the given status when status is not "".
func mooncakeOperation(status string) func(fam string, l Labels) (string, bool) {
	return func(_ string, l Labels) (string, bool) {
		op := l.Get("operation")
		if op == "" || (status != "" && l.Get("status") != status) {
			return "", false
		}
		return op, true
	}
}

// loraLimit bounds the adapters per list of vllm:lora_requests_info.
var loraLimit = Limit{Max: MaxLoRAAdapters, Drop: DropLoRAAdapterLimit}

// readLoRA reads one sample of vllm:lora_requests_info into m.LoRA. The
// sample's value is the time vLLM set it; label sets of earlier moments
// can linger beside the current one, so the latest sample wins (reading
// the same samples again changes nothing). max_lora 0 is V0 without LoRA:
// nothing to report.
func readLoRA(m *snapshot.Model, l Labels, v float64) (dropped int) {
	if m.LoRA.At > v || (m.LoRA.At == v && m.LoRA.Known) {
		return 0
	}
	max := LabelNumber(l, "max_lora")
	m.LoRA = snapshot.LoRA{At: v}
	if !max.OK {
		return 0
	}
	m.LoRA.Known, m.LoRA.Max = true, max
	var n, w int
	m.LoRA.Running, n = adapterList(l.Get("running_lora_adapters"))
	m.LoRA.Waiting, w = adapterList(l.Get("waiting_lora_adapters"))
	return n + w
}

// adapterList counts each adapter named in a comma-joined list, keeping
// at most MaxLoRAAdapters names; dropped is how many more there were.
func adapterList(s string) (counts map[string]float64, dropped int) {
	counts = map[string]float64{}
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if _, seen := counts[name]; !seen && len(counts) >= MaxLoRAAdapters {
			dropped++
			continue
		}
		counts[name]++
	}
	return counts, dropped
}

// shareLoRA hands the server-wide LoRA reading to model m.
func shareLoRA(server, m *snapshot.Model) { m.LoRA = server.LoRA }

// settleSleep combines a model's sleep readings (vllm:engine_sleep_state,
// engine_fully_awake, engine_sleep_resource_state) into one verdict: awake
// only when every engine says awake and every resource serves; the level
// is the deepest engine's.
func settleSleep(m *snapshot.Model) {
	s := &m.Sleep
	s.Known = s.State != "" || s.FullyAwake.OK
	s.Awake, s.Level = false, snapshot.Value{}
	if !s.Known {
		return
	}
	level := slices.Index(sleepStates, s.State)
	s.Awake = level <= 0 && (!s.FullyAwake.OK || s.FullyAwake.V != 0)
	for _, st := range s.Resources {
		if !slices.Contains(servingStates, st) {
			s.Awake = false
		}
	}
	switch {
	case s.Awake:
		s.Level = snapshot.Some(0)
	case level > 0:
		s.Level = snapshot.Some(float64(level))
	}
}

// refused is the server's refused requests (see snapshot.VLLM.Refused),
// counted for every model.
func refused(v *snapshot.VLLM, _ *snapshot.Model) snapshot.Value {
	n, ok := v.Refused()
	return known(ok, snapshot.Some(n))
}

// known is v where ok, else absent.
func known(ok bool, v snapshot.Value) snapshot.Value {
	if !ok {
		return snapshot.Value{}
	}
	return v
}

// computedTokens is the prompt tokens per second computed in prefill: the
// local_compute source; else all prompt tokens minus the cached ones; else
// the per-request computed-KV histogram's sum (counted when requests
// finish, so it lags).
func computedTokens(w Span) snapshot.Value {
	computed := w.IncOf(bySource("local_compute"))
	if !computed.OK {
		computed = w.IncOf(func(m *snapshot.Model) snapshot.Value {
			return known(m.PromptTokens.OK && m.PromptTokensCached.OK, snapshot.Some(m.PromptTokens.V-m.PromptTokensCached.V))
		})
	}
	if !computed.OK {
		computed = w.Inc("vllm_prompt_tokens_computed_per_second")
	}
	return w.Rate(computed)
}

// cachedTokens is the prompt tokens per second served from a cache:
// prompt_tokens_cached, else the cache-hit and KV-transfer sources.
func cachedTokens(w Span) snapshot.Value {
	cached := w.Inc("")
	if !cached.OK {
		cached = w.IncOf(func(m *snapshot.Model) snapshot.Value {
			hit, ext := bySource("local_cache_hit")(m), bySource("external_kv_transfer")(m)
			return known(hit.OK, snapshot.Some(hit.V+ext.V))
		})
	}
	return w.Rate(cached)
}

// bySource reads one source of vllm:prompt_tokens_by_source_total (absent
// without the family).
func bySource(name string) func(*snapshot.Model) snapshot.Value {
	return func(m *snapshot.Model) snapshot.Value {
		return known(m.PromptTokensBySource != nil, snapshot.Some(m.PromptTokensBySource[name]))
	}
}

// LabelNumber reads a numeric label (vllm:cache_config_info's); "None",
// empty, negative or non-finite values are absent.
func LabelNumber(l Labels, key string) snapshot.Value {
	s, ok := l.Lookup(key)
	if !ok {
		return snapshot.Value{}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return snapshot.Value{}
	}
	return snapshot.Some(f)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
