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

// Two sets of bounds, for two readers:
//
//   - DefaultExportBounds are the classic buckets on /metrics: a few bounds
//     per histogram (13, plus every configured latency SLO threshold,
//     ExportBoundsFor), so a pod's probe histograms cost 64 samples, not 714.
//     They answer "what share of probes was under X" exactly at each bound
//     and at every SLO threshold; quantiles come from the native (sparse)
//     histograms exported beside them (schema 7, buckets 0.54% wide:
//     histogram_quantile over them is within 1% of the raw probe latencies,
//     TestProbeNativeQuantileError). histogram_quantile over these classic
//     buckets alone is coarse (up to one bucket off).
//   - DefaultBounds are the fine bounds of the histograms the scheduler keeps
//     for its snapshot (the SLO watchdog's probe SLIs and the bottleneck
//     classifier's probe medians read them in-process, never from /metrics):
//     2^(1/12) steps (about 6%), TTFT and end-to-end from 4.6 ms to 128 s
//     (then 256, 512 s), TPOT and inter-token latency from 1 ms to 16 s (then
//     32, 64 s). Their median is within 5% of the truth anywhere in 5 ms - 60 s
//     (TestProbeBucketsQuantileError). They cost memory, not series.
//
// Every configured latency SLO threshold is a bound of both (BoundsFor,
// ExportBoundsFor), so SLO events at a threshold are counted exactly.
var DefaultBounds = Bounds{
	TTFT: fineBounds(math.Pow(2, -93.0/12), 128, 256, 512),
	TPOT: fineBounds(0.001, 16, 32, 64),
	ITL:  fineBounds(0.001, 16, 32, 64),
	E2E:  fineBounds(math.Pow(2, -93.0/12), 128, 256, 512),
}

// DefaultExportBounds are the probe histograms' classic buckets on
// /metrics, chosen from vLLM's own bucket layouts where they cover a probe's
// range (so a probe and the server's histogram share bounds at the usual SLO
// thresholds), 13 per histogram.
var DefaultExportBounds = Bounds{
	TTFT: []float64{0.01, 0.02, 0.04, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80},
	TPOT: []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5, 5},
	ITL:  []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5, 5},
	E2E:  []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 240, 480},
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

// BoundsFor is DefaultBounds plus the threshold of every latency SLO of f
// for the same metric (sloThresholds).
func BoundsFor(f *config.File) Bounds { return withThresholds(DefaultBounds, f) }

// ExportBoundsFor is DefaultExportBounds plus the threshold of every
// latency SLO of f for the same metric (sloThresholds).
func ExportBoundsFor(f *config.File) Bounds { return withThresholds(DefaultExportBounds, f) }

// withThresholds adds the SLO thresholds of f to b, so that a probe SLO is
// measurable whatever threshold the configuration validated (a bound of
// vLLM's default or custom buckets, histogram_buckets, which b need not
// contain), and a server SLO's threshold reads the same on the probe
// histograms. The probe histograms take their bounds when the scheduler
// starts: a threshold added by a reload applies after a restart (until then
// the watchdog reports a probe SLO unmeasurable).
func withThresholds(b Bounds, f *config.File) Bounds {
	extra := sloThresholds(f)
	return Bounds{
		TTFT: mergeBounds(b.TTFT, extra["ttft"]),
		TPOT: mergeBounds(b.TPOT, extra["tpot"]),
		ITL:  mergeBounds(b.ITL, extra["itl"]),
		E2E:  mergeBounds(b.E2E, extra["e2e"]),
	}
}

// sloThresholds are the thresholds of f's latency SLOs by metric, whatever
// their source.
func sloThresholds(f *config.File) map[string][]float64 {
	extra := map[string][]float64{}
	if f == nil {
		return extra
	}
	for _, s := range f.SLOs {
		if s.Kind == config.KindLatency && s.Threshold > 0 {
			extra[s.Metric] = append(extra[s.Metric], s.Threshold)
		}
	}
	return extra
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
