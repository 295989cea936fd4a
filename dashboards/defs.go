package dashboards

import (
	"fmt"
	"strings"
)

var (
	modelVar    = variable{Name: "model", Label: "Model", Metric: "vllm_requests_running", LabelName: "model"}
	instanceVar = variable{Name: "instance", Label: "Instance", Metric: "vllm_exporter_build_info", LabelName: "instance"}
	profileVar  = variable{Name: "profile", Label: "Probe profile", Metric: "vllm_probe_requests_total", LabelName: "profile"}
	sloVar      = variable{Name: "slo", Label: "SLO", Metric: "vllm_slo_objective_ratio", LabelName: "slo"}
	gpuVar      = variable{Name: "gpu", Label: "GPU", Metric: "vllm_gpu_info", LabelName: "gpu"}
)

// rooflineNoValue names the flags the decode roofline needs.
const rooflineNoValue = "No roofline: start the exporter with --model.weight-bytes (and --model.memory-bandwidth on a host without an NVIDIA GPU); vllm_bottleneck_class_unavailable says which input is missing"

// budgetDesc explains the budget panels' young-period view.
const budgetDesc = "Fraction of each SLO's error budget left (exporter watchdog; the worst replica per model, from the fleet recording rules). Until the watchdog has observed a whole period (30 days by default; vllm_slo_period_covered_ratio) the budget covers only the part seen so far, so one bad burst early on overspends it many times over and it reads negative: a budget computed over 45 minutes of a 30-day period reads -2000% after one. While less than a tenth of the period is covered, the panel shows the share covered instead. Probe SLOs (model=\"\") stay visible whatever the Model variable selects."

// budgetTargets: the budget where at least a tenth of the period is
// covered, the coverage where less is (one query, so the panel always has
// a value; the legend says which), of the worst replica per model as the
// fleet recording rules record it.
func budgetTargets(sel string) []target {
	cov := `min by (slo, model) (model:vllm_slo_period_covered_ratio:min{` + sel + `})`
	return []target{q(`label_replace(min by (slo, model) (model:vllm_slo_error_budget_remaining_ratio:min{`+sel+`}) and on (slo, model) (`+cov+` >= 0.1), "shown", "budget left", "", "")`+
		` or label_replace(`+cov+` < 0.1, "shown", "young period: share covered", "", "")`, "{{slo}} {{model}} {{shown}}")}
}

// capacityNoValue says when the capacity verdicts exist.
const capacityNoValue = "No capacity yet: the classifier records it once latency held (the latency SLOs, else bottleneck.ttft_target_seconds and tpot_target_seconds) over a window with traffic (bottleneck.window, 1m)"

// capacityPlanPanel lists the capacity verdicts per model in one query
// (a table row each, the verdict label naming it): the two that exist once
// the SLOs held, and the two that need configuration (cost: --cost.gpu-hour;
// GPUs needed: bottleneck.daily_requests and a measurement at saturation).
func capacityPlanPanel() panel {
	v := func(metric, verdict string) string {
		return `label_replace(max by (model) (` + metric + `{` + mi + `}), "verdict", "` + verdict + `", "", "")`
	}
	return panel{Title: "Capacity, cost and GPUs needed", Type: "table", W: 8,
		Desc: "The classifier's capacity verdicts per model: the highest requests/s and output tokens/s seen while the latency SLOs held (bottleneck.capacity_horizon, 24h); " +
			"the cost of a million output tokens at that rate (--cost.gpu-hour x GPUs, --cost.gpus or the GPUs NVML sees); " +
			"and the GPUs needed for bottleneck.daily_requests with bottleneck.headroom, only from a capacity measured while the server was saturated (requests waiting, KV cache full or preemptions): the load of an idle server says nothing of what it can serve.",
		NoValue: capacityNoValue,
		Targets: []target{q(v("vllm_capacity_requests_per_second", "requests/s while SLOs held")+
			` or `+v("vllm_capacity_output_tokens_per_second", "output tokens/s while SLOs held")+
			` or `+v("vllm_cost_per_million_output_tokens", "cost per 1M output tokens (--cost.gpu-hour)")+
			` or `+v("vllm_capacity_gpus_needed", "GPUs needed (bottleneck.daily_requests)"), "")}}
}

func all() []dashboard { return []dashboard{overview(), slos(), gpu(), probes()} }

// windowQuantiles says what the probe window quantiles are.
const windowQuantiles = "Exact quantiles of each pod's probes over the last 5 minutes (vllm_probe_*_window_seconds, interpolated between the probes themselves as vllm bench serve does), the same whatever histogram storage Prometheus uses."

// probeWindow is the slowest selected pod's window quantile per profile
// (by adds labels: instance for one line per pod).
func probeWindow(quantile, metric, filter string, by ...string) string {
	return fmt.Sprintf(`max by (%s) (%s{quantile="%s",%s})`, strings.Join(append(by, "profile"), ", "), metric, quantile, filter)
}

// serverVsProbe plots p50 and p99 of vLLM's histogram per model as the
// fleet recording rules record it across replicas (the first of servers a
// model has: a fallback for older layouts) beside the probes' window
// quantiles (per profile, the slowest selected pod's).
func serverVsProbe(title, desc, probe string, servers ...string) panel {
	server := func(op string) string {
		var alts []string
		for _, s := range servers {
			alts = append(alts, rec("model", s, op, mdl))
		}
		return strings.Join(alts, " or ")
	}
	return panel{Title: title, Type: "timeseries", Unit: "s",
		Desc: "Server-side quantiles from vLLM's histograms over all replicas (recording rules) vs. the exporter's synthetic streaming probes (client view, includes network and API overhead). Probe lines: " + windowQuantiles + desc,
		Targets: []target{
			q(server("p99_rate5m"), "server p99 {{model}}"),
			q(server("p50_rate5m"), "server p50 {{model}}"),
			q(probeWindow("0.99", probe, inst), "probe p99 {{profile}}"),
			q(probeWindow("0.5", probe, inst), "probe p50 {{profile}}"),
		}}
}

