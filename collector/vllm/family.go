package vllm

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// family is one row of the family table (names.go): everything the exporter
// knows about one vLLM family. The row drives the scanner (which lines are
// read), normalization (where a sample lands in the snapshot and how
// engines combine), the windows derived from it, the exported Descs,
// rendering and the docs table. Code outside the table never names a
// family: to read a new one, add a row (and, when consumers need it typed,
// the snapshot field it fills).
type family struct {
	// Exported is the stable series the family is exported as.
	Exported string
	// Names are vLLM's names for the family, preferred first. The first
	// one present in a scrape wins and the others are ignored: vLLM emits
	// old and new names with identical values during its deprecation
	// periods, and adding them would double-count.
	Names []string
	Type  valueType
	Scope scope
	// Agg says how the samples of one model combine: over data-parallel
	// engines, and over source labels the exporter drops (priority).
	Agg agg

	// Label is a source label kept on the exported series (finished_reason,
	// reason, source, status): the reading is a map by its value, bounded
	// by Limit. "" keeps none.
	Label string
	Limit labelLimit
	// Key, when set, gives a by-label reading's key instead of Label's
	// value: from vLLM's name and the sample's labels (kv_offload's older
	// transfer_type "CPU_to_GPU" and newer kv_offload_load_* both land on
	// tier "cpu" of the load row). ok false: the sample is not this row's.
	Key func(fam string, l labels) (key string, ok bool)
	// FromLabel: the value is this label of the samples (a number: "None",
	// negative or non-finite values are absent), not the sample value.
	FromLabel string
	// InfoLabels are the labels an info family re-exports (its open label
	// set is stored whole in the snapshot).
	InfoLabels []string
	// State sets: StateLabel names the state; States are the known ones,
	// most awake first; KeyLabel ("" none) names what each state is of (a
	// resource).
	StateLabel, KeyLabel string
	States               []string
	// Unit is a histogram's unit, the last part of Exported (seconds,
	// bytes; "" for a count), named in its HELP and its window series'.
	Unit string
	// ByPriority names the exported per-`priority` histogram (kept only
	// with --vllm.per-priority, at most MaxPriorities values); "" none.
	ByPriority, ByPriorityHelp string

	// Help is the exported series' HELP; for a histogram, what it measures
	// (the cumulative and window series' HELP are built from it).
	// EngineHelp is the HELP of the per-engine series (Scope scopeEngine).
	Help, EngineHelp string
	// Versions documents which vLLM versions emit which name.
	Versions string
	// Expected says for which detected schemas a missing family is reported
	// by vllm_exporter_expected_metric_missing.
	Expected func(schema string, has func(name string) bool) bool

	// Where a reading lands in the snapshot: exactly one of Value (with
	// Count for aggSumCount), Map (with Label), Info, State, StateMap (with
	// KeyLabel), Hist or Server is set; Engine is the per-engine view of
	// Value. TestFamilyRowsAreWellFormed checks each row.
	Value    func(*snapshot.Model) *snapshot.Value
	Count    func(*snapshot.Model) *snapshot.Value
	Engine   func(*snapshot.EngineGauges) *snapshot.Value
	Map      func(*snapshot.Model) *map[string]float64
	Info     func(*snapshot.Model) *map[string]string
	State    func(*snapshot.Model) *string
	StateMap func(*snapshot.Model) *map[string]string
	Hist     snapshot.HistogramName
	Server   func(*snapshot.VLLM) *map[string]float64
	// Labels reads a sample whose meaning is in its label values
	// (vllm:lora_requests_info's adapter lists) into the model, returning
	// how many values it dropped past a bound; it must give the same
	// result when several rows read the same family. Map or Out is then
	// what the row exports, and Share hands a server-wide reading to every
	// model.
	Labels func(m *snapshot.Model, l labels, v float64) (dropped int)
	Share  func(server, m *snapshot.Model)

	// Settle, when set, recomputes what a model's readings of several
	// families mean together (the sleep verdict); it runs after every
	// sample was read, for every model, when the family was present, and
	// must give the same result when it runs again.
	Settle func(*snapshot.Model)
	// Out, when set, is the exported value, computed from the readings
	// (a verdict, a sum over a server-wide map) instead of the reading
	// itself. Absent values export nothing.
	Out func(*snapshot.VLLM, *snapshot.Model) snapshot.Value
	// Windows are the values the row derives over each window (derive.go),
	// exported as gauges with --vllm.opt-in=window-series.
	Windows []window
	// WindowOnly: the family is exported only through its Windows (the
	// first named Exported); it has no series of its own.
	WindowOnly bool
	// OptIn: the family is read (verdicts may use it) but exported only
	// when --vllm.opt-in names Exported: no shipped alert, panel or
	// verdict reads its series, so by default it costs no series.
	OptIn bool
}

