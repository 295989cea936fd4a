package vllm

import (
	"bytes"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	sharedtest "github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// onlyGoldenFamilies makes the goldens whole-output: the scraper exports no
// family beyond those compared (and the wall-time scrape duration).
func onlyGoldenFamilies(t *testing.T, c prometheus.Collector) {
	t.Helper()
	for _, mf := range sharedtest.GatherAll(t, c) {
		n := mf.GetName()
		if !slices.Contains(goldenScalarNames, n) && !slices.Contains(goldenHistogramNames, n) && n != "vllm_exporter_scrape_duration_seconds" {
			t.Errorf("family %s is exported but not in the golden", n)
		}
	}
}

// The self and scalar series checked by the golden tests: everything the
// scraper exports except vllm_exporter_scrape_duration_seconds (wall time).
var goldenScalarNames = []string{
	"vllm_up", "vllm_requests_running", "vllm_requests_waiting", "vllm_requests_swapped",
	"vllm_kv_cache_usage_ratio", "vllm_cpu_kv_cache_usage_ratio",
	"vllm_engine_kv_cache_usage_ratio", "vllm_engine_requests_running", "vllm_engine_requests_waiting",
	"vllm_preemptions_total", "vllm_prompt_tokens_total", "vllm_generation_tokens_total",
	"vllm_prefix_cache_queries_total", "vllm_prefix_cache_hits_total", "vllm_requests_finished_total",
	"vllm_cache_config_info", "vllm_exporter_scrapes_total", "vllm_exporter_scrape_errors_total",
	"vllm_exporter_samples_dropped_total", "vllm_exporter_last_successful_scrape_timestamp_seconds", "vllm_exporter_vllm_schema_info",
	"vllm_exporter_expected_metric_missing", "vllm_pod_role_info", "vllm_server_info",
	// Windowed series need two scrapes; after one they must be absent.
	"vllm_preemptions_per_second", "vllm_prefix_cache_hit_ratio", "vllm_time_to_first_token_window_seconds",
	// Families of newer versions present in the 2026-08 body.
	"vllm_requests_waiting_by_reason", "vllm_engine_awake", "vllm_engine_sleep_level",
	"vllm_estimated_flops_per_gpu_total", "vllm_estimated_read_bytes_per_gpu_total", "vllm_estimated_write_bytes_per_gpu_total",
	"vllm_kv_cache_size_tokens", "vllm_kv_cache_max_concurrency", "vllm_prompt_tokens_by_source_total",
	"vllm_prompt_tokens_cached_total", "vllm_requests_refused_total",
	"vllm_spec_decode_drafts_total", "vllm_engine_healthy", "vllm_exporter_vllm_unexpected_label_values",
	"vllm_prompt_tokens_computed_per_second",
	// Registered always, 0 without a KV connector / multimodal input; LoRA
	// rows absent (V0 without LoRA says max_lora="0").
	"vllm_external_prefix_cache_queries_total", "vllm_external_prefix_cache_hits_total",
	"vllm_mm_cache_queries_total", "vllm_mm_cache_hits_total", "vllm_lora_slots", "vllm_lora_adapter_running",
}

var goldenHistogramNames = []string{
	"vllm_time_to_first_token_seconds", "vllm_inter_token_latency_seconds", "vllm_request_time_per_output_token_seconds",
	"vllm_e2e_request_latency_seconds", "vllm_request_queue_time_seconds", "vllm_request_prefill_time_seconds",
	"vllm_request_decode_time_seconds", "vllm_request_inference_time_seconds",
}

const noErrors = `
# TYPE vllm_exporter_scrapes_total counter
vllm_exporter_scrapes_total 1
# TYPE vllm_exporter_scrape_errors_total counter
vllm_exporter_scrape_errors_total{reason="body_too_large"} 0
vllm_exporter_scrape_errors_total{reason="connect"} 0
vllm_exporter_scrape_errors_total{reason="http_4xx"} 0
vllm_exporter_scrape_errors_total{reason="http_5xx"} 0
vllm_exporter_scrape_errors_total{reason="http_status"} 0
vllm_exporter_scrape_errors_total{reason="parse"} 0
vllm_exporter_scrape_errors_total{reason="timeout"} 0
vllm_exporter_scrape_errors_total{reason="tls"} 0
vllm_exporter_scrape_errors_total{reason="too_many_series"} 0
# TYPE vllm_exporter_samples_dropped_total counter
vllm_exporter_samples_dropped_total{reason="bucket_mismatch"} 0
vllm_exporter_samples_dropped_total{reason="duplicate"} 0
vllm_exporter_samples_dropped_total{reason="engine_limit"} 0
vllm_exporter_samples_dropped_total{reason="finished_reason_limit"} 0
vllm_exporter_samples_dropped_total{reason="invalid_histogram"} 0
vllm_exporter_samples_dropped_total{reason="label_value_too_long"} 0
vllm_exporter_samples_dropped_total{reason="line_too_long"} 0
vllm_exporter_samples_dropped_total{reason="lora_adapter_limit"} 0
vllm_exporter_samples_dropped_total{reason="model_limit"} 0
vllm_exporter_samples_dropped_total{reason="negative_counter"} 0
vllm_exporter_samples_dropped_total{reason="non_finite"} 0
`

func TestGoldenV1Main(t *testing.T) {
	// Served as vLLM main with prometheus_client >= 0.23 would: text 1.0.0.
	srv := newFakeVLLM(t, fixture(t, "vllm-main-2026-08-v1.txt"), "text/plain; version=1.0.0; charset=utf-8")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)

	// Every value below is read off vllm-main-2026-08-v1.txt (one engine,
	// engine="0", so sums and maxima over engines are the values themselves).
	compareNoHelp(t, s, noErrors+`
# TYPE vllm_up gauge
vllm_up 1
# t0 = 1786351200
# TYPE vllm_exporter_last_successful_scrape_timestamp_seconds gauge
vllm_exporter_last_successful_scrape_timestamp_seconds 1.7863512e+09
# kv_cache_usage_perc exists: schema v1
# TYPE vllm_exporter_vllm_schema_info gauge
vllm_exporter_vllm_schema_info{schema="v1"} 1
# the fake serves no /v1/models: the server is learnt from the vllm: names
# TYPE vllm_server_info gauge
vllm_server_info{server="vllm",source="detected",version=""} 1
# num_requests_running 7.0, num_requests_waiting 2.0
# TYPE vllm_requests_running gauge
vllm_requests_running{model="meta-llama/Llama-3.1-8B-Instruct"} 7
# TYPE vllm_requests_waiting gauge
vllm_requests_waiting{model="meta-llama/Llama-3.1-8B-Instruct"} 2
# kv_cache_usage_perc 0.3142486578
# TYPE vllm_kv_cache_usage_ratio gauge
vllm_kv_cache_usage_ratio{model="meta-llama/Llama-3.1-8B-Instruct"} 0.3142486578
# num_preemptions_total 3.0, prompt_tokens_total 834665.0, generation_tokens_total 270297.0
# TYPE vllm_preemptions_total counter
vllm_preemptions_total{model="meta-llama/Llama-3.1-8B-Instruct"} 3
# TYPE vllm_prompt_tokens_total counter
vllm_prompt_tokens_total{model="meta-llama/Llama-3.1-8B-Instruct"} 834665
# TYPE vllm_generation_tokens_total counter
vllm_generation_tokens_total{model="meta-llama/Llama-3.1-8B-Instruct"} 270297
# prefix_cache_queries_total 834665.0, prefix_cache_hits_total 260320.0 (tokens)
# TYPE vllm_prefix_cache_queries_total counter
vllm_prefix_cache_queries_total{model="meta-llama/Llama-3.1-8B-Instruct"} 834665
# TYPE vllm_prefix_cache_hits_total counter
vllm_prefix_cache_hits_total{model="meta-llama/Llama-3.1-8B-Instruct"} 260320
# request_success_total: stop 1158, length 90, abort 2, error 0, repetition 0 (pre-created)
# TYPE vllm_requests_finished_total counter
vllm_requests_finished_total{finished_reason="abort",model="meta-llama/Llama-3.1-8B-Instruct"} 2
vllm_requests_finished_total{finished_reason="error",model="meta-llama/Llama-3.1-8B-Instruct"} 0
vllm_requests_finished_total{finished_reason="length",model="meta-llama/Llama-3.1-8B-Instruct"} 90
vllm_requests_finished_total{finished_reason="repetition",model="meta-llama/Llama-3.1-8B-Instruct"} 0
vllm_requests_finished_total{finished_reason="stop",model="meta-llama/Llama-3.1-8B-Instruct"} 1158
# cache_config_info: block_size 16, cache_dtype auto, enable_prefix_caching True, gpu_memory_utilization 0.92, num_gpu_blocks 27412
# TYPE vllm_cache_config_info gauge
vllm_cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",gpu_memory_utilization="0.92",model="meta-llama/Llama-3.1-8B-Instruct",num_gpu_blocks="27412"} 1
# no NIXL connector, no --vllm.role: an aggregated pod, both by default
# TYPE vllm_pod_role_info gauge
vllm_pod_role_info{model="meta-llama/Llama-3.1-8B-Instruct",role="both",source="default"} 1
# 17 families expected for v1 without gpu_* names; all present.
# TYPE vllm_exporter_expected_metric_missing gauge
vllm_exporter_expected_metric_missing{metric="vllm:cache_config_info"} 0
vllm_exporter_expected_metric_missing{metric="vllm:e2e_request_latency_seconds"} 0
vllm_exporter_expected_metric_missing{metric="vllm:generation_tokens_total"} 0
vllm_exporter_expected_metric_missing{metric="vllm:inter_token_latency_seconds"} 0
vllm_exporter_expected_metric_missing{metric="vllm:kv_cache_usage_perc"} 0
vllm_exporter_expected_metric_missing{metric="vllm:num_preemptions_total"} 0
vllm_exporter_expected_metric_missing{metric="vllm:num_requests_running"} 0
vllm_exporter_expected_metric_missing{metric="vllm:num_requests_waiting"} 0
vllm_exporter_expected_metric_missing{metric="vllm:prefix_cache_hits_total"} 0
vllm_exporter_expected_metric_missing{metric="vllm:prefix_cache_queries_total"} 0
vllm_exporter_expected_metric_missing{metric="vllm:prompt_tokens_total"} 0
vllm_exporter_expected_metric_missing{metric="vllm:request_decode_time_seconds"} 0
vllm_exporter_expected_metric_missing{metric="vllm:request_inference_time_seconds"} 0
vllm_exporter_expected_metric_missing{metric="vllm:request_prefill_time_seconds"} 0
vllm_exporter_expected_metric_missing{metric="vllm:request_queue_time_seconds"} 0
vllm_exporter_expected_metric_missing{metric="vllm:request_success_total"} 0
vllm_exporter_expected_metric_missing{metric="vllm:request_time_per_output_token_seconds"} 0
vllm_exporter_expected_metric_missing{metric="vllm:time_to_first_token_seconds"} 0
# num_requests_waiting_by_reason: capacity 2.0, deferred 0.0
# TYPE vllm_requests_waiting_by_reason gauge
vllm_requests_waiting_by_reason{model="meta-llama/Llama-3.1-8B-Instruct",reason="capacity"} 2
vllm_requests_waiting_by_reason{model="meta-llama/Llama-3.1-8B-Instruct",reason="deferred"} 0
# engine_sleep_state: awake 1, weights_offloaded 0, discard_all 0
# TYPE vllm_engine_awake gauge
vllm_engine_awake{model="meta-llama/Llama-3.1-8B-Instruct"} 1
# TYPE vllm_engine_sleep_level gauge
vllm_engine_sleep_level{model="meta-llama/Llama-3.1-8B-Instruct"} 0
# MFU counters registered unconditionally, 0 without --enable-mfu-metrics
# TYPE vllm_estimated_flops_per_gpu_total counter
vllm_estimated_flops_per_gpu_total{model="meta-llama/Llama-3.1-8B-Instruct"} 0
# TYPE vllm_estimated_read_bytes_per_gpu_total counter
vllm_estimated_read_bytes_per_gpu_total{model="meta-llama/Llama-3.1-8B-Instruct"} 0
# TYPE vllm_estimated_write_bytes_per_gpu_total counter
vllm_estimated_write_bytes_per_gpu_total{model="meta-llama/Llama-3.1-8B-Instruct"} 0
# cache_config_info kv_cache_size_tokens="438592", kv_cache_max_concurrency="53.54"
# TYPE vllm_kv_cache_size_tokens gauge
vllm_kv_cache_size_tokens{model="meta-llama/Llama-3.1-8B-Instruct"} 438592
# TYPE vllm_kv_cache_max_concurrency gauge
vllm_kv_cache_max_concurrency{model="meta-llama/Llama-3.1-8B-Instruct"} 53.54
# prompt_tokens_by_source_total: local_compute 574345, local_cache_hit 260320, external 0; cached 260320
# TYPE vllm_prompt_tokens_by_source_total counter
vllm_prompt_tokens_by_source_total{model="meta-llama/Llama-3.1-8B-Instruct",source="external_kv_transfer"} 0
vllm_prompt_tokens_by_source_total{model="meta-llama/Llama-3.1-8B-Instruct",source="local_cache_hit"} 260320
vllm_prompt_tokens_by_source_total{model="meta-llama/Llama-3.1-8B-Instruct",source="local_compute"} 574345
# TYPE vllm_prompt_tokens_cached_total counter
vllm_prompt_tokens_cached_total{model="meta-llama/Llama-3.1-8B-Instruct"} 260320
# http_requests_total: no 5xx line in the body, only 2xx and 4xx: 0 refused
# TYPE vllm_requests_refused_total counter
vllm_requests_refused_total{model="meta-llama/Llama-3.1-8B-Instruct"} 0
# external and multimodal cache counters: registered, 0
# TYPE vllm_external_prefix_cache_hits_total counter
vllm_external_prefix_cache_hits_total{model="meta-llama/Llama-3.1-8B-Instruct"} 0
# TYPE vllm_external_prefix_cache_queries_total counter
vllm_external_prefix_cache_queries_total{model="meta-llama/Llama-3.1-8B-Instruct"} 0
# TYPE vllm_mm_cache_hits_total counter
vllm_mm_cache_hits_total{model="meta-llama/Llama-3.1-8B-Instruct"} 0
# TYPE vllm_mm_cache_queries_total counter
vllm_mm_cache_queries_total{model="meta-llama/Llama-3.1-8B-Instruct"} 0
`, goldenScalarNames...)

	// The eight latency histograms, bucket for bucket: testdata/golden-v1-histograms.prom
	// is vLLM's lines for those families with vllm: -> vllm_, model_name -> model
	// and engine dropped (see the comment in TestGoldenV0Multiprocess).
	if err := testutil.CollectAndCompare(s, bytes.NewReader(fixture(t, "golden-v1-histograms.prom")), goldenHistogramNames...); err != nil {
		t.Fatal(err)
	}
	onlyGoldenFamilies(t, s)
}

