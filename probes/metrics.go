package probes

import (
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// Skip reasons (vllm_probe_skipped_total{reason}).
const (
	SkipBudget = "budget" // a request- or token-budget would have been exceeded
	// SkipAsleep: vLLM reports its engine deliberately asleep (sleep mode):
	// a probe could only fail, and a failure would page for nothing.
	SkipAsleep = "asleep"
	// SkipModelLen: the profile does not fit the served model's
	// max_model_len (from /v1/models) even with its input shrunk.
	SkipModelLen = "max_model_len"
)

type metrics struct {
	ttft, tpot, itl, e2e *prometheus.HistogramVec
	requests, outTokens  *prometheus.CounterVec
	chunks, failures     *prometheus.CounterVec
	skipped              *prometheus.CounterVec
	lastSuccess, lastTS  *prometheus.GaugeVec
	lastTTFT, ttftGap    *prometheus.GaugeVec
	target               *prometheus.GaugeVec // profile -> the model or adapter it probes
	stalled              prometheus.Gauge
	// window are the exact window quantiles, by latency (Recent).
	window [numLatencies]*prometheus.Desc
}

// The probe histograms' native resolution (see newHistogram).
const (
	nativeBucketFactor = 1.006 // schema 7: 2^(1/128) = 1.0054
	nativeMaxBuckets   = 320   // schema 7 over a 5.6x spread of latencies
)

func newHistogram(name, help string, buckets []float64) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    name,
		Help:    help,
		Buckets: buckets,
		// Native (sparse) histograms carry the precision: schema 7
		// (2^(1/128): buckets 0.54% wide, so histogram_quantile is within
		// about 0.5% of the raw latencies), at most nativeMaxBuckets buckets
		// (past that the client halves the resolution, or resets the
		// histogram an hour after its last reset).
		NativeHistogramBucketFactor:     nativeBucketFactor,
		NativeHistogramMaxBucketNumber:  nativeMaxBuckets,
		NativeHistogramMinResetDuration: time.Hour,
	}, []string{"profile"})
}

// latencySeries are the probe histograms' names, by latency; the window
// summaries' are the same with "_window" before the unit.
var latencySeries = [numLatencies]string{"vllm_probe_time_to_first_token_seconds", "vllm_probe_time_per_output_token_seconds",
	"vllm_probe_inter_token_latency_seconds", "vllm_probe_e2e_latency_seconds"}

// windowHelp says what each window summary holds, by latency.
var windowHelp = [numLatencies]string{"time to first token", "time per output token", "inter-chunk latency", "end-to-end latency"}

func newMetrics(b Bounds) *metrics {
	p := []string{"profile"}
	m := &metrics{
		ttft: newHistogram(latencySeries[latencyTTFT],
			"Probe time to first token in seconds: request sent to the first stream chunk that carries generated text, measured by the exporter.", b.TTFT),
		tpot: newHistogram(latencySeries[latencyTPOT],
			"Probe time per output token in seconds: (e2e - ttft) / (usage.completion_tokens - 1), measured by the exporter.", b.TPOT),
		itl: newHistogram(latencySeries[latencyITL],
			"Probe inter-chunk latency in seconds: each gap between successive stream chunks that carry generated text, measured by the exporter.", b.ITL),
		e2e: newHistogram(latencySeries[latencyE2E],
			"Probe end-to-end latency in seconds: request sent to the last content chunk, measured by the exporter.", b.E2E),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm_probe_requests_total",
			Help: "Synthetic probe requests sent to vLLM."}, p),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm_probe_failures_total",
			Help: "Synthetic probe requests that failed, by reason (one reason per failed probe)."}, []string{"profile", "reason"}),
		outTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm_probe_output_tokens_total",
			Help: "Output tokens received by probes, from the stream's usage.completion_tokens."}, p),
		chunks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm_probe_chunks_total",
			Help: "Stream chunks carrying generated text received by probes (fewer than tokens when chunks carry several tokens)."}, p),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm_probe_skipped_total",
			Help: "Scheduled probes not sent, by reason (budget: the request or token budget was exhausted; asleep: vLLM reports its engine deliberately asleep)."}, []string{"profile", "reason"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm_probe_last_success",
			Help: "1 if the profile's most recent probe succeeded, else 0."}, p),
		lastTS: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm_probe_last_timestamp_seconds",
			Help: "Unix time in seconds when the profile's most recent probe was sent."}, p),
		lastTTFT: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm_probe_last_ttft_seconds",
			Help: "Time to first token in seconds of the profile's most recent probe (absent if it got no token)."}, p),
		ttftGap: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm_probe_ttft_gap_seconds",
			Help: "Median probe TTFT minus median vLLM server-side TTFT (vllm:time_to_first_token_seconds) over the gap window, in seconds."}, p),
		target: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm_probe_target_info",
			Help: "1 for the served model or LoRA adapter each probe profile sends to (the profile's model, else probes.model, else the first model /v1/models lists): joins a profile's series to what it measures."}, []string{"profile", "model"}),
		stalled: prometheus.NewGauge(prometheus.GaugeOpts{Name: "vllm_engine_stalled",
			Help: "1 while probes get no token and vLLM reports running requests but its generation-token counter does not move."}),
	}
	for i, name := range latencySeries {
		name = strings.TrimSuffix(name, "_seconds") + "_window_seconds"
		m.window[i] = prometheus.NewDesc(name, "Probe "+windowHelp[i]+" in seconds, exact quantiles of the profile's successful probes over the trailing window (linear interpolation, as vllm bench serve), measured by the exporter; _sum and _count are cumulative.",
			[]string{"profile", "window"}, nil)
	}
	return m
}