// valueType is the exported series' type.
type valueType int

const (
	typeGauge     valueType = iota
	typeCounter             // a counter; the exported series keeps `_total`
	typeHistogram           // vLLM's buckets re-exported
	typeInfo                // labels only, value 1
	typeStateSet            // one sample per state, value 1 for the current one
)

func (t valueType) String() string {
	return [...]string{"gauge", "counter", "histogram", "info", "state set"}[t]
}

func (t valueType) prom() prometheus.ValueType {
	if t == typeCounter {
		return prometheus.CounterValue
	}
	return prometheus.GaugeValue
}

// scope is what the family's samples describe.
type scope int

const (
	scopeModel  scope = iota // a sample carries model_name; one without is not ours
	scopeEngine              // per model, and per data-parallel engine (vllm_engine_* series)
	scopeServer              // no model_name: the whole server; applies to every model
	// scopeModelOrServer: per model where a sample has model_name, else the
	// whole server (vLLM documents it labelled by engine only).
	scopeModelOrServer
)

func (s scope) String() string {
	return [...]string{"per model", "per model and engine", "server-wide (every model)", "per model; without model_name server-wide"}[s]
}

// agg is how the samples of one model combine.
type agg int

const (
	aggSum        agg = iota
	aggMax            // a ratio of one engine's pool
	aggMin            // a health or awake flag
	aggMean           // a per-GPU counter of each engine's GPUs
	aggBuckets        // a histogram: bucket-wise sum
	aggSumCount       // a token histogram: only _sum and _count are read (buckets skipped unparsed), summed
	aggFirst          // the first sample (an info family, identical on every engine)
	aggLeastAwake     // a state set: the least awake current state
	aggLatest         // the sample with the largest value (a timestamp): lora_requests_info
)

func (a agg) String() string {
	return [...]string{"sum", "max", "min", "mean", "bucket-wise sum", "sum of _sum and _count", "first sample", "least awake state", "latest sample (largest value)"}[a]
}

// labelLimit bounds the distinct values of a kept label per model. Past
// it, a sample is dropped: counted under Drop in
// vllm_exporter_samples_dropped_total when Drop is set, else as an
// unexpected label value.
type labelLimit struct {
	Max  int
	Drop string
}

// mapLimit is the bound of the label-keyed maps that are not vLLM's own
// enumerations.
var mapLimit = labelLimit{Max: maxMapLabels}

// missingLabel is the vLLM name reported when f is expected but absent: the
// name the detected schema would use.
func (f *family) missingLabel(schema string) string {
	if schema == SchemaV1 {
		return f.Names[0]
	}
	return f.Names[len(f.Names)-1]
}

// labels are the exported series' label names.
func (f *family) labels() []string {
	switch {
	case f.Out != nil:
		return []string{"model"}
	case f.Info != nil:
		return append([]string{"model"}, f.InfoLabels...)
	case f.StateMap != nil:
		return []string{"model", f.KeyLabel, f.StateLabel}
	case f.Label != "":
		return []string{"model", f.Label}
	}
	return []string{"model"}
}

// help is the exported series' HELP.
func (f *family) help() string {
	if f.Type == typeHistogram {
		return f.Help + f.inUnit() + ", vLLM's buckets summed over engines; from " + joinOr(f.Names) + "."
	}
	return f.Help
}

// windowHelp is the HELP of a histogram's window quantiles.
func (f *family) windowHelp() string {
	return f.Help + f.inUnit() + ", quantiles over the window (histogram_quantile of bucket increases, absent when the window saw no observation), _sum and _count cumulative; from " + joinOr(f.Names) + "."
}

func (f *family) inUnit() string {
	if f.Unit == "" {
		return ""
	}
	return " in " + f.Unit
}

// windowSeries names a histogram's window quantiles: Exported with
// "_window" before its unit (vllm_time_to_first_token_window_seconds).
func (f *family) windowSeries() string {
	if f.Unit == "" {
		return f.Exported + "_window"
	}
	return strings.TrimSuffix(f.Exported, "_"+f.Unit) + "_window_" + f.Unit
}

