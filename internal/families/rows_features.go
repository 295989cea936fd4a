package families

import (
	"strings"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// featureRows are the rows of families that come with a feature (KV
// offload tiers, HF3FS, LoRA residency), of the engine's heartbeat and
// request shape, and of later upstream additions (release not pinned; where
// vLLM's HELP could not be read it is written in vLLM's style). Rows
// appends them to the table.
var featureRows = []Family{
	{Exported: "vllm_engine_steps_total", Names: []Name{{Name: "vllm:iteration_tokens_total", Help: "Histogram of number of tokens per engine_step.",
		Sim: Sim{Source: "iteration_tokens", Buckets: []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}, Custom: "iteration_tokens"}}},
		Type: Counter, Agg: SumCount,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.StepTokens },
		Count:    func(m *snapshot.Model) *snapshot.Value { return &m.EngineSteps },
		Out:      func(_ *snapshot.VLLM, m *snapshot.Model) snapshot.Value { return m.EngineSteps },
		Help:     "Engine steps that produced output, the per-step heartbeat, summed over engines; from vllm:iteration_tokens_total's _count.",
		Feeds:    "the stall verdict (no step while requests run), the heartbeat panel",
		Versions: "all versions (V0: every step; V1: every step with output; the Rust front-end does not send it); buckets are not read",
		Windows: []Window{
			PerSecond("vllm_engine_steps_per_second", "Engine steps with output per second over the window; derived from vllm:iteration_tokens_total_count.", nil),
			{Series: "vllm_engine_tokens_per_step", Help: "Mean tokens an engine step computed (prompt and generated) over the window, absent without steps; from vllm:iteration_tokens_total's _sum and _count.",
				Of: func(w Span) snapshot.Value {
					return Ratio(w.IncOf(func(m *snapshot.Model) snapshot.Value { return m.StepTokens }), w.Inc(""))
				}},
		}},
	{Exported: "vllm_request_preemptions", Names: []Name{{Name: "vllm:request_num_preemptions", Help: "Histogram of the number of preemptions per finished request.",
		Sim: Sim{Source: "num_preemptions", Buckets: []float64{1, 2, 3, 4, 5, 10, 20}, Custom: "request_num_preemptions"}}},
		Type: Histogram, Agg: Buckets, Hist: snapshot.RequestPreemptions,
		Help:     "Preemptions each finished request suffered (every request is observed, so le=\"1\" holds those preempted at most once)",
		Feeds:    "the preempted-requests panel",
		Versions: "vllm#49984 (merged, ≈0.30+); buckets 1, 2, 3, 4, 5, 10, 20; summed over `priority`"},

	// KV offload: the CPU spec's gauges and failures, the tiering spec's tiers.
	{Exported: "vllm_kv_offload_allocation_failures_total", Names: []Name{{Name: "vllm:kv_offload_allocation_failure_total", Help: "Number of failed KV offload allocations.",
		Sim: Sim{Source: "offload_allocation_failures", When: "offload"}}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.KVOffload.AllocationFailures },
		Help:     "Offload-tier allocations for KV blocks that failed (the blocks stay in GPU memory only), summed over engines; from vllm:kv_offload_allocation_failure_total.",
		Feeds:    "VLLMKVOffloadFailures, the offload failures panel",
		Versions: offloadConnector},
	offloadUsage("vllm_kv_offload_usage_ratio", "in use", func(o *snapshot.KVOffload) *map[string]float64 { return &o.Usage },
		Name{Name: "vllm:kv_offload_cpu_cache_usage_perc", Help: "CPU KV offload cache usage. 1 means 100 percent usage.", Sim: Sim{Source: "offload_cpu_usage", When: "offload", PerProcess: true}}),
	offloadUsage("vllm_kv_offload_write_usage_ratio", "taken by KV being written to it", func(o *snapshot.KVOffload) *map[string]float64 { return &o.WriteUsage },
		Name{Name: "vllm:kv_offload_cpu_cache_write_usage_perc", Help: "CPU KV offload cache write usage. 1 means 100 percent usage.", Sim: Sim{Source: "offload_cpu_write_usage", When: "offload", PerProcess: true}},
		Name{Name: "vllm:kv_offload_tiering_primary_write_usage_perc", Help: "Tiering primary tier write usage. 1 means 100 percent usage.", Sim: Sim{Source: "tier_write_usage", Label: "tier", When: "tiering", PerProcess: true}}),
	offloadUsage("vllm_kv_offload_read_usage_ratio", "taken by KV being read from it", func(o *snapshot.KVOffload) *map[string]float64 { return &o.ReadUsage },
		Name{Name: "vllm:kv_offload_cpu_cache_read_usage_perc", Help: "CPU KV offload cache read usage. 1 means 100 percent usage.", Sim: Sim{Source: "offload_cpu_read_usage", When: "offload", PerProcess: true}},
		Name{Name: "vllm:kv_offload_tiering_primary_read_usage_perc", Help: "Tiering primary tier read usage. 1 means 100 percent usage.", Sim: Sim{Source: "tier_read_usage", Label: "tier", When: "tiering", PerProcess: true}}),
	{Exported: "vllm_kv_offload_stores_skipped_total", Names: []Name{{Name: "vllm:kv_offload_stores_skipped_total", Help: "Number of KV offload stores skipped below the store threshold.",
		Sim: Sim{Source: "offload_stores_skipped", When: "offload"}}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.KVOffload.StoresSkipped },
		Help:     "KV stores to the CPU tier skipped because the block was used fewer times than the store threshold, summed over engines; from vllm:kv_offload_stores_skipped_total.",
		OptIn:    true,
		Versions: offloadConnector + "; only with `store_threshold` >= 2"},
	tierCounter("vllm_kv_offload_tier_read_bytes_total", "Bytes read from a tier of tiered offloading (promoted towards GPU memory)", "vllm:kv_offload_tiering_read_bytes_total",
		"Tiering bytes read per tier.", "tier_read_bytes", func(o *snapshot.KVOffload) *map[string]float64 { return &o.TierReadBytes }, true),
	tierCounter("vllm_kv_offload_tier_write_bytes_total", "Bytes written to a tier of tiered offloading (cascaded from the primary tier)", "vllm:kv_offload_tiering_write_bytes_total",
		"Tiering bytes written per tier.", "tier_write_bytes", func(o *snapshot.KVOffload) *map[string]float64 { return &o.TierWriteBytes }, true),
	tierCounter("vllm_kv_offload_tier_read_seconds_total", "Seconds spent reading from a tier of tiered offloading", "vllm:kv_offload_tiering_read_time_total",
		"Tiering read time per tier, in seconds.", "tier_read_seconds", func(o *snapshot.KVOffload) *map[string]float64 { return &o.TierReadSeconds }, true),
	tierCounter("vllm_kv_offload_tier_write_seconds_total", "Seconds spent writing to a tier of tiered offloading", "vllm:kv_offload_tiering_write_time_total",
		"Tiering write time per tier, in seconds.", "tier_write_seconds", func(o *snapshot.KVOffload) *map[string]float64 { return &o.TierWriteSeconds }, true),
	tierCounter("vllm_kv_offload_tier_block_queries_total", "KV blocks looked up in a tier of tiered offloading", "vllm:kv_offload_tiering_block_queries_total",
		"Tiering block queries per tier.", "tier_block_queries", func(o *snapshot.KVOffload) *map[string]float64 { return &o.BlockQueries }, true),
	tierCounter("vllm_kv_offload_tier_block_hits_total", "KV blocks found in a tier of tiered offloading", "vllm:kv_offload_tiering_block_hits_total",
		"Tiering block hits per tier.", "tier_block_hits", func(o *snapshot.KVOffload) *map[string]float64 { return &o.BlockHits }, true),
	tierCounter("vllm_kv_offload_promotion_failures_total", "Promotion jobs of tiered offloading (KV moved from a tier towards GPU memory) that failed", "vllm:kv_offload_tiering_promotion_job_failures_total",
		"Tiering promotion job failures per tier.", "tier_promotion_failures", func(o *snapshot.KVOffload) *map[string]float64 { return &o.PromotionFailures }, false),
	tierCounter("vllm_kv_offload_cascade_failures_total", "Cascade jobs of tiered offloading (KV moved from the primary tier to a lower one) that failed", "vllm:kv_offload_tiering_cascade_job_failures_total",
		"Tiering cascade job failures per tier.", "tier_cascade_failures", func(o *snapshot.KVOffload) *map[string]float64 { return &o.CascadeFailures }, false),
	{Exported: "vllm_kv_offload_promotion_allocation_failures_total", Names: []Name{{Name: "vllm:kv_offload_tiering_promotion_allocation_failures_total",
		Help: "Number of tiering promotion allocation failures.", Sim: Sim{Source: "tier_promotion_allocation_failures", When: "tiering"}}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.KVOffload.PromotionAllocationFailures },
		Help:     "Promotions of tiered offloading that found no room in the primary tier, summed over engines; from vllm:kv_offload_tiering_promotion_allocation_failures_total.",
		Feeds:    "VLLMKVOffloadFailures, the offload failures panel",
		Versions: tieringVersions},

	// HF3FS KV connector.
	{Exported: "vllm_hf3fs_save_failures_total", Names: []Name{{Name: "vllm:hf3fs_num_failed_save_total", Help: "Number of failed HF3FS KV cache saves.",
		Sim: Sim{Source: "hf3fs_save_failures", When: "hf3fs"}}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.HF3FS.SaveFailures },
		Help:     "KV cache saves to HF3FS that failed, summed over engines; from vllm:hf3fs_num_failed_save_total.",
		Feeds:    "VLLMKVOffloadFailures, the offload failures panel",
		Versions: hf3fsVersions},
	{Exported: "vllm_hf3fs_load_failures_total", Names: []Name{{Name: "vllm:hf3fs_num_failed_load_total", Help: "Number of failed HF3FS KV cache loads.",
		Sim: Sim{Source: "hf3fs_load_failures", When: "hf3fs"}}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.HF3FS.LoadFailures },
		Help:     "KV cache loads from HF3FS that failed (the prompt is computed instead), summed over engines; from vllm:hf3fs_num_failed_load_total.",
		Feeds:    "VLLMKVOffloadFailures, the offload failures panel",
		Versions: hf3fsVersions},
	summaryRow("vllm_hf3fs_save_seconds", "Duration of HF3FS KV cache saves in seconds", hf3fsVersions,
		func(m *snapshot.Model) *snapshot.SumCount { return &m.HF3FS.Save },
		Name{Name: "vllm:hf3fs_save_duration_seconds", Help: "Histogram of HF3FS KV cache save duration in seconds.", Sim: Sim{Source: "hf3fs_save", Buckets: hf3fsBuckets, When: "hf3fs"}}),
	summaryRow("vllm_hf3fs_load_seconds", "Duration of HF3FS KV cache loads in seconds", hf3fsVersions,
		func(m *snapshot.Model) *snapshot.SumCount { return &m.HF3FS.Load },
		Name{Name: "vllm:hf3fs_load_duration_seconds", Help: "Histogram of HF3FS KV cache load duration in seconds.", Sim: Sim{Source: "hf3fs_load", Buckets: hf3fsBuckets, When: "hf3fs"}}),

	// LoRA residency (vllm#54830; #45411 closed).
	{Exported: "vllm_lora_gpu_loaded_adapters", Names: []Name{{Name: "vllm:num_gpu_loaded_lora_adapters", Help: "Number of LoRA adapters loaded on GPU.",
		Sim: Sim{Source: "lora_gpu_loaded", When: "lora"}}}, Type: Gauge, Agg: Max,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.LoRAResidency.GPULoaded },
		Help:     "LoRA adapters loaded in GPU memory, the most any engine holds; from vllm:num_gpu_loaded_lora_adapters.",
		Feeds:    "the LoRA residency panel",
		Versions: loraResidencyVersions},
	{Exported: "vllm_lora_cpu_loaded_adapters", Names: []Name{{Name: "vllm:num_cpu_loaded_lora_adapters", Help: "Number of LoRA adapters loaded on CPU.",
		Sim: Sim{Source: "lora_cpu_loaded", When: "lora"}}}, Type: Gauge, Agg: Max,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.LoRAResidency.CPULoaded },
		Help:     "LoRA adapters loaded in CPU memory (ready to move to GPU), the most any engine holds; from vllm:num_cpu_loaded_lora_adapters.",
		Feeds:    "the LoRA residency panel",
		Versions: loraResidencyVersions},
	{Exported: "vllm_lora_adapter_loaded", Names: []Name{{Name: "vllm:lora_adapter_loaded", Help: "Whether a LoRA adapter is loaded, by adapter and level.",
		Sim: Sim{Source: "lora_adapter_loaded", When: "lora"}}}, Type: StateSet, Agg: LeastAwake,
		KeyLabel: "adapter_name", StateLabel: "level", States: []string{"cpu", "gpu"}, Limit: Limit{Max: MaxLoRAAdapters},
		StateMap: func(m *snapshot.Model) *map[string]string { return &m.LoRAResidency.Level },
		Help:     "1 for each loaded LoRA adapter at the level it is loaded to (gpu where any engine has it in GPU memory, else cpu), at most 32 adapters; from vllm:lora_adapter_loaded.",
		Feeds:    "the LoRA residency panel",
		Versions: loraResidencyVersions + "; labels `adapter_name`, `level`, `pinned` (not kept)"},
	summaryRow("vllm_lora_adapter_load_seconds", "Time to load a LoRA adapter into memory in seconds", loraResidencyVersions+"; `transition=\"load\"`",
		func(m *snapshot.Model) *snapshot.SumCount { return &m.LoRAResidency.Load },
		Name{Name: "vllm:lora_adapter_load_seconds", Help: "Histogram of LoRA adapter load time in seconds, by transition.",
			Sim: Sim{Source: "lora_load_seconds", Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}, When: "lora"}}).only("transition", "load"),
	summaryRow("vllm_lora_adapter_activate_seconds", "Time to activate a loaded LoRA adapter on GPU in seconds", loraResidencyVersions+"; `transition=\"activate\"`",
		func(m *snapshot.Model) *snapshot.SumCount { return &m.LoRAResidency.Activate },
		Name{Name: "vllm:lora_adapter_load_seconds"}).only("transition", "activate"),

	// Scheduling.
	{Exported: "vllm_scheduler_policy_info", Names: []Name{{Name: "vllm:scheduler_policy_info", Help: "Scheduler policy in use; 1 for the active policy, 0 for the others.",
		Sim: Sim{Source: "policy", Label: "policy", Values: []string{"fcfs", "priority"}}}}, Type: StateSet, Agg: LeastAwake,
		StateLabel: "policy", States: []string{"fcfs", "priority"},
		State:    func(m *snapshot.Model) *string { return &m.SchedulerPolicy },
		Help:     "1 for the scheduling policy vLLM runs (fcfs, priority); from vllm:scheduler_policy_info.",
		OptIn:    true,
		Versions: laterVersions + "; one series per policy, 1 for the active one"},
	summaryRow("vllm_request_priority", "Priority of finished requests (lower is more urgent)", laterVersions+"; only with `--scheduling-policy priority`",
		func(m *snapshot.Model) *snapshot.SumCount { return &m.RequestPriority },
		Name{Name: "vllm:request_priority", Help: "Histogram of the priority of finished requests.", Sim: Sim{Source: "priority", Buckets: []float64{-100, -10, -1, 0, 1, 10, 100}, When: "priority"}}),
	{Exported: "vllm_scheduler_queue_pressure_ratio", Names: []Name{{Name: "vllm:scheduler_queue_pressure", Help: "Waiting requests over max_num_seqs, by reason.",
		Sim: Sim{Source: "queue_pressure", Label: "reason", Values: []string{"capacity", "deferred"}}}}, Type: Gauge, Agg: Max,
		Label: "reason", Limit: MapLimit,
		Map:      func(m *snapshot.Model) *map[string]float64 { return &m.QueuePressure },
		Help:     "Waiting requests over max_num_seqs by reason (capacity, deferred), max over engines; from vllm:scheduler_queue_pressure.",
		OptIn:    true,
		Versions: laterVersions},
	{Exported: "vllm_recomputed_tokens_total", Names: []Name{{Name: "vllm:recomputed_token_executions_total", Help: "Number of token executions repeated after preemption.",
		Sim: Sim{Source: "recomputed_tokens"}}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.RecomputedTokens },
		Help:     "Token executions vLLM repeated because a preemption discarded their KV, summed over engines; from vllm:recomputed_token_executions_total.",
		OptIn:    true,
		Versions: laterVersions},

	// Prefix cache in blocks, the KV pool's memory.
	{Exported: "vllm_prefix_cache_block_queries_total", Names: []Name{{Name: "vllm:prefix_cache_block_queries_total", Help: "Prefix cache queries, in terms of number of queried blocks.",
		Sim: Sim{Source: "prefix_block_queries"}}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.PrefixBlockQueries },
		Help:     "Prefix-cache lookups in KV blocks, summed over engines; from vllm:prefix_cache_block_queries_total.",
		OptIn:    true,
		Versions: laterVersions},
	{Exported: "vllm_prefix_cache_block_hits_total", Names: []Name{{Name: "vllm:prefix_cache_block_hits_total", Help: "Prefix cache hits, in terms of number of cached blocks.",
		Sim: Sim{Source: "prefix_block_hits"}}}, Type: Counter, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.PrefixBlockHits },
		Help:     "Prefix-cache hits in KV blocks, summed over engines; from vllm:prefix_cache_block_hits_total.",
		OptIn:    true,
		Versions: laterVersions,
		Windows: []Window{
			RatioTo("vllm_prefix_cache_block_queries_total", "vllm_prefix_cache_block_hit_ratio", "Prefix-cache hit ratio 0..1 in blocks over the window, absent without lookups; from vllm:prefix_cache_block_hits_total and vllm:prefix_cache_block_queries_total.", nil),
		}},
	{Exported: "vllm_prefix_cache_blocks_cached", Names: []Name{{Name: "vllm:prefix_cache_blocks_cached", Help: "Number of KV blocks held in the prefix cache.",
		Sim: Sim{Source: "prefix_blocks_cached"}}}, Type: Gauge, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.PrefixBlocksCached },
		Help:     "KV blocks the prefix cache holds, summed over engines; from vllm:prefix_cache_blocks_cached.",
		OptIn:    true,
		Versions: laterVersions},
	{Exported: "vllm_kv_cache_memory_bytes", Names: []Name{{Name: "vllm:available_kv_cache_memory_bytes", Help: "GPU memory available for the KV cache, in bytes.",
		Sim: Sim{Source: "kv_memory_bytes"}}}, Type: Gauge, Agg: Sum,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &m.KVCacheMemoryBytes },
		Help:     "GPU memory vLLM gave the KV cache in bytes, summed over engines; from vllm:available_kv_cache_memory_bytes.",
		OptIn:    true,
		Versions: laterVersions},
	{Exported: "vllm_spec_decode_accepted_tokens_by_position_total", Names: []Name{{Name: "vllm:spec_decode_num_accepted_tokens_per_pos_total", Help: "Accepted tokens per draft position.",
		Sim: Sim{Source: "spec_per_pos", Label: "position", When: "spec_decode"}}}, Type: Counter, Agg: Sum,
		Label: "position", Limit: MapLimit,
		Map:      func(m *snapshot.Model) *map[string]float64 { return &m.SpecAcceptedByPosition },
		Help:     "Speculative-decoding draft tokens accepted by draft position (0 first), summed over engines; from vllm:spec_decode_num_accepted_tokens_per_pos_total.",
		OptIn:    true,
		Versions: "V1 0.8.5+, only with speculative decoding; at most 16 positions"},

	// Request shape: vLLM histograms read as _sum and _count.
	summaryRow("vllm_request_params_n", "The n request parameter of finished requests", "all versions (V1: every finished request)",
		func(m *snapshot.Model) *snapshot.SumCount { return &m.ParamsN },
		Name{Name: "vllm:request_params_n", Help: "Histogram of the n request parameter.", Sim: Sim{Source: "params_n", Buckets: []float64{1, 2, 5, 10, 20}, Custom: "request_params_n"}}),
	summaryRow("vllm_request_params_max_tokens", "The max_tokens request parameter of finished requests", "0.6.4+ (V1: requests that set max_tokens)",
		func(m *snapshot.Model) *snapshot.SumCount { return &m.ParamsMaxTokens },
		Name{Name: "vllm:request_params_max_tokens", Help: "Histogram of the max_tokens request parameter.", Sim: Sim{Source: "params_max_tokens", Tokens: true, Custom: "request_tokens"}}),
	summaryRow("vllm_request_prompt_tokens", "Prompt tokens per finished request", "all versions",
		func(m *snapshot.Model) *snapshot.SumCount { return &m.RequestPromptTokens },
		Name{Name: "vllm:request_prompt_tokens", Help: "Number of prefill tokens processed.", Sim: Sim{Source: "request_prompt_tokens", Tokens: true, Custom: "request_tokens"}}),
	summaryRow("vllm_request_generation_tokens", "Generated tokens per finished request", "all versions",
		func(m *snapshot.Model) *snapshot.SumCount { return &m.RequestGenerationTokens },
		Name{Name: "vllm:request_generation_tokens", Help: "Number of generation tokens processed.", Sim: Sim{Source: "request_generation_tokens", Tokens: true, Custom: "request_tokens"}}),
	summaryRow("vllm_request_max_generation_tokens", "Most generation tokens a finished request (with all its parallel samples) asked for", "0.6.4+; llm-d-inference-sim names it `vllm:max_num_generation_tokens`",
		func(m *snapshot.Model) *snapshot.SumCount { return &m.MaxGenerationTokens },
		Name{Name: "vllm:request_max_num_generation_tokens", Help: "Histogram of maximum number of requested generation tokens.", Sim: Sim{Source: "max_num_generation_tokens", Tokens: true, Custom: "request_tokens"}},
		Name{Name: "vllm:max_num_generation_tokens", StandIn: "llm-d-inference-sim"}),
}

