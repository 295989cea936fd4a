package vllm

import (
	"math"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// cacheConfigLabels are the vllm:cache_config_info labels re-exported. vLLM
// changes that label set every release; these five exist in all of them.
var cacheConfigLabels = []string{"block_size", "num_gpu_blocks", "gpu_memory_utilization", "enable_prefix_caching", "cache_dtype"}

type descs struct {
	up, running, waiting, swapped, kv, engineKV, engineRunning, engineWaiting, cpuKV *prometheus.Desc
	preemptions, promptTokens, genTokens, prefixQueries, prefixHits, finished        *prometheus.Desc
	preemptRate, preemptPerReq, prefixHitRatio, promptRate, genRate, finishedRate    *prometheus.Desc
	cacheConfig                                                                      *prometheus.Desc

	// Families of newer vLLM versions (docs/vllm-versions.md).
	waitingByReason, awake, sleepLevel, sleepResource, engineHealthy          *prometheus.Desc
	specDrafts, specDraftTokens, specAccepted, specAcceptRatio, specAcceptLen *prometheus.Desc
	promptBySource, promptCached, promptComputedRate, promptCachedRate        *prometheus.Desc
	kvSizeTokens, kvMaxConcurrency, flops, readBytes, writeBytes              *prometheus.Desc
	flopsRate, bytesRate, refused, unexpected                                 *prometheus.Desc
	byPriority                                                                map[snapshot.HistogramName]*prometheus.Desc
	hist, windowQuantile                                                      map[snapshot.HistogramName]*prometheus.Desc

	scrapes, scrapeErrors, scrapeDuration, lastSuccess, schema, missing *prometheus.Desc
	samplesDropped                                                      *prometheus.Desc
}

func newDescs() *descs {
	m := []string{"model"}
	mw := []string{"model", "window"}
	g := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	d := &descs{
		up:            g("vllm_up", "1 if the last scrape of vLLM's /metrics was fetched and parsed, else 0."),
		running:       g("vllm_requests_running", "Requests running on the engine, summed over engines; from vllm:num_requests_running.", m...),
		waiting:       g("vllm_requests_waiting", "Requests waiting to be scheduled, summed over engines; from vllm:num_requests_waiting.", m...),
		swapped:       g("vllm_requests_swapped", "Requests swapped to CPU (V0 engine only); from vllm:num_requests_swapped.", m...),
		kv:            g("vllm_kv_cache_usage_ratio", "GPU KV-cache usage 0..1, max over engines; from vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc.", m...),
		engineKV:      g("vllm_engine_kv_cache_usage_ratio", "GPU KV-cache usage 0..1 of one data-parallel engine; from vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc.", "model", "engine"),
		engineRunning: g("vllm_engine_requests_running", "Requests running on one data-parallel engine; from vllm:num_requests_running.", "model", "engine"),
		engineWaiting: g("vllm_engine_requests_waiting", "Requests waiting on one data-parallel engine; from vllm:num_requests_waiting.", "model", "engine"),
		cpuKV:         g("vllm_cpu_kv_cache_usage_ratio", "CPU KV-cache usage 0..1 (V0 engine only); from vllm:cpu_cache_usage_perc.", m...),

		preemptions:   g("vllm_preemptions_total", "Preemptions, summed over engines; from vllm:num_preemptions_total.", m...),
		promptTokens:  g("vllm_prompt_tokens_total", "Prompt (prefill) tokens processed, summed over engines; from vllm:prompt_tokens_total.", m...),
		genTokens:     g("vllm_generation_tokens_total", "Generated tokens, summed over engines; from vllm:generation_tokens_total.", m...),
		prefixQueries: g("vllm_prefix_cache_queries_total", "Prefix-cache queries in tokens (blocks before vLLM 0.9.0), summed over engines; from vllm:prefix_cache_queries_total or vllm:gpu_prefix_cache_queries_total.", m...),
		prefixHits:    g("vllm_prefix_cache_hits_total", "Prefix-cache hits in tokens (blocks before vLLM 0.9.0), summed over engines; from vllm:prefix_cache_hits_total or vllm:gpu_prefix_cache_hits_total.", m...),
		finished:      g("vllm_requests_finished_total", "Finished requests by finish reason, summed over engines; from vllm:request_success_total.", "model", "finished_reason"),

		preemptRate:    g("vllm_preemptions_per_second", "Preemptions per second over the window; derived from vllm:num_preemptions_total.", mw...),
		preemptPerReq:  g("vllm_preemptions_per_request_ratio", "Preemptions per finished request over the window (can exceed 1: a request may be preempted several times), absent when no request finished; from vllm:num_preemptions_total and vllm:request_success_total.", mw...),
		prefixHitRatio: g("vllm_prefix_cache_hit_ratio", "Prefix-cache hit ratio 0..1 (hits / queries) over the window, absent without queries; from vllm:prefix_cache_hits_total and vllm:prefix_cache_queries_total (or the gpu_ names).", mw...),
		promptRate:     g("vllm_prompt_tokens_per_second", "Prompt tokens per second over the window; derived from vllm:prompt_tokens_total.", mw...),
		genRate:        g("vllm_generation_tokens_per_second", "Generated tokens per second over the window; derived from vllm:generation_tokens_total.", mw...),
		finishedRate:   g("vllm_requests_finished_per_second", "Finished requests per second over the window by finish reason; derived from vllm:request_success_total.", "model", "window", "finished_reason"),

		cacheConfig: g("vllm_cache_config_info", "vLLM's KV-cache configuration as labels, value 1; from vllm:cache_config_info.", append([]string{"model"}, cacheConfigLabels...)...),

		waitingByReason:    g("vllm_requests_waiting_by_reason", "Waiting requests by reason (capacity: waiting for scheduling capacity; deferred: held by a transient constraint such as LoRA budget or KV transfer), summed over engines; from vllm:num_requests_waiting_by_reason.", "model", "reason"),
		awake:              g("vllm_engine_awake", "1 if every engine of the model is awake, 0 while one is deliberately asleep (sleep mode); from vllm:engine_sleep_state and vllm:engine_fully_awake / engine_sleep_resource_state.", m...),
		sleepLevel:         g("vllm_engine_sleep_level", "Deepest sleep level of the model's engines: 0 awake, 1 weights offloaded, 2 weights discarded; from vllm:engine_sleep_state.", m...),
		sleepResource:      g("vllm_engine_sleep_resource_state", "1 for each engine resource's current sleep state (least awake over engines); from vllm:engine_sleep_resource_state.", "model", "resource", "state"),
		engineHealthy:      g("vllm_engine_healthy", "1 if every engine reports a healthy cached state, else 0 (vLLM --enable-fault-tolerance only); from vllm:engine_healthy.", m...),
		specDrafts:         g("vllm_spec_decode_drafts_total", "Speculative-decoding drafts, summed over engines; from vllm:spec_decode_num_drafts_total.", m...),
		specDraftTokens:    g("vllm_spec_decode_draft_tokens_total", "Speculative-decoding draft tokens proposed, summed over engines; from vllm:spec_decode_num_draft_tokens_total.", m...),
		specAccepted:       g("vllm_spec_decode_accepted_tokens_total", "Speculative-decoding draft tokens accepted, summed over engines; from vllm:spec_decode_num_accepted_tokens_total.", m...),
		specAcceptRatio:    g("vllm_spec_decode_acceptance_ratio", "Accepted / proposed draft tokens over the window, absent without drafts; from vllm:spec_decode_num_accepted_tokens_total and vllm:spec_decode_num_draft_tokens_total.", mw...),
		specAcceptLen:      g("vllm_spec_decode_mean_acceptance_length", "Mean tokens a stream gains per decode step over the window, 1 + accepted / drafts (the factor between per-step inter-token latency and per-token time); from vllm:spec_decode_num_accepted_tokens_total and vllm:spec_decode_num_drafts_total.", mw...),
		promptBySource:     g("vllm_prompt_tokens_by_source_total", "Prompt tokens by source (local_compute, local_cache_hit, external_kv_transfer), summed over engines; from vllm:prompt_tokens_by_source_total.", "model", "source"),
		promptCached:       g("vllm_prompt_tokens_cached_total", "Prompt tokens served from the local or external prefix cache, summed over engines; from vllm:prompt_tokens_cached_total.", m...),
		promptComputedRate: g("vllm_prompt_tokens_computed_per_second", "Prompt tokens per second actually computed in prefill (cache and KV-transfer hits excluded) over the window; from vllm:prompt_tokens_by_source_total{source=\"local_compute\"}, else vllm:prompt_tokens_total minus vllm:prompt_tokens_cached_total, else vllm:request_prefill_kv_computed_tokens_sum.", mw...),
		promptCachedRate:   g("vllm_prompt_tokens_cached_per_second", "Prompt tokens per second served from a prefix cache over the window; from vllm:prompt_tokens_cached_total, else vllm:prompt_tokens_by_source_total (cache hit + KV transfer).", mw...),
		kvSizeTokens:       g("vllm_kv_cache_size_tokens", "Tokens the KV-cache pool holds, as vLLM states it; from vllm:cache_config_info's kv_cache_size_tokens label.", m...),
		kvMaxConcurrency:   g("vllm_kv_cache_max_concurrency", "Requests of max_model_len tokens the KV-cache pool holds at once, as vLLM states it; from vllm:cache_config_info's kv_cache_max_concurrency label.", m...),
		flops:              g("vllm_estimated_flops_per_gpu_total", "vLLM's estimate of floating-point operations per GPU (mean over engines), 0 without --enable-mfu-metrics; from vllm:estimated_flops_per_gpu_total.", m...),
		readBytes:          g("vllm_estimated_read_bytes_per_gpu_total", "vLLM's estimate of bytes read from GPU memory per GPU (mean over engines); from vllm:estimated_read_bytes_per_gpu_total.", m...),
		writeBytes:         g("vllm_estimated_write_bytes_per_gpu_total", "vLLM's estimate of bytes written to GPU memory per GPU (mean over engines); from vllm:estimated_write_bytes_per_gpu_total.", m...),
		flopsRate:          g("vllm_estimated_flops_per_second_per_gpu", "vLLM's estimated floating-point operations per second per GPU over the window, absent while the counter does not move; from vllm:estimated_flops_per_gpu_total.", mw...),
		bytesRate:          g("vllm_estimated_memory_bytes_per_second_per_gpu", "vLLM's estimated GPU-memory bytes read plus written per second per GPU over the window, absent while the counters do not move; from vllm:estimated_read_bytes_per_gpu_total and vllm:estimated_write_bytes_per_gpu_total.", mw...),
		refused:            g("vllm_requests_refused_total", "Requests the vLLM server answered with a 5xx (or 429 where status codes are not grouped) before or instead of the engine, summed over handlers and counted for every model of the server; from http_requests_total (vLLM's HTTP instrumentator).", m...),
		unexpected:         g("vllm_exporter_vllm_unexpected_label_values", "Distinct label values in the last vLLM scrape that the exporter did not understand or had to drop past a bound (an unknown sleep state, more priorities than allowed); their samples are ignored.", "metric", "label"),
		byPriority: map[snapshot.HistogramName]*prometheus.Desc{
			snapshot.TTFT: g("vllm_time_to_first_token_by_priority_seconds", "Time from request arrival to the first output token in seconds per request priority (--vllm.per-priority; vLLM --scheduling-policy priority); from vllm:time_to_first_token_seconds.", "model", "priority"),
			snapshot.E2E:  g("vllm_e2e_request_latency_by_priority_seconds", "End-to-end request latency in seconds per request priority (--vllm.per-priority); from vllm:e2e_request_latency_seconds.", "model", "priority"),
		},

		hist:           map[snapshot.HistogramName]*prometheus.Desc{},
		windowQuantile: map[snapshot.HistogramName]*prometheus.Desc{},

		scrapes:        g("vllm_exporter_scrapes_total", "Scrapes of vLLM's /metrics attempted."),
		scrapeErrors:   g("vllm_exporter_scrape_errors_total", "Failed scrapes of vLLM's /metrics by reason.", "reason"),
		samplesDropped: g("vllm_exporter_samples_dropped_total", "Samples of vLLM's /metrics dropped by a bound (model, engine and finished-reason limits, label value length) or as invalid, by reason.", "reason"),
		scrapeDuration: g("vllm_exporter_scrape_duration_seconds", "Duration of the last scrape of vLLM's /metrics (fetch, parse, derive) in seconds."),
		lastSuccess:    g("vllm_exporter_last_successful_scrape_timestamp_seconds", "Unix time of the last successful scrape of vLLM's /metrics."),
		schema:         g("vllm_exporter_vllm_schema_info", "Detected vLLM metric schema (v0, v1-legacy, v1, none), value 1.", "schema"),
		missing:        g("vllm_exporter_expected_metric_missing", "1 if a vLLM metric expected for the detected schema is absent (its derived series are not exported), else 0.", "metric"),
	}
	for _, s := range sources {
		if s.Field != fHistogram {
			continue
		}
		what := histogramWhat[s.Hist]
		d.hist[s.Hist] = g(s.Exported, what+" in seconds, vLLM's buckets summed over engines; from "+joinOr(s.Names)+".", m...)
		d.windowQuantile[s.Hist] = g("vllm_"+string(s.Hist)+"_window_seconds",
			what+" in seconds, quantiles over the window (histogram_quantile of bucket increases, absent when the window saw no observation), _sum and _count cumulative; from "+joinOr(s.Names)+".", mw...)
	}
	return d
}

// histogramWhat says what each latency histogram measures, for HELP.
var histogramWhat = map[snapshot.HistogramName]string{
	snapshot.TTFT:              "Time from request arrival to the first output token",
	snapshot.InterTokenLatency: "Time between successive output tokens (per engine step)",
	snapshot.RequestTPOT:       "Per-request mean time per output token after the first",
	snapshot.E2E:               "End-to-end request latency",
	snapshot.QueueTime:         "Time requests spent waiting in the queue",
	snapshot.PrefillTime:       "Time requests spent in prefill",
	snapshot.DecodeTime:        "Time requests spent in decode",
	snapshot.InferenceTime:     "Time requests spent running (prefill plus decode)",
}

func joinOr(names []string) string {
	out := names[0]
	for _, n := range names[1:] {
		out += " or " + n
	}
	return out
}

func (d *descs) all() []*prometheus.Desc {
	out := []*prometheus.Desc{d.up, d.running, d.waiting, d.swapped, d.kv, d.engineKV, d.engineRunning, d.engineWaiting, d.cpuKV,
		d.preemptions, d.promptTokens, d.genTokens, d.prefixQueries, d.prefixHits, d.finished,
		d.preemptRate, d.preemptPerReq, d.prefixHitRatio, d.promptRate, d.genRate, d.finishedRate, d.cacheConfig,
		d.scrapes, d.scrapeErrors, d.scrapeDuration, d.lastSuccess, d.schema, d.missing, d.samplesDropped,
		d.waitingByReason, d.awake, d.sleepLevel, d.sleepResource, d.engineHealthy,
		d.specDrafts, d.specDraftTokens, d.specAccepted, d.specAcceptRatio, d.specAcceptLen,
		d.promptBySource, d.promptCached, d.promptComputedRate, d.promptCachedRate,
		d.kvSizeTokens, d.kvMaxConcurrency, d.flops, d.readBytes, d.writeBytes,
		d.flopsRate, d.bytesRate, d.refused, d.unexpected, d.byPriority[snapshot.TTFT], d.byPriority[snapshot.E2E]}
	for _, h := range snapshot.LatencyHistograms {
		out = append(out, d.hist[h], d.windowQuantile[h])
	}
	return out
}

// Describe implements prometheus.Collector.
func (s *Scraper) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range s.descs.all() {
		ch <- d
	}
}