func joinOr(names []string) string { return strings.Join(names, " or ") }

// key is a by-label reading's key for a sample with labels l; ok false:
// the sample is not this row's.
func (f *family) key(fam string, l labels) (string, bool) {
	if f.Key != nil {
		return f.Key(fam, l)
	}
	return l.get(f.Label), true
}

// sample reads one gauge, counter, info or state-set sample of family f
// (vLLM name fam) into the scrape.
func (rd *reading) sample(f *family, fam string, l labels, v float64) {
	modelName, hasModel := l.lookup("model_name")
	var mod *snapshot.Model
	switch {
	case f.Server != nil:
		p := f.Server(rd.vllm)
		*p = rd.putBounded(fam, f.Label, f.Limit.Max, *p, l.get(f.Label), v)
		return
	case f.Scope == scopeServer || (f.Scope == scopeModelOrServer && !hasModel):
		mod = rd.server
	case !hasModel:
		return // every engine metric carries model_name; anything else is not ours
	default:
		if mod = rd.modelFor(modelName); mod == nil {
			return
		}
	}
	switch {
	case f.Labels != nil:
		if n := f.Labels(mod, l, v); n > 0 {
			rd.r.drop(f.Limit.Drop, func() string {
				return fmt.Sprintf("%s: %d %s values dropped: more than %d", fam, n, f.Label, f.Limit.Max)
			})
			rd.r.dropped[f.Limit.Drop] += float64(n - 1) // one per value, as counted
		}
	case f.Info != nil:
		if p := f.Info(mod); *p == nil {
			*p = map[string]string{}
			for n, v := range l.all() {
				if n != "engine" {
					(*p)[n] = v
				}
			}
		}
	case f.State != nil || f.StateMap != nil:
		rd.state(f, fam, mod, l, v)
	default:
		rd.scalar(f, fam, mod, modelName, l, v)
	}
}

// scalar reads a gauge or counter sample (or a number from a label).
func (rd *reading) scalar(f *family, fam string, mod *snapshot.Model, modelName string, l labels, v float64) {
	if f.FromLabel != "" {
		n := labelNumber(l, f.FromLabel)
		if !n.OK {
			return
		}
		v = n.V
	}
	if f.Map != nil {
		rd.byLabel(f, fam, mod, modelName, l, v)
		return
	}
	combine(f.Agg, f.Value(mod), v)
	if f.Agg == aggMean {
		if rd.means == nil {
			rd.means = map[meanKey]int{}
		}
		rd.means[meanKey{mod, f}]++
	}
	if f.Engine != nil && mod != rd.server {
		combine(f.Agg, f.Engine(rd.engineFor(modelName, l.get("engine"))), v)
	}
}

