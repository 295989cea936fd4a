package vllm

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// engineOf is a sample's data-parallel engine: vLLM's engine label,
// SGLang's dp_rank.
func engineOf(l families.Labels) string {
	if e, ok := l.Lookup("engine"); ok {
		return e
	}
	return l.Get("dp_rank")
}

// sample reads one gauge, counter, info or state-set sample of family f
// (the server's name n) into the scrape.
func (rd *reading) sample(f *families.Family, n families.Name, l families.Labels, v float64) {
	if n.Keep != nil && !n.Keep(l) {
		return
	}
	fam := n.Name
	modelName, hasModel := rd.modelOf(l)
	var mod *snapshot.Model
	switch {
	case f.Server != nil:
		p := f.Server(rd.vllm)
		*p = rd.putBounded(fam, f.Label, f.Limit.Max, *p, l.Get(f.Label), v)
		return
	case f.Scope == families.ScopeServer || (f.Scope == families.ScopeModelOrServer && !hasModel):
		mod = rd.server
	case !hasModel:
		return // every engine metric carries model_name; anything else is not ours
	default:
		if mod = rd.modelFor(modelName); mod == nil {
			return
		}
	}
	switch {
	case f.ReadLabels != nil:
		if n := f.ReadLabels(mod, l, v); n > 0 {
			rd.r.drop(f.Limit.Drop, func() string {
				return fmt.Sprintf("%s: %d %s values dropped: more than %d", fam, n, f.Label, f.Limit.Max)
			})
			rd.r.dropped[f.Limit.Drop] += float64(n - 1) // one per value, as counted
		}
	case f.Info != nil:
		if p := f.Info(mod); *p == nil {
			*p = map[string]string{}
			for n, v := range l.All() {
				if n != "engine" {
					(*p)[n] = v
				}
			}
		}
	case f.State != nil || f.StateMap != nil:
		rd.state(f, fam, mod, l, v)
	default:
		rd.scalar(f, n, mod, modelName, l, v)
	}
}

// scalar reads a gauge or counter sample (or a number from a label).
func (rd *reading) scalar(f *families.Family, n families.Name, mod *snapshot.Model, modelName string, l families.Labels, v float64) {
	fam := n.Name
	if n.FromLabel != "" {
		x := families.LabelNumber(l, n.FromLabel)
		if !x.OK {
			return
		}
		v = x.V
	}
	if f.Map != nil {
		rd.byLabel(f, fam, mod, modelName, l, v)
		return
	}
	combine(f.Agg, f.Value(mod), v)
	if f.Agg == families.Mean {
		if rd.means == nil {
			rd.means = map[meanKey]int{}
		}
		rd.means[meanKey{mod, f}]++
	}
	if f.Engine != nil && mod != rd.server {
		combine(f.Agg, f.Engine(rd.engineFor(modelName, engineOf(l))), v)
	}
}

// byLabel adds v to the model's map by f.Label's value, within f.Limit.
func (rd *reading) byLabel(f *families.Family, fam string, mod *snapshot.Model, modelName string, l families.Labels, v float64) {
	p := f.Map(mod)
	key, ok := f.KeyOf(fam, l)
	if !ok {
		return
	}
	if f.Limit.Drop == "" {
		*p = rd.putBounded(fam, f.Label, f.Limit.Max, *p, key, v)
		return
	}
	if *p == nil {
		*p = map[string]float64{}
	}
	if _, seen := (*p)[key]; !seen && len(*p) >= f.Limit.Max {
		rd.r.drop(f.Limit.Drop, func() string {
			return fmt.Sprintf("%s %q of model %q dropped: more than %d values", f.Label, key, modelName, f.Limit.Max)
		})
		return
	}
	(*p)[key] += v
}

// state reads one sample of a state set: per key (f.KeyLabel's value), the
// least awake current state over engines wins. A state outside f.States
// is not guessed at: counted as unexpected and ignored.
func (rd *reading) state(f *families.Family, fam string, mod *snapshot.Model, l families.Labels, v float64) {
	if v != 1 {
		return
	}
	st := l.Get(f.StateLabel)
	rank := stateRank(f, st)
	if rank < 0 {
		rd.unexpected(fam, f.StateLabel, st)
		return
	}
	if f.State != nil {
		if p := f.State(mod); *p == "" || stateRank(f, *p) < rank {
			*p = st
		}
		return
	}
	p := f.StateMap(mod)
	if *p == nil {
		*p = map[string]string{}
	}
	key := l.Get(f.KeyLabel)
	old, seen := (*p)[key]
	if !seen && len(*p) >= families.MapLimit.Max {
		rd.unexpected(fam, f.KeyLabel, key)
		return
	}
	if !seen || stateRank(f, old) < rank {
		(*p)[key] = st
	}
}

// stateRank is st's position in f.States (higher: less awake), -1 if unknown.
func stateRank(f *families.Family, st string) int {
	for i, s := range f.States {
		if s == st {
			return i
		}
	}
	return -1
}

