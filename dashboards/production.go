package dashboards

import (
	"strings"

	"github.com/vllm-exporter/vllm_exporter/internal/histq"
)

// Rows of production vLLM features (issue 24): admission control, the NIXL
// connector of disaggregated prefill/decode, LoRA adapters, KV offloading
// (the offloading connector, the Mooncake store) and KV block residency. Each family is optional, so every panel says
// which vLLM version or flag it needs when it is empty.

const (
	productionRowTitle = "Production vLLM (0.32–0.33): admission, KV transfer, LoRA, KV offload, block residency"
	pdPairRowTitle     = "Disaggregated prefill/decode pair (NIXL): pick the pair with the Prefill pod and Decode pod variables"
)

// The pair's pods: the Prefill pod variable lists the pods whose role
// (vllm_pod_role_info) is prefill, the Decode pod variable those whose
// role is decode; both list the aggregated pods (role both) and the pods
// whose exporter says no role (older than the role series), so a pod is
// never out of reach. "All" is the pods listed. Each side's panels filter
// on its variable as well as on $instance.
var (
	prefillVar = variable{Name: "prefill", Label: "Prefill pod", Query: roleQuery("prefill")}
	decodeVar  = variable{Name: "decode", Label: "Decode pod", Query: roleQuery("decode")}
)

// roleQuery lists (by instance) the pods of role or both, and the
// exporters without role information.
func roleQuery(role string) string {
	return `max by (instance) (vllm_pod_role_info{model=~"$model",role=~"` + role + `|both"})` +
		` or max by (instance) (vllm_exporter_build_info unless on (instance) vllm_pod_role_info)`
}

const (
	nixlNoValue     = "No NIXL KV connector: needs vLLM with --kv-transfer-config using NixlConnector (disaggregated prefill/decode; llm-d, Dynamo)"
	loraNoValue     = "No LoRA: needs vLLM 0.6.4+ started with --enable-lora (vllm:lora_requests_info)"
	offloadNoValue  = "No KV offload: needs vLLM 0.30+ with the offloading connector (--kv-transfer-config OffloadingConnector, LMCache); vllm:kv_offload_*"
	kvBlockNoValue  = "Needs vLLM ≈0.13+ started with --kv-cache-metrics (vllm:kv_block_*_seconds)"
	mooncakeNoValue = "No Mooncake store: needs vLLM with --kv-transfer-config using MooncakeStoreConnector (2026; vllm:mooncake_store_operation_*)"
)

// hsum is the per-second sum of a histogram's observations by labels
// (classic or native, package histq).
func hsum(metric, filter string, by ...string) string {
	return histq.H{Name: metric, Matchers: filter, Window: ri[1 : len(ri)-1]}.Sum("rate", by...).String()
}

// rates are per-second rates of counters summed by labels (model, and
// more), one target per (metric, legend) pair; each legend ends with the
// labels' values.
func rates(by string, metricLegend ...string) []target {
	var legend string
	for _, l := range strings.Split(by, ",") {
		legend = " {{" + strings.TrimSpace(l) + "}}" + legend
	}
	var out []target
	for i := 0; i+1 < len(metricLegend); i += 2 {
		out = append(out, q(`sum by (`+by+`) (rate(`+metricLegend[i]+`{`+mi+`}`+ri+`))`, metricLegend[i+1]+legend))
	}
	return out
}