// rec selects a fleet recording rule's series (alerts/vllm-recording.yml).
func rec(level, metric, op, sel string) string {
	return level + ":" + metric + ":" + op + "{" + sel + "}"
}

// overview is the Overview dashboard as data: its rows and panels in
// screen order. It is long because the dashboard is; one literal keeps the
// layout readable top to bottom, as the JSON it renders.
func overview() dashboard {
	return dashboard{
		File: "vllm-overview.json", UID: "vllm-exporter-overview", Title: "vLLM / Overview",
		Desc: "SLO status, bottleneck, latency (server vs probe), throughput and saturation of vLLM replicas, from vllm_exporter.",
		Vars: []variable{modelVar, instanceVar, prefillVar, decodeVar},
		Rows: []row{
			{Title: "Status", Panels: []panel{
				{Title: "SLO error budget remaining", Type: "stat", Unit: "percentunit", W: 6, H: 6,
					Desc:    budgetDesc,
					NoValue: "no SLO evaluated yet",
					Targets: budgetTargets(sloModel)},
				{Title: "SLO alert state", Type: "state-timeline", W: 6, H: 6,
					Desc:    "Page (critical) and ticket (warning) state of each SLO from the watchdog's multi-window burn rates (any replica, recording rule).",
					Targets: []target{q(`max by (slo, model, severity) (`+rec("model", "vllm_slo_alert_state", "max", sloModel)+`)`, "{{slo}} {{model}} {{severity}}")}},
				{Title: "Bottleneck", Type: "stat", W: 6, H: 6,
					Desc:    "The classifier's current bottleneck class per model (the class whose vllm_bottleneck is 1 on some replica; recording rule).",
					Targets: []target{q(`max by (model, class) (`+rec("model", "vllm_bottleneck", "max", mdl)+`) == 1`, "{{model}}: {{class}}")}},
				{Title: "Firing alerts", Type: "table", W: 6, H: 6,
					Desc:    "Alerts firing in Prometheus (Watchdog is the always-on heartbeat).",
					Targets: []target{q(`sum by (alertname, severity) (ALERTS{alertstate="firing"})`, "{{alertname}}")}},
			}},
			{Title: "Latency: server vs probe", Panels: []panel{
				serverVsProbe("TTFT p50 / p99", "", "vllm_probe_time_to_first_token_window_seconds", "vllm_time_to_first_token_seconds"),
				serverVsProbe("TPOT p50 / p99", " Server lines: vLLM's per-request TPOT (vllm:request_time_per_output_token_seconds, vLLM 0.11+); where a server has none (older vLLM, simulators) its inter-token latency, as the TPOT SLO measures it then.",
					"vllm_probe_time_per_output_token_window_seconds", "vllm_request_time_per_output_token_seconds", "vllm_inter_token_latency_seconds"),
				withWidth(serverVsProbe("Inter-token latency p50 / p99", " vLLM observes one gap per engine step (a step that emits several tokens, with speculative decoding, is one), the probes one per streamed chunk.",
					"vllm_probe_inter_token_latency_window_seconds", "vllm_inter_token_latency_seconds"), 8),
				{Title: "E2E request latency p50 / p99", Type: "timeseries", Unit: "s", W: 8,
					Targets: []target{
						q(rec("model", "vllm_e2e_request_latency_seconds", "p99_rate5m", mdl), "p99 {{model}}"),
						q(rec("model", "vllm_e2e_request_latency_seconds", "p50_rate5m", mdl), "p50 {{model}}"),
					}},
				{Title: "Queue time p50 / p99", Type: "timeseries", Unit: "s", W: 8,
					Targets: []target{
						q(rec("model", "vllm_request_queue_time_seconds", "p99_rate5m", mdl), "p99 {{model}}"),
						q(rec("model", "vllm_request_queue_time_seconds", "p50_rate5m", mdl), "p50 {{model}}"),
					}},
			}},
			{Title: "Throughput and saturation", Panels: []panel{
				{Title: "Token throughput", Type: "timeseries", Unit: "short", W: 8,
					Desc: "Prompt (prefill) and generation (decode) tokens per second, over all replicas (recording rules).",
					Targets: []target{
						q(rec("model", "vllm_prompt_tokens", "rate5m", mdl), "prompt {{model}}"),
						q(rec("model", "vllm_generation_tokens", "rate5m", mdl), "generation {{model}}"),
					}},
				{Title: "Finished requests by reason", Type: "timeseries", Unit: "reqps", W: 8, Stack: true,
					Targets: []target{q(`sum by (finished_reason) (`+rec("model", "vllm_requests_finished", "rate5m", mdl)+`)`, "{{finished_reason}}")}},
				{Title: "KV cache usage", Type: "timeseries", Unit: "percentunit", W: 8, Max: one(),
					Desc:    "Max KV cache usage over engines, per replica. Above 95% for long means preemption and queueing.",
					Targets: []target{q(`max by (model, instance) (vllm_kv_cache_usage_ratio{`+mi+`})`, "{{model}} {{instance}}")}},
				{Title: "Scheduler: running and waiting", Type: "timeseries", Unit: "short", W: 8,
					Targets: []target{
						q(`sum by (model) (vllm_requests_running{`+mi+`})`, "running {{model}}"),
						q(`sum by (model) (vllm_requests_waiting{`+mi+`})`, "waiting {{model}}"),
					}},
				{Title: "Preemptions", Type: "timeseries", Unit: "short", W: 8,
					Desc: "Preemptions per second and per finished request (above 1% of requests is KV pressure), over all replicas (recording rules).",
					Targets: []target{
						q(rec("model", "vllm_preemptions", "rate5m", mdl), "preemptions/s {{model}}"),
						q(rec("model", "vllm_preemptions_per_request", "ratio_rate5m", mdl), "per request {{model}}"),
					}},
				{Title: "Prefix cache hit ratio", Type: "timeseries", Unit: "percentunit", W: 8, Max: one(),
					Targets: []target{q(rec("model", "vllm_prefix_cache_hit", "ratio_rate5m", mdl), "{{model}}")}},
			}},
			{Title: "Fleet (per model, all replicas; recording rules)", Panels: []panel{
				{Title: "Fleet TTFT / TPOT p99", Type: "timeseries", Unit: "s", W: 8,
					Targets: []target{
						q(`model:vllm_time_to_first_token_seconds:p99_rate5m{`+mdl+`}`, "TTFT p99 {{model}}"),
						q(`model:vllm_request_time_per_output_token_seconds:p99_rate5m{`+mdl+`}`, "TPOT p99 {{model}}"),
					}},
				{Title: "Fleet generation throughput and replicas", Type: "timeseries", Unit: "short", W: 8,
					Targets: []target{
						q(`model:vllm_generation_tokens:rate5m{`+mdl+`}`, "generation tokens/s {{model}}"),
						q(`model:vllm_replicas:count{`+mdl+`}`, "replicas {{model}}"),
					}},
				{Title: "Fleet KV cache usage (max / avg)", Type: "timeseries", Unit: "percentunit", W: 8, Max: one(),
					Targets: []target{
						q(`model:vllm_kv_cache_usage_ratio:max{`+mdl+`}`, "max {{model}}"),
						q(`model:vllm_kv_cache_usage_ratio:avg{`+mdl+`}`, "avg {{model}}"),
					}},
			}},
			{Title: "Bottleneck evidence, decode efficiency and capacity", Panels: []panel{
				{Title: "Bottleneck evidence", Type: "table", W: 8,
					Desc:    "The signals behind the current class: each measured value (signal) and the threshold it was compared with (signal_threshold). A model classed near_optimal has no bottleneck and so no evidence: its row says so.",
					NoValue: "no classification yet (the classifier runs on the SLO watchdog's tick)",
					Targets: []target{q(`max by (model, class, signal) (vllm_bottleneck_evidence{`+mi+`})`+
						` or label_replace(max by (model, class) (vllm_bottleneck{class="near_optimal",`+mi+`}) == 1, "signal", "no bottleneck", "", "")`, "")}},
				{Title: "Decode: measured vs roofline", Type: "timeseries", Unit: "short", W: 8,
					Desc:    "Per-stream decode tokens/s measured (1 / mean time per output token) vs the memory-bandwidth roofline prediction (classifier; needs --model.weight-bytes, and a GPU or --model.memory-bandwidth).",
					NoValue: rooflineNoValue,
					Targets: []target{
						q(`max by (model) (vllm_decode_measured_tokens_per_second{`+mi+`})`, "measured {{model}}"),
						q(`max by (model) (vllm_decode_roofline_tokens_per_second{`+mi+`})`, "roofline {{model}}"),
					}},
				{Title: "Decode efficiency (measured / roofline)", Type: "timeseries", Unit: "percentunit", W: 8,
					NoValue: rooflineNoValue,
					Targets: []target{q(`max by (model) (vllm_decode_efficiency_ratio{`+mi+`})`, "{{model}}")}},
				{Title: "Request phases (mean per request)", Type: "timeseries", Unit: "s", W: 12,
					Desc: "Where a request's time goes: queue, prefill, decode (vLLM's request phase histograms, over all replicas; recording rules).",
					Targets: []target{
						q(rec("model", "vllm_request_queue_time_seconds", "mean_rate5m", mdl), "queue {{model}}"),
						q(rec("model", "vllm_request_prefill_time_seconds", "mean_rate5m", mdl), "prefill {{model}}"),
						q(rec("model", "vllm_request_decode_time_seconds", "mean_rate5m", mdl), "decode {{model}}"),
					}},
				{Title: "KV cache usage per engine (data parallel)", Type: "timeseries", Unit: "percentunit", W: 12, Max: one(),
					Targets: []target{q(`max by (model, instance, engine) (vllm_engine_kv_cache_usage_ratio{`+mi+`})`, "{{model}} {{instance}} engine {{engine}}")}},
				{Title: "vLLM reachable", Type: "stat", W: 8,
					Targets: []target{q(`vllm_up{`+inst+`}`, "{{instance}}")}},
				{Title: "Exporter scrape of vLLM", Type: "timeseries", Unit: "s", W: 8,
					Targets: []target{
						q(`max by (instance) (vllm_exporter_scrape_duration_seconds{`+inst+`})`, "scrape duration {{instance}}"),
						q(`time() - max by (instance) (vllm_exporter_last_successful_scrape_timestamp_seconds{`+inst+`})`, "since last success {{instance}}"),
					}},
				capacityPlanPanel(),
				{Title: "Throughput vs capacity (measured while the SLOs held)", Type: "timeseries", Unit: "short", W: 24,
					Desc: "Output tokens/s and finished requests/s now, against the highest the classifier saw over its capacity horizon (bottleneck.capacity_horizon, 24h) while the latency SLOs held: " +
						"a lower bound on what this server can serve within its SLOs (unless it was saturated then, the load it happened to get). Throughput near the capacity line: the next rise in load meets the SLO limit; plan replicas before it.",
					NoValue: capacityNoValue,
					Targets: []target{
						q(rec("model", "vllm_generation_tokens", "rate5m", mdl), "output tokens/s now {{model}}"),
						q(`max by (model) (vllm_capacity_output_tokens_per_second{`+mi+`})`, "output tokens/s capacity {{model}}"),
						q(`sum by (model) (`+rec("model", "vllm_requests_finished", "rate5m", mdl)+`)`, "requests/s now {{model}}"),
						q(`max by (model) (vllm_capacity_requests_per_second{`+mi+`})`, "requests/s capacity {{model}}"),
					}},
			}},
			newerVLLMRow(),
			productionRow(),
			pdPairRow(),
			exporterRow(),
		},
	}
}

