package exposition

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// descMeta is what the exposition needs of a Desc: its name, help and
// label names, which prometheus.Desc keeps to itself.
type descMeta struct {
	name, help *string
	// labels are the label names in the Desc's order; byName the indexes
	// of labels in name order, the order of the written pairs.
	labels []string
	byName []int
	names  []*string // the label names as pointers the pairs share, by name
}

func newDescMeta(name, help string, labels []string) *descMeta {
	m := &descMeta{name: &name, help: &help, labels: labels}
	m.byName = make([]int, len(labels))
	for i := range labels {
		m.byName[i] = i
	}
	slices.SortFunc(m.byName, func(a, b int) int { return strings.Compare(labels[a], labels[b]) })
	for _, i := range m.byName {
		m.names = append(m.names, &labels[i])
	}
	return m
}

// Descs are the Descs one collector renders, with what a Writer needs of
// each. Fill it before the first gather; it is only read after that.
type Descs map[*prometheus.Desc]*descMeta

// New makes a Desc without const labels and records its meta.
func (ds Descs) New(name, help string, labels ...string) *prometheus.Desc {
	d := prometheus.NewDesc(name, help, labels, nil)
	ds[d] = newDescMeta(name, help, slices.Clone(labels))
	return d
}

// All returns the Descs, for a collector's Describe.
func (ds Descs) All() []*prometheus.Desc {
	out := make([]*prometheus.Desc, 0, len(ds))
	for d := range ds {
		out = append(out, d)
	}
	return out
}

// Writer writes one gather's families (NewWriter, then a call per series,
// then Done). Its structs and values come from arenas (arena)
// sized from the last gather (Sizes): one allocation per
// type, instead of one per struct and value; past an arena's room (a
// first gather, a server that grew) they are allocated one by one. What
// the arenas hand out lives as long as the families written from them.
type Writer struct {
	descs    Descs
	families map[*prometheus.Desc]*written
	errs     []error
	n        Sizes // what this gather took: the next one's room

	// spare are the families of the gather before, emptied, for this one
	// (a Writer given back to Writers); out is Done's slice.
	spare map[*prometheus.Desc]*written
	out   []*dto.MetricFamily

	metA     arena[dto.Metric]
	pairA    arena[dto.LabelPair]
	pairPtrA arena[*dto.LabelPair]
	strA     arena[string]
	floatA   arena[float64]
	uintA    arena[uint64]
	gaugeA   arena[dto.Gauge]
	counterA arena[dto.Counter]
	bucketA  arena[dto.Bucket]
	bPtrA    arena[*dto.Bucket]
	qA       arena[dto.Quantile]
	qPtrA    arena[*dto.Quantile]
	histA    arena[dto.Histogram]
	sumA     arena[dto.Summary]
}

// Sizes are the elements of each type one gather took.
type Sizes struct {
	metrics, labels, pairs, floats, uints, gauges, counters, buckets, quantiles, families int
	histograms, summaries                                                                 int
}

// NewWriter returns a Writer of the Descs in ds, its arenas sized from the
// Sizes of the last gather (zero Sizes: the first).
func NewWriter(ds Descs, last Sizes) *Writer {
	return &Writer{
		descs:    ds,
		families: make(map[*prometheus.Desc]*written, last.families),
		metA:     make(arena[dto.Metric], 0, last.metrics),
		pairA:    make(arena[dto.LabelPair], 0, last.pairs),
		pairPtrA: make(arena[*dto.LabelPair], 0, last.labels),
		strA:     make(arena[string], 0, last.pairs),
		floatA:   make(arena[float64], 0, last.floats),
		uintA:    make(arena[uint64], 0, last.uints),
		gaugeA:   make(arena[dto.Gauge], 0, last.gauges),
		counterA: make(arena[dto.Counter], 0, last.counters),
		bucketA:  make(arena[dto.Bucket], 0, last.buckets),
		bPtrA:    make(arena[*dto.Bucket], 0, last.buckets),
		qA:       make(arena[dto.Quantile], 0, last.quantiles),
		qPtrA:    make(arena[*dto.Quantile], 0, last.quantiles),
		histA:    make(arena[dto.Histogram], 0, last.histograms),
		sumA:     make(arena[dto.Summary], 0, last.summaries),
	}
}

// Sizes is what this gather took of each arena: the next one's room.
func (x *Writer) Sizes() Sizes {
	n := x.n
	n.families = len(x.families)
	return n
}

