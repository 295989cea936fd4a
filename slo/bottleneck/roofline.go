package bottleneck

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// ModelSpec is what the operator tells the exporter about the served model
// and the hardware when the GPU snapshot cannot (flags --model.*).
type ModelSpec struct {
	// WeightBytes is the bytes of weights one decode step streams. When 0,
	// Parameters × BytesPerParameter is used.
	WeightBytes       float64
	Parameters        float64
	BytesPerParameter float64
	// KVCacheBytes is the KV-cache pool size in bytes; when 0 it is derived
	// from GPU memory × vLLM's gpu_memory_utilization − weights − overhead.
	KVCacheBytes float64
	// MemoryBandwidth is the effective memory bandwidth in bytes/s used when
	// no GPU snapshot gives a peak (already effective: not scaled again).
	MemoryBandwidth float64
	// KVBytesPerToken is the KV-cache bytes one token occupies (2 x layers
	// x KV heads x head dim x dtype bytes); with vLLM's stated pool size in
	// tokens (cache_config_info kv_cache_size_tokens) it gives the pool in
	// bytes without memory arithmetic.
	KVBytesPerToken float64
	// PeakFLOPS and PeakMemoryBandwidth are one GPU's theoretical peaks
	// (dense FLOP/s of the serving dtype; bytes/s), the denominators of
	// vLLM's own MFU/MBU estimates. PeakMemoryBandwidth defaults to NVML's
	// peak; PeakFLOPS has no NVML source.
	PeakFLOPS, PeakMemoryBandwidth float64
}

// Weights returns the weight bytes the spec implies, or 0 when unknown.
func (m ModelSpec) Weights() float64 {
	if m.WeightBytes > 0 {
		return m.WeightBytes
	}
	if m.Parameters > 0 && m.BytesPerParameter > 0 {
		return m.Parameters * m.BytesPerParameter
	}
	return 0
}

// Validate rejects negative or non-finite values.
func (m ModelSpec) Validate() error {
	for name, v := range map[string]float64{
		"--model.weight-bytes": m.WeightBytes, "--model.parameters": m.Parameters,
		"--model.bytes-per-parameter": m.BytesPerParameter, "--model.kv-cache-bytes": m.KVCacheBytes,
		"--model.memory-bandwidth": m.MemoryBandwidth, "--model.kv-bytes-per-token": m.KVBytesPerToken,
		"--gpu.peak-flops": m.PeakFLOPS, "--gpu.peak-memory-bandwidth": m.PeakMemoryBandwidth,
	} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: must be a finite number >= 0, got %v", name, v)
		}
	}
	if (m.Parameters > 0) != (m.BytesPerParameter > 0) && m.WeightBytes == 0 {
		return errors.New("--model.parameters and --model.bytes-per-parameter must be given together")
	}
	return nil
}

// PredictDecodeTokensPerSecond is the bandwidth-math roofline: one decode step
// streams every weight byte plus the KV cache of the running batch, so each
// stream advances one token per (weights + kv) / bandwidth seconds. The seed's
// worked example: 16e9 bytes (8B FP16) at 600e9 B/s → 37.5 tokens/s.
func PredictDecodeTokensPerSecond(weightBytes, kvBytes, bandwidthBytesPerSecond float64) (float64, error) {
	switch {
	case !(weightBytes > 0) || math.IsInf(weightBytes, 0):
		return 0, fmt.Errorf("weight bytes must be > 0, got %v", weightBytes)
	case !(kvBytes >= 0) || math.IsInf(kvBytes, 0):
		return 0, fmt.Errorf("kv bytes must be >= 0, got %v", kvBytes)
	case !(bandwidthBytesPerSecond > 0) || math.IsInf(bandwidthBytesPerSecond, 0):
		return 0, fmt.Errorf("bandwidth must be > 0, got %v", bandwidthBytesPerSecond)
	}
	return bandwidthBytesPerSecond / (weightBytes + kvBytes), nil
}

// Roofline is one model's decode-roofline comparison.
type Roofline struct {
	WeightBytes float64
	// WeightSource is "flag" (--model.*), "process_memory" (the compute
	// processes' GPU memory minus the KV pool and overhead) or "" (unknown).
	WeightSource    string
	KVBytes         float64 // KV read per step: usage × pool size (0 when unknown)
	KVSource        string  // "flag", "cache_config", "gpu_memory" or "none"
	Bandwidth       float64 // effective bytes/s
	BandwidthSource string  // "gpu" or "flag"
	// Predicted per-stream decode tokens/s; absent when weights or
	// bandwidth are unknown.
	Predicted snapshot.Value
	// Measured per-stream decode tokens/s = 1 / mean decode step over the
	// window (see MeanDecodeStepSeconds).
	Measured snapshot.Value
	// Efficiency = Measured / Predicted.
	Efficiency snapshot.Value
	// AcceptanceLength is the speculative-decoding mean acceptance length
	// over the window (1 + accepted / drafts) that Predicted and Measured
	// were scaled by: one decode step (one weight read, one inter-token
	// latency observation) then yields that many tokens per stream. Absent
	// without spec decode.
	AcceptanceLength snapshot.Value
	// MFU and MBU are vLLM's own FLOPs and bytes estimates per GPU per
	// second over the window divided by one GPU's peak (--enable-mfu-metrics
	// on the server; absent while its counters stay 0 or without a peak).
	MFU, MBU snapshot.Value
}

