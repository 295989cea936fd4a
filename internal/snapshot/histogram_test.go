package snapshot

import (
	"math"
	"testing"
)

func TestQuantile(t *testing.T) {
	// 10 obs <= 0.1, 20 in (0.1,0.5], 10 in (0.5,1], 10 above 1: 50 in all.
	normal := Histogram{Bounds: []float64{0.1, 0.5, 1}, Counts: []float64{10, 30, 40}, Count: 50, Sum: 30}
	cases := []struct {
		name string
		h    Histogram
		q    float64
		want Value
	}{
		// rank 25 falls in (0.1,0.5] holding 20; 15 into it: 0.1 + 0.4*15/20 = 0.4.
		{"normal median", normal, 0.5, Some(0.4)},
		// rank 5 in the first bucket, lower edge 0: 0.1*5/10 = 0.05.
		{"first bucket from zero", normal, 0.1, Some(0.05)},
		// rank 40 is exactly the top of (0.5,1]: 0.5 + 0.5*10/10 = 1.
		{"bucket boundary", normal, 0.8, Some(1)},
		// rank 45 > 40 lands in +Inf: the highest finite bound.
		{"+Inf bucket returns highest finite bound", normal, 0.9, Some(1)},
		{"q below 0", normal, -0.1, Some(math.Inf(-1))},
		{"q above 1", normal, 1.1, Some(math.Inf(1))},
		{"NaN q", normal, math.NaN(), Value{}},
		{"empty histogram is absent", Histogram{Bounds: []float64{0.1, 1}, Counts: []float64{0, 0}}, 0.5, Value{}},
		// One finite bucket [0,2] with 4 obs: rank 2 -> 2*2/4 = 1; rank 3.96 -> 1.98.
		{"single bucket p50", Histogram{Bounds: []float64{2}, Counts: []float64{4}, Count: 4}, 0.5, Some(1)},
		{"single bucket p99", Histogram{Bounds: []float64{2}, Counts: []float64{4}, Count: 4}, 0.99, Some(1.98)},
		{"+Inf only is absent", Histogram{Count: 5, Sum: 10}, 0.5, Value{}},
		// All 3 observations above the only finite bound 1.
		{"everything in +Inf", Histogram{Bounds: []float64{1}, Counts: []float64{0}, Count: 3}, 0.5, Some(1)},
		// First bound 0 is not interpolated from 0 to 0: PromQL returns the bound.
		{"non-positive first bound", Histogram{Bounds: []float64{0, 1}, Counts: []float64{2, 4}, Count: 4}, 0.25, Some(0)},
		// Counts 5,4,6 are forced monotonic to 5,5,6: rank 3 -> 1*3/5 = 0.6.
		{"non-monotonic counts", Histogram{Bounds: []float64{1, 2}, Counts: []float64{5, 4}, Count: 6}, 0.5, Some(0.6)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.h.Quantile(c.q)
			if got.OK != c.want.OK || (got.OK && !(got.V == c.want.V || math.Abs(got.V-c.want.V) < 1e-12)) {
				t.Fatalf("Quantile(%v) = %+v, want %+v", c.q, got, c.want)
			}
		})
	}
}

func TestSub(t *testing.T) {
	b := []float64{1, 2}
	older := Histogram{Bounds: b, Counts: []float64{1, 2}, Count: 3, Sum: 1.5}
	cases := []struct {
		name      string
		newer     Histogram
		older     Histogram
		want      Histogram
		wantReset bool
	}{
		{"normal", Histogram{Bounds: b, Counts: []float64{4, 6}, Count: 8, Sum: 5}, older,
			Histogram{Bounds: b, Counts: []float64{3, 4}, Count: 5, Sum: 3.5}, false},
		{"no change", older, older, Histogram{Bounds: b, Counts: []float64{0, 0}}, false},
		// vLLM restarted: every count is lower; the newer value is the increase.
		{"reset", Histogram{Bounds: b, Counts: []float64{1, 1}, Count: 1, Sum: 0.2}, Histogram{Bounds: b, Counts: []float64{4, 6}, Count: 8, Sum: 5},
			Histogram{Bounds: b, Counts: []float64{1, 1}, Count: 1, Sum: 0.2}, true},
		// Restarted and already past the old count, but the sum betrays it.
		{"reset seen only in sum", Histogram{Bounds: b, Counts: []float64{2, 3}, Count: 4, Sum: 1}, older,
			Histogram{Bounds: b, Counts: []float64{2, 3}, Count: 4, Sum: 1}, true},
		// One bucket went down although count and sum went up.
		{"reset seen only in a bucket", Histogram{Bounds: b, Counts: []float64{0, 3}, Count: 4, Sum: 2}, older,
			Histogram{Bounds: b, Counts: []float64{0, 3}, Count: 4, Sum: 2}, true},
		// New buckets (vLLM upgraded, hence restarted).
		{"bucket layout changed", Histogram{Bounds: []float64{1, 2, 5}, Counts: []float64{1, 2, 3}, Count: 3, Sum: 4}, older,
			Histogram{Bounds: []float64{1, 2, 5}, Counts: []float64{1, 2, 3}, Count: 3, Sum: 4}, true},
		// le="1" vs le="1.0" parse to the same float; 0.1+0.2 vs 0.3 is absorbed.
		{"bounds equal within rounding", Histogram{Bounds: []float64{0.1 + 0.2, 2}, Counts: []float64{2, 3}, Count: 4, Sum: 2},
			Histogram{Bounds: []float64{0.3, 2}, Counts: []float64{1, 2}, Count: 3, Sum: 1.5},
			Histogram{Bounds: []float64{0.1 + 0.2, 2}, Counts: []float64{1, 1}, Count: 1, Sum: 0.5}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, reset := c.newer.Sub(c.older)
			if reset != c.wantReset || !equalHist(got, c.want) {
				t.Fatalf("Sub = %+v reset=%v, want %+v reset=%v", got, reset, c.want, c.wantReset)
			}
		})
	}
}

