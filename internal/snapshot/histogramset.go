package snapshot

import "iter"

// histogramNames is every HistogramName, in the order a HistogramSet keeps
// (and All yields) them.
var histogramNames = [...]HistogramName{
	TTFT, InterTokenLatency, RequestTPOT, E2E, QueueTime, PrefillTime, DecodeTime, InferenceTime,
	KVTransferTime, KVTransferPostTime, KVTransferSize, KVTransferDescriptors,
	KVBlockLifetime, KVBlockIdleBeforeEvict, KVBlockReuseGap, MooncakeStoreOperation,
}

// histogramIndex is n's place in a HistogramSet, -1 for a name that is
// none of the constants.
func histogramIndex(n HistogramName) int {
	for i, name := range histogramNames {
		if name == n {
			return i
		}
	}
	return -1
}

// HistogramSet is a model's histograms, at most one per HistogramName. It
// is an array, not a map, because the scraper's history keeps one per model
// per scrape: at 16 models × 8 engines a map of vLLM's histograms took
// about 3.75 KB (a 32-slot table), this array 1 KB. The zero value is empty; a
// HistogramSet is copied by value.
type HistogramSet struct {
	h   [len(histogramNames)]Histogram
	has uint32 // bit i: h[i] is present
}

// HistogramsOf builds a set from a map (for literals).
func HistogramsOf(m map[HistogramName]Histogram) HistogramSet {
	var s HistogramSet
	for n, h := range m {
		s.Set(n, h)
	}
	return s
}

// Lookup returns the histogram n and whether the set has it.
func (s *HistogramSet) Lookup(n HistogramName) (Histogram, bool) {
	i := histogramIndex(n)
	if i < 0 || s.has&(1<<i) == 0 {
		return Histogram{}, false
	}
	return s.h[i], true
}

// Get returns the histogram n, the zero Histogram when absent.
func (s *HistogramSet) Get(n HistogramName) Histogram {
	h, _ := s.Lookup(n)
	return h
}

// Has says whether the set has histogram n.
func (s *HistogramSet) Has(n HistogramName) bool {
	_, ok := s.Lookup(n)
	return ok
}

// Set stores h as histogram n. n must be one of the HistogramName
// constants: another name is a programming error and panics.
func (s *HistogramSet) Set(n HistogramName, h Histogram) {
	i := histogramIndex(n)
	if i < 0 {
		panic("snapshot: unknown histogram name " + string(n))
	}
	s.h[i] = h
	s.has |= 1 << i
}

// Delete removes histogram n from the set.
func (s *HistogramSet) Delete(n HistogramName) {
	if i := histogramIndex(n); i >= 0 {
		s.h[i], s.has = Histogram{}, s.has&^(1<<i)
	}
}

// Len is the number of histograms in the set.
func (s *HistogramSet) Len() int {
	n := 0
	for b := s.has; b != 0; b &= b - 1 {
		n++
	}
	return n
}

// All yields the set's histograms in the order of the HistogramName
// constants.
func (s *HistogramSet) All() iter.Seq2[HistogramName, Histogram] {
	return func(yield func(HistogramName, Histogram) bool) {
		for i, n := range histogramNames {
			if s.has&(1<<i) != 0 && !yield(n, s.h[i]) {
				return
			}
		}
	}
}