// kvOverheadBytesPerGPU is what vLLM's memory budget loses to the CUDA
// context and activation buffers (the configuration seed's 1.5 GB).
const kvOverheadBytesPerGPU = 1.5e9

// ComputeRoofline fills a Roofline from the spec, the model's latest scrape,
// the window and the GPU snapshot (any may be nil). efficiency scales the
// GPUs' theoretical peak bandwidth; under tensor parallelism the weights
// and KV are split across the GPUs and so is the traffic, so the aggregate
// bandwidth of every visible GPU is used.
func ComputeRoofline(spec ModelSpec, m *snapshot.Model, w *snapshot.Derived, gpu *snapshot.GPU, efficiency float64) Roofline {
	r := Roofline{WeightBytes: spec.Weights(), KVSource: "none"}
	var peak, memTotal, procMem float64
	devs := upDevices(gpu)
	for _, d := range devs {
		if d.PeakMemBandwidthBytesPerSecond.OK {
			peak += d.PeakMemBandwidthBytesPerSecond.V
		}
		if d.MemoryTotalBytes.OK {
			memTotal += d.MemoryTotalBytes.V
		}
		for _, b := range d.ProcessMemoryBytes {
			procMem += b
		}
	}
	// The KV pool when known without arithmetic: the flag, else the pool
	// vLLM states (≈0.24+).
	knownPool := spec.KVCacheBytes
	if knownPool <= 0 && m != nil {
		knownPool, _ = statedPoolBytes(m, spec.KVBytesPerToken)
	}
	if r.WeightBytes > 0 {
		r.WeightSource = "flag"
	} else if w := procMem - knownPool - kvOverheadBytesPerGPU*float64(len(devs)); knownPool > 0 && procMem > 0 && w > 0 {
		// vLLM's process memory is weights + the KV pool + overhead; with
		// the pool given, the rest is the weights. (Without it the two
		// cannot be told apart: vLLM sizes the pool to fill its share.)
		r.WeightBytes, r.WeightSource = w, "process_memory"
	}
	switch {
	case peak > 0:
		r.Bandwidth, r.BandwidthSource = peak*efficiency, "gpu"
	case spec.MemoryBandwidth > 0:
		r.Bandwidth, r.BandwidthSource = spec.MemoryBandwidth, "flag"
	}
	if m != nil && m.KVUsage.OK {
		pool := spec.KVCacheBytes
		if pool > 0 {
			r.KVSource = "flag"
		} else if b, ok := statedPoolBytes(m, spec.KVBytesPerToken); ok {
			// vLLM states its pool (≈0.24+): no memory arithmetic.
			pool, r.KVSource = b, "cache_config"
		} else if gmu, ok := cacheConfigFloat(m, "gpu_memory_utilization"); ok && memTotal > 0 && r.WeightBytes > 0 {
			pool = memTotal*gmu - r.WeightBytes - kvOverheadBytesPerGPU*float64(len(devs))
			r.KVSource = "gpu_memory"
		}
		if pool > 0 {
			r.KVBytes = m.KVUsage.V * pool
		} else {
			r.KVSource = "none"
		}
	}
	if p, err := PredictDecodeTokensPerSecond(r.WeightBytes, r.KVBytes, r.Bandwidth); err == nil {
		r.Predicted = snapshot.Some(p)
	}
	if step := MeanDecodeStepSeconds(w); step.OK && step.V > 0 {
		r.Measured = snapshot.Some(1 / step.V)
	}
	// Speculative decoding: one step streams the weights once and yields
	// L tokens per stream, and vLLM observes one inter-token latency per
	// step, so both sides of the comparison gain the factor L.
	if l := acceptanceLength(w); l.OK {
		r.AcceptanceLength = l
		if r.Predicted.OK {
			r.Predicted.V *= l.V
		}
		if r.Measured.OK && stepFromITL(w) {
			r.Measured.V *= l.V
		}
	}
	if r.Predicted.OK && r.Measured.OK {
		r.Efficiency = snapshot.Some(r.Measured.V / r.Predicted.V)
	}
	r.MFU, r.MBU = utilization(spec, w, devs)
	return r
}

// statedPoolBytes is the KV pool vLLM states in tokens
// (cache_config_info kv_cache_size_tokens, or its kv_cache_memory_bytes
// when the operator fixed the pool) in bytes.
func statedPoolBytes(m *snapshot.Model, bytesPerToken float64) (float64, bool) {
	if b, err := strconv.ParseFloat(m.CacheConfig["kv_cache_memory_bytes"], 64); err == nil && b > 0 && !math.IsInf(b, 0) {
		return b, true
	}
	if m.KVCacheSizeTokens.OK && bytesPerToken > 0 {
		return m.KVCacheSizeTokens.V * bytesPerToken, true
	}
	return 0, false
}