func slos() dashboard {
	// the SLOs' series per model (recorded across replicas)
	rm := `slo=~"$slo",` + sloModel
	// the exporter's per-SLO series without a model label
	su := `slo=~"$slo",` + inst
	return dashboard{
		File: "vllm-slos.json", UID: "vllm-exporter-slos", Title: "vLLM / SLOs",
		Desc: "Error budgets and multi-window burn rates of the configured SLOs (exporter watchdog).",
		Vars: []variable{modelVar, instanceVar, sloVar},
		Rows: []row{
			{Title: "Budget", Panels: []panel{
				{Title: "Error budget remaining", Type: "bargauge", Unit: "percentunit", W: 8, Max: one(),
					Desc: budgetDesc, NoValue: "no SLO evaluated yet",
					Targets: budgetTargets(rm)},
				{Title: "Objective", Type: "stat", Unit: "percentunit", W: 8,
					Targets: []target{q(`max by (slo, model) (`+rec("model", "vllm_slo_objective_ratio", "max", rm)+`)`, "{{slo}} {{model}}")}},
				{Title: "Page / ticket state", Type: "state-timeline", W: 8,
					Targets: []target{q(`max by (slo, model, severity) (`+rec("model", "vllm_slo_alert_state", "max", rm)+`)`, "{{slo}} {{model}} {{severity}}")}},
				{Title: "Error budget remaining over time", Type: "timeseries", Unit: "percentunit", W: 24, Max: one(),
					Desc: "Budget left, and the share of the period the watchdog has observed: until that reaches 100% the budget rests on a part of the period, and one bad burst can show it overspent many times over.",
					Targets: []target{
						q(`min by (slo, model) (`+rec("model", "vllm_slo_error_budget_remaining_ratio", "min", rm)+`)`, "{{slo}} {{model}}"),
						q(`min by (slo, model) (`+rec("model", "vllm_slo_period_covered_ratio", "min", rm)+`) < 1`, "period covered so far {{slo}} {{model}}"),
					}},
			}},
			{Title: "Burn rates", Panels: []panel{
				{Title: "Burn rate by window", Type: "timeseries", Unit: "short",
					Desc:    "Error ratio divided by the allowed error ratio (1 - objective), of the worst replica per model (recording rule). 14.4 over 1h and 5m pages; 1 over 3d exhausts the budget exactly at the period's end.",
					Targets: []target{q(`max by (slo, model, window) (`+rec("model", "vllm_slo_burn_rate", "max", rm)+`)`, "{{slo}} {{model}} {{window}}")}},
				{Title: "Error ratio by window", Type: "timeseries", Unit: "percentunit",
					Desc:    "Share of the window's events that were bad: the burn rate times the allowed error ratio (1 - objective).",
					Targets: []target{q(`max by (slo, model, window) (`+rec("model", "vllm_slo_burn_rate", "max", rm)+` * ignoring (window) group_left () (1 - `+rec("model", "vllm_slo_objective_ratio", "max", rm)+`))`, "{{slo}} {{model}} {{window}}")}},
				{Title: "Watchdog evaluation age", Type: "stat", Unit: "s", W: 12,
					Targets: []target{q(`time() - max by (instance) (`+rec("instance", "vllm_slo_last_evaluation_timestamp_seconds", "max", inst)+`)`, "{{instance}}")}},
				{Title: "Config reload", Type: "stat", W: 12,
					Targets: []target{q(`vllm_exporter_config_last_reload_successful{`+inst+`}`, "{{instance}}")}},
				{Title: "SLOs not measurable", Type: "timeseries", Unit: "short", W: 24,
					Desc: "1 while the watchdog cannot measure an SLO for some model, by reason: no_bucket_bound (vLLM's histogram has no bucket bound at the SLO's threshold, e.g. vLLM --custom-histogram-buckets without it: put one there, or move the threshold to a bound) " +
						"or series_missing (the histogram or counter is not in vLLM's /metrics); 0 (reason measurable) while it can. Beside it the watchdog ticks that could not measure the SLO in the last hour. " +
						"An unmeasurable SLO counts no events: its budget and burn rates stand still and cannot page.",
					NoValue: "no SLO evaluated yet",
					Targets: []target{
						q(`max by (slo, reason) (vllm_slo_unmeasurable{`+su+`})`+
							` or (label_replace(max by (slo) (`+rec("model", "vllm_slo_objective_ratio", "max", rm)+`) * 0, "reason", "measurable", "", "") unless on (slo) max by (slo) (vllm_slo_unmeasurable{`+su+`}))`, "{{slo}} {{reason}}"),
						q(`sum by (slo) (increase(vllm_exporter_slo_evaluation_errors_total{`+su+`}[1h])) or max by (slo) (`+rec("model", "vllm_slo_objective_ratio", "max", rm)+`) * 0`, "ticks not measured in 1h {{slo}}"),
					}},
			}},
			{Title: "Prometheus rules (fleet: per model across replicas; alerts/slo-rules.yml)", Panels: []panel{
				{Title: "Burn rate by window (recording rules)", Type: "timeseries", Unit: "short",
					Desc: "Error ratio of each window (slo:sli_error:ratio_rate<window>) divided by the allowed error ratio, per model across replicas: what the generated page and ticket alerts evaluate.",
					Targets: []target{q(`label_replace({__name__=~"slo:sli_error:ratio_rate.+",`+rm+`}, "window", "$1", "__name__", "slo:sli_error:ratio_rate(.+)")`+
						` / on (slo) group_left () (1 - slo:objective:ratio{slo=~"$slo"})`, "{{slo}} {{model}} {{window}}")}},
				{Title: "Error budget remaining (recording rules)", Type: "timeseries", Unit: "percentunit", Max: one(),
					Targets: []target{q(`slo:error_budget_remaining:ratio{`+rm+`}`, "{{slo}} {{model}}")}},
			}},
		},
	}
}

