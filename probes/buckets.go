package probes

import (
	"math"
	"slices"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
)

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

// BoundsFor is DefaultBounds plus the threshold of every probe latency
// SLO of f for the same metric, so that a probe SLO is measurable whatever
// threshold the configuration validated (it is a bound of vLLM's default
// or custom buckets, histogram_buckets, which the fine default bounds need
// not contain). The probe histograms take their bounds when the scheduler
// starts: a probe SLO threshold added by a reload applies after a restart
// (until then the watchdog reports the SLO unmeasurable).
func BoundsFor(f *config.File) Bounds {
	b := DefaultBounds
	if f == nil {
		return b
	}
	extra := map[string][]float64{}
	for _, s := range f.SLOs {
		if s.Source == config.SourceProbe && s.Kind == config.KindLatency && s.Threshold > 0 {
			extra[s.Metric] = append(extra[s.Metric], s.Threshold)
		}
	}
	return Bounds{
		TTFT: mergeBounds(b.TTFT, extra["ttft"]),
		TPOT: mergeBounds(b.TPOT, extra["tpot"]),
		ITL:  mergeBounds(b.ITL, extra["itl"]),
		E2E:  mergeBounds(b.E2E, extra["e2e"]),
	}
}

// mergeBounds is the sorted union of a and b. A bound of b within 1e-9
// (relative) of one of a replaces it, so the threshold is exported exactly
// as configured (le="0.25", not le="0.25000000000000017").
func mergeBounds(a, b []float64) []float64 {
	if len(b) == 0 {
		return a
	}
	out := slices.Clone(a)
	for _, x := range b {
		dup := false
		for i, y := range out {
			if math.Abs(x-y) <= 1e-9*math.Max(math.Abs(x), math.Abs(y)) {
				out[i], dup = x, true
				break
			}
		}
		if !dup {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}
