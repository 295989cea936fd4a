package probes

import "math"

// Bounds are the classic bucket upper bounds of the probe histograms.
type Bounds struct {
	TTFT, TPOT, ITL, E2E []float64
}

// DefaultBounds are the probe histograms' classic bucket bounds: the one
// place the defaults live. vLLM's own bucket layouts are far too coarse for
// a probe's few, steady latencies (histogram_quantile over them read a
// 200 ms TTFT as 175 ms and a 1 s one as 1.75 s); probes are low-rate, so
// fine buckets cost series, not work. The bounds grow by 2^(1/12) (about
// 6%): TTFT and end-to-end from 4.6 ms to 128 s (then 256, 512 s), TPOT and
// inter-token latency from 1 ms to 16 s (then 32, 64 s). histogram_quantile
// over them is within 5% of the true median of a constant latency and of
// the median and p99 of a latency with a few percent of jitter, anywhere in
// 5 ms - 60 s (TestProbeBucketsQuantileError); a perfectly constant
// latency's p99 can read up to one bucket (6%) high. The native histograms
// are exported alongside.
var DefaultBounds = Bounds{
	TTFT: fineBounds(math.Pow(2, -93.0/12), 128, 256, 512),
	TPOT: fineBounds(0.001, 16, 32, 64),
	ITL:  fineBounds(0.001, 16, 32, 64),
	E2E:  fineBounds(math.Pow(2, -93.0/12), 128, 256, 512),
}

// fineFactor is the ratio between neighbouring fine bounds.
var fineFactor = math.Pow(2, 1.0/12)

// fineBounds are bounds from lo to hi at fineFactor, then the coarse tail.
func fineBounds(lo, hi float64, tail ...float64) []float64 {
	return append(LogBounds(lo, hi, fineFactor), tail...)
}

// LogBounds returns bounds from lo multiplying by factor (> 1) up to and
// including the first bound >= hi. Each bound is lo*factor^i computed
// directly, so rounding does not accumulate.
func LogBounds(lo, hi, factor float64) []float64 {
	if !(lo > 0) || !(hi > lo) || !(factor > 1) {
		return nil
	}
	var out []float64
	for i := 0; ; i++ {
		b := lo * math.Pow(factor, float64(i))
		if b >= hi*(1-1e-12) {
			return append(out, hi)
		}
		out = append(out, b)
	}
}