// byLabel adds v to the model's map by f.Label's value, within f.Limit.
func (rd *reading) byLabel(f *family, fam string, mod *snapshot.Model, modelName string, l labels, v float64) {
	p := f.Map(mod)
	key, ok := f.key(fam, l)
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
func (rd *reading) state(f *family, fam string, mod *snapshot.Model, l labels, v float64) {
	if v != 1 {
		return
	}
	st := l.get(f.StateLabel)
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
	key := l.get(f.KeyLabel)
	old, seen := (*p)[key]
	if !seen && len(*p) >= mapLimit.Max {
		rd.unexpected(fam, f.KeyLabel, key)
		return
	}
	if !seen || stateRank(f, old) < rank {
		(*p)[key] = st
	}
}

// stateRank is st's position in f.States (higher: less awake), -1 if unknown.
func stateRank(f *family, st string) int {
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
func (rd *reading) histogram(f *family, fam string, c *child) {
	modelName, ok := c.labels.lookup("model_name")
	if !ok {
		return
	}
	mod := rd.modelFor(modelName)
	if mod == nil {
		return
	}
	cached := rd.n.bounds[fam]
	h, problem := c.histogram(f.Agg == aggSumCount, cached)
	if problem != "" {
		rd.r.drop(DropInvalidHistogram, func() string { return fmt.Sprintf("%s (%s): %s", fam, c.labels.text, problem) })
		rd.voided = append(rd.voided, void{f: f, model: modelName})
		return
	}
	if f.Agg == aggSumCount {
		add(f.Value(mod), h.Sum)
		add(f.Count(mod), h.Count)
		return
	}
	if len(h.Bounds) > 0 && (len(cached) == 0 || &h.Bounds[0] != &cached[0]) {
		rd.n.bounds[fam] = h.Bounds
	}
	if p, ok := c.labels.lookup("priority"); ok && rd.n.perPriority && f.ByPriority != "" {
		rd.addPriority(mod, p, f.Hist, fam, h)
	}
	if sum, seen := mod.Histograms.Lookup(f.Hist); seen {
		// sum's Counts were made for this scrape: the engines add into them.
		if !sum.AddInPlace(h) {
			rd.r.drop(DropBucketMismatch, func() string {
				return fmt.Sprintf("%s: engines of model %q have different buckets; engine %q dropped", fam, mod.Name, c.labels.get("engine"))
			})
			return
		}
		h = sum
	}
	mod.Histograms.Set(f.Hist, h)
}

// applyServer adds family f's server-wide reading to model m, combined as
// the row says.
func (f *family) applyServer(server, m *snapshot.Model) {
	switch {
	case f.Share != nil:
		f.Share(server, m)
	case f.Info != nil:
		if p := f.Info(m); *p == nil {
			*p = *f.Info(server)
		}
	case f.Value != nil && f.Hist == "" && f.Agg != aggSumCount:
		if v := *f.Value(server); v.OK {
			combine(f.Agg, f.Value(m), v.V)
		}
	}
}

// combine folds x into v.
func combine(a agg, v *snapshot.Value, x float64) {
	switch a {
	case aggMax:
		maxOf(v, x)
	case aggMin:
		minOf(v, x)
	case aggFirst:
		if !v.OK {
			*v = snapshot.Some(x)
		}
	default:
		add(v, x)
	}
}

// labelNumber reads a numeric label (vllm:cache_config_info's); "None",
// empty, negative or non-finite values are absent.
func labelNumber(l labels, key string) snapshot.Value {
	s, ok := l.lookup(key)
	if !ok {
		return snapshot.Value{}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return snapshot.Value{}
	}
	return snapshot.Some(f)
}

// familyDescs are the Descs of one row's series (nil where it has none):
// windows by Windows' place (nil for a value only read in process).
type familyDescs struct {
	series, engine, window, priority *prometheus.Desc
	windows                          []*prometheus.Desc
}

// descs makes the row's Descs.
func (f *family) descs() familyDescs {
	var d familyDescs
	if !f.WindowOnly {
		d.series = prometheus.NewDesc(f.Exported, f.help(), f.labels(), nil)
	}
	if f.Engine != nil {
		d.engine = prometheus.NewDesc(engineSeries(f.Exported), f.EngineHelp, []string{"model", "engine"}, nil)
	}
	if f.Hist != "" {
		d.window = prometheus.NewDesc(f.windowSeries(), f.windowHelp(), []string{"model", "window"}, nil)
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

// engineSeries names the per-engine view of an exported series.
func engineSeries(exported string) string {
	return "vllm_engine_" + strings.TrimPrefix(exported, "vllm_")
}

// render sends the row's series for model m of snapshot v.
func (f *family) render(d familyDescs, e sink, v *snapshot.VLLM, m *snapshot.Model) {
	if d.series == nil {
		return
	}
	name, t := m.Name, f.Type.prom()
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
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| exported series | type | scope | engines combined by | labels kept | vLLM source (preferred first) | versions |\n|---|---|---|---|---|---|---|\n")
	for i := range families {
		f := &families[i]
		names := make([]string, len(f.Names))
		for i, n := range f.Names {
			names[i] = "`" + n + "`"
		}
		var kept []string
		if l := f.labels()[1:]; len(l) > 0 {
			kept = append(kept, "`"+strings.Join(l, "`, `")+"`")
		}
		if f.Engine != nil {
			kept = append(kept, "`engine` in `"+engineSeries(f.Exported)+"`")
		}
		if f.ByPriority != "" {
			kept = append(kept, "`priority` in `"+f.ByPriority+"`")
		}
		if len(kept) == 0 {
			kept = []string{"–"}
		}
		typ := f.Type.String()
		if f.WindowOnly {
			typ += " (per window)"
		}
		if f.OptIn {
			typ += " (opt-in)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s |\n", f.Exported, typ, f.Scope, f.Agg, strings.Join(kept, "; "), strings.Join(names, ", "), f.Versions)
	}
	return b.String()
}
