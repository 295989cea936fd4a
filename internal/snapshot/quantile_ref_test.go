package snapshot

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// quantileByCopy is Quantile as it was written first, PromQL's
// bucketQuantile almost line by line: it copies the counts made monotonic
// and binary-searches the copy. Quantile reads the counts in place and must
// agree with it everywhere.
func quantileByCopy(h Histogram, q float64) Value {
	switch {
	case math.IsNaN(q):
		return Value{}
	case q < 0:
		return Some(math.Inf(-1))
	case q > 1:
		return Some(math.Inf(1))
	}
	n := len(h.Bounds)
	if n == 0 || len(h.Counts) != n {
		return Value{}
	}
	counts := make([]float64, n+1)
	maxSoFar := math.Inf(-1)
	for i, c := range h.Counts {
		maxSoFar = math.Max(maxSoFar, c)
		counts[i] = maxSoFar
	}
	counts[n] = math.Max(maxSoFar, h.Count)
	observations := counts[n]
	if observations == 0 || math.IsNaN(observations) {
		return Value{}
	}
	rank := q * observations
	b := sort.Search(n, func(i int) bool { return counts[i] >= rank })
	if b == n {
		return Some(h.Bounds[n-1])
	}
	if b == 0 && h.Bounds[0] <= 0 {
		return Some(h.Bounds[0])
	}
	start, end, count := 0.0, h.Bounds[b], counts[b]
	if b > 0 {
		start = h.Bounds[b-1]
		count -= counts[b-1]
		rank -= counts[b-1]
	}
	v := start + (end-start)*(rank/count)
	if math.IsNaN(v) {
		return Value{}
	}
	return Some(v)
}

// sameValue compares two Values, NaN equal to NaN.
func sameValue(a, b Value) bool {
	return a.OK == b.OK && (a.V == b.V || (math.IsNaN(a.V) && math.IsNaN(b.V)))
}

// TestQuantileAgreesWithTheCopyingOne: on histograms of every shape the
// scrapes can bring (counts out of order between buckets, negative or NaN
// counts, +Inf count below the last bucket, bounds at or below 0, one
// bucket), Quantile gives what the copying version gives, and allocates
// nothing.
func TestQuantileAgreesWithTheCopyingOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	qs := []float64{-0.5, 0, 0.001, 0.1, 0.25, 0.5, 0.9, 0.95, 0.99, 1, 1.5, math.NaN()}
	odd := []float64{math.NaN(), math.Inf(1), -3, 0}
	for range 20000 {
		n := 1 + rng.IntN(12)
		h := Histogram{Bounds: make([]float64, n), Counts: make([]float64, n)}
		bound := -1 + rng.Float64()*2
		cum := 0.0
		for i := range n {
			h.Bounds[i] = bound
			bound += rng.Float64() * 3
			cum += float64(rng.IntN(4))
			h.Counts[i] = cum
			if rng.IntN(8) == 0 { // a bucket scraped mid-update: lower than the one before
				h.Counts[i] = cum - float64(1+rng.IntN(3))
			}
		}
		h.Count = cum + float64(rng.IntN(3))
		switch rng.IntN(10) {
		case 0:
			h.Counts[rng.IntN(n)] = odd[rng.IntN(len(odd))]
		case 1:
			h.Count = odd[rng.IntN(len(odd))]
		case 2:
			h.Count = 0
			clear(h.Counts)
		}
		for _, q := range qs {
			if got, want := h.Quantile(q), quantileByCopy(h, q); !sameValue(got, want) {
				t.Fatalf("Quantile(%v) = %+v, the copying one %+v, for %+v", q, got, want, h)
			}
		}
	}
	h := Histogram{Bounds: []float64{0.1, 0.5, 1, 5}, Counts: []float64{3, 9, 12, 20}, Count: 21}
	if n := testing.AllocsPerRun(100, func() { h.Quantile(0.99) }); n != 0 {
		t.Errorf("Quantile allocates %v times", n)
	}
}