// collectWindows renders the window quantiles of r: a quantile line only
// where the window holds an observation.
func (m *metrics) collectWindows(ch chan<- prometheus.Metric, r *Recent) {
	w := model.Duration(QuantileWindow).String()
	for profile, lws := range r.Windows {
		for i, lw := range lws {
			q := map[float64]float64{}
			if lw.N > 0 {
				q[0.5], q[0.99] = lw.P50, lw.P99
			}
			ch <- prometheus.MustNewConstSummary(m.window[i], uint64(lw.Count), lw.Sum, q, profile, w)
		}
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.ttft, m.tpot, m.itl, m.e2e, m.requests, m.failures, m.outTokens, m.chunks,
		m.skipped, m.lastSuccess, m.lastTS, m.lastTTFT, m.ttftGap, m.target, m.stalled}
}

// create pre-creates a profile's series so every reason shows 0 from the start.
func (m *metrics) create(profile string) {
	for _, h := range []*prometheus.HistogramVec{m.ttft, m.tpot, m.itl, m.e2e} {
		h.WithLabelValues(profile)
	}
	for _, c := range []*prometheus.CounterVec{m.requests, m.outTokens, m.chunks} {
		c.WithLabelValues(profile)
	}
	for _, r := range Reasons {
		m.failures.WithLabelValues(profile, r)
	}
	m.skipped.WithLabelValues(profile, SkipBudget)
	m.skipped.WithLabelValues(profile, SkipAsleep)
	m.skipped.WithLabelValues(profile, SkipModelLen)
}

// remove deletes every series of a profile that left the configuration.
func (m *metrics) remove(profile string) {
	l := prometheus.Labels{"profile": profile}
	for _, c := range m.collectors() {
		if v, ok := c.(interface {
			DeletePartialMatch(prometheus.Labels) int
		}); ok {
			v.DeletePartialMatch(l)
		}
	}
}

// classic is a cumulative-on-export histogram kept for the snapshot.
type classic struct {
	bounds []float64
	counts []float64 // per bucket, not cumulative
	count  float64
	sum    float64
}

func newClassic(bounds []float64) classic {
	return classic{bounds: bounds, counts: make([]float64, len(bounds))}
}

func (c *classic) observe(v float64) {
	c.count++
	c.sum += v
	if i := sort.SearchFloat64s(c.bounds, v); i < len(c.bounds) {
		c.counts[i]++
	}
}

func (c *classic) snapshot() snapshot.Histogram {
	h := snapshot.Histogram{Bounds: c.bounds, Counts: make([]float64, len(c.bounds)), Count: c.count, Sum: c.sum}
	var cum float64
	for i, n := range c.counts {
		cum += n
		h.Counts[i] = cum
	}
	return h
}