// Collect implements prometheus.Collector. It only emits what the last
// scrape prepared.
func (s *Scraper) Collect(ch chan<- prometheus.Metric) {
	for _, m := range *s.rendered.Load() {
		ch <- m
	}
}

// WindowLabel formats a window as its `window` label value ("1m", "5m").
func WindowLabel(d time.Duration) string { return model.Duration(d).String() }

// render prepares the const metrics for the current state. Called with s.mu
// held (or from New). A failed scrape renders only the self-metrics and
// vllm_up 0: nothing from vLLM is shown as if it were fresh.
func (s *Scraper) render(snap *snapshot.VLLM, res *result, windows map[time.Duration]map[string]*snapshot.Derived, took time.Duration) {
	d := s.descs
	var out []prometheus.Metric
	emit := func(desc *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		// Label values were validated when parsed; an error here is a bug,
		// and a bug must cost one series, not the process.
		if m, err := prometheus.NewConstMetric(desc, t, v, labels...); err == nil {
			out = append(out, m)
		}
	}
	value := func(desc *prometheus.Desc, t prometheus.ValueType, v snapshot.Value, labels ...string) {
		if v.OK {
			emit(desc, t, v.V, labels...)
		}
	}

	up := 0.0
	if snap != nil && snap.Up {
		up = 1
	}
	emit(d.up, prometheus.GaugeValue, up)
	emit(d.scrapes, prometheus.CounterValue, s.scrapes)
	for _, r := range reasons {
		emit(d.scrapeErrors, prometheus.CounterValue, s.errors[r], r)
	}
	for _, r := range dropReasons {
		emit(d.samplesDropped, prometheus.CounterValue, s.dropped[r], r)
	}
	if snap != nil {
		emit(d.scrapeDuration, prometheus.GaugeValue, took.Seconds())
	}
	if !s.lastOK.IsZero() {
		emit(d.lastSuccess, prometheus.GaugeValue, float64(s.lastOK.UnixNano())/1e9)
	}
	if up == 0 {
		s.rendered.Store(&out)
		return
	}

	emit(d.schema, prometheus.GaugeValue, 1, snap.Schema)
	missing := make(map[string]bool, len(res.missing))
	for _, m := range res.missing {
		missing[m] = true
	}
	for _, e := range res.expected {
		emit(d.missing, prometheus.GaugeValue, b2f(missing[e]), e)
	}
	for k, n := range res.unexpected {
		emit(d.unexpected, prometheus.GaugeValue, float64(n), k.Metric, k.Label)
	}
	refused, haveRefused := snap.Refused()

	for _, name := range sortedKeys(snap.Models) {
		m := snap.Models[name]
		value(d.running, prometheus.GaugeValue, m.Running, name)
		value(d.waiting, prometheus.GaugeValue, m.Waiting, name)
		value(d.swapped, prometheus.GaugeValue, m.Swapped, name)
		value(d.kv, prometheus.GaugeValue, m.KVUsage, name)
		value(d.cpuKV, prometheus.GaugeValue, m.CPUKVUsage, name)
		for _, e := range sortedKeys(m.PerEngine) {
			g := m.PerEngine[e]
			value(d.engineKV, prometheus.GaugeValue, g.KVUsage, name, e)
			value(d.engineRunning, prometheus.GaugeValue, g.Running, name, e)
			value(d.engineWaiting, prometheus.GaugeValue, g.Waiting, name, e)
		}
		value(d.preemptions, prometheus.CounterValue, m.Preemptions, name)
		value(d.promptTokens, prometheus.CounterValue, m.PromptTokens, name)
		value(d.genTokens, prometheus.CounterValue, m.GenerationTokens, name)
		value(d.prefixQueries, prometheus.CounterValue, m.PrefixQueries, name)
		value(d.prefixHits, prometheus.CounterValue, m.PrefixHits, name)
		for _, r := range sortedKeys(m.FinishedByReason) {
			emit(d.finished, prometheus.CounterValue, m.FinishedByReason[r], name, r)
		}
		if m.CacheConfig != nil {
			lv := []string{name}
			for _, l := range cacheConfigLabels {
				lv = append(lv, m.CacheConfig[l])
			}
			emit(d.cacheConfig, prometheus.GaugeValue, 1, lv...)
		}
		for _, hn := range snapshot.LatencyHistograms {
			h, ok := m.Histograms[hn]
			if !ok {
				continue
			}
			if m, err := constHistogram(d.hist[hn], h, name); err == nil {
				out = append(out, m)
			}
		}
		d.renderNewer(emit, value, func(c prometheus.Metric) { out = append(out, c) }, m)
		if haveRefused {
			emit(d.refused, prometheus.CounterValue, refused, name)
		}
	}

	for _, w := range s.opts.Windows {
		wl := WindowLabel(w)
		byModel := windows[w]
		for _, name := range sortedKeys(byModel) {
			dv := byModel[name]
			value(d.preemptRate, prometheus.GaugeValue, dv.PreemptionsPerSecond, name, wl)
			value(d.preemptPerReq, prometheus.GaugeValue, dv.PreemptionsPerRequest, name, wl)
			value(d.prefixHitRatio, prometheus.GaugeValue, dv.PrefixCacheHitRatio, name, wl)
			value(d.promptRate, prometheus.GaugeValue, dv.PromptTokensPerSecond, name, wl)
			value(d.genRate, prometheus.GaugeValue, dv.GenerationTokensPerSecond, name, wl)
			for _, r := range sortedKeys(dv.FinishedPerSecondByReason) {
				emit(d.finishedRate, prometheus.GaugeValue, dv.FinishedPerSecondByReason[r], name, wl, r)
			}
			value(d.specAcceptRatio, prometheus.GaugeValue, dv.SpecAcceptanceRatio, name, wl)
			value(d.specAcceptLen, prometheus.GaugeValue, dv.SpecMeanAcceptanceLength, name, wl)
			value(d.promptComputedRate, prometheus.GaugeValue, dv.PromptTokensComputedPerSecond, name, wl)
			value(d.promptCachedRate, prometheus.GaugeValue, dv.PromptTokensCachedPerSecond, name, wl)
			value(d.flopsRate, prometheus.GaugeValue, dv.EstimatedFlopsPerSecond, name, wl)
			value(d.bytesRate, prometheus.GaugeValue, dv.EstimatedBytesPerSecond, name, wl)
			for _, hn := range snapshot.LatencyHistograms {
				qs, ok := dv.Quantiles[hn]
				cum, ok2 := snap.Models[name].Histograms[hn]
				if !ok || !ok2 {
					continue
				}
				if m, err := windowSummary(d.windowQuantile[hn], qs, cum, name, wl); err == nil {
					out = append(out, m)
				}
			}
		}
	}
	s.rendered.Store(&out)
}

