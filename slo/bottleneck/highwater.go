package bottleneck

import (
	"slices"
	"time"
)

// highWater is the highest value seen over a sliding horizon, kept as
// per-bucket maxima (at most highWaterBuckets of them), so memory stays
// bounded however long the horizon. It is the "what this server has shown
// it can do" reference the relative rules compare against: the prefill
// speed of prefill_bound (typical: the median of the buckets' means), the
// decode step and the prefix-cache hit ratio of prefix_cache_miss (max).
type highWater struct {
	buckets []hwBucket
}

type hwBucket struct {
	at     time.Time
	v      float64 // the bucket's highest value
	sum, n float64 // and the sum and count of its values
}

const highWaterBuckets = 120

// max returns the highest value whose bucket is within horizon of now.
func (h *highWater) max(now time.Time, horizon time.Duration) (float64, bool) {
	h.expire(now, horizon)
	best, ok := 0.0, false
	for _, b := range h.buckets {
		if !ok || b.v > best {
			best, ok = b.v, true
		}
	}
	return best, ok
}

// typical returns the median of the per-bucket means within horizon of
// now: what this server usually shows, which a mix of workloads that
// swings the value from window to window does not move much.
func (h *highWater) typical(now time.Time, horizon time.Duration) (float64, bool) {
	h.expire(now, horizon)
	if len(h.buckets) == 0 {
		return 0, false
	}
	vs := make([]float64, len(h.buckets))
	for i, b := range h.buckets {
		vs[i] = b.sum / b.n
	}
	slices.Sort(vs)
	return vs[len(vs)/2], true
}

// add records v at now.
func (h *highWater) add(now time.Time, horizon time.Duration, v float64) {
	width := max(horizon/highWaterBuckets, time.Second)
	at := now.Truncate(width)
	if n := len(h.buckets); n > 0 && h.buckets[n-1].at.Equal(at) {
		b := &h.buckets[n-1]
		b.v, b.sum, b.n = max(b.v, v), b.sum+v, b.n+1
	} else {
		h.buckets = append(h.buckets, hwBucket{at: at, v: v, sum: v, n: 1})
	}
	h.expire(now, horizon)
}

func (h *highWater) expire(now time.Time, horizon time.Duration) {
	cut := now.Add(-horizon)
	i := 0
	for i < len(h.buckets) && h.buckets[i].at.Before(cut) {
		i++
	}
	if i > 0 {
		h.buckets = append(h.buckets[:0], h.buckets[i:]...)
	}
	if len(h.buckets) > highWaterBuckets+1 { // a horizon shortened by a reload
		h.buckets = append(h.buckets[:0], h.buckets[len(h.buckets)-highWaterBuckets-1:]...)
	}
}