// Versions shared by the rows above.
const (
	offloadConnector      = "only with the offloading connector's CPU spec (2026); labels `model_name`, `engine`"
	tieringVersions       = "only with tiered offloading (`TieringOffloadingSpec`, #48798, 2026-08); labels `model_name`, `engine`, `tier`"
	hf3fsVersions         = "only with the HF3FS KV connector (`HF3FSKVConnector`); labels `model_name`, `engine`"
	loraResidencyVersions = "vllm#54830 (open), with LoRA enabled; labels `model_name`, `engine`"
	laterVersions         = "later than main 2026-08-17, release not pinned (upstream tests and docs)"
)

// hf3fsBuckets are the HF3FS save and load histograms' bounds.
var hf3fsBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 5}

// offloadUsage is a usage gauge of the offload tiers, by tier: the CPU
// spec's name is tier cpu, the tiering spec's carry tier. Max: one pool
// per engine, and in multiprocess mode one series per API server.
func offloadUsage(exported, what string, field func(*snapshot.KVOffload) *map[string]float64, names ...Name) Family {
	var from []string
	for i, n := range names {
		from = append(from, n.Name)
		names[i].Plus = i > 0 // the tiering spec's tiers beside the CPU one
	}
	return Family{Exported: exported, Names: names, Type: Gauge, Agg: Max, Label: "tier", Limit: MapLimit,
		Key: func(_ string, l Labels) (string, bool) {
			if t, ok := l.Lookup("tier"); ok {
				return t, true
			}
			return "cpu", true
		},
		Map:      func(m *snapshot.Model) *map[string]float64 { return field(&m.KVOffload) },
		Help:     "Share 0..1 of an offload tier's space " + what + ", by tier, max over engines and API servers; from " + strings.Join(from, " or ") + " (without a tier label: tier cpu).",
		Feeds:    "the KV offload tier panel",
		Versions: offloadConnector + "; a gauge of multiprocess mode `all`: one series per API server `pid`, combined by max"}
}

