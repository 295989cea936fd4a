package dashboards

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// What issue 8 asks each dashboard to show. Each entry is a set of series
// that must appear together in one panel (e.g. server and probe TTFT side
// by side, DRAM bandwidth with its peak).
var requiredPanels = map[string][][]string{
	"vllm-overview.json": {
		// fleet-wide panels read the fleet recording rules
		// (alerts/vllm-recording.yml), the others the raw series
		{"model:vllm_slo_error_budget_remaining_ratio:min"},
		{"model:vllm_slo_alert_state:max"},
		{"model:vllm_bottleneck:max"},
		{"model:vllm_time_to_first_token_seconds:p99_rate5m", "vllm_probe_time_to_first_token_window_seconds"},
		// server TPOT falls back to ITL where vLLM has no per-request TPOT
		{"model:vllm_request_time_per_output_token_seconds:p99_rate5m", "model:vllm_inter_token_latency_seconds:p99_rate5m", "vllm_probe_time_per_output_token_window_seconds"},
		{"model:vllm_inter_token_latency_seconds:p50_rate5m", "vllm_probe_inter_token_latency_window_seconds"},
		{"model:vllm_prompt_tokens:rate5m", "model:vllm_generation_tokens:rate5m"},
		{"vllm_kv_cache_usage_ratio"},
		{"vllm_requests_waiting", "vllm_requests_running"},
		{"model:vllm_request_queue_time_seconds:p99_rate5m"},
		{"model:vllm_preemptions:rate5m"},
		// vLLM 0.12-0.33 (docs/vllm-versions.md)
		{"vllm_requests_waiting_by_reason"},
		{`vllm_bottleneck{class="deferred_livelock"`},
		{"vllm_requests_refused_total"},
		{"vllm_engine_awake", "vllm_engine_sleep_level"},
		{"vllm_engine_sleep_resource_state"},
		{"vllm_engine_healthy"},
		{"vllm_health_verdict"},
		{"vllm_spec_decode_accepted_tokens_total", "vllm_spec_decode_draft_tokens_total"},
		{"vllm_spec_decode_accepted_tokens_total", "vllm_spec_decode_drafts_total"},
		{"vllm_prompt_tokens_by_source_total"},
		{"vllm_kv_cache_size_tokens", "vllm_kv_cache_max_concurrency"},
		{"vllm_model_flops_utilization_ratio", "vllm_model_bandwidth_utilization_ratio"},
		// production vLLM (issue 24): admission, NIXL, LoRA, offload,
		// block residency, and a prefill/decode pair side by side
		{"vllm_requests_rejected_total", "vllm_requests_waiting"},
		{"vllm_kv_transfer_time_seconds_bucket", "vllm_kv_transfer_post_time_seconds_bucket"},
		{"vllm_kv_transfer_size_bytes_sum"},
		{"vllm_kv_transfer_failures_total", "vllm_kv_transfer_notification_failures_total", "vllm_kv_transfer_expired_requests_total"},
		{"vllm_lora_adapter_running", "vllm_lora_adapter_waiting"},
		{"vllm_lora_slots_used", "vllm_lora_slots{"},
		{"vllm_kv_offload_load_bytes_total", "vllm_kv_offload_store_bytes_total", "vllm_kv_offload_load_seconds_total", "vllm_kv_offload_store_seconds_total"},
		{"vllm_external_prefix_cache_hits_total", "vllm_external_prefix_cache_queries_total"},
		{"vllm_kv_block_lifetime_seconds_bucket", "vllm_kv_block_idle_before_evict_seconds_bucket", "vllm_kv_block_reuse_gap_seconds_bucket"},
		{`instance=~"$decode"`, "vllm_time_to_first_token_seconds_bucket", "vllm_kv_transfer_time_seconds_bucket"},
		{`instance=~"$prefill"`, "vllm_request_prefill_time_seconds_bucket"},
	},
	"vllm-slos.json": {
		{"model:vllm_slo_burn_rate:max"},
		{"model:vllm_slo_error_budget_remaining_ratio:min"},
		{"slo:sli_error:ratio_rate", "slo:objective:ratio"},
		{"slo:error_budget_remaining:ratio"},
	},
	"vllm-gpu.json": {
		{"vllm_gpu_utilization_ratio"},
		{"vllm_gpu_dram_bandwidth_utilization_ratio", "vllm_gpu_memory_bandwidth_peak_bytes_per_second"},
		{"vllm_gpu_sm_clock_hertz", "vllm_gpu_sm_clock_max_hertz"},
		{"vllm_gpu_clock_event_active"},
		{"vllm_gpu_power_watts", "vllm_gpu_power_limit_watts"},
	},
	"vllm-probes.json": {
		{"vllm_probe_time_to_first_token_window_seconds"},
		{"vllm_probe_time_per_output_token_window_seconds"},
		{"vllm_probe_inter_token_latency_window_seconds"},
		{"vllm_probe_e2e_latency_window_seconds"},
		{"vllm_probe_time_to_first_token_seconds_bucket", "vllm_probe_e2e_latency_seconds_bucket"},
		{"vllm_probe_failures_total"},
		{"vllm_probe_ttft_gap_seconds"},
	},
}

func TestDashboardsShowWhatTheIssueAsks(t *testing.T) {
	for file, want := range requiredPanels {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, names := range want {
			found := false
			for _, p := range d.Panels {
				var all strings.Builder
				for _, tg := range p.Targets {
					all.WriteString(tg.Expr + "\n")
				}
				ok := true
				for _, n := range names {
					ok = ok && strings.Contains(all.String(), n)
				}
				if ok {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: no panel shows %s together", file, strings.Join(names, " and "))
			}
		}
	}
}
