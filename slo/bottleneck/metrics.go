package bottleneck

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/collector"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

var _ prometheus.Collector = (*Classifier)(nil)

// descs are the Descs of the classifier's series.
var descs collector.Descs

var (
	descClass = descs.New("vllm_bottleneck",
		"Bottleneck class state set (exactly one class is 1 per model), from the classifier on the watchdog tick.",
		"model", "class")
	descEvidence = descs.New("vllm_bottleneck_evidence",
		"Signals behind the current bottleneck class: the measured value (signal) and the threshold it was compared to (signal_threshold), in the signal's base unit.",
		"model", "class", "signal")
	descUnavailable = descs.New("vllm_bottleneck_class_unavailable",
		"1 for each bottleneck class the classifier cannot reach with the inputs present (reason no_gpu or no_roofline_or_dram).",
		"model", "class", "reason")
	descRoofline = descs.New("vllm_decode_roofline_tokens_per_second",
		"Predicted per-stream decode tokens per second: effective memory bandwidth / (weight bytes + KV bytes in use).",
		"model")
	descMeasured = descs.New("vllm_decode_measured_tokens_per_second",
		"Measured per-stream decode tokens per second: 1 / mean time per output token over the classifier window (sum/count increase of vLLM's inter-token latency histogram, else its request TPOT histogram).",
		"model")
	descEfficiency = descs.New("vllm_decode_efficiency_ratio",
		"Measured / predicted per-stream decode tokens per second (decode roofline efficiency; above 1 when the weight, KV or bandwidth inputs overstate the bytes or understate the bandwidth).",
		"model")
	descMFU = descs.New("vllm_model_flops_utilization_ratio",
		"vLLM's estimated FLOP/s per GPU over the classifier window / one GPU's peak FLOP/s (--gpu.peak-flops); from vllm:estimated_flops_per_gpu_total (non-zero with vLLM --enable-mfu-metrics).",
		"model")
	descMBU = descs.New("vllm_model_bandwidth_utilization_ratio",
		"vLLM's estimated GPU-memory bytes read and written per second per GPU over the classifier window / one GPU's peak memory bandwidth (--gpu.peak-memory-bandwidth, else NVML); from vllm:estimated_read_bytes_per_gpu_total and vllm:estimated_write_bytes_per_gpu_total.",
		"model")
	descAcceptLen = descs.New("vllm_decode_spec_acceptance_length",
		"Speculative-decoding mean acceptance length the decode roofline and measured rate were scaled by (tokens per stream per decode step), absent without spec decode; from vllm:spec_decode_num_accepted_tokens_total and vllm:spec_decode_num_drafts_total.",
		"model")
	descCapTokens = descs.New("vllm_capacity_output_tokens_per_second",
		"Highest windowed output-token throughput observed while the latency SLOs held, over the capacity horizon.",
		"model")
	descCapRequests = descs.New("vllm_capacity_requests_per_second",
		"Highest windowed finished-request throughput observed while the latency SLOs held, over the capacity horizon.",
		"model")
	descCost = descs.New("vllm_cost_per_million_output_tokens",
		"Cost of one million output tokens at the sustained capacity: --cost.gpu-hour x GPUs / output tokens per hour x 1e6.",
		"model")
	descGPUsNeeded = descs.New("vllm_capacity_gpus_needed",
		"GPUs needed for bottleneck.daily_requests at the per-GPU request capacity measured while saturated (requests waiting, KV full or preemptions) with the SLOs held, with bottleneck.headroom applied; absent until such a measurement exists.",
		"model")
)

// Describe implements prometheus.Collector.
func (c *Classifier) Describe(ch chan<- *prometheus.Desc) { descs.Describe(ch) }

// Collect implements prometheus.Collector: the const metrics of the last
// Tick's state. It does no work besides.
func (c *Classifier) Collect(ch chan<- prometheus.Metric) {
	gauge := collector.Metrics(ch).Gauge
	for _, st := range c.States() {
		m := st.Model
		for _, cl := range Classes {
			v := 0.0
			if cl == st.Class {
				v = 1
			}
			gauge(descClass, v, m, string(cl))
		}
		seen := map[string]bool{}
		for _, e := range st.Evidence() {
			if seen[e.Signal] {
				continue
			}
			seen[e.Signal] = true
			gauge(descEvidence, e.Value, m, string(st.Class), e.Signal)
			if e.Op != "" {
				gauge(descEvidence, e.Threshold, m, string(st.Class), e.Signal+"_threshold")
			}
		}
		for _, cl := range Classes {
			if reason, ok := st.Unavailable[cl]; ok {
				gauge(descUnavailable, 1, m, string(cl), reason)
			}
		}
		r, capy := st.Roofline, st.Capacity
		for _, v := range []struct {
			desc *prometheus.Desc
			snapshot.Value
		}{
			{descRoofline, r.Predicted}, {descMeasured, r.Measured}, {descEfficiency, r.Efficiency},
			{descMFU, r.MFU}, {descMBU, r.MBU}, {descAcceptLen, r.AcceptanceLength},
			{descCapTokens, capy.OutputTokensPerSecond}, {descCapRequests, capy.RequestsPerSecond},
			{descCost, capy.CostPerMillionOutput},
		} {
			if v.OK {
				gauge(v.desc, v.V, m)
			}
		}
		if capy.Plan != nil {
			gauge(descGPUsNeeded, float64(capy.Plan.GPUsWithHeadroom), m)
		}
	}
}