// acceptanceLength is the window's spec-decode mean acceptance length when
// spec decode is on (> 1).
func acceptanceLength(w *snapshot.Derived) snapshot.Value {
	if w == nil || !w.SpecMeanAcceptanceLength.OK || !(w.SpecMeanAcceptanceLength.V > 1) || math.IsInf(w.SpecMeanAcceptanceLength.V, 0) {
		return snapshot.Value{}
	}
	return w.SpecMeanAcceptanceLength
}

// stepFromITL reports whether MeanDecodeStepSeconds took the mean of the
// inter-token-latency histogram (one observation per step, not yet scaled)
// rather than the per-request TPOT histogram (already per token) or the
// median fallback (decodeStepSeconds, already scaled).
func stepFromITL(w *snapshot.Derived) bool {
	if w == nil {
		return false
	}
	d, ok := w.Deltas[snapshot.InterTokenLatency]
	return ok && d.Count > 0 && d.Sum > 0
}

// utilization divides vLLM's per-GPU FLOPs and bytes rates by one GPU's
// peak: the flag, else (bandwidth only) the mean NVML peak of the GPUs.
func utilization(spec ModelSpec, w *snapshot.Derived, devs []snapshot.GPUDevice) (mfu, mbu snapshot.Value) {
	if w == nil {
		return
	}
	if w.EstimatedFlopsPerSecond.OK && spec.PeakFLOPS > 0 {
		mfu = snapshot.Some(w.EstimatedFlopsPerSecond.V / spec.PeakFLOPS)
	}
	bw := spec.PeakMemoryBandwidth
	if bw <= 0 {
		n := 0.0
		for _, d := range devs {
			if d.PeakMemBandwidthBytesPerSecond.OK {
				bw += d.PeakMemBandwidthBytesPerSecond.V
				n++
			}
		}
		if n > 0 {
			bw /= n
		}
	}
	if w.EstimatedBytesPerSecond.OK && bw > 0 {
		mbu = snapshot.Some(w.EstimatedBytesPerSecond.V / bw)
	}
	return mfu, mbu
}

// MeanDecodeStepSeconds is the mean time between tokens of a stream over the
// window: the inter-token-latency histogram's sum/count increase (every gap
// weighs the same, as every decode step does), else the per-request TPOT
// histogram's, else its median. A mean is used because vLLM's lowest TPOT
// bucket (10 ms) is coarser than a fast GPU's step: a quantile interpolated
// inside it says little.
func MeanDecodeStepSeconds(w *snapshot.Derived) snapshot.Value {
	if w == nil {
		return snapshot.Value{}
	}
	for _, h := range []snapshot.HistogramName{snapshot.InterTokenLatency, snapshot.RequestTPOT} {
		if d, ok := w.Deltas[h]; ok && d.Count > 0 && d.Sum > 0 {
			return snapshot.Some(d.Sum / d.Count)
		}
	}
	return decodeStepSeconds(w, 0.5)
}

// decodeStepSeconds is the time per output token at quantile q over the
// window: from vLLM's inter-token-latency histogram, observed per token as it
// is generated (so it moves within a tick of a regime change), else from the
// per-request TPOT histogram, observed only when a request finishes. With
// speculative decoding one ITL observation covers a whole step of several
// tokens, so the ITL value is divided by the mean acceptance length.
func decodeStepSeconds(w *snapshot.Derived, q float64) snapshot.Value {
	if v := quantile(w, snapshot.InterTokenLatency, q); v.OK {
		if l := acceptanceLength(w); l.OK {
			v.V /= l.V
		}
		return v
	}
	return quantile(w, snapshot.RequestTPOT, q)
}

func quantile(w *snapshot.Derived, h snapshot.HistogramName, q float64) snapshot.Value {
	if w == nil || w.Quantiles == nil {
		return snapshot.Value{}
	}
	v := w.Quantiles[h][q]
	if !v.OK || math.IsNaN(v.V) || math.IsInf(v.V, 0) {
		return snapshot.Value{}
	}
	return v
}

func cacheConfigFloat(m *snapshot.Model, key string) (float64, bool) {
	if m == nil || m.CacheConfig == nil {
		return 0, false
	}
	v := strings.Fields(m.CacheConfig[key]) // the first blank-separated token
	if len(v) == 0 {
		return 0, false
	}
	f, err := strconv.ParseFloat(v[0], 64)
	if err != nil || !(f > 0 && f <= 1) {
		return 0, false
	}
	return f, true
}

// upDevices returns the GPUs that are up in a usable snapshot.
func upDevices(g *snapshot.GPU) []snapshot.GPUDevice {
	if g == nil || !g.Up {
		return nil
	}
	out := make([]snapshot.GPUDevice, 0, len(g.Devices))
	for _, d := range g.Devices {
		if d.Up {
			out = append(out, d)
		}
	}
	return out
}
