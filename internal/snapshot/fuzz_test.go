package snapshot

import (
	"math"
	"testing"
)

// FuzzQuantile checks the properties any histogram_quantile result must
// have, on arbitrary cumulative histograms: present iff there are
// observations, between 0 (or the first bound) and the highest finite bound,
// and non-decreasing in q.
func FuzzQuantile(f *testing.F) {
	f.Add(0.1, 0.5, 1.0, uint16(10), uint16(20), uint16(10), uint16(10))
	f.Add(-1.0, 0.0, 2.5, uint16(0), uint16(0), uint16(0), uint16(0))
	f.Add(1.0, 1.0, 1.0, uint16(5), uint16(0), uint16(3), uint16(1))
	f.Fuzz(func(t *testing.T, b0, b1, b2 float64, c0, c1, c2, cInf uint16) {
		for _, b := range []float64{b0, b1, b2} {
			if math.IsNaN(b) || math.IsInf(b, 0) {
				return
			}
		}
		if !(b0 < b1 && b1 < b2) {
			return
		}
		// Build cumulative counts from per-bucket increments.
		h := Histogram{Bounds: []float64{b0, b1, b2}}
		cum := 0.0
		for _, inc := range []uint16{c0, c1, c2} {
			cum += float64(inc)
			h.Counts = append(h.Counts, cum)
		}
		h.Count = cum + float64(cInf)
		prev := math.Inf(-1)
		for _, q := range []float64{0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 1} {
			v := h.Quantile(q)
			if h.Count == 0 {
				if v.OK {
					t.Fatalf("q%v of an empty histogram = %v, want absent", q, v.V)
				}
				continue
			}
			if !v.OK {
				// PromQL's 0/0 when the rank falls at the start of an empty
				// first bucket; only possible for tiny q.
				continue
			}
			lo := math.Min(0, b0)
			if v.V < lo-1e-9 || v.V > b2+1e-9 {
				t.Fatalf("q%v = %v outside [%v, %v] for %+v", q, v.V, lo, b2, h)
			}
			if v.V < prev-1e-9 {
				t.Fatalf("q%v = %v below the previous quantile %v for %+v", q, v.V, prev, h)
			}
			prev = v.V
		}
	})
}