func TestGoldenV0Multiprocess(t *testing.T) {
	srv := newFakeVLLM(t, fixture(t, "vllm-0.7.3-v0-multiprocess.txt"), "text/plain; version=0.0.4; charset=utf-8")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)

	// Values from vllm-0.7.3-v0-multiprocess.txt. V0 has no engine label,
	// no prefix-cache counters (only hit-rate gauges at -1, not exported),
	// and still the swapped / CPU-cache gauges.
	compareNoHelp(t, s, noErrors+`
# TYPE vllm_up gauge
vllm_up 1
# TYPE vllm_exporter_last_successful_scrape_timestamp_seconds gauge
vllm_exporter_last_successful_scrape_timestamp_seconds 1.7863512e+09
# no kv_cache_usage_perc, no prefix counters, no engine label, V0 HELP: v0
# TYPE vllm_exporter_vllm_schema_info gauge
vllm_exporter_vllm_schema_info{schema="v0"} 1
# the fake serves no /v1/models: the server is learnt from the vllm: names
# TYPE vllm_server_info gauge
vllm_server_info{server="vllm",source="detected",version=""} 1
# TYPE vllm_requests_running gauge
vllm_requests_running{model="meta-llama/Llama-3.1-8B-Instruct"} 7
# TYPE vllm_requests_waiting gauge
vllm_requests_waiting{model="meta-llama/Llama-3.1-8B-Instruct"} 2
# num_requests_swapped 0.0, cpu_cache_usage_perc 0.0: present, so exported as 0
# TYPE vllm_requests_swapped gauge
vllm_requests_swapped{model="meta-llama/Llama-3.1-8B-Instruct"} 0
# TYPE vllm_cpu_kv_cache_usage_ratio gauge
vllm_cpu_kv_cache_usage_ratio{model="meta-llama/Llama-3.1-8B-Instruct"} 0
# gpu_cache_usage_perc 0.2761049166
# TYPE vllm_kv_cache_usage_ratio gauge
vllm_kv_cache_usage_ratio{model="meta-llama/Llama-3.1-8B-Instruct"} 0.2761049166
# TYPE vllm_preemptions_total counter
vllm_preemptions_total{model="meta-llama/Llama-3.1-8B-Instruct"} 3
# prompt_tokens_total 832617.0, generation_tokens_total 270297.0
# TYPE vllm_prompt_tokens_total counter
vllm_prompt_tokens_total{model="meta-llama/Llama-3.1-8B-Instruct"} 832617
# TYPE vllm_generation_tokens_total counter
vllm_generation_tokens_total{model="meta-llama/Llama-3.1-8B-Instruct"} 270297
# only the reasons V0 has seen: stop 1158, length 90
# TYPE vllm_requests_finished_total counter
vllm_requests_finished_total{finished_reason="length",model="meta-llama/Llama-3.1-8B-Instruct"} 90
vllm_requests_finished_total{finished_reason="stop",model="meta-llama/Llama-3.1-8B-Instruct"} 1158
# V0 cache_config_info: no engine label, gpu_memory_utilization 0.9, prefix caching off
# TYPE vllm_cache_config_info gauge
vllm_cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="False",gpu_memory_utilization="0.9",model="meta-llama/Llama-3.1-8B-Instruct",num_gpu_blocks="27412"} 1
# no NIXL connector, no --vllm.role: an aggregated pod, both by default
# TYPE vllm_pod_role_info gauge
vllm_pod_role_info{model="meta-llama/Llama-3.1-8B-Instruct",role="both",source="default"} 1
# 15 expected for v0 (no prefix counters, no per-request TPOT); ITL under its V0 name.
# TYPE vllm_exporter_expected_metric_missing gauge
vllm_exporter_expected_metric_missing{metric="vllm:cache_config_info"} 0
vllm_exporter_expected_metric_missing{metric="vllm:e2e_request_latency_seconds"} 0
vllm_exporter_expected_metric_missing{metric="vllm:generation_tokens_total"} 0
vllm_exporter_expected_metric_missing{metric="vllm:time_per_output_token_seconds"} 0
vllm_exporter_expected_metric_missing{metric="vllm:gpu_cache_usage_perc"} 0
vllm_exporter_expected_metric_missing{metric="vllm:num_preemptions_total"} 0
vllm_exporter_expected_metric_missing{metric="vllm:num_requests_running"} 0
vllm_exporter_expected_metric_missing{metric="vllm:num_requests_waiting"} 0
vllm_exporter_expected_metric_missing{metric="vllm:prompt_tokens_total"} 0
vllm_exporter_expected_metric_missing{metric="vllm:request_decode_time_seconds"} 0
vllm_exporter_expected_metric_missing{metric="vllm:request_inference_time_seconds"} 0
vllm_exporter_expected_metric_missing{metric="vllm:request_prefill_time_seconds"} 0
vllm_exporter_expected_metric_missing{metric="vllm:request_queue_time_seconds"} 0
vllm_exporter_expected_metric_missing{metric="vllm:request_success_total"} 0
vllm_exporter_expected_metric_missing{metric="vllm:time_to_first_token_seconds"} 0
`, goldenScalarNames...)

	// testdata/golden-v0-histograms.prom was written from the fixture by a
	// text transform independent of this package (rename vllm:X to vllm_X,
	// time_per_output_token to inter_token_latency, model_name to model,
	// keep vLLM's bucket, _sum and _count values); V0 in multiprocess mode
	// prints _sum first, which must not matter. No per-request TPOT in V0.
	if err := testutil.CollectAndCompare(s, bytes.NewReader(fixture(t, "golden-v0-histograms.prom")), goldenHistogramNames...); err != nil {
		t.Fatal(err)
	}
	onlyGoldenFamilies(t, s)
}