// productionRow shows admission rejections, NIXL KV transfers, LoRA
// adapters, KV offload traffic (Mooncake included) and KV block residency
// per model. It is long because the row is, as overview: one literal keeps
// the panels in screen order, as the JSON renders them.
func productionRow() row {
	rate := func(metric string) string { return `rate(` + metric + `{` + mi + `}` + ri + `)` }
	byModel := func(metric, labels string) string { return `sum by (` + labels + `) (` + rate(metric) + `)` }
	offload := func(dir string) (bytes, secs string) {
		return byModel("vllm_kv_offload_"+dir+"_bytes_total", "model, tier"), byModel("vllm_kv_offload_"+dir+"_seconds_total", "model, tier")
	}
	loadB, loadS := offload("load")
	storeB, storeS := offload("store")
	return row{Title: productionRowTitle, Panels: []panel{
		{Title: "Admission rejections by reason (queue vs cap)", Type: "timeseries", Unit: "short", W: 8,
			Desc: "Requests vLLM refused at admission (HTTP 503) per second, by reason: max_num_queued_reqs (waiting plus running requests at --max-num-queued-reqs) or max_num_queued_tokens (--max-num-queued-tokens). " +
				"They never reach the finished-request counters and count against the availability SLO. Beside them the deepest engine's waiting queue: rejections while it sits flat at a level mean it is at the cap " +
				"(vLLM does not export the cap; compare with the flag): raise the cap only if the latency SLO has room, else scale out.",
			NoValue: "No admission control: needs vLLM 0.32+ started with --max-num-queued-reqs or --max-num-queued-tokens (vllm:admission_rejections_total)",
			Targets: []target{
				q(byModel("vllm_requests_rejected_total", "model, reason"), "rejected/s {{reason}} {{model}}"),
				q(`max by (model) (vllm_engine_requests_waiting{`+mi+`}) or max by (model) (vllm_requests_waiting{`+mi+`})`, "deepest queue {{model}}"),
			}},
		{Title: "KV transfer latency p50 / p99 (NIXL)", Type: "timeseries", Unit: "s", W: 8,
			Desc: "Duration of the NIXL KV-cache transfers (a decode pod reading a request's KV from its prefill pod) and the time to post them. " +
				"On a decode pod every request's TTFT includes its transfer: a rising p99 here shows as TTFT without any prefill or queue time behind it.",
			NoValue: nixlNoValue,
			Targets: []target{
				q(hq("0.99", "vllm_kv_transfer_time_seconds", mi, "model"), "transfer p99 {{model}}"),
				q(hq("0.5", "vllm_kv_transfer_time_seconds", mi, "model"), "transfer p50 {{model}}"),
				q(hq("0.99", "vllm_kv_transfer_post_time_seconds", mi, "model"), "post p99 {{model}}"),
			}},
		{Title: "KV transfer throughput (NIXL)", Type: "timeseries", Unit: "Bps", W: 8,
			Desc:    "Bytes of KV cache moved by NIXL per second (the sum of vLLM's transfer-size histogram over the interval), and the median transfer size.",
			NoValue: nixlNoValue,
			Targets: []target{
				q(hsum("vllm_kv_transfer_size_bytes", mi, "model"), "bytes/s {{model}}"),
				q(hq("0.5", "vllm_kv_transfer_size_bytes", mi, "model"), "median transfer {{model}}"),
			}},
		{Title: "KV transfer failures and expired requests (NIXL)", Type: "timeseries", Unit: "short", W: 8,
			Desc: "Per second: failed transfers (the decode side recomputes or fails the request; VLLMKVTransferFailures pages above 5%), failed notifications, " +
				"and requests whose KV expired on the prefill side before a decode pod read it (a decode pod too slow to pick up its requests).",
			NoValue: nixlNoValue,
			Targets: rates("model", "vllm_kv_transfer_failures_total", "failed transfers/s", "vllm_kv_transfer_notification_failures_total", "failed notifications/s",
				"vllm_kv_transfer_expired_requests_total", "expired/s")},
		{Title: "LoRA adapters running and waiting", Type: "timeseries", Unit: "short", W: 8,
			Desc: "Adapters with running requests and adapters with waiting requests (the most over the interval: a wait between two scrapes still shows). " +
				"An adapter that waits while others run is held by the LoRA budget (max_lora adapters per batch), not by KV capacity.",
			NoValue: loraNoValue,
			Targets: []target{
				q(`max by (model, adapter) (max_over_time(vllm_lora_adapter_running{`+mi+`}`+ri+`))`, "running {{adapter}}"),
				q(`max by (model, adapter) (max_over_time(vllm_lora_adapter_waiting{`+mi+`}`+ri+`))`, "waiting {{adapter}}"),
			}},
		{Title: "LoRA slots used vs max_lora", Type: "timeseries", Unit: "short", W: 8,
			Desc:    "Adapters in the running batch against max_lora (--max-loras). At max_lora with adapters waiting, raise --max-loras (GPU memory permitting) or route adapters to fewer pods.",
			NoValue: loraNoValue,
			Targets: []target{
				q(`max by (model) (vllm_lora_slots_used{`+mi+`})`, "used {{model}}"),
				q(`max by (model) (vllm_lora_slots{`+mi+`})`, "max_lora {{model}}"),
			}},
		{Title: "LoRA adapters loaded (GPU and CPU)", Type: "timeseries", Unit: "short", W: 8,
			Desc: "LoRA adapters vLLM holds in GPU memory (ready to run) and in CPU memory (loaded, one activation away), the most any engine holds, and per adapter the level it is at (gpu where any engine has it on GPU). " +
				"Adapters swapped in and out of GPU memory on every batch cost an activation each: more --max-loras keeps them resident.",
			NoValue: "No LoRA residency: needs vLLM with --enable-lora and the adapter residency metrics (vllm#54830; vllm:num_gpu_loaded_lora_adapters)",
			Targets: []target{
				q(`max by (model) (vllm_lora_gpu_loaded_adapters{`+mi+`})`, "on GPU {{model}}"),
				q(`max by (model) (vllm_lora_cpu_loaded_adapters{`+mi+`})`, "on CPU {{model}}"),
				q(`count by (model, level) (vllm_lora_adapter_loaded{`+mi+`})`, "adapters at {{level}} {{model}}"),
			}},
		{Title: "KV offload throughput and bandwidth by direction and tier", Type: "timeseries", Unit: "Bps", W: 8,
			Desc: "Bytes per second loaded from an offload tier into GPU memory (load) and stored from GPU memory to it (store), per tier (the newer vLLM names count as tier cpu), " +
				"and the bandwidth each direction achieves while it transfers (bytes / transfer seconds).",
			NoValue: offloadNoValue,
			Targets: []target{
				q(loadB, "load {{tier}} {{model}}"),
				q(storeB, "store {{tier}} {{model}}"),
				q(loadB+` / (`+loadS+` > 0)`, "load bandwidth {{tier}} {{model}}"),
				q(storeB+` / (`+storeS+` > 0)`, "store bandwidth {{tier}} {{model}}"),
			}},
		{Title: "KV offload transfer time by direction and tier", Type: "timeseries", Unit: "percentunit", W: 8,
			Desc:    "Seconds spent loading and storing KV per second of wall time, per tier: the share of time the offload path is busy. Near 100% the tier's link is the limit and loads delay prefills.",
			NoValue: offloadNoValue,
			Targets: []target{
				q(loadS, "load {{tier}} {{model}}"),
				q(storeS, "store {{tier}} {{model}}"),
			}},
		{Title: "KV offload hit ratio (external prefix cache)", Type: "timeseries", Unit: "percentunit", W: 8, Max: one(),
			Desc:    "Prompt tokens found in the KV connector's external cache (offload tier, LMCache, a P/D peer) over the tokens looked up. A low ratio with heavy store traffic: the tier holds KV nobody reads back.",
			NoValue: "No external prefix cache lookups: needs vLLM ≈0.11+ with a KV connector (--kv-transfer-config; vllm:external_prefix_cache_*)",
			Targets: []target{q(byModel("vllm_external_prefix_cache_hits_total", "model")+` / (`+byModel("vllm_external_prefix_cache_queries_total", "model")+` > 0)`, "{{model}}")}},
		{Title: "KV offload tier usage (CPU tier and the tiers behind it)", Type: "timeseries", Unit: "percentunit", W: 8, Max: one(),
			Desc: "Share of each offload tier's space in use, and the share taken by KV being written to it and read from it (the CPU tier from vllm:kv_offload_cpu_cache_*, the tiers of tiered offloading by their tier label), the largest over engines and API servers. " +
				"A tier at 100% cannot take more KV: allocations fail (VLLMKVOffloadFailures) and blocks stay in GPU memory only.",
			NoValue: "No offload tier usage: needs vLLM with the offloading connector's CPU spec (--kv-transfer-config OffloadingConnector, 2026; vllm:kv_offload_cpu_cache_usage_perc)",
			Targets: []target{
				q(`max by (model, tier) (vllm_kv_offload_usage_ratio{`+mi+`})`, "used {{tier}} {{model}}"),
				q(`max by (model, tier) (vllm_kv_offload_write_usage_ratio{`+mi+`})`, "writing {{tier}} {{model}}"),
				q(`max by (model, tier) (vllm_kv_offload_read_usage_ratio{`+mi+`})`, "reading {{tier}} {{model}}"),
			}},
		{Title: "KV offload and HF3FS failures", Type: "timeseries", Unit: "short", W: 8,
			Desc: "Failures per second of KV offloading: allocations in the CPU tier, promotions and cascades of tiered offloading (and promotions that found no room), HF3FS saves and loads. " +
				"A failed store keeps KV in GPU memory only; a failed load or promotion is recomputed as prefill (VLLMKVOffloadFailures).",
			NoValue: "No offload failures series: needs vLLM with the offloading connector (2026) or HF3FSKVConnector (--kv-transfer-config); vllm:kv_offload_allocation_failure_total, vllm:hf3fs_num_failed_*",
			Targets: append(rates("model", "vllm_kv_offload_allocation_failures_total", "CPU tier allocation", "vllm_kv_offload_promotion_allocation_failures_total", "promotion allocation",
				"vllm_hf3fs_save_failures_total", "HF3FS save", "vllm_hf3fs_load_failures_total", "HF3FS load"),
				rates("model, tier", "vllm_kv_offload_promotion_failures_total", "promotion", "vllm_kv_offload_cascade_failures_total", "cascade")...)},
		{Title: "Mooncake store operations, errors and failed keys", Type: "timeseries", Unit: "short", W: 8,
			Desc: "Operations per second against the Mooncake pool by operation (load_get: KV read back into GPU memory, save_put: KV stored), those that ended in error, and the KV blocks (keys) that failed. " +
				"Failed loads are recomputed as prefill; failed stores leave the pool without the blocks.",
			NoValue: mooncakeNoValue,
			Targets: rates("model, operation", "vllm_mooncake_store_operations_total", "ops/s", "vllm_mooncake_store_operation_errors_total", "errors/s",
				"vllm_mooncake_store_failed_keys_total", "failed keys/s")},
		{Title: "Mooncake store throughput", Type: "timeseries", Unit: "Bps", W: 8,
			Desc:    "Bytes per second the Mooncake store operations move, by operation, and the mean bytes per key (KV block) they touch.",
			NoValue: mooncakeNoValue,
			Targets: []target{
				q(byModel("vllm_mooncake_store_bytes_total", "model, operation"), "bytes/s {{operation}} {{model}}"),
				q(byModel("vllm_mooncake_store_bytes_total", "model, operation")+` / (`+byModel("vllm_mooncake_store_keys_total", "model, operation")+` > 0)`, "bytes per key {{operation}} {{model}}"),
			}},
		{Title: "Mooncake store operation time p50 / p99", Type: "timeseries", Unit: "s", W: 8,
			Desc:    "Duration of the Mooncake store operations, every operation and status together: a rising p99 delays the prefills that wait on a load.",
			NoValue: mooncakeNoValue,
			Targets: []target{
				q(hq("0.99", "vllm_mooncake_store_operation_seconds", mi, "model"), "p99 {{model}}"),
				q(hq("0.5", "vllm_mooncake_store_operation_seconds", mi, "model"), "p50 {{model}}"),
			}},
		{Title: "Requests preempted more than once, and preemptions per request", Type: "timeseries", Unit: "percentunit", W: 12,
			Desc: "Share of finished requests that vLLM preempted more than once (vllm:request_num_preemptions observes every finished request; its first bucket, le=1, holds the ones preempted at most once) and the mean preemptions per finished request. " +
				"A few requests preempted many times point at long requests evicted over and over (raise the KV pool, cap max_tokens); many preempted once at a pool just short of the load.",
			NoValue: "No per-request preemptions: needs vLLM ≈0.30+ (vllm#49984; vllm:request_num_preemptions)",
			Targets: []target{
				q(histq.H{Name: "vllm_request_preemptions", Matchers: mi, Window: ri[1 : len(ri)-1]}.AboveRatio(1, `1(\\.0)?`, "model").String(), "preempted more than once {{model}}"),
				q(histq.H{Name: "vllm_request_preemptions", Matchers: mi, Window: ri[1 : len(ri)-1]}.Mean("model").String(), "preemptions per request {{model}}"),
			}},
		{Title: "Engine steps per second (heartbeat)", Type: "timeseries", Unit: "short", W: 12,
			Desc:    "Engine steps that produced output per second (vllm:iteration_tokens_total's count), beside the requests running: a step every few milliseconds while requests run; steps at 0 with requests running is a stalled engine (VLLMEngineStalled).",
			NoValue: "No engine heartbeat: needs vLLM 0.6.4+ with the Python front-end (vllm:iteration_tokens_total; the Rust front-end does not send it)",
			Targets: []target{
				q(`sum by (model) (rate(vllm_engine_steps_total{`+mi+`}`+ri+`))`, "steps/s {{model}}"),
				q(`sum by (model) (vllm_requests_running{`+mi+`})`, "running {{model}}"),
			}},
		{Title: "KV block residency p50 / p99", Type: "timeseries", Unit: "s", W: 24,
			Desc: "How long KV blocks live in GPU memory (allocation to eviction), how long they sat idle before eviction, and the gap between two uses of a cached block. " +
				"Reuse gaps longer than the idle time before eviction mean the prefix cache evicts blocks before they are reused (thrashing): more KV memory, or offloading, keeps them.",
			NoValue: kvBlockNoValue,
			Targets: []target{
				q(hq("0.5", "vllm_kv_block_lifetime_seconds", mi, "model"), "lifetime p50 {{model}}"),
				q(hq("0.99", "vllm_kv_block_lifetime_seconds", mi, "model"), "lifetime p99 {{model}}"),
				q(hq("0.5", "vllm_kv_block_idle_before_evict_seconds", mi, "model"), "idle before evict p50 {{model}}"),
				q(hq("0.99", "vllm_kv_block_idle_before_evict_seconds", mi, "model"), "idle before evict p99 {{model}}"),
				q(hq("0.5", "vllm_kv_block_reuse_gap_seconds", mi, "model"), "reuse gap p50 {{model}}"),
				q(hq("0.99", "vllm_kv_block_reuse_gap_seconds", mi, "model"), "reuse gap p99 {{model}}"),
			}},
	}}
}

