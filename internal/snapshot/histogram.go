package snapshot

import (
	"math"
)

// boundsEqual reports whether two bound lists are the same. Bounds are parsed
// floats, so vLLM's le="1.0" and a Prometheus 3 style le="1" are already equal
// here; the small relative tolerance only absorbs decimal round-trips.
func boundsEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !floatEq(a[i], b[i]) {
			return false
		}
	}
	return true
}

func floatEq(a, b float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

// Sub returns the increase from older to h. When any bucket count, the count
// or the sum went down, or the bucket layout changed, the process behind the
// histogram restarted in between: like Prometheus' rate(), the newer value is
// then taken as the whole increase since the restart, and reset is true.
func (h Histogram) Sub(older Histogram) (delta Histogram, reset bool) {
	if !boundsEqual(h.Bounds, older.Bounds) || h.Count < older.Count || h.Sum < older.Sum {
		return h.clone(), true
	}
	d := Histogram{
		Bounds: h.Bounds, // shared, never mutated
		Counts: make([]float64, len(h.Counts)),
		Count:  h.Count - older.Count,
		Sum:    h.Sum - older.Sum,
	}
	for i := range h.Counts {
		if h.Counts[i] < older.Counts[i] {
			return h.clone(), true
		}
		d.Counts[i] = h.Counts[i] - older.Counts[i]
	}
	return d, false
}

func (h Histogram) clone() Histogram {
	c := h
	c.Counts = append([]float64(nil), h.Counts...)
	return c
}

// Add returns the bucket-wise sum of h and o, for summing data-parallel
// engines of one model. ok is false when the bucket layouts differ.
func (h Histogram) Add(o Histogram) (Histogram, bool) {
	if !boundsEqual(h.Bounds, o.Bounds) {
		return h, false
	}
	s := Histogram{Bounds: h.Bounds, Counts: make([]float64, len(h.Counts)), Count: h.Count + o.Count, Sum: h.Sum + o.Sum}
	for i := range h.Counts {
		s.Counts[i] = h.Counts[i] + o.Counts[i]
	}
	return s, true
}

// AddInPlace is Add writing the sum into h's own Counts, for a sum whose
// Counts belong to the caller alone (summing the engines of one model
// while a scrape is read: one slice per model instead of one per engine).
// h is unchanged when the bucket layouts differ.
func (h *Histogram) AddInPlace(o Histogram) bool {
	if !boundsEqual(h.Bounds, o.Bounds) || len(h.Counts) != len(o.Counts) {
		return false
	}
	for i := range h.Counts {
		h.Counts[i] += o.Counts[i]
	}
	h.Count += o.Count
	h.Sum += o.Sum
	return true
}

// Quantile estimates the q-quantile exactly as PromQL's histogram_quantile
// does for classic buckets: linear interpolation inside the bucket holding
// the rank, 0 as the lower edge of the first bucket (when its bound is
// positive), and the highest finite bound when the rank falls into +Inf.
// Where PromQL would return NaN (no observations, no finite bucket) the
// result is absent: a quiet window is not a latency of 0.
func (h Histogram) Quantile(q float64) Value {
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
		return Value{} // +Inf only: PromQL needs at least two buckets.
	}
	// PromQL forces cumulative counts to be monotonic (scrapes of
	// concurrently updated buckets can be slightly inconsistent): a bucket
	// counts as the largest count up to it. Read in place, not copied:
	// derive asks for every quantile of every histogram of every model in
	// every window at each scrape, and the copies were a sixth of what a
	// scrape allocated at 16 models x 8 engines.
	maxSoFar := math.Inf(-1)
	for _, c := range h.Counts {
		maxSoFar = math.Max(maxSoFar, c)
	}
	observations := math.Max(maxSoFar, h.Count)
	if observations == 0 || math.IsNaN(observations) {
		return Value{}
	}
	rank := q * observations
	// The first bucket whose (monotonic) count reaches rank, and the count
	// below it.
	b, below, at := n, 0.0, 0.0
	run := math.Inf(-1)
	for i, c := range h.Counts {
		prev := run
		run = math.Max(run, c)
		if run >= rank {
			b, below, at = i, prev, run
			break
		}
	}
	if b == n {
		return Some(h.Bounds[n-1])
	}
	if b == 0 && h.Bounds[0] <= 0 {
		return Some(h.Bounds[0])
	}
	start, end, count := 0.0, h.Bounds[b], at
	if b > 0 {
		start = h.Bounds[b-1]
		count -= below
		rank -= below
	}
	v := start + (end-start)*(rank/count)
	if math.IsNaN(v) {
		return Value{}
	}
	return Some(v)
}

// CountAtOrBelow returns the cumulative count of observations <= bound.
// bound must be one of the histogram's bucket boundaries (or +Inf): counts
// between boundaries are unknowable, and guessing would make an SLO lie.
func (h Histogram) CountAtOrBelow(bound float64) (float64, bool) {
	if math.IsInf(bound, 1) {
		return h.Count, true
	}
	for i, b := range h.Bounds {
		if floatEq(b, bound) && i < len(h.Counts) {
			return h.Counts[i], true
		}
	}
	return 0, false
}