// tierCounter is a counter of tiered offloading by tier (optIn: no
// shipped alert or panel reads it).
func tierCounter(exported, help, name, vllmHelp, source string, field func(*snapshot.KVOffload) *map[string]float64, optIn bool) Family {
	f := Family{Exported: exported, Names: []Name{{Name: name, Help: vllmHelp, Sim: Sim{Source: source, Label: "tier", When: "tiering"}}},
		Type: Counter, Agg: Sum, Label: "tier", Limit: MapLimit,
		Map:      func(m *snapshot.Model) *map[string]float64 { return field(&m.KVOffload) },
		Help:     help + ", by tier, summed over engines; from " + name + ".",
		OptIn:    optIn,
		Versions: tieringVersions}
	if !optIn {
		f.Feeds = "VLLMKVOffloadFailures, the offload failures panel"
	}
	return f
}

// summaryRow is a vLLM histogram kept as its _sum and _count, exported as
// a summary without quantiles (the mean is rate(_sum) / rate(_count)):
// nothing shipped reads its buckets.
func summaryRow(exported, help, versions string, field func(*snapshot.Model) *snapshot.SumCount, names ...Name) Family {
	var from []string
	for _, n := range names {
		if n.StandIn == "" {
			from = append(from, n.Name)
		}
	}
	return Family{Exported: exported, Names: names, Type: Summary, Agg: SumCount,
		Value:    func(m *snapshot.Model) *snapshot.Value { return &field(m).Sum },
		Count:    func(m *snapshot.Model) *snapshot.Value { return &field(m).Count },
		Help:     help + ", _sum and _count summed over engines (no quantiles: the buckets are not read); from " + strings.Join(from, " or ") + ".",
		OptIn:    true,
		Versions: versions}
}

// only restricts a row to the samples whose label has the value.
func (f Family) only(label, value string) Family {
	f.Names[0].Keep = labelIs(label, value)
	return f
}