func gpu() dashboard {
	g := `gpu=~"$gpu",` + inst
	by := "instance, gpu"
	lg := "{{instance}} gpu{{gpu}}"
	sel := func(metric string) string { return fmt.Sprintf("max by (%s) (%s{%s})", by, metric, g) }
	return dashboard{
		File: "vllm-gpu.json", UID: "vllm-exporter-gpu", Title: "vLLM / GPU",
		Desc: "GPU utilization, memory bandwidth against peak, clocks and throttle reasons, power, from the exporter's NVML collector.",
		Vars: []variable{instanceVar, gpuVar},
		Rows: []row{
			{Title: "Utilization", Panels: []panel{
				{Title: "GPU utilization (NVML)", Type: "timeseries", Unit: "percentunit", W: 8, Max: one(),
					Targets: []target{q(sel("vllm_gpu_utilization_ratio"), lg)}},
				{Title: "SM utilization / occupancy / tensor (GPM)", Type: "timeseries", Unit: "percentunit", W: 8, Max: one(),
					Targets: []target{
						q(sel("vllm_gpu_sm_utilization_ratio"), "SM "+lg),
						q(sel("vllm_gpu_sm_occupancy_ratio"), "occupancy "+lg),
						q(sel("vllm_gpu_tensor_activity_ratio"), "tensor "+lg),
					}},
				{Title: "Memory used", Type: "timeseries", Unit: "bytes", W: 8,
					Desc: "Device memory in use, free and total (NVML). vLLM reserves its KV cache up front (--gpu-memory-utilization), so used sits flat near that share of total while it serves: " +
						"free memory shrinking further means another process (see \"GPU memory by process\") takes memory vLLM may need at its next start.",
					Targets: []target{
						q(sel("vllm_gpu_memory_used_bytes"), "used "+lg),
						q(sel("vllm_gpu_memory_free_bytes"), "free "+lg),
						q(sel("vllm_gpu_memory_total_bytes"), "total "+lg),
					}},
				{Title: "GPU memory by process", Type: "timeseries", Unit: "bytes", W: 16,
					Desc: "Device memory each compute process on the GPU uses, by pid (NVML). Normally one vLLM worker per GPU: a second pid is a stray process (a crashed worker's leftover, a notebook) holding memory vLLM counted on. " +
						"Inside a container NVML may report pids of the host's namespace, or none without the host's PID namespace.",
					NoValue: "No processes listed: NVML reports no compute process on this GPU, or cannot see them (container without the host's PID namespace)",
					Targets: []target{q(`max by (instance, gpu, pid) (vllm_gpu_process_memory_used_bytes{`+g+`})`, lg+" pid {{pid}}")}},
				{Title: "GPM metrics available", Type: "table", W: 8,
					Desc:    "Whether NVML GPM (Hopper and newer) works on each GPU: the SM, occupancy, tensor and DRAM bandwidth panels read GPM and stay empty without it (reason says why: device_not_supported on a GPU older than Hopper, driver_not_supported, query_failed, sample_not_supported).",
					Targets: []target{q(`max by (instance, gpu, reason) (vllm_gpu_gpm_supported{`+g+`})`, "")}},
			}},
			{Title: "Memory bandwidth", Panels: []panel{
				{Title: "DRAM bandwidth vs peak", Type: "timeseries", Unit: "Bps",
					Desc: "DRAM bandwidth in use (GPM utilization x peak) against the GPU's theoretical peak. Decode is bandwidth-bound: near peak means the hardware is the limit.",
					Targets: []target{
						q(fmt.Sprintf("max by (%s) (vllm_gpu_dram_bandwidth_utilization_ratio{%s}) * on (%s) max by (%s) (vllm_gpu_memory_bandwidth_peak_bytes_per_second{%s})", by, g, by, by, g), "used "+lg),
						q(sel("vllm_gpu_memory_bandwidth_peak_bytes_per_second"), "peak "+lg),
					}},
				{Title: "Memory controller utilization (NVML)", Type: "timeseries", Unit: "percentunit", Max: one(),
					Targets: []target{q(sel("vllm_gpu_memory_controller_utilization_ratio"), lg)}},
			}},
			{Title: "Clocks and throttling", Panels: []panel{
				{Title: "SM and memory clocks vs max", Type: "timeseries", Unit: "hertz",
					Targets: []target{
						q(sel("vllm_gpu_sm_clock_hertz"), "SM "+lg),
						q(sel("vllm_gpu_sm_clock_max_hertz"), "SM max "+lg),
						q(sel("vllm_gpu_memory_clock_hertz"), "mem "+lg),
						q(sel("vllm_gpu_memory_clock_max_hertz"), "mem max "+lg),
					}},
				{Title: "Clock event reasons (throttling)", Type: "state-timeline",
					Desc:    "Which clock-event (throttle) reasons are active per GPU.",
					Targets: []target{q(`max by (instance, gpu, reason) (vllm_gpu_clock_event_active{`+g+`})`, "{{instance}} gpu{{gpu}} {{reason}}")}},
				{Title: "Time throttled by reason", Type: "timeseries", Unit: "percentunit", W: 24,
					Targets: []target{q(`sum by (instance, gpu, reason) (rate(vllm_gpu_clock_event_seconds_total{`+g+`}`+ri+`))`, "{{instance}} gpu{{gpu}} {{reason}}")}},
			}},
			{Title: "Power and thermals", Panels: []panel{
				{Title: "Power vs limit", Type: "timeseries", Unit: "watt", W: 8,
					Targets: []target{
						q(sel("vllm_gpu_power_watts"), "power "+lg),
						q(sel("vllm_gpu_power_limit_watts"), "limit "+lg),
					}},
				{Title: "Energy per hour", Type: "timeseries", Unit: "kwatth", W: 8,
					Desc: "Energy each GPU drew over the last hour (NVML's energy counter since the driver loaded), in kWh: the GPU's part of the cost of serving; divide by the hour's output tokens for energy per token. " +
						"Unlike the power gauge it misses no peak between scrapes.",
					Targets: []target{q(`sum by (instance, gpu) (increase(vllm_gpu_energy_joules_total{`+g+`}[1h])) / 3.6e6`, lg)}},
				{Title: "Temperature", Type: "timeseries", Unit: "celsius", W: 8,
					Targets: []target{q(sel("vllm_gpu_temperature_celsius"), lg)}},
				{Title: "PCIe and NVLink throughput", Type: "timeseries", Unit: "Bps", W: 24,
					Targets: []target{
						q(sel("vllm_gpu_pcie_tx_bytes_per_second"), "PCIe tx "+lg),
						q(sel("vllm_gpu_pcie_rx_bytes_per_second"), "PCIe rx "+lg),
						q(sel("vllm_gpu_nvlink_tx_bytes_per_second"), "NVLink tx "+lg),
						q(sel("vllm_gpu_nvlink_rx_bytes_per_second"), "NVLink rx "+lg),
					}},
				{Title: "GPU memory health", Type: "timeseries", Unit: "short", W: 16,
					Desc: "ECC errors over the last hour and remapped rows by type; a rising count precedes fatal Xids (48, 63, 64, 94, 95). " +
						"remap pending (1): a row remap waits for a GPU reset to take effect: drain the node and reset the GPU. remap failed (1): the GPU ran out of spare rows: replace it.",
					Targets: []target{
						q(`sum by (instance, gpu, type) (increase(vllm_gpu_ecc_errors_total{`+g+`}[1h]))`, "ECC {{type}} "+lg),
						q(`max by (instance, gpu, type) (vllm_gpu_remapped_rows{`+g+`})`, "remapped {{type}} "+lg),
						q(sel("vllm_gpu_remapped_rows_pending"), "remap pending "+lg),
						q(sel("vllm_gpu_remapped_rows_failure"), "remap failed "+lg),
						q(sel("vllm_gpu_up"), "up "+lg),
					}},
				{Title: "Last Xid event", Type: "stat", Unit: "dateTimeFromNow", W: 8,
					Desc:    "When the exporter last saw an Xid critical error event on each GPU (NVML event set; vllm_gpu_xid_events_total counts them by xid). Xid 48, 63, 64, 79, 94 and 95 mean lost or corrupted memory or a GPU off the bus: the vLLM on that GPU needs a restart, often the node a reset.",
					NoValue: "no Xid event since the exporter started",
					Targets: []target{q(`(`+sel("vllm_gpu_last_xid_event_timestamp_seconds")+` > 0) * 1000`, lg)}},
				{Title: "GPUs", Type: "table", W: 24,
					Targets: []target{q(`max by (instance, gpu, uuid, name, driver_version, cuda_version) (vllm_gpu_info{`+g+`})`, "")}},
			}},
		},
	}
}

