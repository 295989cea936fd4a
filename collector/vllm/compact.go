package vllm

import (
	"math"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// compactFamilies copies parsed families into a few arrays, one per kind of
// object, for the parse cache to keep between scrapes. The text parser
// allocates every family, metric, label pair, bucket and value on its own,
// interleaved with its scratch objects; kept as parsed, those few long-lived
// objects pin most of the heap spans the parse touched once its scratch is
// freed. At 16 models x 8 engines that left 6-9 MB of the exporter's heap
// in use but empty (go_memory_classes_heap_unused_bytes). Copied here they
// fill whole arrays, and the parse's own objects all become garbage.
//
// The copy also makes equal label pairs, bucket bounds and strings one
// object each: the parser gives every sample its own, and the same few
// dozen model_name, engine and le values took 2 MB of what the cache kept.
// Nothing writes a label pair, bound or string after parsing (the cache's
// slots write values only), so sharing them changes no reading.
//
// Fields the text format cannot express (exemplars, created timestamps,
// native buckets) are not copied: build compares the copy, values patched
// in, with the parser's families (proto.Equal), so a family the copy would
// change is never cached.
func compactFamilies(fams map[string]*dto.MetricFamily) map[string]*dto.MetricFamily {
	var n struct {
		metrics, labels, pairs, gauges, counters, untypeds, summaries,
		quantiles, hists, buckets, floats, uints int
	}
	uniq := map[string]int{} // string -> its offset in all
	var all strings.Builder
	str := func(s *string) {
		if s == nil {
			return
		}
		if _, ok := uniq[*s]; !ok {
			uniq[*s] = all.Len()
			all.WriteString(*s)
		}
	}
	pairs := map[[2]string]bool{}
	bounds := map[uint64]bool{}
	for _, mf := range fams {
		str(mf.Name)
		str(mf.Help)
		str(mf.Unit)
		n.metrics += len(mf.Metric)
		for _, m := range mf.Metric {
			n.labels += len(m.Label)
			for _, lp := range m.Label {
				str(lp.Name)
				str(lp.Value)
				pairs[[2]string{lp.GetName(), lp.GetValue()}] = true
			}
			switch {
			case m.Gauge != nil:
				n.gauges++
				n.floats++
			case m.Counter != nil:
				n.counters++
				n.floats++
			case m.Untyped != nil:
				n.untypeds++
				n.floats++
			}
			if s := m.Summary; s != nil {
				n.summaries++
				n.quantiles += len(s.Quantile)
				n.floats += 1 + 2*len(s.Quantile)
				n.uints++
			}
			if h := m.Histogram; h != nil {
				n.hists++
				n.buckets += len(h.Bucket)
				n.floats += 2 + len(h.Bucket) // sum, float count, float bucket counts
				n.uints += 1 + len(h.Bucket)
				for _, b := range h.Bucket {
					if b.UpperBound != nil {
						bounds[math.Float64bits(*b.UpperBound)] = true
					}
				}
			}
		}
	}
	n.pairs = len(pairs)
	n.floats += len(bounds)
	text := all.String()

	var (
		famA     = make(arena[dto.MetricFamily], 0, len(fams))
		typeA    = make(arena[dto.MetricType], 0, len(fams))
		metA     = make(arena[dto.Metric], 0, n.metrics)
		metPtrA  = make(arena[*dto.Metric], 0, n.metrics)
		pairA    = make(arena[dto.LabelPair], 0, n.pairs)
		pairPtrA = make(arena[*dto.LabelPair], 0, n.labels)
		strA     = make(arena[string], 0, len(uniq))
		gaugeA   = make(arena[dto.Gauge], 0, n.gauges)
		counterA = make(arena[dto.Counter], 0, n.counters)
		untypedA = make(arena[dto.Untyped], 0, n.untypeds)
		sumA     = make(arena[dto.Summary], 0, n.summaries)
		qA       = make(arena[dto.Quantile], 0, n.quantiles)
		qPtrA    = make(arena[*dto.Quantile], 0, n.quantiles)
		histA    = make(arena[dto.Histogram], 0, n.hists)
		bucketA  = make(arena[dto.Bucket], 0, n.buckets)
		bPtrA    = make(arena[*dto.Bucket], 0, n.buckets)
		floatA   = make(arena[float64], 0, n.floats)
		uintA    = make(arena[uint64], 0, n.uints)
	)
	strPtrs := make(map[string]*string, len(uniq))
	strOf := func(s *string) *string {
		if s == nil {
			return nil
		}
		if p, ok := strPtrs[*s]; ok {
			return p
		}
		p := strA.take()
		off := uniq[*s]
		*p = text[off : off+len(*s)]
		strPtrs[*s] = p
		return p
	}
	f64 := func(v *float64) *float64 {
		if v == nil {
			return nil
		}
		p := floatA.take()
		*p = *v
		return p
	}
	u64 := func(v *uint64) *uint64 {
		if v == nil {
			return nil
		}
		p := uintA.take()
		*p = *v
		return p
	}
	sharedPairs := make(map[[2]string]*dto.LabelPair, n.pairs)
	sharedBounds := make(map[uint64]*float64, len(bounds))
	bound := func(v *float64) *float64 {
		if v == nil {
			return nil
		}
		k := math.Float64bits(*v)
		if p, ok := sharedBounds[k]; ok {
			return p
		}
		p := f64(v)
		sharedBounds[k] = p
		return p
	}

	out := make(map[string]*dto.MetricFamily, len(fams))
	for name, mf := range fams {
		cf := famA.take()
		cf.Name, cf.Help, cf.Unit = strOf(mf.Name), strOf(mf.Help), strOf(mf.Unit)
		if mf.Type != nil {
			cf.Type = typeA.take()
			*cf.Type = *mf.Type
		}
		if mf.Metric != nil {
			cf.Metric = metPtrA.slice(len(mf.Metric))
		}
		for i, m := range mf.Metric {
			cm := metA.take()
			cf.Metric[i] = cm
			if m.Label != nil {
				cm.Label = pairPtrA.slice(len(m.Label))
			}
			for j, lp := range m.Label {
				k := [2]string{lp.GetName(), lp.GetValue()}
				p, ok := sharedPairs[k]
				if !ok {
					p = pairA.take()
					p.Name, p.Value = strOf(lp.Name), strOf(lp.Value)
					sharedPairs[k] = p
				}
				cm.Label[j] = p
			}
			if m.TimestampMs != nil {
				ts := *m.TimestampMs
				cm.TimestampMs = &ts
			}
			if m.Gauge != nil {
				cm.Gauge = gaugeA.take()
				cm.Gauge.Value = f64(m.Gauge.Value)
			}
			if m.Counter != nil {
				cm.Counter = counterA.take()
				cm.Counter.Value = f64(m.Counter.Value)
			}
			if m.Untyped != nil {
				cm.Untyped = untypedA.take()
				cm.Untyped.Value = f64(m.Untyped.Value)
			}
			if s := m.Summary; s != nil {
				cs := sumA.take()
				cm.Summary = cs
				cs.SampleCount, cs.SampleSum = u64(s.SampleCount), f64(s.SampleSum)
				if s.Quantile != nil {
					cs.Quantile = qPtrA.slice(len(s.Quantile))
				}
				for j, q := range s.Quantile {
					cq := qA.take()
					cq.Quantile, cq.Value = f64(q.Quantile), f64(q.Value)
					cs.Quantile[j] = cq
				}
			}
			if h := m.Histogram; h != nil {
				ch := histA.take()
				cm.Histogram = ch
				ch.SampleCount, ch.SampleCountFloat, ch.SampleSum = u64(h.SampleCount), f64(h.SampleCountFloat), f64(h.SampleSum)
				if h.Bucket != nil {
					ch.Bucket = bPtrA.slice(len(h.Bucket))
				}
				for j, b := range h.Bucket {
					cb := bucketA.take()
					cb.CumulativeCount, cb.CumulativeCountFloat = u64(b.CumulativeCount), f64(b.CumulativeCountFloat)
					cb.UpperBound = bound(b.UpperBound)
					ch.Bucket[j] = cb
				}
			}
		}
		out[name] = cf
	}
	return out
}

// arena hands out the elements of a slice allocated once, for objects that
// live and die together. Past its capacity it falls back to the heap, so a
// miscount costs compactness, never correctness.
type arena[T any] []T

func (a *arena[T]) take() *T {
	if len(*a) == cap(*a) {
		return new(T)
	}
	*a = (*a)[:len(*a)+1]
	return &(*a)[len(*a)-1]
}

// slice returns the next n elements, capped so that appending to them
// cannot overwrite the elements after.
func (a *arena[T]) slice(n int) []T {
	if len(*a)+n > cap(*a) {
		return make([]T, n)
	}
	s := (*a)[len(*a) : len(*a)+n : len(*a)+n]
	*a = (*a)[:len(*a)+n]
	return s
}
