package probes

import (
	"maps"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// quantileFunc returns the qs-quantiles of the histogram that observed xs.
type quantileFunc func(t *testing.T, xs []float64, qs ...float64) []float64

// gatherHistogram observes xs into the probe histogram pick selects (as the
// exporter registers it, with DefaultExportBounds) and gathers it as
// Prometheus scrapes it.
func gatherHistogram(t *testing.T, pick func(*metrics) *prometheus.HistogramVec, xs []float64) *dto.Histogram {
	t.Helper()
	hv := pick(newMetrics(DefaultExportBounds))
	for _, x := range xs {
		hv.WithLabelValues("p").Observe(x)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(hv)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs[0].GetMetric()[0].GetHistogram()
}

// nativeQuantile is PromQL's histogram_quantile over the native (sparse)
// histogram the exporter exposes: the bucket holding rank q*count, then
// exponential interpolation inside it (Prometheus 3, promql/quantile.go,
// for standard exponential schemas).
func nativeQuantile(pick func(*metrics) *prometheus.HistogramVec) quantileFunc {
	return func(t *testing.T, xs []float64, qs ...float64) []float64 {
		t.Helper()
		h := gatherHistogram(t, pick, xs)
		if h.Schema == nil {
			t.Fatal("no native histogram exported")
		}
		base := math.Pow(2, math.Pow(2, -float64(h.GetSchema())))
		type bucket struct{ lo, hi, n float64 }
		var bs []bucket
		idx, n := int32(0), int64(0)
		deltas := h.GetPositiveDelta()
		for _, sp := range h.GetPositiveSpan() {
			idx += sp.GetOffset()
			for range sp.GetLength() {
				n += deltas[0]
				deltas = deltas[1:]
				bs = append(bs, bucket{math.Pow(base, float64(idx-1)), math.Pow(base, float64(idx)), float64(n)})
				idx++
			}
		}
		if h.GetZeroCount() != 0 || len(h.GetNegativeSpan()) != 0 {
			t.Fatalf("latencies in the zero or negative buckets: %v", h)
		}
		out := make([]float64, len(qs))
		for i, q := range qs {
			rank, count := q*float64(h.GetSampleCount()), 0.0
			for _, b := range bs {
				if b.n == 0 {
					continue
				}
				if count+b.n >= rank {
					f := (rank - count) / b.n
					out[i] = math.Exp2(math.Log2(b.lo) + (math.Log2(b.hi)-math.Log2(b.lo))*f)
					break
				}
				count += b.n
			}
		}
		return out
	}
}

// classicQuantile is PromQL's histogram_quantile over the classic buckets
// (snapshot.Histogram.Quantile matches it) of the histogram the scheduler
// keeps for its snapshot, with bounds.
func classicQuantile(bounds []float64) quantileFunc {
	return func(t *testing.T, xs []float64, qs ...float64) []float64 {
		t.Helper()
		c := newClassic(bounds)
		for _, x := range xs {
			c.observe(x)
		}
		h := c.snapshot()
		out := make([]float64, len(qs))
		for i, q := range qs {
			v := h.Quantile(q)
			if !v.OK {
				t.Fatalf("no quantile %v", q)
			}
			out[i] = v.V
		}
		return out
	}
}

// exact is the q-quantile of sorted xs (the nearest-rank definition).
func exact(xs []float64, q float64) float64 {
	return xs[int(math.Ceil(q*float64(len(xs))))-1]
}

var probeHistograms = []struct {
	name   string
	pick   func(*metrics) *prometheus.HistogramVec
	bounds func(Bounds) []float64
	lo, hi float64
}{
	{"ttft", func(m *metrics) *prometheus.HistogramVec { return m.ttft }, func(b Bounds) []float64 { return b.TTFT }, 0.005, 60},
	{"e2e", func(m *metrics) *prometheus.HistogramVec { return m.e2e }, func(b Bounds) []float64 { return b.E2E }, 0.005, 60},
	{"tpot", func(m *metrics) *prometheus.HistogramVec { return m.tpot }, func(b Bounds) []float64 { return b.TPOT }, 0.005, 10},
	{"itl", func(m *metrics) *prometheus.HistogramVec { return m.itl }, func(b Bounds) []float64 { return b.ITL }, 0.005, 10},
}

// TestProbeNativeQuantileError: histogram_quantile over the native
// histograms the exporter exposes is within 1% of the raw latencies the
// probe client measured, across 5 ms - 60 s (TTFT, e2e) and 5 ms - 10 s
// (TPOT, ITL): the median of a constant latency (the worst case for
// interpolation inside a bucket), and the median and p99 of latencies with
// 3% and 10% jitter. The classic buckets on /metrics are few
// (DefaultExportBounds); the native ones carry the precision.
func TestProbeNativeQuantileError(t *testing.T) {
	for _, c := range probeHistograms {
		t.Run(c.name, func(t *testing.T) { checkQuantileError(t, nativeQuantile(c.pick), c.lo, c.hi, 0.01) })
	}
}

// TestProbeBucketsQuantileError: the fine bounds of the histograms the
// scheduler keeps for its snapshot (read by the bottleneck classifier and
// the SLO watchdog in-process) are within 5% of the truth across the same
// ranges.
func TestProbeBucketsQuantileError(t *testing.T) {
	for _, c := range probeHistograms {
		t.Run(c.name, func(t *testing.T) { checkQuantileError(t, classicQuantile(c.bounds(DefaultBounds)), c.lo, c.hi, 0.05) })
	}
	// vLLM's own layout fails the same check (the reason for fine bounds):
	// a constant 200 ms reads 175 ms.
	if got := vllmLayoutMedian(0.2); math.Abs(got-0.2)/0.2 < 0.05 {
		t.Errorf("the check cannot fail: vLLM's TTFT buckets read 200 ms as %.4g", got)
	}
}

// TestProbeExportBoundsAreFewAndCoarseAlone: the exported classic bounds
// are at most 16 per histogram even with the example configuration's
// thresholds merged in, and on their own they fail the 1% check that the
// native histograms pass (so the native check cannot pass by accident of
// fine classic bounds).
func TestProbeExportBoundsAreFewAndCoarseAlone(t *testing.T) {
	f := loadConfig(t, "testdata/slo-thresholds.yml")
	for _, c := range probeHistograms {
		def, merged := c.bounds(DefaultExportBounds), c.bounds(ExportBoundsFor(f))
		if len(def) > 13 || len(merged) > 16 || !slices.IsSorted(merged) {
			t.Errorf("%s: %d default, %d merged export bounds (want <= 13, <= 16, sorted): %v", c.name, len(def), len(merged), merged)
		}
	}
	xs := make([]float64, 400)
	for i := range xs {
		xs[i] = 0.3
	}
	got := classicQuantile(DefaultExportBounds.TTFT)(t, xs, 0.5)[0]
	if math.Abs(got-0.3)/0.3 < 0.01 {
		t.Errorf("the classic export bounds read a constant 300 ms as %.4g: the native check proves nothing", got)
	}
}

func checkQuantileError(t *testing.T, quantile quantileFunc, lo, hi, tol float64) {
	rng := rand.New(rand.NewSource(1))
	worst := map[string]float64{}
	for i := 0; i < 60; i++ {
		// Not on a bound: an offset grid so centres fall anywhere in a bucket.
		l := lo * math.Pow(hi/lo, (float64(i)+0.37)/60)
		cases := []struct {
			name   string
			jitter float64
			qs     []float64
		}{{"constant median", 0, []float64{0.5}}, {"3% jitter", 0.03, []float64{0.5, 0.99}}, {"10% jitter", 0.10, []float64{0.5, 0.99}}}
		for _, c := range cases {
			xs := make([]float64, 400)
			for j := range xs {
				xs[j] = l * math.Exp(c.jitter*rng.NormFloat64())
			}
			slices.Sort(xs)
			got := quantile(t, xs, c.qs...)
			for k, q := range c.qs {
				truth := exact(xs, q)
				rel := math.Abs(got[k]-truth) / truth
				key := c.name + " q" + trimQ(q)
				worst[key] = math.Max(worst[key], rel)
				if rel > tol {
					t.Errorf("%s at %.4g s: histogram_quantile(%v) = %.4g, true %.4g (%.2f%% off, tolerance %.0f%%)", c.name, l, q, got[k], truth, 100*rel, 100*tol)
				}
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(worst)) {
		t.Logf("worst error, %s: %.2f%%", k, 100*worst[k])
	}
}

func trimQ(q float64) string {
	if q == 0.5 {
		return "50"
	}
	return "99"
}

// vllmLayoutMedian is histogram_quantile(0.5) of a constant latency over
// vLLM's TTFT bucket layout.
func vllmLayoutMedian(l float64) float64 {
	b := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}
	h := snapshot.Histogram{Bounds: b, Counts: make([]float64, len(b)), Count: 10}
	for i, x := range b {
		if l <= x {
			h.Counts[i] = 10
		}
	}
	return h.Quantile(0.5).V
}