func TestSubDoesNotAlias(t *testing.T) {
	newer := Histogram{Bounds: []float64{1}, Counts: []float64{1}, Count: 1}
	older := Histogram{Bounds: []float64{1}, Counts: []float64{5}, Count: 5}
	d, reset := newer.Sub(older)
	if !reset {
		t.Fatal("want reset")
	}
	d.Counts[0] = 99
	if newer.Counts[0] != 1 {
		t.Fatal("Sub's result shares Counts with a published snapshot")
	}
}

func TestAdd(t *testing.T) {
	a := Histogram{Bounds: []float64{1, 2}, Counts: []float64{1, 2}, Count: 3, Sum: 1}
	b := Histogram{Bounds: []float64{1, 2}, Counts: []float64{0, 4}, Count: 4, Sum: 6}
	got, ok := a.Add(b)
	if !ok || !equalHist(got, Histogram{Bounds: []float64{1, 2}, Counts: []float64{1, 6}, Count: 7, Sum: 7}) {
		t.Fatalf("Add = %+v, %v", got, ok)
	}
	if _, ok := a.Add(Histogram{Bounds: []float64{1}, Counts: []float64{1}, Count: 1}); ok {
		t.Fatal("Add of different layouts must fail")
	}
}

func TestAddInPlace(t *testing.T) {
	a := Histogram{Bounds: []float64{1, 2}, Counts: []float64{1, 2}, Count: 3, Sum: 1}
	b := Histogram{Bounds: []float64{1, 2}, Counts: []float64{0, 4}, Count: 4, Sum: 6}
	want, _ := a.Add(b)
	if !a.AddInPlace(b) || !equalHist(a, want) {
		t.Fatalf("AddInPlace = %+v, want %+v", a, want)
	}
	before := a.clone()
	if a.AddInPlace(Histogram{Bounds: []float64{1}, Counts: []float64{1}, Count: 1}) || !equalHist(a, before) {
		t.Fatalf("AddInPlace of different layouts: %+v, want it unchanged and false", a)
	}
}

func TestCountAtOrBelow(t *testing.T) {
	h := Histogram{Bounds: []float64{0.5, 1, 2.5}, Counts: []float64{3, 7, 9}, Count: 10}
	cases := []struct {
		bound  float64
		want   float64
		wantOK bool
	}{
		{1.0, 7, true}, // le="1" and le="1.0" are the same bound
		{0.5, 3, true},
		{2.5, 9, true},
		{math.Inf(1), 10, true},
		{2, 0, false}, // not a boundary: unknowable
		{0.1 + 0.4, 3, true},
	}
	for _, c := range cases {
		got, ok := h.CountAtOrBelow(c.bound)
		if ok != c.wantOK || got != c.want {
			t.Errorf("CountAtOrBelow(%v) = %v, %v; want %v, %v", c.bound, got, ok, c.want, c.wantOK)
		}
	}
}

func equalHist(a, b Histogram) bool {
	if a.Count != b.Count || math.Abs(a.Sum-b.Sum) > 1e-12 || !boundsEqual(a.Bounds, b.Bounds) || len(a.Counts) != len(b.Counts) {
		return false
	}
	for i := range a.Counts {
		if a.Counts[i] != b.Counts[i] {
			return false
		}
	}
	return true
}
