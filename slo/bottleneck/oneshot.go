package bottleneck

import (
	"fmt"
	"math"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// CannotRuleOut names, for a verdict reached without GPU readings, the
// hardware causes the inputs could not exclude and that would make the
// verdict's knob the wrong one: a GPU 20x slower than it should be (clocks
// capped, a degraded part) slows every engine step, which fills the queue
// and the KV cache and causes preemptions exactly as over-admission does.
func CannotRuleOut(c Class, unavailable map[Class]string) []string {
	if unavailable[Throttled] != ReasonNoGPU {
		return nil
	}
	const slowGPU = "a throttled, degraded or slower-than-expected GPU (no NVML readings): every engine step would be slow, " +
		"which produces the same queue, KV pressure and preemptions; check clocks and throttle reasons (nvidia-smi -q -d PERFORMANCE,CLOCK) before turning the knob"
	switch c {
	case KVCacheExhausted, TooManySequences, Queueing, PrefillBound:
		return []string{slowGPU}
	case MemoryBoundDecode, DecodeOverhead:
		return []string{slowGPU, "NVLink-bound tensor parallelism (no NVML readings): communication slows decode steps the same way"}
	case EngineStalled, ServerUnavailable:
		return []string{"a lost GPU or a fatal Xid error (no NVML readings): check dmesg for NVRM Xid messages"}
	}
	return nil
}

// signalHistogram is the vLLM histogram a quantile evidence signal is
// interpolated from.
func signalHistogram(signal string, w *snapshot.Derived) (snapshot.HistogramName, bool) {
	switch signal {
	case "ttft_seconds", "ttft_p99_seconds":
		return snapshot.TTFT, true
	case "prefill_p99_seconds":
		return snapshot.PrefillTime, true
	case "queue_time_p99_seconds":
		return snapshot.QueueTime, true
	case "tpot_seconds":
		if w != nil {
			if d, ok := w.Deltas[snapshot.InterTokenLatency]; ok && d.Count > 0 {
				return snapshot.InterTokenLatency, true
			}
		}
		return snapshot.RequestTPOT, true
	}
	return "", false
}

// wideBucket is the upper/lower bound ratio from which a quantile
// interpolated inside a bucket is reported as the bucket's range: beyond
// it the interpolated point claims a precision the buckets do not have.
const wideBucket = 1.25

// BucketAround returns the bounds (lo, hi] of the bucket of h holding v
// when it is wide (hi/lo > 1.25; the first bucket's lower bound is 0), so
// a report can print the range instead of an interpolated point.
func BucketAround(h snapshot.Histogram, v float64) (lo, hi float64, wide bool) {
	for i, b := range h.Bounds {
		if math.IsInf(b, 1) {
			break
		}
		if v <= b {
			if i > 0 {
				lo = h.Bounds[i-1]
			}
			if v <= lo { // on a bound: exact as far as the buckets go
				return 0, 0, false
			}
			return lo, b, lo == 0 || b/lo > wideBucket
		}
	}
	return 0, 0, false
}

// withBuckets copies evidence, attaching the bucket range to each quantile
// read from inside a wide bucket of the window's histogram.
func withBuckets(ev []Evidence, w *snapshot.Derived) []Evidence {
	out := make([]Evidence, len(ev))
	for i, e := range ev {
		out[i] = e
		if h, ok := signalHistogram(e.Signal, w); ok && w != nil {
			if lo, hi, wide := BucketAround(w.Deltas[h], e.Value); wide {
				out[i].Bucket = []float64{lo, hi}
			}
		}
	}
	return out
}

// sigFig rounds v to 3 significant digits for a person to read.
func sigFig(v float64) string {
	switch {
	case v == 0 || math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Sprint(v)
	case math.Abs(v) >= 1000 || (v == math.Trunc(v) && math.Abs(v) < 1e15):
		return fmt.Sprintf("%.0f", v) // counts and large rates: no false decimals
	}
	d := 2 - int(math.Floor(math.Log10(math.Abs(v))))
	return fmt.Sprintf("%.*f", max(d, 0), v)
}
