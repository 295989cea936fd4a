package vllm

import (
	"strings"
	"testing"
)

func TestKeepNeeded(t *testing.T) {
	body := `# HELP python_info Python platform information
# TYPE python_info gauge
python_info{implementation="CPython",version="3.12.11"} 1.0
# a plain comment
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 7.0
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{engine="0",model_name="m"} 1.7e+09
vllm:e2e_request_latency_seconds_bucket{le="1.0",model_name="m"} 3.0
vllm:request_prompt_tokens_bucket{le="1.0",model_name="m"} 3.0 1700000000
process_open_fds 118.0
`
	kept, anyVLLM := keepNeeded([]byte(body))
	want := `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 7.0
vllm:e2e_request_latency_seconds_bucket{le="1.0",model_name="m"} 3.0
`
	if string(kept) != want || !anyVLLM {
		t.Fatalf("kept (anyVLLM %v):\n%s\nwant:\n%s", anyVLLM, kept, want)
	}

	// Only unneeded vllm:* families: still a vLLM body.
	if _, any := keepNeeded([]byte("vllm:iteration_tokens_total_sum{model_name=\"m\"} 5\n")); !any {
		t.Error("a body with only unneeded vllm:* families counted as not vLLM")
	}

	// Malformed lines of unneeded families are kept so the parser rejects them.
	for _, bad := range []string{
		"python_info{implementation=\"CPython\" 1.0\n", // unterminated label set
		"process_open_fds lots\n",                      // value is not a number
		"hello world\n",
		"process_open_fds 1 2 3\n",
	} {
		kept, _ := keepNeeded([]byte(bad))
		if !strings.Contains(string(kept), strings.TrimSpace(bad)) {
			t.Errorf("malformed line %q dropped", bad)
		}
		if _, err := parseBody([]byte(bad), "text/plain"); err == nil {
			t.Errorf("malformed line %q parsed without error", bad)
		}
	}
}