// pdPairRow shows one prefill/decode pair side by side: what the decode
// pod's users wait for (TTFT, of which the KV transfer) beside the prefill
// work on the prefill pod, and each side's load and transfer failures.
func pdPairRow() row {
	dec := mi + `,instance=~"$decode"`
	pre := mi + `,instance=~"$prefill"`
	return row{Title: pdPairRowTitle, Panels: []panel{
		{Title: "Pod roles (prefill, decode, both)", Type: "table", W: 24, H: 5,
			Desc: "Each pod's role in disaggregated serving and where the exporter learnt it (source: flag = --vllm.role, detected = from the NIXL families, default = nothing said otherwise, so both). " +
				"The Prefill pod and Decode pod variables list the pods of their role, the aggregated ones (both) and pods whose exporter reports no role.",
			NoValue: "No role yet: the exporter reports vllm_pod_role_info per model once it has scraped vLLM (set with --vllm.role, or learnt from vLLM's NIXL families)",
			Targets: []target{q(`max by (model, instance, role, source) (vllm_pod_role_info{`+mi+`})`, "")}},
		{Title: "Decode pod: TTFT and KV transfer p99", Type: "timeseries", Unit: "s", W: 12,
			Desc: "On the decode pod a request's TTFT includes reading its KV from the prefill pod: TTFT p99 close to the transfer p99 means the transfer, not this pod, sets the first token. " +
				"Compare with the prefill time on the prefill pod beside.",
			NoValue: nixlNoValue,
			Targets: []target{
				q(hq("0.99", "vllm_time_to_first_token_seconds", dec, "model", "instance"), "TTFT p99 {{instance}}"),
				q(hq("0.5", "vllm_time_to_first_token_seconds", dec, "model", "instance"), "TTFT p50 {{instance}}"),
				q(hq("0.99", "vllm_kv_transfer_time_seconds", dec, "model", "instance"), "KV transfer p99 {{instance}}"),
			}},
		{Title: "Prefill pod: prefill and queue time p99", Type: "timeseries", Unit: "s", W: 12,
			Desc:    "The prefill pod computes the prompts whose KV the decode pod reads: its prefill and queue time are what a decode pod's TTFT waits for before the transfer.",
			NoValue: nixlNoValue,
			Targets: []target{
				q(hq("0.99", "vllm_request_prefill_time_seconds", pre, "model", "instance"), "prefill p99 {{instance}}"),
				q(hq("0.5", "vllm_request_prefill_time_seconds", pre, "model", "instance"), "prefill p50 {{instance}}"),
				q(hq("0.99", "vllm_request_queue_time_seconds", pre, "model", "instance"), "queue p99 {{instance}}"),
			}},
		{Title: "Pair: running and waiting (decode waits on transfers)", Type: "timeseries", Unit: "short", W: 12,
			Desc: "Requests running on each pod, and on the decode pod the requests deferred while their KV is in flight (waiting by reason deferred, vLLM ≈0.20+) " +
				"beside those waiting for capacity. Many deferred with few running: the decode pod waits on transfers.",
			NoValue: nixlNoValue,
			Targets: []target{
				q(`sum by (model, instance) (vllm_requests_running{`+pre+`})`, "running prefill {{instance}}"),
				q(`sum by (model, instance) (vllm_requests_running{`+dec+`})`, "running decode {{instance}}"),
				q(`sum by (model, instance, reason) (vllm_requests_waiting_by_reason{`+dec+`})`, "waiting {{reason}} decode {{instance}}"),
			}},
		{Title: "Pair: transfer failures (decode) and expired KV (prefill)", Type: "timeseries", Unit: "short", W: 12,
			Desc:    "Per second: failed KV transfers seen by the decode pod, and requests whose KV expired unread on the prefill pod.",
			NoValue: nixlNoValue,
			Targets: []target{
				q(`sum by (model, instance) (rate(vllm_kv_transfer_failures_total{`+dec+`}`+ri+`))`, "failed transfers/s {{instance}}"),
				q(`sum by (model, instance) (rate(vllm_kv_transfer_expired_requests_total{`+pre+`}`+ri+`))`, "expired/s {{instance}}"),
			}},
	}}
}