// renderNewer appends the series of the families newer vLLM versions add
// (absent families export nothing).
func (d *descs) renderNewer(emit func(*prometheus.Desc, prometheus.ValueType, float64, ...string),
	value func(*prometheus.Desc, prometheus.ValueType, snapshot.Value, ...string), push func(prometheus.Metric), m *snapshot.Model) {
	name := m.Name
	for _, r := range sortedKeys(m.WaitingByReason) {
		emit(d.waitingByReason, prometheus.GaugeValue, m.WaitingByReason[r], name, r)
	}
	if m.Sleep.Known {
		emit(d.awake, prometheus.GaugeValue, b2f(m.Sleep.Awake), name)
		value(d.sleepLevel, prometheus.GaugeValue, m.Sleep.Level, name)
		for _, r := range sortedKeys(m.Sleep.Resources) {
			emit(d.sleepResource, prometheus.GaugeValue, 1, name, r, m.Sleep.Resources[r])
		}
	}
	value(d.engineHealthy, prometheus.GaugeValue, m.EngineHealthy, name)
	value(d.specDrafts, prometheus.CounterValue, m.SpecDrafts, name)
	value(d.specDraftTokens, prometheus.CounterValue, m.SpecDraftTokens, name)
	value(d.specAccepted, prometheus.CounterValue, m.SpecAcceptedTokens, name)
	for _, src := range sortedKeys(m.PromptTokensBySource) {
		emit(d.promptBySource, prometheus.CounterValue, m.PromptTokensBySource[src], name, src)
	}
	value(d.promptCached, prometheus.CounterValue, m.PromptTokensCached, name)
	value(d.kvSizeTokens, prometheus.GaugeValue, m.KVCacheSizeTokens, name)
	value(d.kvMaxConcurrency, prometheus.GaugeValue, m.KVCacheMaxConcurrency, name)
	value(d.flops, prometheus.CounterValue, m.EstimatedFlops, name)
	value(d.readBytes, prometheus.CounterValue, m.EstimatedReadBytes, name)
	value(d.writeBytes, prometheus.CounterValue, m.EstimatedWriteBytes, name)
	for _, p := range sortedKeys(m.ByPriority) {
		for _, hn := range []snapshot.HistogramName{snapshot.TTFT, snapshot.E2E} {
			if h, ok := m.ByPriority[p][hn]; ok {
				if c, err := constHistogram(d.byPriority[hn], h, name, p); err == nil {
					push(c)
				}
			}
		}
	}
}

// windowSummary exports windowed quantiles as a summary: the quantile label
// is reserved for summaries (promtool rejects it elsewhere), and a summary is
// exactly "quantiles over a recent window plus cumulative count and sum".
func windowSummary(desc *prometheus.Desc, qs map[float64]snapshot.Value, cum snapshot.Histogram, labels ...string) (prometheus.Metric, error) {
	present := make(map[float64]float64, len(qs))
	for q, v := range qs {
		if v.OK {
			present[q] = v.V
		}
	}
	return prometheus.NewConstSummary(desc, uint64(math.Round(cum.Count)), cum.Sum, present, labels...)
}

// constHistogram re-exports a cumulative histogram. vLLM's counts are whole
// numbers carried as floats; client_golang's classic const histogram wants
// integers.
func constHistogram(desc *prometheus.Desc, h snapshot.Histogram, labels ...string) (prometheus.Metric, error) {
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b] = uint64(math.Round(h.Counts[i]))
	}
	return prometheus.NewConstHistogram(desc, uint64(math.Round(h.Count)), h.Sum, buckets, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
