package dashboards

// The overview's last row: what the exporter itself costs (CPU, memory,
// goroutines, file descriptors) and whether its own parts work (collectors,
// the model bound, what it drops of vLLM's body, the SLO state file, the
// configuration). Every family exported by default is read by a shipped
// alert, panel or verdict (docs/cost.md); these are the exporter's own.

const exporterRowTitle = "Exporter (this sidecar): cost and health"

// exporterOnly keeps the runtime series (go_*, process_*, which carry no
// exporter-specific name) of the exporters' own targets: "All" instances
// is `.*`, which would match every job Prometheus scrapes.
func exporterOnly(expr string) string {
	return `(` + expr + `) and on (instance) vllm_exporter_build_info{` + inst + `}`
}

// exporterRow is the row as data, in screen order.
func exporterRow() row {
	// max by instance of a runtime series (one per process).
	m := func(metric string) string { return `max by (instance) (` + metric + `{` + inst + `})` }
	unexpected := `max by (instance, metric, label) (vllm_exporter_vllm_unexpected_label_values{` + inst + `})`
	return row{Title: exporterRowTitle, Panels: []panel{
		{Title: "Exporter CPU", Type: "timeseries", Unit: "percentunit", W: 8,
			Desc: "CPU seconds the exporter process uses per second (1 = one core). It scrapes vLLM, evaluates the SLOs, classifies and probes on fixed intervals, so the figure is flat under steady load: " +
				"a rise without more models, engines or probe profiles is worth a look. The shipped deployments request 50m (0.05).",
			Targets: []target{q(exporterOnly(`max by (instance) (rate(process_cpu_seconds_total{`+inst+`}`+ri+`))`), "CPU {{instance}}")}},
		{Title: "Exporter memory", Type: "timeseries", Unit: "bytes", W: 8,
			Desc: "Resident memory of the exporter process, the Go heap (live objects, and free space in spans still held) and the Go soft limit GOMEMLIMIT. " +
				"The shipped deployments set GOMEMLIMIT to 40 MiB under a 64 MiB container limit: RSS nearing the container limit risks an OOM kill; a heap that grows without bound is a leak (the exporter bounds every map it keeps).",
			Targets: []target{
				// GOMEMLIMIT unset reads math.MaxInt64: shown only when set.
				q(`label_replace(`+exporterOnly(m("process_resident_memory_bytes"))+`, "series", "RSS", "", "")`+
					` or label_replace(`+exporterOnly(m("go_gc_gomemlimit_bytes")+` < 1e18`)+`, "series", "GOMEMLIMIT", "", "")`, "{{series}} {{instance}}"),
				q(exporterOnly(m("go_memory_classes_heap_objects_bytes")), "heap objects {{instance}}"),
				q(exporterOnly(m("go_memory_classes_heap_unused_bytes")), "heap unused {{instance}}"),
			}},
		{Title: "Exporter goroutines", Type: "timeseries", Unit: "short", W: 8,
			Desc: "Goroutines of the exporter process. The count is constant while the configuration is: a fixed set of loops (scraper, watchdog, classifier, probe scheduler, HTTP server) plus one per request in flight. " +
				"A steady climb is a leak (stuck probe streams, scrapes that never return); a step after a reload with more probe profiles is expected.",
			Targets: []target{q(exporterOnly(m("go_goroutines")), "{{instance}}")}},
		{Title: "Collectors", Type: "table", W: 12,
			Desc: "State of each collector (vllm scrape, probes, gpu): up when its last run succeeded, failing when it failed (VLLMExporterCollectorDown alerts), " +
				"absent when it is enabled in auto mode but found nothing to collect on this host (reason: e.g. nvml_library_not_found on a host without an NVIDIA driver; nothing alerts on an absent collector).",
			Targets: []target{q(`label_replace(max by (instance, collector) (vllm_exporter_collector_up{`+inst+`}) == 1, "state", "up", "", "")`+
				` or label_replace(max by (instance, collector) (vllm_exporter_collector_up{`+inst+`}) == 0, "state", "failing", "", "")`+
				` or label_replace(max by (instance, collector, reason) (vllm_exporter_collector_absent{`+inst+`}), "state", "absent", "", "")`, "")}},
		{Title: "Collector run time", Type: "timeseries", Unit: "s", W: 12,
			Desc: "Duration of each collector's last run: the vLLM scrape (fetch and parse of vLLM's /metrics), the last probe, the NVML read. " +
				"A vLLM scrape nearing --vllm.scrape-interval, or a probe nearing its timeout, lags the SLOs and verdicts built on them.",
			Targets: []target{q(`max by (instance, collector) (vllm_exporter_collector_duration_seconds{`+inst+`})`, "{{collector}} {{instance}}")}},
		{Title: "Models tracked, evicted, refused", Type: "timeseries", Unit: "short", W: 8,
			Desc: "Model names each component (vllm: the scraper, slo: the watchdog) keeps state for, and over the last hour the names it evicted (gone from vLLM for --vllm.model-idle-timeout) and refused. " +
				"A refused model is one the exporter does not track, because --vllm.max-models names were tracked already: its series are missing from every panel and its SLOs are not evaluated. Raise --vllm.max-models, or find what invents model names.",
			Targets: []target{
				q(`max by (instance, component) (vllm_exporter_models_tracked{`+inst+`})`, "tracked {{component}} {{instance}}"),
				q(`sum by (instance, component) (increase(vllm_exporter_models_evicted_total{`+inst+`}[1h]))`, "evicted in 1h {{component}} {{instance}}"),
				q(`sum by (instance, component) (increase(vllm_exporter_models_refused_total{`+inst+`}[1h]))`, "refused in 1h {{component}} {{instance}}"),
			}},
		{Title: "vLLM samples dropped, unexpected label values", Type: "timeseries", Unit: "short", W: 8,
			Desc: "Samples of vLLM's /metrics the exporter dropped over the last hour, by reason: a bound (model_limit, engine_limit, lora_adapter_limit, finished_reason_limit, label_value_too_long, line_too_long) " +
				"or invalid input (invalid_histogram, bucket_mismatch). Beside them the label values of the last scrape the exporter did not understand (an unknown sleep state, more priorities than allowed), by metric and label: " +
				"their samples are ignored. Either one non-zero means a panel or SLO sees less than vLLM said: a newer vLLM, or a bound to raise.",
			Targets: []target{
				q(`sum by (instance, reason) (increase(vllm_exporter_samples_dropped_total{`+inst+`}[1h]))`, "dropped in 1h {{reason}} {{instance}}"),
				// 0 (metric "none") while every value was understood
				q(unexpected+` or (label_replace(max by (instance) (vllm_exporter_vllm_schema_info{`+inst+`}) * 0, "metric", "none", "", "") unless on (instance) `+unexpected+`)`,
					"unexpected {{metric}} {{label}} {{instance}}"),
			}},
		{Title: "SLO state file", Type: "timeseries", Unit: "short", W: 8,
			Desc: "The SLO watchdog's checkpoint (--slo.state-file): seconds since the last successful write (it writes every --slo.checkpoint-interval), " +
				"whether the windows were restored from it at start (1; 0 after a first start or a bad file), and checkpoint problems over the last hour by reason (corrupt, foreign, version: the file was set aside; read, write: check the volume). " +
				"Without a restored state a restart starts every SLO window empty.",
			NoValue: "No SLO state: start the exporter with --slo.state-file (on a persistent volume) to keep the SLO windows across restarts",
			Targets: []target{
				q(`time() - max by (instance) (vllm_exporter_slo_state_last_save_timestamp_seconds{`+inst+`})`, "seconds since last save {{instance}}"),
				q(`max by (instance) (vllm_exporter_slo_state_restored{`+inst+`})`, "restored at start {{instance}}"),
				q(`sum by (instance, reason) (increase(vllm_exporter_slo_state_errors_total{`+inst+`}[1h]))`, "errors in 1h {{reason}} {{instance}}"),
			}},
		{Title: "Exporter open file descriptors", Type: "timeseries", Unit: "percentunit", W: 8, Max: one(),
			Desc:    "Open file descriptors over the process limit. The exporter holds a few sockets (vLLM, probes, Prometheus' scrapes) and its state file: near the limit, scrapes and probes start failing with \"too many open files\".",
			Targets: []target{q(exporterOnly(m("process_open_fds")+` / on (instance) `+m("process_max_fds")), "{{instance}}")}},
		{Title: "Inference server and metric schema", Type: "stat", W: 8,
			Desc: "The server the exporter reads (vllm, sglang, trtllm; --vllm.server or learnt from /v1/models) with its version, and the layout of its /metrics it detected: v1 (V1 engine, 0.9.2+), v1-legacy (V1 before the 0.9.2 renames: gpu_cache_usage_perc), v0 (the V0 engine), sglang, trtllm, none (no family the exporter reads: vLLM started with --disable-log-stats, SGLang without --enable-metrics, trtllm-serve without return_perf_metrics). " +
				"It decides which families are expected (vllm_exporter_expected_metric_missing) and which series stay empty (docs/exporter.md's engine tables); none while the server serves means every vLLM panel stays empty.",
			NoValue: "no successful scrape of vLLM yet",
			Targets: []target{q(`max by (instance, schema) (vllm_exporter_vllm_schema_info{`+inst+`}) == 1`, "{{instance}}: {{schema}}"),
				q(`max by (instance, server, version) (vllm_server_info{`+inst+`})`, "{{instance}}: {{server}} {{version}}")}},
		{Title: "Since last configuration reload", Type: "stat", Unit: "s", W: 8,
			Desc: "Time since the configuration file (SLOs, probe profiles, bottleneck thresholds) was last loaded successfully, at start or on SIGHUP / POST /-/reload. " +
				"A reload that fails keeps the previous configuration (VLLMExporterConfigReloadFailed); an age older than your last config change means the change is not live.",
			Targets: []target{q(`time() - max by (instance) (vllm_exporter_config_last_reload_success_timestamp_seconds{`+inst+`})`, "{{instance}}")}},
	}}
}
