package vllm

import (
	"fmt"
	"strings"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// kind is how a source family is read and how data-parallel engines combine.
type kind int

const (
	kindGauge          kind = iota // summed over engines
	kindGaugeMax                   // max over engines (a ratio of one engine's pool)
	kindCounter                    // summed over engines
	kindHistogram                  // bucket-wise sum over engines
	kindInfo                       // labels only
	kindStateSet                   // one sample per state, value 1 for the current one
	kindGaugeMin                   // min over engines (a health or awake flag)
	kindCounterMean                // mean over engines (a per-GPU counter of each engine's GPUs)
	kindTokenHistogram             // a token-count histogram: only _sum and _count are read, summed over engines
	kindServer                     // no model_name label: the whole server
)

func (k kind) String() string {
	return [...]string{"gauge (sum over engines)", "gauge (max over engines)", "counter (sum over engines)", "histogram (sum over engines)", "info",
		"state set (least awake over engines)", "gauge (min over engines)", "counter (mean over engines)",
		"token histogram (_sum/_count, sum over engines)", "server-wide (no model_name; counted for every model)"}[k]
}

// field identifies what a source family fills in a snapshot.Model.
type field int

const (
	fRunning field = iota
	fWaiting
	fSwapped
	fKVUsage
	fCPUKVUsage
	fPreemptions
	fPromptTokens
	fGenerationTokens
	fPrefixQueries
	fPrefixHits
	fFinished
	fCacheConfig
	fHistogram // Hist says which
	fWaitingByReason
	fSleepState
	fFullyAwake
	fSleepResource
	fEngineHealthy
	fSpecDrafts
	fSpecDraftTokens
	fSpecAccepted
	fPromptBySource
	fPromptCached
	fPrefillKVComputed
	fFlops
	fReadBytes
	fWriteBytes
	fHTTPRequests
	fFromCacheConfig // read from vllm:cache_config_info's labels (documentation row only)
)

// source is one row of the name-normalization table: a stable exported
// series and the vLLM families it is read from. Names are in order of
// preference; the first one present in a scrape wins and the others are
// ignored, because vLLM emits old and new names with identical values during
// its deprecation periods and adding them would double-count.
type source struct {
	Exported string // our series (without window/quantile variants)
	Names    []string
	Kind     kind
	Field    field
	Hist     snapshot.HistogramName // for fHistogram
	// Expected says for which detected schemas a missing family is reported
	// by vllm_exporter_expected_metric_missing.
	Expected func(schema string, has func(name string) bool) bool
	Versions string // documentation: which vLLM versions emit which name
}

// Schemas the detector reports (vllm_exporter_vllm_schema_info{schema}).
const (
	SchemaV0       = "v0"        // V0 engine (default through 0.7.x, optional to 0.10.x)
	SchemaV1Legacy = "v1-legacy" // V1 engine before the 0.9.2 renames (gpu_cache_usage_perc, gpu_prefix_cache_*)
	SchemaV1       = "v1"        // V1 engine with kv_cache_usage_perc (0.9.2+)
	SchemaNone     = "none"      // no vllm:* family at all (--disable-log-stats, or not vLLM)
)

func always(string, func(string) bool) bool   { return true }
func neverExp(string, func(string) bool) bool { return false }
func v1Only(s string, _ func(string) bool) bool {
	return s == SchemaV1Legacy || s == SchemaV1
}

// afterGPUNamesGone: the per-request TPOT histogram arrived (≈0.11) together
// with the hiding of the gpu_* names, so its absence is only news once
// gpu_cache_usage_perc is gone too.
func afterGPUNamesGone(s string, has func(string) bool) bool {
	return s == SchemaV1 && !has("vllm:gpu_cache_usage_perc")
}

// sources is the name-normalization table. docs/exporter.md shows the table rendered from it
// (see MarkdownTable), so code and documentation cannot drift apart.
var sources = []source{
	{Exported: "vllm_requests_running", Names: []string{"vllm:num_requests_running"}, Kind: kindGauge, Field: fRunning, Expected: always,
		Versions: "all versions"},
	{Exported: "vllm_requests_waiting", Names: []string{"vllm:num_requests_waiting"}, Kind: kindGauge, Field: fWaiting, Expected: always,
		Versions: "all versions (≈0.20+: includes deferred requests)"},
	{Exported: "vllm_requests_swapped", Names: []string{"vllm:num_requests_swapped"}, Kind: kindGauge, Field: fSwapped, Expected: neverExp,
		Versions: "V0 only, ≤0.9.0"},
	{Exported: "vllm_kv_cache_usage_ratio", Names: []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}, Kind: kindGaugeMax, Field: fKVUsage, Expected: always,
		Versions: "`kv_cache_usage_perc` 0.9.2+; `gpu_cache_usage_perc` V0 and V1 ≤0.11 (hidden ≈0.11, removed ≈0.12)"},
	{Exported: "vllm_cpu_kv_cache_usage_ratio", Names: []string{"vllm:cpu_cache_usage_perc"}, Kind: kindGaugeMax, Field: fCPUKVUsage, Expected: neverExp,
		Versions: "V0 only, ≤0.9.0"},
	{Exported: "vllm_preemptions_total", Names: []string{"vllm:num_preemptions_total"}, Kind: kindCounter, Field: fPreemptions, Expected: always,
		Versions: "all versions"},
	{Exported: "vllm_prompt_tokens_total", Names: []string{"vllm:prompt_tokens_total"}, Kind: kindCounter, Field: fPromptTokens, Expected: always,
		Versions: "all versions"},
	{Exported: "vllm_generation_tokens_total", Names: []string{"vllm:generation_tokens_total"}, Kind: kindCounter, Field: fGenerationTokens, Expected: always,
		Versions: "all versions"},
	{Exported: "vllm_prefix_cache_queries_total", Names: []string{"vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"}, Kind: kindCounter, Field: fPrefixQueries, Expected: v1Only,
		Versions: "V1 only: `gpu_prefix_cache_*` 0.8.0–≈0.11 (blocks before 0.9.0, tokens after); `prefix_cache_*` 0.9.2+. V0 has no counters"},
	{Exported: "vllm_prefix_cache_hits_total", Names: []string{"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"}, Kind: kindCounter, Field: fPrefixHits, Expected: v1Only,
		Versions: "as prefix_cache_queries"},
	{Exported: "vllm_requests_finished_total", Names: []string{"vllm:request_success_total"}, Kind: kindCounter, Field: fFinished, Expected: always,
		Versions: "all versions, label `finished_reason` (V1 pre-creates stop/length/abort/error/repetition; V0 only after first use)"},
	{Exported: "vllm_cache_config_info", Names: []string{"vllm:cache_config_info"}, Kind: kindInfo, Field: fCacheConfig, Expected: always,
		Versions: "all versions; label set changes every release (five are re-exported)"},
	{Exported: "vllm_kv_cache_size_tokens", Names: []string{"vllm:cache_config_info"}, Kind: kindInfo, Field: fFromCacheConfig, Expected: neverExp,
		Versions: "label `kv_cache_size_tokens` ≈0.24+ (#42206, 2026-06); preferred over memory arithmetic in the roofline"},
	{Exported: "vllm_kv_cache_max_concurrency", Names: []string{"vllm:cache_config_info"}, Kind: kindInfo, Field: fFromCacheConfig, Expected: neverExp,
		Versions: "label `kv_cache_max_concurrency` ≈0.24+ (#42206)"},
	{Exported: "vllm_requests_waiting_by_reason", Names: []string{"vllm:num_requests_waiting_by_reason"}, Kind: kindGauge, Field: fWaitingByReason, Expected: neverExp,
		Versions: "≈0.20+ (#38435), label `reason` (`capacity`, `deferred`); queueing uses `capacity`"},
	{Exported: "vllm_engine_awake", Names: []string{"vllm:engine_sleep_state"}, Kind: kindStateSet, Field: fSleepState, Expected: neverExp,
		Versions: "≈0.11.1/0.12+, label `sleep_state` (`awake`, `weights_offloaded` = level 1, `discard_all` = level 2); also `vllm_engine_sleep_level`"},
	{Exported: "vllm_engine_awake", Names: []string{"vllm:engine_fully_awake"}, Kind: kindGaugeMin, Field: fFullyAwake, Expected: neverExp,
		Versions: "late 2026 (per-resource sleep model): 0 while any resource sleeps"},
	{Exported: "vllm_engine_sleep_resource_state", Names: []string{"vllm:engine_sleep_resource_state"}, Kind: kindStateSet, Field: fSleepResource, Expected: neverExp,
		Versions: "late 2026, labels `resource` (`scheduler`, `weights`, `kv_cache`), `state`"},
	{Exported: "vllm_engine_healthy", Names: []string{"vllm:engine_healthy"}, Kind: kindGaugeMin, Field: fEngineHealthy, Expected: neverExp,
		Versions: "late 2026, only with `--enable-fault-tolerance`; labelled by `engine` only, so it applies to every model"},
	{Exported: "vllm_spec_decode_drafts_total", Names: []string{"vllm:spec_decode_num_drafts_total"}, Kind: kindCounter, Field: fSpecDrafts, Expected: neverExp,
		Versions: "V1 0.8.5+, only with speculative decoding"},
	{Exported: "vllm_spec_decode_draft_tokens_total", Names: []string{"vllm:spec_decode_num_draft_tokens_total"}, Kind: kindCounter, Field: fSpecDraftTokens, Expected: neverExp,
		Versions: "V1 0.8.3+, only with speculative decoding"},
	{Exported: "vllm_spec_decode_accepted_tokens_total", Names: []string{"vllm:spec_decode_num_accepted_tokens_total"}, Kind: kindCounter, Field: fSpecAccepted, Expected: neverExp,
		Versions: "V1 0.8.3+, only with speculative decoding"},
	{Exported: "vllm_prompt_tokens_by_source_total", Names: []string{"vllm:prompt_tokens_by_source_total"}, Kind: kindCounter, Field: fPromptBySource, Expected: neverExp,
		Versions: "≈0.16+ (#33290), label `source` (`local_compute`, `local_cache_hit`, `external_kv_transfer`)"},
	{Exported: "vllm_prompt_tokens_cached_total", Names: []string{"vllm:prompt_tokens_cached_total"}, Kind: kindCounter, Field: fPromptCached, Expected: neverExp,
		Versions: "≈0.16+ (#33290)"},
	{Exported: "vllm_prompt_tokens_computed_per_second", Names: []string{"vllm:request_prefill_kv_computed_tokens"}, Kind: kindTokenHistogram, Field: fPrefillKVComputed, Expected: neverExp,
		Versions: "≈0.13+ (#30189); the computed-token rate's fallback when `prompt_tokens_by_source` is absent"},
	{Exported: "vllm_estimated_flops_per_gpu_total", Names: []string{"vllm:estimated_flops_per_gpu_total"}, Kind: kindCounterMean, Field: fFlops, Expected: neverExp,
		Versions: "≈0.17+ (#30950); 0 unless `--enable-mfu-metrics`"},
	{Exported: "vllm_estimated_read_bytes_per_gpu_total", Names: []string{"vllm:estimated_read_bytes_per_gpu_total"}, Kind: kindCounterMean, Field: fReadBytes, Expected: neverExp,
		Versions: "≈0.17+; 0 unless `--enable-mfu-metrics`"},
	{Exported: "vllm_estimated_write_bytes_per_gpu_total", Names: []string{"vllm:estimated_write_bytes_per_gpu_total"}, Kind: kindCounterMean, Field: fWriteBytes, Expected: neverExp,
		Versions: "≈0.17+; 0 unless `--enable-mfu-metrics`"},
	{Exported: "vllm_requests_refused_total", Names: []string{"http_requests_total"}, Kind: kindServer, Field: fHTTPRequests, Expected: neverExp,
		Versions: "0.8.3+ (HTTP instrumentator); `status` 5xx (and 429 when codes are not grouped) summed over handlers"},
	{Exported: "vllm_time_to_first_token_seconds", Names: []string{"vllm:time_to_first_token_seconds"}, Kind: kindHistogram, Field: fHistogram, Hist: snapshot.TTFT, Expected: always,
		Versions: "all versions; buckets extended to 2560 s in 0.8.4"},
	{Exported: "vllm_inter_token_latency_seconds", Names: []string{"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"}, Kind: kindHistogram, Field: fHistogram, Hist: snapshot.InterTokenLatency, Expected: always,
		Versions: "`inter_token_latency_seconds` 0.10.2+; `time_per_output_token_seconds` (same per-step observations) up to ≈0.14"},
	{Exported: "vllm_request_time_per_output_token_seconds", Names: []string{"vllm:request_time_per_output_token_seconds"}, Kind: kindHistogram, Field: fHistogram, Hist: snapshot.RequestTPOT,
		Expected: afterGPUNamesGone,
		Versions: "V1 ≈0.11+"},
	{Exported: "vllm_e2e_request_latency_seconds", Names: []string{"vllm:e2e_request_latency_seconds"}, Kind: kindHistogram, Field: fHistogram, Hist: snapshot.E2E, Expected: always,
		Versions: "all versions"},
	{Exported: "vllm_request_queue_time_seconds", Names: []string{"vllm:request_queue_time_seconds"}, Kind: kindHistogram, Field: fHistogram, Hist: snapshot.QueueTime, Expected: always,
		Versions: "V0 0.6.4+, V1 0.8.0+"},
	{Exported: "vllm_request_prefill_time_seconds", Names: []string{"vllm:request_prefill_time_seconds"}, Kind: kindHistogram, Field: fHistogram, Hist: snapshot.PrefillTime, Expected: always,
		Versions: "V0 0.6.4+, V1 0.8.0+"},
	{Exported: "vllm_request_decode_time_seconds", Names: []string{"vllm:request_decode_time_seconds"}, Kind: kindHistogram, Field: fHistogram, Hist: snapshot.DecodeTime, Expected: always,
		Versions: "V0 0.6.4+, V1 0.8.0+"},
	{Exported: "vllm_request_inference_time_seconds", Names: []string{"vllm:request_inference_time_seconds"}, Kind: kindHistogram, Field: fHistogram, Hist: snapshot.InferenceTime, Expected: always,
		Versions: "V0 0.6.4+, V1 0.8.0+"},
}

// missingLabel is the vLLM name reported when s is expected but absent: the
// name the detected schema would use.
func (s *source) missingLabel(schema string) string {
	if schema == SchemaV1 {
		return s.Names[0]
	}
	return s.Names[len(s.Names)-1]
}

// MarkdownTable renders the normalization table for docs/exporter.md.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| exported series | type / engine aggregation | vLLM source (preferred first) | versions |\n|---|---|---|---|\n")
	for _, s := range sources {
		names := make([]string, len(s.Names))
		for i, n := range s.Names {
			names[i] = "`" + n + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", s.Exported, s.Kind, strings.Join(names, ", "), s.Versions)
	}
	return b.String()
}
