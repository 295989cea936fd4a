package snapshot

import (
	"slices"
	"testing"
)

func TestHistogramSetKeepsEachNameApart(t *testing.T) {
	var s HistogramSet
	if s.Len() != 0 || s.Has(TTFT) {
		t.Fatalf("zero set: len %d, has TTFT %v", s.Len(), s.Has(TTFT))
	}
	for i, n := range histogramNames {
		s.Set(n, Histogram{Count: float64(i + 1)})
	}
	if s.Len() != len(histogramNames) {
		t.Fatalf("len %d, want %d", s.Len(), len(histogramNames))
	}
	var order []HistogramName
	for n, h := range s.All() {
		if want := float64(histogramIndex(n) + 1); h.Count != want {
			t.Fatalf("%s: count %v, want %v", n, h.Count, want)
		}
		order = append(order, n)
	}
	if !slices.Equal(order, histogramNames[:]) {
		t.Fatalf("All yields %v", order)
	}
	// A copy is a value: setting it leaves the original as it was.
	c := s
	c.Set(E2E, Histogram{Count: 100})
	if s.Get(E2E).Count == 100 {
		t.Fatal("setting a copy changed the original")
	}
	if _, ok := s.Lookup("no_such_histogram"); ok {
		t.Fatal("an unknown name is found")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Set of an unknown name did not panic")
		}
	}()
	s.Set("no_such_histogram", Histogram{})
}

func TestHistogramSetListsEveryLatencyHistogramOnce(t *testing.T) {
	seen := map[HistogramName]bool{}
	for _, n := range histogramNames {
		if seen[n] {
			t.Fatalf("%s listed twice", n)
		}
		seen[n] = true
	}
	for _, n := range LatencyHistograms {
		if !seen[n] {
			t.Fatalf("%s is not in histogramNames", n)
		}
	}
	if len(histogramNames) > 32 {
		t.Fatalf("%d names do not fit the set's 32-bit mask", len(histogramNames))
	}
}

func TestHistogramsOfAndLenAgree(t *testing.T) {
	s := HistogramsOf(map[HistogramName]Histogram{TTFT: {Count: 1}, KVBlockReuseGap: {Count: 2}})
	if s.Len() != 2 || s.Get(TTFT).Count != 1 || s.Get(KVBlockReuseGap).Count != 2 || s.Has(E2E) {
		t.Fatalf("set %+v", s)
	}
}
