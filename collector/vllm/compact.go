package vllm

import (
	"math"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/vllm-exporter/vllm_exporter/internal/arena"
)

// compactor copies parsed families into a few arrays, one per kind of
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
// native buckets) are not copied: the cache compares the copy, values patched
// in, with the parser's families (proto.Equal), so a family the copy would
// change is never cached.
//
// It copies in two passes over the families: count, then copy into
// arrays of the counted sizes. The parse cache passes the families
// of a large body part by part (count all parts, then copy all parts), so
// that only one part's parse is live at a time.
type compactor struct {
	n struct {
		fams, metrics, labels, gauges, counters, untypeds, summaries,
		quantiles, hists, buckets, floats, uints int
	}
	uniq   map[string]int // string -> its offset in text
	all    strings.Builder
	text   string
	pairs  map[[2]string]*dto.LabelPair
	bounds map[uint64]*float64
	strs   map[string]*string

	famA     arena.Arena[dto.MetricFamily]
	typeA    arena.Arena[dto.MetricType]
	metA     arena.Arena[dto.Metric]
	metPtrA  arena.Arena[*dto.Metric]
	pairA    arena.Arena[dto.LabelPair]
	pairPtrA arena.Arena[*dto.LabelPair]
	strA     arena.Arena[string]
	gaugeA   arena.Arena[dto.Gauge]
	counterA arena.Arena[dto.Counter]
	untypedA arena.Arena[dto.Untyped]
	sumA     arena.Arena[dto.Summary]
	qA       arena.Arena[dto.Quantile]
	qPtrA    arena.Arena[*dto.Quantile]
	histA    arena.Arena[dto.Histogram]
	bucketA  arena.Arena[dto.Bucket]
	bPtrA    arena.Arena[*dto.Bucket]
	floatA   arena.Arena[float64]
	uintA    arena.Arena[uint64]
}

func (k *compactor) str(s *string) {
	if s == nil {
		return
	}
	if _, ok := k.uniq[*s]; !ok {
		k.uniq[*s] = k.all.Len()
		k.all.WriteString(*s)
	}
}

// count adds fams to the sizes the arrays need.
func (k *compactor) count(fams map[string]*dto.MetricFamily) {
	if k.uniq == nil {
		k.uniq = map[string]int{}
		k.pairs = map[[2]string]*dto.LabelPair{}
		k.bounds = map[uint64]*float64{}
	}
	n := &k.n
	n.fams += len(fams)
	for _, mf := range fams {
		k.str(mf.Name)
		k.str(mf.Help)
		k.str(mf.Unit)
		n.metrics += len(mf.Metric)
		for _, m := range mf.Metric {
			n.labels += len(m.Label)
			for _, lp := range m.Label {
				k.str(lp.Name)
				k.str(lp.Value)
				k.pairs[[2]string{lp.GetName(), lp.GetValue()}] = nil
			}
			if m.Gauge != nil {
				n.gauges++
				n.floats += set(m.Gauge.Value)
			}
			if m.Counter != nil {
				n.counters++
				n.floats += set(m.Counter.Value)
			}
			if m.Untyped != nil {
				n.untypeds++
				n.floats += set(m.Untyped.Value)
			}
			if s := m.Summary; s != nil {
				n.summaries++
				n.quantiles += len(s.Quantile)
				n.floats += set(s.SampleSum)
				n.uints += set(s.SampleCount)
				for _, q := range s.Quantile {
					n.floats += set(q.Quantile) + set(q.Value)
				}
			}
			if h := m.Histogram; h != nil {
				n.hists++
				n.buckets += len(h.Bucket)
				n.floats += set(h.SampleSum) + set(h.SampleCountFloat)
				n.uints += set(h.SampleCount)
				for _, b := range h.Bucket {
					n.floats += set(b.CumulativeCountFloat)
					n.uints += set(b.CumulativeCount)
					if b.UpperBound != nil {
						k.bounds[math.Float64bits(*b.UpperBound)] = nil
					}
				}
			}
		}
	}
}

// set is 1 for a field that holds a value, 0 for an absent one.
func set[T any](p *T) int {
	if p == nil {
		return 0
	}
	return 1
}

// alloc makes the arrays for what count counted.
func (k *compactor) alloc() {
	n := &k.n
	k.text = k.all.String()
	k.all = strings.Builder{}
	k.famA = make(arena.Arena[dto.MetricFamily], 0, n.fams)
	k.typeA = make(arena.Arena[dto.MetricType], 0, n.fams)
	k.metA = make(arena.Arena[dto.Metric], 0, n.metrics)
	k.metPtrA = make(arena.Arena[*dto.Metric], 0, n.metrics)
	k.pairA = make(arena.Arena[dto.LabelPair], 0, len(k.pairs))
	k.pairPtrA = make(arena.Arena[*dto.LabelPair], 0, n.labels)
	k.strA = make(arena.Arena[string], 0, len(k.uniq))
	k.gaugeA = make(arena.Arena[dto.Gauge], 0, n.gauges)
	k.counterA = make(arena.Arena[dto.Counter], 0, n.counters)
	k.untypedA = make(arena.Arena[dto.Untyped], 0, n.untypeds)
	k.sumA = make(arena.Arena[dto.Summary], 0, n.summaries)
	k.qA = make(arena.Arena[dto.Quantile], 0, n.quantiles)
	k.qPtrA = make(arena.Arena[*dto.Quantile], 0, n.quantiles)
	k.histA = make(arena.Arena[dto.Histogram], 0, n.hists)
	k.bucketA = make(arena.Arena[dto.Bucket], 0, n.buckets)
	k.bPtrA = make(arena.Arena[*dto.Bucket], 0, n.buckets)
	k.floatA = make(arena.Arena[float64], 0, n.floats+len(k.bounds))
	k.uintA = make(arena.Arena[uint64], 0, n.uints)
	k.strs = make(map[string]*string, len(k.uniq))
}

