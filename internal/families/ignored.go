package families

// Unread is a family the exporter knows and leaves unread, with why: it is
// neither read nor counted as unknown.
type Unread struct {
	Name
	Type string // vLLM's TYPE: counter, gauge, histogram
	Why  string
}

// Ignored are the families vLLM may send that no row reads.
var Ignored = []Unread{
	// Families of the 2026-08 tree (and later) no shipped alert, panel or
	// verdict needs, and the V0 ones that were renamed or never moved.
	{Name: Name{Name: "vllm:tokens_total", Help: "Number of prefill plus generation tokens processed."}, Type: "counter", Why: "V0 0.6.4-0.7.3, never incremented"},
	{Name: Name{Name: "vllm:avg_prompt_throughput_toks_per_s", Help: "Average prefill throughput in tokens/s."}, Type: "gauge", Why: "V0 up to 0.6.6; the exporter derives rates from the token counters"},
	{Name: Name{Name: "vllm:avg_generation_throughput_toks_per_s", Help: "Average generation throughput in tokens/s."}, Type: "gauge", Why: "as avg_prompt_throughput_toks_per_s"},
	{Name: Name{Name: "vllm:model_forward_time_milliseconds", Help: "Histogram of time spent in the model forward pass in ms."}, Type: "histogram", Why: "V0 with --collect-detailed-traces, removed 0.9.1"},
	{Name: Name{Name: "vllm:model_execute_time_milliseconds", Help: "Histogram of time spent in the model execute function in ms."}, Type: "histogram", Why: "as model_forward_time_milliseconds"},
	{Name: Name{Name: "vllm:request_params_best_of", Help: "Histogram of the best_of request parameter."}, Type: "histogram", Why: "V0 up to 0.6.2"},
	{Name: Name{Name: "vllm:spec_decode_draft_acceptance_rate", Help: "Speulative token acceptance rate."}, Type: "gauge", Why: "V0 speculative decoding, removed 0.10.0; V1's counters are read"},
	{Name: Name{Name: "vllm:spec_decode_efficiency", Help: "Speculative decoding system efficiency."}, Type: "gauge", Why: "as spec_decode_draft_acceptance_rate"},
	{Name: Name{Name: "vllm:spec_decode_num_emitted_tokens_total", Help: "Number of emitted tokens."}, Type: "counter", Why: "as spec_decode_draft_acceptance_rate"},
	{Name: Name{Name: "vllm:prompt_tokens_recomputed_total", Help: "Number of prompt tokens recomputed."}, Type: "counter", Why: "on main for two months of 2026, removed #38709; vllm:recomputed_token_executions_total is read"},
	{Name: Name{Name: "vllm:diffusion_num_denoising_steps_total", Help: "Number of denoising steps."}, Type: "counter", Why: "diffusion language models only"},
	{Name: Name{Name: "vllm:diffusion_num_canvas_positions_total", Help: "Number of canvas positions evaluated."}, Type: "counter", Why: "diffusion language models only"},
	{Name: Name{Name: "vllm:diffusion_num_committed_tokens_total", Help: "Number of committed (finalized) tokens."}, Type: "counter", Why: "diffusion language models only"},
	{Name: Name{Name: "vllm:kv_offload_load_size", Help: "Histogram of KV offload load sizes in bytes."}, Type: "histogram", Why: "transfer sizes; the byte counters are read"},
	{Name: Name{Name: "vllm:kv_offload_store_size", Help: "Histogram of KV offload store sizes in bytes."}, Type: "histogram", Why: "as kv_offload_load_size"},
	{Name: Name{Name: "vllm:kv_offload_size", Help: "Histogram of KV offload transfer sizes in bytes."}, Type: "histogram", Why: "deprecated beside kv_offload_load_size / store_size"},
	{Name: Name{Name: "vllm:kv_offload_lookup_sync_delay_seconds", Help: "Histogram of synchronous KV offload lookup delays in seconds."}, Type: "histogram", Why: "lookup latency inside a step; the transfer time counters are read"},
	{Name: Name{Name: "vllm:kv_offload_lookup_async_delay_seconds", Help: "Histogram of asynchronous KV offload lookup delays in seconds."}, Type: "histogram", Why: "as kv_offload_lookup_sync_delay_seconds"},
	{Name: Name{Name: "vllm:kv_offload_cpu_allocation_size", Help: "Histogram of CPU KV offload allocation sizes in blocks."}, Type: "histogram", Why: "allocation sizes; failures and usage are read"},
	{Name: Name{Name: "vllm:kv_offload_tiering_lookup_sync_delay_seconds", Help: "Histogram of synchronous tiering lookup delays in seconds."}, Type: "histogram", Why: "as kv_offload_lookup_sync_delay_seconds"},
	{Name: Name{Name: "vllm:kv_offload_tiering_lookup_async_delay_seconds", Help: "Histogram of asynchronous tiering lookup delays in seconds."}, Type: "histogram", Why: "as kv_offload_lookup_sync_delay_seconds"},
	{Name: Name{Name: "vllm:kv_offload_tiering_active_promotion_jobs", Help: "Number of active tiering promotion jobs."}, Type: "gauge", Why: "jobs in flight; their failures are read"},
	{Name: Name{Name: "vllm:kv_offload_tiering_active_cascade_jobs", Help: "Number of active tiering cascade jobs."}, Type: "gauge", Why: "as kv_offload_tiering_active_promotion_jobs"},
	{Name: Name{Name: "vllm:tool_call_parser_invocations_total", Help: "Total number of ToolParser invocations. Non-streaming increments once per choice; streaming increments once per delta."}, Type: "counter", Why: "tool-call parsing outcomes, an application concern"},
	{Name: Name{Name: "vllm:websocket_connections_active", Help: "Number of active realtime websocket connections."}, Type: "gauge", Why: "the realtime (audio) task only"},
	{Name: Name{Name: "vllm:websocket_connections_total", Help: "Total number of realtime websocket connections."}, Type: "counter", Why: "the realtime (audio) task only"},
	{Name: Name{Name: "vllm:websocket_connection_duration_seconds", Help: "Histogram of realtime websocket connection durations in seconds."}, Type: "histogram", Why: "the realtime (audio) task only"},
	{Name: Name{Name: "vllm:eplb_rebalancing", Help: "Whether expert-parallel load balancing is rebalancing."}, Type: "gauge", Why: "expert parallelism internals (later upstream addition)"},
	{Name: Name{Name: "vllm:eplb_rebalance_events_total", Help: "Number of expert-parallel load balancing rebalances."}, Type: "counter", Why: "as eplb_rebalancing"},
	{Name: Name{Name: "vllm:worker_model_execute_time_seconds", Help: "Histogram of worker model execution time in seconds."}, Type: "histogram", Why: "per-phase worker timings (later upstream addition); the request phases are read"},
	{Name: Name{Name: "vllm:worker_spec_decode_proposer_time_seconds", Help: "Histogram of worker speculative-decoding proposer time in seconds."}, Type: "histogram", Why: "as worker_model_execute_time_seconds"},
	{Name: Name{Name: "vllm:worker_step_time_seconds", Help: "Histogram of worker step time in seconds."}, Type: "histogram", Why: "as worker_model_execute_time_seconds"},
	{Name: Name{Name: "vllm:structured_output_cache_queries_total", Help: "Structured output cache queries."}, Type: "counter", Why: "grammar compilation cache (later upstream addition)"},
	{Name: Name{Name: "vllm:structured_output_cache_hits_total", Help: "Structured output cache hits."}, Type: "counter", Why: "as structured_output_cache_queries"},
	{Name: Name{Name: "vllm:time_in_queue_requests", Help: "Histogram of time the request spent in the queue in seconds.", Sim: Sim{Source: "queue", Buckets: latencyBuckets, Custom: "request_latency"}},
		Type: "histogram", Why: "V0's copy of vllm:request_queue_time_seconds (deprecated 0.8.0, removed 0.9.1)"},
	{Name: Name{Name: "vllm:gpu_prefix_cache_hit_rate", Help: "GPU prefix cache block hit rate.", Sim: Sim{Source: "gpu_prefix_hit_rate"}},
		Type: "gauge", Why: "V0's since-start block hit rate (-1 without prefix caching); the exporter derives the ratio from the counters"},
	{Name: Name{Name: "vllm:cpu_prefix_cache_hit_rate", Help: "CPU prefix cache block hit rate.", Sim: Sim{Source: "minus_one"}},
		Type: "gauge", Why: "V0's CPU block hit rate, -1 in practice"},
	{Name: Name{Server: ServerSGLang, Name: "sglang:inter_token_latency_seconds", Help: "Histogram of inter-token latency in seconds.", Sim: Sim{Source: "itl", Buckets: sglangITLBuckets, PerModel: true}},
		Type: "histogram", Why: "observed per token (each gap divided among the tokens it brought), where vLLM's inter-token latency is per engine step"},
	{Name: Name{Server: ServerSGLang, Name: "sglang:cache_hit_rate", Help: "The cache hit rate", Sim: Sim{Source: "zero"}},
		Type: "gauge", Why: "the last prefill batch's hit rate (a percentage in 2024 releases); the ratio over a window comes from the token counters"},
	{Name: Name{Server: ServerTRTLLM, Name: "trtllm_num_requests_completed_total", Help: "Number of completed requests.", Sim: Sim{}},
		Type: "counter", Why: "adds only the last drained iteration's completions (undercounts); finished requests come from trtllm_request_success_total"},
}

// Spec is what the simulator renders of one vLLM name: the name with its
// HELP and fill, and its TYPE.
type Spec struct {
	Name
	Type string
}

// specList is every name the table describes, rows first, in table
// order; specs the same by name.
var specList, specs = func() ([]Spec, map[string]Spec) {
	var list []Spec
	byName := map[string]Spec{}
	add := func(s Spec) {
		if _, seen := byName[s.Name.Name]; !seen {
			byName[s.Name.Name] = s
			list = append(list, s)
		}
	}
	for i := range Rows {
		for _, n := range Rows[i].Names {
			if n.Help != "" || n.Sim.Source != "" {
				add(Spec{Name: n, Type: Rows[i].VLLMType()})
			}
		}
	}
	for _, u := range Ignored {
		add(Spec{Name: u.Name, Type: u.Type})
	}
	return list, byName
}()

// Lookup returns the table's description of a vLLM name.
func Lookup(name string) (Spec, bool) {
	s, ok := specs[name]
	return s, ok
}

// Specs are every name the table describes, in table order.
func Specs() []Spec { return specList }