// metric starts a series of desc's family with the given label values, or
// returns nil (and records why) when they do not fit the Desc.
func (x *Writer) metric(desc *prometheus.Desc, t dto.MetricType, labels []string) *dto.Metric {
	meta := x.descs[desc]
	if meta == nil {
		x.errs = append(x.errs, fmt.Errorf("exposition: no metadata for %s", desc))
		return nil
	}
	if len(labels) != len(meta.labels) {
		x.errs = append(x.errs, fmt.Errorf("exposition: %s: %d label values for %d labels", *meta.name, len(labels), len(meta.labels)))
		return nil
	}
	for _, v := range labels {
		if !utf8.ValidString(v) {
			x.errs = append(x.errs, fmt.Errorf("exposition: %s: label value %q is not valid UTF-8", *meta.name, v))
			return nil
		}
	}
	w := x.families[desc]
	if w == nil {
		if w = x.spare[desc]; w != nil {
			delete(x.spare, desc)
			if w.family.GetType() != t {
				w.family.Type = t.Enum()
			}
		} else {
			w = &written{family: &dto.MetricFamily{Name: meta.name, Help: meta.help, Type: t.Enum()}}
		}
		x.families[desc] = w
	} else if w.family.GetType() != t {
		x.errs = append(x.errs, fmt.Errorf("exposition: %s: a %s series in a %s family", *meta.name, t, w.family.GetType()))
		return nil
	}
	n := len(labels)
	x.n.metrics++
	x.n.labels += n
	m := x.metA.Take()
	ptrs := x.pairPtrA.Slice(n)
	for k, i := range meta.byName {
		// A pair with the value of the family's last series is that
		// series' pair: series come grouped (a model's engines, an SLO's
		// windows), and the pairs were most of what a gauge took.
		if w.last != nil && w.last[k].GetValue() == labels[i] {
			ptrs[k] = w.last[k]
			continue
		}
		x.n.pairs++
		p, v := x.pairA.Take(), x.strA.Take()
		*v = labels[i]
		p.Name, p.Value = meta.names[k], v
		ptrs[k] = p
	}
	w.last = ptrs
	m.Label = ptrs
	w.family.Metric = append(w.family.Metric, m)
	return m
}

// written is one family being written, and the label pairs of its last
// series.
type written struct {
	family *dto.MetricFamily
	last   []*dto.LabelPair
}

// Value writes one gauge or counter sample.
func (x *Writer) Value(desc *prometheus.Desc, t prometheus.ValueType, v float64, labels []string) {
	mt := dto.MetricType_GAUGE
	if t == prometheus.CounterValue {
		mt = dto.MetricType_COUNTER
	}
	m := x.metric(desc, mt, labels)
	if m == nil {
		return
	}
	x.n.floats++
	p := x.floatA.Take()
	*p = v
	if mt == dto.MetricType_COUNTER {
		x.n.counters++
		c := x.counterA.Take()
		c.Value = p
		m.Counter = c
		return
	}
	x.n.gauges++
	g := x.gaugeA.Take()
	g.Value = p
	m.Gauge = g
}

// Histogram writes h as client_golang's const histogram would; bounds that
// are not strictly increasing and finite take the library's map (see
// constHistogram).
func (x *Writer) Histogram(desc *prometheus.Desc, h snapshot.Histogram, labels []string) {
	if !increasingFinite(h.Bounds) || len(h.Counts) != len(h.Bounds) {
		x.library(desc, dto.MetricType_HISTOGRAM, labels, func() (prometheus.Metric, error) {
			return ConstHistogram(desc, h, labels...)
		})
		return
	}
	m := x.metric(desc, dto.MetricType_HISTOGRAM, labels)
	if m == nil {
		return
	}
	n := len(h.Bounds)
	x.n.uints += n + 1
	x.n.floats += n + 1
	x.n.buckets += n
	vals, floats := x.uintA.Slice(n+1), x.floatA.Slice(n+1)
	buckets, ptrs := x.bucketA.Slice(n), x.bPtrA.Slice(n)
	for i := range n {
		vals[i] = uint64(math.Round(h.Counts[i]))
		floats[i] = h.Bounds[i]
		buckets[i].CumulativeCount, buckets[i].UpperBound = &vals[i], &floats[i]
		ptrs[i] = &buckets[i]
	}
	vals[n], floats[n] = uint64(math.Round(h.Count)), h.Sum
	x.n.histograms++
	m.Histogram = x.histA.Take()
	m.Histogram.SampleCount, m.Histogram.SampleSum, m.Histogram.Bucket = &vals[n], &floats[n], ptrs
}

// Summary writes a windowed summary as client_golang's const summary would
// (windowSummary): the quantiles present, by rank.
func (x *Writer) Summary(desc *prometheus.Desc, qs map[float64]snapshot.Value, cum snapshot.Histogram, labels []string) {
	m := x.metric(desc, dto.MetricType_SUMMARY, labels)
	if m == nil {
		return
	}
	n := 0
	for _, v := range qs {
		if v.OK {
			n++
		}
	}
	x.n.quantiles += n
	x.n.floats += 2*n + 1
	x.n.uints++
	quantiles, ptrs, floats := x.qA.Slice(n), x.qPtrA.Slice(n), x.floatA.Slice(2*n+1)
	i := 0
	for rank, v := range qs {
		if v.OK {
			floats[2*i], floats[2*i+1] = rank, v.V
			quantiles[i].Quantile, quantiles[i].Value = &floats[2*i], &floats[2*i+1]
			ptrs[i] = &quantiles[i]
			i++
		}
	}
	slices.SortFunc(ptrs, func(a, b *dto.Quantile) int {
		if a.GetQuantile() < b.GetQuantile() {
			return -1
		}
		if a.GetQuantile() > b.GetQuantile() {
			return 1
		}
		return 0
	})
	count := x.uintA.Take()
	*count = uint64(math.Round(cum.Count))
	floats[2*n] = cum.Sum
	x.n.summaries++
	m.Summary = x.sumA.Take()
	m.Summary.SampleCount, m.Summary.SampleSum, m.Summary.Quantile = count, &floats[2*n], ptrs
}

