package bottleneck

import "github.com/vllm-exporter/vllm_exporter/internal/families"

// Reasons a class cannot be reached because the server has no family for
// its rule's input (the `reason` label of vllm_bottleneck_class_unavailable):
// SGLang and trtllm-serve lack some of vLLM's (docs/exporter.md's engine
// tables).
const (
	ReasonNoPreemptions = "no_preemption_counter"
	ReasonNoTPOT        = "no_tpot_histogram"
)

// needs are the exported series one of which a class's rule reads, and the
// reason it is unavailable without them.
var needs = []struct {
	classes []Class
	series  []string
	reason  string
}{
	{[]Class{TooManySequences}, []string{"vllm_preemptions_total"}, ReasonNoPreemptions},
	{[]Class{Throttled, CommunicationBound, MemoryBoundDecode, DecodeOverhead},
		[]string{"vllm_inter_token_latency_seconds", "vllm_request_time_per_output_token_seconds"}, ReasonNoTPOT},
}

// MissingInputs lists the classes whose rule reads a series the server of
// a body of schema has no family for, with why: that rule never holds,
// so its class is no verdict the classifier can reach there
// (too_many_sequences on trtllm-serve, the decode-side classes on SGLang).
func MissingInputs(schema string) map[Class]string {
	server := families.ServerOf(schema)
	fills := map[string]bool{}
	for i := range families.Rows {
		if f := &families.Rows[i]; len(f.NamesOf(server)) > 0 {
			fills[f.Exported] = true
		}
	}
	out := map[Class]string{}
	for _, n := range needs {
		any := false
		for _, s := range n.series {
			any = any || fills[s]
		}
		for _, c := range n.classes {
			if !any {
				out[c] = n.reason
			}
		}
	}
	return out
}
