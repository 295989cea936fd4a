package vllm

import (
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// Quantiles are the quantiles derived for every latency histogram.
var Quantiles = []float64{0.5, 0.9, 0.95, 0.99}

// span is what a window's value is derived from (families.Span): one
// model's readings through the window, oldest first, and its length.
type span struct {
	chain []*snapshot.Model
	secs  float64
	row   *families.Family
	dv    *snapshot.Derived
}

func (w *span) Rate(inc snapshot.Value) snapshot.Value {
	if !inc.OK {
		return inc
	}
	return snapshot.Some(inc.V / w.secs)
}

// Inc is the increase of the row exported as name ("": the row deriving).
// A by-label row's is summed over its label values, a value that appears
// during the window counting from 0 (vLLM creates a reason's counter on its
// first use); it is absent when no reading has any.
func (w *span) Inc(name string) snapshot.Value {
	f := w.row
	if name != "" {
		f = rowByExported[name]
	}
	if f.Map == nil {
		return increase(w.chain, func(m *snapshot.Model) snapshot.Value { return *f.Value(m) })
	}
	total, any := 0.0, false
	for key := range keysOf(w.chain, f) {
		any = true
		total += increase(w.chain, func(m *snapshot.Model) snapshot.Value { return snapshot.Some((*f.Map(m))[key]) }).V
	}
	return snapshot.Value{V: total, OK: any}
}

// IncOf is the increase of any reading.
func (w *span) IncOf(get func(*snapshot.Model) snapshot.Value) snapshot.Value {
	return increase(w.chain, get)
}

// Delta is histogram h's increase over the window.
func (w *span) Delta(h snapshot.HistogramName) (snapshot.Histogram, bool) {
	d, ok := w.dv.Deltas[h]
	return d, ok
}

// keysOf are the label values of by-label row f along chain.
func keysOf(chain []*snapshot.Model, f *families.Family) map[string]bool {
	keys := map[string]bool{}
	for _, m := range chain {
		for k := range *f.Map(m) {
			keys[k] = true
		}
	}
	return keys
}

// rowByExported finds a row by its exported series (filled by init: the
// rows' windows refer to it).
var rowByExported = map[string]*families.Family{}

func init() {
	for i := range families.Rows {
		rowByExported[families.Rows[i].Exported] = &families.Rows[i]
	}
}

// derive computes the windowed values of every model present at both ends
// of span (oldest first; span[0] and the last element are the window's start
// and end). Like PromQL's increase(), every successful snapshot in between is
// looked at: a counter or histogram that went down means vLLM restarted, and
// the increase is then summed piecewise (before the restart, plus the value
// since it). Rates divide by the time actually between the two ends, not by
// the nominal window.
func derive(window time.Duration, history []*snapshot.VLLM) map[string]*snapshot.Derived {
	if len(history) < 2 {
		return nil
	}
	start, end := history[0], history[len(history)-1]
	elapsed := end.Time.Sub(start.Time).Seconds()
	if elapsed <= 0 {
		return nil
	}
	out := make(map[string]*snapshot.Derived, len(end.Models))
	chain := make([]*snapshot.Model, 0, len(history))
	for name, newer := range end.Models {
		older, ok := start.Models[name]
		if !ok {
			continue
		}
		// The model's readings through the window; failed scrapes and
		// scrapes without the model carry nothing.
		chain = append(chain[:0], older)
		for _, h := range history[1 : len(history)-1] {
			if m := h.Models[name]; h.Up && m != nil {
				chain = append(chain, m)
			}
		}
		chain = append(chain, newer)
		dv := &snapshot.Derived{
			Window:                    window,
			Start:                     start.Time,
			End:                       end.Time,
			FinishedPerSecondByReason: map[string]float64{},
			Series:                    map[string]snapshot.Value{},
			Quantiles:                 map[snapshot.HistogramName]map[float64]snapshot.Value{},
			Deltas:                    map[snapshot.HistogramName]snapshot.Histogram{},
		}
		for hn := range newer.Histograms.All() {
			delta := histogramIncrease(chain, hn)
			dv.Deltas[hn] = delta
			qs := make(map[float64]snapshot.Value, len(Quantiles))
			for _, q := range Quantiles {
				qs[q] = delta.Quantile(q)
			}
			dv.Quantiles[hn] = qs
		}
		w := &span{chain: chain, secs: elapsed, dv: dv}
		for i := range families.Rows {
			w.row = &families.Rows[i]
			for _, win := range w.row.Windows {
				switch {
				case win.ByLabel != nil:
					by := *win.ByLabel(dv)
					for key := range keysOf(chain, w.row) {
						by[key] = increase(chain, func(m *snapshot.Model) snapshot.Value { return snapshot.Some((*w.row.Map(m))[key]) }).V / elapsed
					}
				case win.Field != nil:
					*win.Field(dv) = win.Of(w)
				default:
					dv.Series[win.Series] = win.Of(w)
				}
			}
		}
		out[name] = dv
	}
	return out
}

// sumValues is the sum of a map's values.
func sumValues(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// increase sums a counter's increases along chain, a decrease counting as
// a reset (the newer value is the increase since it). It is absent when
// either end lacks the counter; readings in between that lack it are
// skipped.
func increase(chain []*snapshot.Model, get func(*snapshot.Model) snapshot.Value) snapshot.Value {
	prev := get(chain[0])
	if !prev.OK || !get(chain[len(chain)-1]).OK {
		return snapshot.Value{}
	}
	total := 0.0
	for _, m := range chain[1:] {
		v := get(m)
		if !v.OK {
			continue
		}
		if v.V < prev.V {
			total += v.V
		} else {
			total += v.V - prev.V
		}
		prev = v
	}
	return snapshot.Some(total)
}

// histogramIncrease is the bucket-wise increase of histogram hn along chain
// (whose last element has it). A reading without it counts as empty: V0's
// multiprocess mode creates a histogram on its first observation, and a
// restarted V0 engine starts without it. Without a reset anywhere along the
// chain this is the difference of the two ends.
func histogramIncrease(chain []*snapshot.Model, hn snapshot.HistogramName) snapshot.Histogram {
	newest := chain[len(chain)-1].Histograms.Get(hn)
	var empty *snapshot.Histogram
	get := func(m *snapshot.Model) snapshot.Histogram {
		if h, ok := m.Histograms.Lookup(hn); ok {
			return h
		}
		if empty == nil {
			empty = &snapshot.Histogram{Bounds: newest.Bounds, Counts: make([]float64, len(newest.Counts))}
		}
		return *empty
	}
	resets := false
	for i := 1; i < len(chain) && !resets; i++ {
		resets = wentDown(get(chain[i]), get(chain[i-1]))
	}
	if !resets {
		delta, _ := newest.Sub(get(chain[0]))
		return delta
	}
	total, _ := get(chain[1]).Sub(get(chain[0]))
	for i := 2; i < len(chain); i++ {
		d, _ := get(chain[i]).Sub(get(chain[i-1]))
		if sum, ok := total.Add(d); ok {
			total = sum
		} else {
			total = d // new bucket layout (vLLM upgraded): only its increase can be kept
		}
	}
	return total
}

// wentDown is what Histogram.Sub calls a reset, tested without allocating:
// a different bucket layout, or a count, sum or bucket that went down.
func wentDown(newer, older snapshot.Histogram) bool {
	if newer.Count < older.Count || newer.Sum < older.Sum || len(newer.Counts) != len(older.Counts) || len(newer.Bounds) != len(older.Bounds) {
		return true
	}
	for i := range newer.Counts {
		if newer.Counts[i] < older.Counts[i] || newer.Bounds[i] != older.Bounds[i] {
			return true
		}
	}
	return false
}