func probes() dashboard {
	p := `profile=~"$profile",` + inst
	// one line per pod and profile: a window quantile does not aggregate
	pw := func(quantile, metric string) target {
		return q(probeWindow(quantile, metric, p, "instance"), map[string]string{"0.99": "p99", "0.5": "p50"}[quantile]+" {{profile}} {{instance}}")
	}
	pair := func(title, metric string) panel {
		return panel{Title: title, Type: "timeseries", Unit: "s", W: 6, Desc: windowQuantiles,
			Targets: []target{pw("0.99", metric), pw("0.5", metric)}}
	}
	pooled := func(metric, legend string) target {
		return q(hq("0.99", metric, p, "profile"), legend+" p99 {{profile}}")
	}
	return dashboard{
		File: "vllm-probes.json", UID: "vllm-exporter-probes", Title: "vLLM / Probes",
		Desc: "Synthetic streaming probes: what a client sees (TTFT, TPOT, ITL, e2e), failures, and the gap to the server's own view.",
		Vars: []variable{instanceVar, profileVar},
		Rows: []row{
			{Title: "Probe latency", Panels: []panel{
				pair("Probe TTFT p50 / p99", "vllm_probe_time_to_first_token_window_seconds"),
				pair("Probe TPOT p50 / p99", "vllm_probe_time_per_output_token_window_seconds"),
				pair("Probe inter-token latency p50 / p99", "vllm_probe_inter_token_latency_window_seconds"),
				pair("Probe e2e latency p50 / p99", "vllm_probe_e2e_latency_window_seconds"),
				{Title: "Probe p99 across the selected pods (histograms)", Type: "timeseries", Unit: "s", W: 24,
					Desc: "p99 of the probe histograms summed over the selected pods: exact to about 1% where Prometheus stores native histograms (scrape_native_histograms); from the classic buckets alone (Prometheus 3's default, and NHCB) up to a bucket off, so read one pod's quantiles in the panels above.",
					Targets: []target{
						pooled("vllm_probe_time_to_first_token_seconds", "TTFT"),
						pooled("vllm_probe_time_per_output_token_seconds", "TPOT"),
						pooled("vllm_probe_inter_token_latency_seconds", "ITL"),
						pooled("vllm_probe_e2e_latency_seconds", "e2e"),
					}},
			}},
			{Title: "Probe results", Panels: []panel{
				{Title: "Probes per second", Type: "timeseries", Unit: "reqps", W: 8,
					Targets: []target{q(`sum by (profile) (rate(vllm_probe_requests_total{`+p+`}`+ri+`))`, "{{profile}}")}},
				{Title: "Probe failures by reason", Type: "timeseries", Unit: "reqps", W: 8, Stack: true,
					Desc:    "Empty while every probe succeeds.",
					Targets: []target{q(`sum by (profile, reason) (rate(vllm_probe_failures_total{`+p+`}`+ri+`))`, "{{profile}} {{reason}}")}},
				{Title: "Last probe succeeded", Type: "stat", W: 8,
					Desc:    "1 when the last probe of the profile succeeded (the reasons of failing probes are in \"Last probe TTFT and age\" and \"Probe failures by reason\").",
					NoValue: "no probe yet",
					Targets: []target{q(`min by (profile) (vllm_probe_last_success{`+p+`})`, "{{profile}}")}},
				{Title: "Last probe TTFT and age", Type: "timeseries", Unit: "s", W: 12,
					Desc:    "TTFT of the last successful probe and the age of the last probe. While probes fail there is no new TTFT: the failures of the last 5 minutes show by reason instead (their value: failures in 5m).",
					NoValue: "no probe yet (probes need --probe.enabled and a profile in the config)",
					Targets: []target{
						q(`max by (profile) (vllm_probe_last_ttft_seconds{`+p+`}) and on (profile) (min by (profile) (vllm_probe_last_success{`+p+`}) == 1)`, "TTFT {{profile}}"),
						q(`time() - max by (profile) (vllm_probe_last_timestamp_seconds{`+p+`})`, "age {{profile}}"),
						q(`sum by (profile, reason) (increase(vllm_probe_failures_total{`+p+`}[5m])) > 0`, "failing: {{reason}} {{profile}}"),
					}},
				{Title: "Probe TTFT minus server TTFT (median)", Type: "timeseries", Unit: "s", W: 12,
					Desc:    "Time the client waits that vLLM's own TTFT does not see: network, proxy, API server, tokenization.",
					Targets: []target{q(`max by (profile) (vllm_probe_ttft_gap_seconds{`+p+`})`, "{{profile}}")}},
				{Title: "Engine stalled", Type: "stat", W: 8,
					Targets: []target{q(`max by (instance) (vllm_engine_stalled{`+inst+`})`, "{{instance}}")}},
				{Title: "Streamed output tokens and chunks", Type: "timeseries", Unit: "short", W: 16,
					Targets: []target{
						q(`sum by (profile) (rate(vllm_probe_output_tokens_total{`+p+`}`+ri+`))`, "tokens/s {{profile}}"),
						q(`sum by (profile) (rate(vllm_probe_chunks_total{`+p+`}`+ri+`))`, "chunks/s {{profile}}"),
					}},
				{Title: "Probes skipped by reason", Type: "timeseries", Unit: "short", W: 12, Stack: true,
					Desc: "Scheduled probes not sent, per second, by reason: budget (probes.max_requests_per_minute or max_tokens_per_hour spent: raise the budget or lengthen the profiles' intervals), " +
						"asleep (vLLM reports its engine deliberately asleep: expected during /sleep), max_model_len (the profile does not fit the model's context even with its prompt shrunk: lower its output_tokens). " +
						"A skipped probe measures nothing, so the probe SLOs see fewer events.",
					Targets: []target{q(`sum by (profile, reason) (rate(vllm_probe_skipped_total{`+p+`}`+ri+`))`, "{{profile}} {{reason}}")}},
				{Title: "Probe targets", Type: "table", W: 12,
					Desc:    "The served model or LoRA adapter each profile sends its probes to (the profile's model, else probes.model, else the first model vLLM's /v1/models lists): what each profile's latency measures.",
					NoValue: "no probe target yet (probes need --probe.enabled and a profile in the config; the target is resolved at the first probe)",
					Targets: []target{q(`max by (instance, profile, model) (vllm_probe_target_info{`+p+`})`, "")}},
			}},
		},
	}
}

