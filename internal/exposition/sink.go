package exposition

import (
	"math"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// Sink takes a collector's series: into a Writer (Gather, /metrics), or as
// const metrics onto a channel (Collect) or into a slice (tests). One
// render function serves all three, so what /metrics shows and what a
// registry gathers cannot drift apart.
type Sink struct {
	w   *Writer
	ch  chan<- prometheus.Metric
	out *[]prometheus.Metric
}

// ToWriter is a Sink that writes into w.
func ToWriter(w *Writer) Sink { return Sink{w: w} }

// ToChannel is a Sink that sends const metrics on ch, as made.
func ToChannel(ch chan<- prometheus.Metric) Sink { return Sink{ch: ch} }

// ToSlice is a Sink that appends const metrics to *out.
func ToSlice(out *[]prometheus.Metric) Sink { return Sink{out: out} }

func (s Sink) add(m prometheus.Metric, err error) {
	// Label values are validated where they come from; an error here is a
	// bug, and a bug must cost one series, not the process.
	if err != nil {
		return
	}
	if s.ch != nil {
		s.ch <- m
		return
	}
	*s.out = append(*s.out, m)
}

// Emit takes one gauge or counter sample.
func (s Sink) Emit(desc *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	if s.w != nil {
		s.w.Value(desc, t, v, labels)
		return
	}
	s.add(prometheus.NewConstMetric(desc, t, v, labels...))
}

// Gauge takes one gauge sample.
func (s Sink) Gauge(desc *prometheus.Desc, v float64, labels ...string) {
	s.Emit(desc, prometheus.GaugeValue, v, labels...)
}

// Value takes v if it is known, and nothing otherwise.
func (s Sink) Value(desc *prometheus.Desc, t prometheus.ValueType, v snapshot.Value, labels ...string) {
	if v.OK {
		s.Emit(desc, t, v.V, labels...)
	}
}

// Summary takes windowed quantiles with the cumulative count and sum.
func (s Sink) Summary(desc *prometheus.Desc, qs map[float64]snapshot.Value, cum snapshot.Histogram, labels ...string) {
	if s.w != nil {
		s.w.Summary(desc, qs, cum, labels)
		return
	}
	s.add(WindowSummary(desc, qs, cum, labels...))
}

// Histogram takes a cumulative histogram.
func (s Sink) Histogram(desc *prometheus.Desc, h snapshot.Histogram, labels ...string) {
	if s.w != nil {
		s.w.Histogram(desc, h, labels)
		return
	}
	s.add(ConstHistogram(desc, h, labels...))
}

// WindowSummary exports windowed quantiles as a summary: the quantile label
// is reserved for summaries (promtool rejects it elsewhere), and a summary is
// exactly "quantiles over a recent window plus cumulative count and sum".
func WindowSummary(desc *prometheus.Desc, qs map[float64]snapshot.Value, cum snapshot.Histogram, labels ...string) (prometheus.Metric, error) {
	present := make(map[float64]float64, len(qs))
	for q, v := range qs {
		if v.OK {
			present[q] = v.V
		}
	}
	return prometheus.NewConstSummary(desc, uint64(math.Round(cum.Count)), cum.Sum, present, labels...)
}

// ConstHistogram re-exports a cumulative histogram. vLLM's counts are whole
// numbers carried as floats; client_golang's classic const histogram wants
// integers. (A Writer writes histograms itself and takes this path only for
// bounds that are not strictly increasing and finite.)
func ConstHistogram(desc *prometheus.Desc, h snapshot.Histogram, labels ...string) (prometheus.Metric, error) {
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b] = uint64(math.Round(h.Counts[i]))
	}
	return prometheus.NewConstHistogram(desc, uint64(math.Round(h.Count)), h.Sum, buckets, labels...)
}

// increasingFinite reports whether bounds are strictly increasing finite
// numbers (+Inf is never among a snapshot's bounds: its count is Count).
func increasingFinite(bounds []float64) bool {
	for i, b := range bounds {
		if math.IsNaN(b) || math.IsInf(b, 0) || (i > 0 && b <= bounds[i-1]) {
			return false
		}
	}
	return true
}

// Gatherer is a prometheus.Gatherer of the series render takes, written at
// each call into a Writer sized from the call before. Transactional gathers
// (a /metrics request) write into Writers lent and given back.
type Gatherer struct {
	render  func(Sink)
	writers *Writers
}

// NewGatherer returns a Gatherer of render's series; ds must hold every
// Desc render uses.
func NewGatherer(ds Descs, render func(Sink)) *Gatherer {
	return &Gatherer{render: render, writers: NewWriters(ds)}
}

// Gather implements prometheus.Gatherer: the families are the caller's to
// keep.
func (g *Gatherer) Gather() ([]*dto.MetricFamily, error) {
	w := g.writers.New()
	g.render(ToWriter(w))
	mfs, err := w.Done()
	g.writers.Sized(w.Sizes())
	return mfs, err
}

// Transactional is g as a prometheus.TransactionalGatherer
// (promhttp.HandlerForTransactional): the families are written into a
// Writer lent for the request and given back when it has encoded them.
func (g *Gatherer) Transactional() prometheus.TransactionalGatherer {
	return lending{g}
}

type lending struct{ g *Gatherer }

func (l lending) Gather() ([]*dto.MetricFamily, func(), error) {
	w := l.g.writers.Get()
	l.g.render(ToWriter(w))
	mfs, err := w.Done()
	return mfs, func() { l.g.writers.Put(w) }, err
}

// Writers lends Writers to gathers whose families are read once and then
// let go (a /metrics request, through promhttp's transactional gathering):
// a Writer given back is emptied and written into again, so such a gather
// allocates next to nothing, and the memory of the families it writes is
// the same memory at every collection of the heap, rather than new memory
// a collection that begins during a request counts as live and one that
// begins elsewhere does not. It keeps one: requests come one after the
// other (one Prometheus, or two replicas a few milliseconds apart), and a
// gather while another's families are still read takes a new Writer,
// which is dropped when given back rather than kept for a rare overlap.
// Not a sync.Pool: a pool lets go of what it holds at every collection,
// which is the churn this is here to end.
type Writers struct {
	descs Descs
	mu    sync.Mutex
	free  []*Writer
	last  Sizes
}

// keptWriters is how many emptied Writers a Writers keeps.
const keptWriters = 1

// NewWriters returns Writers of the Descs in ds.
func NewWriters(ds Descs) *Writers { return &Writers{descs: ds} }

// New returns a Writer of its own for a gather whose families the caller
// keeps, sized from the last gather (give its Sizes to Sized).
func (p *Writers) New() *Writer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return NewWriter(p.descs, p.last)
}

// Sized records the Sizes of a gather written into a Writer that will not
// be given back (from New, or one whose families a caller keeps): the size
// of the next new Writer.
func (p *Writers) Sized(n Sizes) {
	p.mu.Lock()
	p.last = n
	p.mu.Unlock()
}

// Get lends an empty Writer: one given back, or a new one sized from the
// last gather.
func (p *Writers) Get() *Writer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		w := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		return w
	}
	return NewWriter(p.descs, p.last)
}

// Put gives back a Writer from Get once nothing reads its families. One
// that finds no room is dropped as it is: emptying it would be work for
// the collector's sake only.
func (p *Writers) Put(w *Writer) {
	n := w.Sizes()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = n
	if len(p.free) < keptWriters {
		w.empty()
		p.free = append(p.free, w)
	}
}