// library writes a metric client_golang makes (a case the straight
// writers leave to it) into desc's family.
func (x *Writer) library(desc *prometheus.Desc, t dto.MetricType, labels []string, build func() (prometheus.Metric, error)) {
	pm, err := build()
	if err != nil {
		x.errs = append(x.errs, err)
		return
	}
	m := x.metric(desc, t, labels)
	if m == nil {
		return
	}
	pairs := m.Label
	if err := pm.Write(m); err != nil {
		x.errs = append(x.errs, err)
	}
	m.Label = pairs
}

// Done returns the written families as a registry's Gather would:
// sorted by name, their series by label values; a series whose labels
// repeat the one before it is dropped with an error.
func (x *Writer) Done() ([]*dto.MetricFamily, error) {
	out := x.out[:0]
	if out == nil {
		out = make([]*dto.MetricFamily, 0, len(x.families))
	}
	for _, w := range x.families {
		f := w.family
		slices.SortStableFunc(f.Metric, compareLabelValues)
		kept := f.Metric[:1]
		for _, m := range f.Metric[1:] {
			if compareLabelValues(kept[len(kept)-1], m) == 0 {
				x.errs = append(x.errs, fmt.Errorf("exposition: series %s%v collected twice", f.GetName(), m.GetLabel()))
				continue
			}
			kept = append(kept, m)
		}
		f.Metric = kept
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	x.out = out
	var err error
	if len(x.errs) > 0 {
		err = fmt.Errorf("%d errors while writing metric families: %w", len(x.errs), x.errs[0])
	}
	return out, err
}

// compareLabelValues orders series of one family as the registry does: by
// their label values in the pairs' (name) order.
func compareLabelValues(a, b *dto.Metric) int {
	if la, lb := len(a.Label), len(b.Label); la != lb {
		return la - lb
	}
	for i, p := range a.Label {
		if c := strings.Compare(p.GetValue(), b.Label[i].GetValue()); c != 0 {
			return c
		}
	}
	return 0
}

// empty readies x for another gather once nothing reads what it wrote:
// that is cleared (so x holds nothing of the state it was written from),
// and its arenas, families and Done's slice are kept for the next gather.
// An arena this gather outgrew, or took less than half of, is made anew
// at this gather's size.
func (x *Writer) empty() {
	n := x.Sizes()
	refill(&x.metA, n.metrics)
	refill(&x.pairA, n.pairs)
	refill(&x.pairPtrA, n.labels)
	refill(&x.strA, n.pairs)
	refill(&x.floatA, n.floats)
	refill(&x.uintA, n.uints)
	refill(&x.gaugeA, n.gauges)
	refill(&x.counterA, n.counters)
	refill(&x.bucketA, n.buckets)
	refill(&x.bPtrA, n.buckets)
	refill(&x.qA, n.quantiles)
	refill(&x.qPtrA, n.quantiles)
	refill(&x.histA, n.histograms)
	refill(&x.sumA, n.summaries)
	if x.spare == nil {
		x.spare = make(map[*prometheus.Desc]*written, len(x.families))
	}
	for d, w := range x.families {
		// Done may have dropped duplicates past the kept length: clear
		// them too (one made by the library is not in an arena).
		clear(w.family.Metric[:cap(w.family.Metric)])
		w.family.Metric, w.last = w.family.Metric[:0], nil
		x.spare[d] = w
	}
	clear(x.families)
	clear(x.out)
	x.out = x.out[:0]
	x.errs, x.n = nil, Sizes{}
}

// refill empties a for a gather of n elements: cleared and rewound, or
// made anew when it is smaller than n (an eighth larger: series come and
// go by a few, and each time an arena is outgrown the surplus is
// allocated one by one) or more than twice n.
func refill[T any](a *arena[T], n int) {
	if cap(*a) < n || cap(*a) > 2*n+64 {
		*a = make(arena[T], 0, n+n/8)
		return
	}
	clear(*a)
	*a = (*a)[:0]
}

// arena hands out the elements of a slice allocated once. Past its capacity
// it falls back to the heap, so a miscount costs compactness, never
// correctness. The zero arena allocates every element on its own.
type arena[T any] []T

// Take returns the next element, zeroed.
func (a *arena[T]) Take() *T {
	if len(*a) == cap(*a) {
		return new(T)
	}
	*a = (*a)[:len(*a)+1]
	return &(*a)[len(*a)-1]
}

// Slice returns the next n elements, capped so that appending to them
// cannot overwrite the elements after.
func (a *arena[T]) Slice(n int) []T {
	if len(*a)+n > cap(*a) {
		return make([]T, n)
	}
	s := (*a)[len(*a) : len(*a)+n : len(*a)+n]
	*a = (*a)[:len(*a)+n]
	return s
}