const newerVLLMRowTitle = "Newer vLLM (0.12–0.33): admission, sleep, health, speculative decoding, prefill work"

// newerVLLMRow shows the series read from the families vLLM added from
// ≈0.12 to 0.33 (docs/vllm-versions.md). Each family is optional, so every
// panel says which vLLM version or flag it needs when it is empty.
func newerVLLMRow() row {
	rate := func(metric, sel string) string { return `rate(` + metric + `{` + sel + `}` + ri + `)` }
	spec := func(metric string) string { return `sum by (model) (` + rate(metric, mi) + `)` }
	const specNoValue = "No speculative decoding: needs vLLM started with --speculative-config (vllm:spec_decode_* counters, V1 0.8.3+)"
	return row{Title: newerVLLMRowTitle, Panels: []panel{
		{Title: "Waiting requests by reason", Type: "timeseries", Unit: "short", W: 8, Stack: true,
			Desc: "Waiting requests split by why they wait. capacity: no room in the batch or KV cache yet (real queueing; what the queueing class and alerts read). " +
				"deferred: held by a transient constraint (LoRA budget, KV transfer, blocked status). From vLLM ≈0.20 vllm_requests_waiting counts both: " +
				"deferred requests piling up while few wait for capacity and the KV cache is mostly free is the deferred livelock (vllm #53130).",
			NoValue: "Needs vLLM ≈0.20+ (vllm:num_requests_waiting_by_reason); on older vLLM see \"Scheduler: running and waiting\"",
			Targets: []target{q(`sum by (model, reason) (vllm_requests_waiting_by_reason{`+mi+`})`, "{{reason}} {{model}}")}},
		{Title: "Deferred livelock", Type: "state-timeline", W: 8,
			Desc: "Firing while the classifier reports deferred_livelock for the model (the VLLMDeferredLivelock page): deferred requests pile up, generation all but stops, " +
				"vLLM's /health stays 200 and only a restart recovers (vllm #53130). The exporter's /-/vllm/healthy and /-/vllm/ready answer 503 meanwhile. " +
				"Detecting it needs the waiting-by-reason split of vLLM ≈0.20+: on older vLLM this stays ok.",
			NoValue: "No classification yet (the classifier runs on the SLO watchdog's tick)",
			Targets: []target{q(`max by (model) (vllm_bottleneck{class="deferred_livelock",`+mi+`})`, "{{model}}")}},
		{Title: "Requests refused (5xx, 429)", Type: "timeseries", Unit: "reqps", W: 8,
			Desc: "Requests vLLM's HTTP server answered with a 5xx (503 while overloaded, asleep or with a dead engine) or a 429 (where status codes are not grouped), summed over handlers. " +
				"They never reach vLLM's finished-request counters, and they burn the availability SLO. vLLM gives them no model: each model of the server shows the server's total.",
			NoValue: "No HTTP request counts: needs vLLM's HTTP instrumentator (V1 0.8.3+, http_requests_total), and absent until the server answered a request",
			Targets: []target{q(`sum by (model) (`+rate("vllm_requests_refused_total", mi)+`)`, "refused/s {{model}}")}},
		{Title: "Engine awake and sleep level", Type: "timeseries", Unit: "short", W: 8,
			Desc: "awake: 1 when every engine of the model is awake, 0 while one sleeps on purpose (/sleep, RL weight swaps, model multiplexing). " +
				"sleep level: 0 awake, 1 weights offloaded to CPU, 2 weights discarded. While asleep the probes pause, the stall alerts hold off and /-/vllm/ready answers 503.",
			NoValue: "Needs vLLM ≈0.12+ (vllm:engine_sleep_state)",
			Targets: []target{
				q(`min by (model) (vllm_engine_awake{`+mi+`})`, "awake {{model}}"),
				q(`max by (model) (vllm_engine_sleep_level{`+mi+`})`, "sleep level {{model}}"),
			}},
		{Title: "Sleep state per resource", Type: "table", W: 8,
			Desc:    "Current state of each engine resource (scheduler: running/paused; weights and kv_cache: resident/offloaded/discarded/released), the least awake over engines.",
			NoValue: "Needs vLLM 0.30+ (vllm:engine_sleep_resource_state, late 2026)",
			Targets: []target{q(`max by (model, resource, state) (vllm_engine_sleep_resource_state{`+mi+`}) == 1`, "")}},
		{Title: "vLLM engine healthy", Type: "stat", W: 4,
			Desc:    "vllm:engine_healthy, min over engines: 0 when an engine reports itself unhealthy (vLLM fault tolerance).",
			NoValue: "Only with vLLM --enable-fault-tolerance (vllm:engine_healthy, late 2026)",
			Targets: []target{q(`min by (model) (vllm_engine_healthy{`+mi+`})`, "{{model}}")}},
		{Title: "Health verdict", Type: "stat", W: 4,
			Desc:    "The exporter's verdict for the vLLM server (what /-/vllm/healthy and /-/vllm/ready answer): serving, asleep (healthy but not ready), or starting, down, unhealthy, stalled, livelocked (both 503).",
			Targets: []target{q(`max by (instance, state) (vllm_health_verdict{`+inst+`}) == 1`, "{{instance}}: {{state}}")}},
		{Title: "Speculative decoding: acceptance rate", Type: "timeseries", Unit: "percentunit", W: 8, Max: one(),
			Desc:    "Accepted / proposed draft tokens. A falling rate means the draft model (or n-gram/EAGLE head) no longer predicts this traffic: the drafts cost compute and gain little.",
			NoValue: specNoValue,
			Targets: []target{q(spec("vllm_spec_decode_accepted_tokens_total")+` / (`+spec("vllm_spec_decode_draft_tokens_total")+` > 0)`, "{{model}}")}},
		{Title: "Speculative decoding: mean acceptance length", Type: "timeseries", Unit: "short", W: 8,
			Desc: "1 + accepted tokens per draft: tokens a stream gains per decode step (1 = no gain). vLLM's inter-token latency histogram counts per step, so per-token time is ITL divided by this; " +
				"the classifier scales the decode roofline and the measured decode rate by it (its line: the same ratio over the classifier window, bottleneck.window).",
			NoValue: specNoValue,
			Targets: []target{
				q(`1 + `+spec("vllm_spec_decode_accepted_tokens_total")+` / (`+spec("vllm_spec_decode_drafts_total")+` > 0)`, "{{model}}"),
				q(`max by (model) (vllm_decode_spec_acceptance_length{`+mi+`})`, "classifier {{model}}"),
			}},
		{Title: "Prompt tokens: computed vs cached", Type: "timeseries", Unit: "short", W: 8, Stack: true,
			Desc: "Prompt tokens per second by source: local_compute is the prefill work the GPU does; local_cache_hit (prefix cache) and external_kv_transfer (KV connector) are served without compute. " +
				"A shrinking cached share at the same prompt rate means more prefill work per request.",
			NoValue: "Needs vLLM ≈0.16+ (vllm:prompt_tokens_by_source_total); on older vLLM see \"Prefix cache hit ratio\"",
			Targets: []target{q(`sum by (model, source) (`+rate("vllm_prompt_tokens_by_source_total", mi)+`)`, "{{source}} {{model}}")}},
		{Title: "KV cache pool (as vLLM states it)", Type: "stat", W: 8,
			Desc:    "The KV-cache pool vLLM allocated, per engine: tokens it holds and how many requests of max_model_len tokens fit at once. The decode roofline sizes the KV pool from it (with --model.kv-bytes-per-token).",
			NoValue: "Needs vLLM ≈0.24+ (kv_cache_size_tokens and kv_cache_max_concurrency labels of vllm:cache_config_info)",
			Targets: []target{
				q(`max by (model) (vllm_kv_cache_size_tokens{`+mi+`})`, "tokens {{model}}"),
				q(`max by (model) (vllm_kv_cache_max_concurrency{`+mi+`})`, "max concurrency {{model}}"),
			}},
		{Title: "MFU and MBU (vLLM's estimates)", Type: "timeseries", Unit: "percentunit", W: 16,
			Desc: "Model FLOPs utilization (vLLM's estimated FLOP/s per GPU / one GPU's peak) and model bandwidth utilization (estimated bytes read and written per second per GPU / peak memory bandwidth). " +
				"Prefill-heavy load drives MFU, decode drives MBU; MBU near 1 means decode is at the memory-bandwidth limit.",
			NoValue: "Needs vLLM ≈0.17+ started with --enable-mfu-metrics, and the exporter's --gpu.peak-flops for MFU (--gpu.peak-memory-bandwidth for MBU on a host without an NVIDIA GPU)",
			Targets: []target{
				q(`max by (model) (vllm_model_flops_utilization_ratio{`+mi+`})`, "MFU {{model}}"),
				q(`max by (model) (vllm_model_bandwidth_utilization_ratio{`+mi+`})`, "MBU {{model}}"),
			}},
	}}
}

func withWidth(p panel, w int) panel { p.W = w; return p }