func (k *compactor) strOf(s *string) *string {
	if s == nil {
		return nil
	}
	if p, ok := k.strs[*s]; ok {
		return p
	}
	p := k.strA.Take()
	if off, ok := k.uniq[*s]; ok {
		*p = k.text[off : off+len(*s)]
	} else {
		*p = *s // not counted: copy was given families count was not
	}
	k.strs[*s] = p
	return p
}

func (k *compactor) f64(v *float64) *float64 {
	if v == nil {
		return nil
	}
	p := k.floatA.Take()
	*p = *v
	return p
}

func (k *compactor) u64(v *uint64) *uint64 {
	if v == nil {
		return nil
	}
	p := k.uintA.Take()
	*p = *v
	return p
}

func (k *compactor) bound(v *float64) *float64 {
	if v == nil {
		return nil
	}
	b := math.Float64bits(*v)
	if p := k.bounds[b]; p != nil {
		return p
	}
	p := k.f64(v)
	k.bounds[b] = p
	return p
}

func (k *compactor) pair(lp *dto.LabelPair) *dto.LabelPair {
	key := [2]string{lp.GetName(), lp.GetValue()}
	if p := k.pairs[key]; p != nil {
		return p
	}
	p := k.pairA.Take()
	p.Name, p.Value = k.strOf(lp.Name), k.strOf(lp.Value)
	k.pairs[key] = p
	return p
}

// copy copies fams into the arrays, adding them to out under their names.
func (k *compactor) copy(fams, out map[string]*dto.MetricFamily) {
	for name, mf := range fams {
		cf := k.famA.Take()
		cf.Name, cf.Help, cf.Unit = k.strOf(mf.Name), k.strOf(mf.Help), k.strOf(mf.Unit)
		if mf.Type != nil {
			cf.Type = k.typeA.Take()
			*cf.Type = *mf.Type
		}
		if mf.Metric != nil {
			cf.Metric = k.metPtrA.Slice(len(mf.Metric))
		}
		for i, m := range mf.Metric {
			cm := k.metA.Take()
			cf.Metric[i] = cm
			if m.Label != nil {
				cm.Label = k.pairPtrA.Slice(len(m.Label))
			}
			for j, lp := range m.Label {
				cm.Label[j] = k.pair(lp)
			}
			if m.TimestampMs != nil {
				ts := *m.TimestampMs
				cm.TimestampMs = &ts
			}
			if m.Gauge != nil {
				cm.Gauge = k.gaugeA.Take()
				cm.Gauge.Value = k.f64(m.Gauge.Value)
			}
			if m.Counter != nil {
				cm.Counter = k.counterA.Take()
				cm.Counter.Value = k.f64(m.Counter.Value)
			}
			if m.Untyped != nil {
				cm.Untyped = k.untypedA.Take()
				cm.Untyped.Value = k.f64(m.Untyped.Value)
			}
			if s := m.Summary; s != nil {
				cs := k.sumA.Take()
				cm.Summary = cs
				cs.SampleCount, cs.SampleSum = k.u64(s.SampleCount), k.f64(s.SampleSum)
				if s.Quantile != nil {
					cs.Quantile = k.qPtrA.Slice(len(s.Quantile))
				}
				for j, q := range s.Quantile {
					cq := k.qA.Take()
					cq.Quantile, cq.Value = k.f64(q.Quantile), k.f64(q.Value)
					cs.Quantile[j] = cq
				}
			}
			if h := m.Histogram; h != nil {
				ch := k.histA.Take()
				cm.Histogram = ch
				ch.SampleCount, ch.SampleCountFloat, ch.SampleSum = k.u64(h.SampleCount), k.f64(h.SampleCountFloat), k.f64(h.SampleSum)
				if h.Bucket != nil {
					ch.Bucket = k.bPtrA.Slice(len(h.Bucket))
				}
				for j, b := range h.Bucket {
					cb := k.bucketA.Take()
					cb.CumulativeCount, cb.CumulativeCountFloat = k.u64(b.CumulativeCount), k.f64(b.CumulativeCountFloat)
					cb.UpperBound = k.bound(b.UpperBound)
					ch.Bucket[j] = cb
				}
			}
		}
		out[name] = cf
	}
}
