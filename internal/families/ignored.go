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
	{Name: Name{Name: "vllm:request_prompt_tokens", Help: "Number of prefill tokens processed.", Sim: Sim{Source: "request_prompt_tokens", Tokens: true, Custom: "request_tokens"}},
		Type: "histogram", Why: "per-request prompt lengths; prompt tokens are read from vllm:prompt_tokens_total"},
	{Name: Name{Name: "vllm:request_generation_tokens", Help: "Number of generation tokens processed.", Sim: Sim{Source: "request_generation_tokens", Tokens: true, Custom: "request_tokens"}},
		Type: "histogram", Why: "per-request output lengths; generated tokens are read from vllm:generation_tokens_total"},
	{Name: Name{Name: "vllm:iteration_tokens_total", Help: "Histogram of number of tokens per engine_step.", Sim: Sim{Source: "iteration_tokens", Buckets: []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}, Custom: "iteration_tokens"}},
		Type: "histogram", Why: "tokens per engine step"},
	{Name: Name{Name: "vllm:request_max_num_generation_tokens", Help: "Histogram of maximum number of requested generation tokens.", Sim: Sim{Source: "max_num_generation_tokens", Tokens: true, Custom: "request_tokens"}},
		Type: "histogram", Why: "parallel sampling's requested lengths"},
	{Name: Name{Name: "vllm:request_params_n", Help: "Histogram of the n request parameter.", Sim: Sim{Source: "params_n", Buckets: []float64{1, 2, 5, 10, 20}, Custom: "request_params_n"}},
		Type: "histogram", Why: "the n request parameter"},
	{Name: Name{Name: "vllm:request_params_max_tokens", Help: "Histogram of the max_tokens request parameter.", Sim: Sim{Source: "params_max_tokens", Tokens: true, Custom: "request_tokens"}},
		Type: "histogram", Why: "the max_tokens request parameter"},
	{Name: Name{Name: "vllm:spec_decode_num_accepted_tokens_per_pos_total", Help: "Accepted tokens per draft position.", Sim: Sim{Source: "spec_per_pos", Label: "position", When: "spec_decode"}},
		Type: "counter", Why: "acceptance per draft position; the mean acceptance length comes from the totals"},
	{Name: Name{Name: "vllm:scheduler_policy_info", Help: "Scheduler policy in use; 1 for the active policy, 0 for the others.", Sim: Sim{Source: "policy", Label: "policy", Values: []string{"fcfs", "priority"}}},
		Type: "gauge", Why: "the scheduling policy"},
	{Name: Name{Name: "vllm:request_num_preemptions", Help: "Histogram of the number of preemptions per finished request.", Sim: Sim{Source: "num_preemptions", Buckets: []float64{1, 2, 3, 4, 5, 10, 20}, Custom: "request_num_preemptions"}},
		Type: "histogram", Why: "preemptions per finished request"},
	{Name: Name{Name: "vllm:request_priority", Help: "Histogram of the priority of finished requests.", Sim: Sim{Source: "priority", Buckets: []float64{-100, -10, -1, 0, 1, 10, 100}, When: "priority"}},
		Type: "histogram", Why: "raw request priorities"},
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