// histogram adds one child of a histogram family to the model (a token
// histogram's _sum and _count to its Value and Count), and to its
// per-priority view when kept. A child that is not a histogram leaves the
// model's histogram absent this scrape: summed without it, the engines'
// total would be wrong.
func (rd *reading) histogram(f *families.Family, n families.Name, c *child) {
	fam := n.Name
	modelName, ok := rd.modelOf(c.labels)
	if !ok || n.Keep != nil && !n.Keep(c.labels) {
		return
	}
	mod := rd.modelFor(modelName)
	if mod == nil {
		return
	}
	cached := rd.n.bounds[fam]
	h, problem := c.histogram(f.Agg == families.SumCount, cached)
	if problem != "" {
		rd.r.drop(DropInvalidHistogram, func() string { return fmt.Sprintf("%s (%s): %s", fam, c.labels.Text, problem) })
		rd.voided = append(rd.voided, void{f: f, model: modelName})
		return
	}
	if f.Agg == families.SumCount {
		add(f.Value(mod), h.Sum)
		add(f.Count(mod), h.Count)
		return
	}
	if len(h.Bounds) > 0 && (len(cached) == 0 || &h.Bounds[0] != &cached[0]) {
		rd.n.bounds[fam] = h.Bounds
	}
	if p, ok := c.labels.Lookup("priority"); ok && rd.n.perPriority && f.ByPriority != "" {
		rd.addPriority(mod, p, f.Hist, fam, h)
	}
	if sum, seen := mod.Histograms.Lookup(f.Hist); seen {
		// sum's Counts were made for this scrape: the engines add into them.
		if !sum.AddInPlace(h) {
			rd.r.drop(DropBucketMismatch, func() string {
				return fmt.Sprintf("%s: engines of model %q have different buckets; engine %q dropped", fam, mod.Name, c.labels.Get("engine"))
			})
			return
		}
		h = sum
	}
	mod.Histograms.Set(f.Hist, h)
}

// applyServer adds row f's server-wide reading to model m, combined as
// the row says.
func applyServer(f *families.Family, server, m *snapshot.Model) {
	switch {
	case f.Share != nil:
		f.Share(server, m)
	case f.Info != nil:
		if p := f.Info(m); *p == nil {
			*p = *f.Info(server)
		}
	case f.Value != nil && f.Hist == "" && f.Agg != families.SumCount:
		if v := *f.Value(server); v.OK {
			combine(f.Agg, f.Value(m), v.V)
		}
	}
}

// combine folds x into v.
func combine(a families.Agg, v *snapshot.Value, x float64) {
	switch a {
	case families.Max:
		maxOf(v, x)
	case families.Min:
		minOf(v, x)
	case families.First:
		if !v.OK {
			*v = snapshot.Some(x)
		}
	default:
		add(v, x)
	}
}

// promType is the exported series' value type.
func promType(t families.Type) prometheus.ValueType {
	if t == families.Counter {
		return prometheus.CounterValue
	}
	return prometheus.GaugeValue
}

// familyDescs are the Descs of one row's series (nil where it has none):
// windows by Windows' place (nil for a value only read in process).
type familyDescs struct {
	series, engine, window, priority *prometheus.Desc
	windows                          []*prometheus.Desc
}

// descsOf makes row f's Descs.
func descsOf(f *families.Family) familyDescs {
	var d familyDescs
	if !f.WindowOnly {
		d.series = prometheus.NewDesc(f.Exported, f.SeriesHelp(), f.SeriesLabels(), nil)
	}
	if f.Engine != nil {
		d.engine = prometheus.NewDesc(families.EngineSeries(f.Exported), f.EngineHelp, []string{"model", "engine"}, nil)
	}
	if f.Hist != "" {
		d.window = prometheus.NewDesc(f.WindowSeries(), f.WindowHelp(), []string{"model", "window"}, nil)
	}
	if f.ByPriority != "" {
		d.priority = prometheus.NewDesc(f.ByPriority, f.ByPriorityHelp, []string{"model", "priority"}, nil)
	}
	for _, w := range f.Windows {
		var wd *prometheus.Desc
		if w.Series != "" {
			labels := []string{"model", "window"}
			if w.ByLabel != nil {
				labels = append(labels, f.Label)
			}
			wd = prometheus.NewDesc(w.Series, w.Help, labels, nil)
		}
		d.windows = append(d.windows, wd)
	}
	return d
}

// render sends row f's series for model m of snapshot v.
func render(f *families.Family, d familyDescs, e sink, v *snapshot.VLLM, m *snapshot.Model) {
	if d.series == nil {
		return
	}
	name, t := m.Name, promType(f.Type)
	switch {
	case f.Out != nil:
		e.value(d.series, t, f.Out(v, m), name)
	case f.Hist != "":
		if h, ok := m.Histograms.Lookup(f.Hist); ok {
			e.histogram(d.series, h, name)
		}
		for _, p := range sortedKeys(m.ByPriority) {
			if h, ok := m.ByPriority[p][f.Hist]; ok && d.priority != nil {
				e.histogram(d.priority, h, name, p)
			}
		}
	case f.Map != nil:
		mp := *f.Map(m)
		for _, k := range sortedKeys(mp) {
			e.emit(d.series, t, mp[k], name, k)
		}
	case f.Info != nil:
		info := *f.Info(m)
		if info == nil {
			return
		}
		lv := make([]string, 0, 1+len(f.InfoLabels))
		lv = append(lv, name)
		for _, l := range f.InfoLabels {
			lv = append(lv, info[l])
		}
		e.emit(d.series, t, 1, lv...)
	case f.StateMap != nil:
		st := *f.StateMap(m)
		for _, k := range sortedKeys(st) {
			e.emit(d.series, t, 1, name, k, st[k])
		}
	case f.Value != nil:
		e.value(d.series, t, *f.Value(m), name)
		for _, en := range sortedKeys(m.PerEngine) {
			if d.engine != nil {
				e.value(d.engine, t, *f.Engine(m.PerEngine[en]), name, en)
			}
		}
	}
}

// MarkdownTable renders the family table for docs/exporter.md.
func MarkdownTable() string { return families.MarkdownTable() }
