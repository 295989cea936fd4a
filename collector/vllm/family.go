package vllm

import (
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vllm-exporter/vllm_exporter/internal/exposition"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// family is one row of the family table (names.go): everything the exporter
// knows about one vLLM family. The row drives the line filter (which lines
// reach the parser), normalization (where a sample lands in the snapshot
// and how engines combine), the exported Desc, rendering and the docs
// table. Code outside the table never names a family: to read a new one,
// add a row (and, when consumers need it typed, the snapshot field it
// fills).
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
	Key func(fam string, labels map[string]string) (key string, ok bool)
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
	Labels func(m *snapshot.Model, labels map[string]string, v float64) (dropped int)
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
	// WindowOnly: the family is exported only through the window series
	// named Exported (metrics.go's windowSeries); it has no series of its own.
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

// lookup returns the family's first name present in fams.
func (f *family) lookup(fams map[string]*dto.MetricFamily) *dto.MetricFamily {
	for _, name := range f.Names {
		if mf := fams[name]; mf != nil {
			return mf
		}
	}
	return nil
}

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

// sample reads one sample of family f (vLLM name fam) into the scrape.
func (rd *reading) sample(f *family, fam string, m *dto.Metric) {
	labels := rd.labels
	modelName, hasModel := labels["model_name"]
	var mod *snapshot.Model
	switch {
	case f.Server != nil:
		if v, ok := scalar(m); ok {
			p := f.Server(rd.vllm)
			*p = rd.putBounded(fam, f.Label, f.Limit.Max, *p, labels[f.Label], v)
		}
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
		if v, ok := scalar(m); ok {
			if n := f.Labels(mod, labels, v); n > 0 {
				rd.r.drop(f.Limit.Drop, fmt.Sprintf("%s: %d %s values dropped: more than %d", fam, n, f.Label, f.Limit.Max))
				rd.r.dropped[f.Limit.Drop] += float64(n - 1) // one per value, as counted
			}
		}
	case f.Hist != "":
		rd.histogram(f, fam, mod, m)
	case f.Agg == aggSumCount:
		if dh := m.GetHistogram(); dh != nil {
			add(f.Value(mod), dh.GetSampleSum())
			add(f.Count(mod), count(dh.SampleCountFloat, dh.GetSampleCount()))
		}
	case f.Info != nil:
		if p := f.Info(mod); *p == nil {
			*p = maps.Clone(labels) // labels is reused
			delete(*p, "engine")
		}
	case f.State != nil || f.StateMap != nil:
		rd.state(f, fam, mod, m)
	default:
		rd.scalar(f, fam, mod, modelName, m)
	}
}

// scalar reads a gauge or counter sample (or a number from a label).
func (rd *reading) scalar(f *family, fam string, mod *snapshot.Model, modelName string, m *dto.Metric) {
	var v float64
	if f.FromLabel != "" {
		n := labelNumber(rd.labels, f.FromLabel)
		if !n.OK {
			return
		}
		v = n.V
	} else {
		var ok bool
		if v, ok = scalar(m); !ok {
			return
		}
	}
	if f.Map != nil {
		rd.byLabel(f, fam, mod, modelName, v)
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
		combine(f.Agg, f.Engine(rd.engineFor(modelName, rd.labels["engine"])), v)
	}
}

// byLabel adds v to the model's map by f.Label's value, within f.Limit.
func (rd *reading) byLabel(f *family, fam string, mod *snapshot.Model, modelName string, v float64) {
	p := f.Map(mod)
	key := rd.labels[f.Label]
	if f.Key != nil {
		var ok bool
		if key, ok = f.Key(fam, rd.labels); !ok {
			return
		}
	}
	if f.Limit.Drop == "" {
		*p = rd.putBounded(fam, f.Label, f.Limit.Max, *p, key, v)
		return
	}
	if *p == nil {
		*p = map[string]float64{}
	}
	if _, seen := (*p)[key]; !seen && len(*p) >= f.Limit.Max {
		rd.r.drop(f.Limit.Drop, fmt.Sprintf("%s %q of model %q dropped: more than %d values", f.Label, key, modelName, f.Limit.Max))
		return
	}
	(*p)[key] += v
}

// state reads one sample of a state set: per key (f.KeyLabel's value), the
// least awake current state over engines wins. A state outside f.States
// is not guessed at: counted as unexpected and ignored.
func (rd *reading) state(f *family, fam string, mod *snapshot.Model, m *dto.Metric) {
	v, ok := scalar(m)
	if !ok || v != 1 {
		return
	}
	st := rd.labels[f.StateLabel]
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
	key := rd.labels[f.KeyLabel]
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

// histogram adds one child of a histogram family to the model, and to its
// per-priority view when kept.
func (rd *reading) histogram(f *family, fam string, mod *snapshot.Model, m *dto.Metric) {
	h, err := rd.n.histogram(fam, m)
	if err != nil {
		rd.r.drop(DropInvalidHistogram, err.Error())
		return
	}
	if sum, seen := mod.Histograms.Lookup(f.Hist); seen {
		// sum's Counts were made by n.histogram for this scrape: the
		// engines are added into them.
		if !sum.AddInPlace(h) {
			rd.r.drop(DropBucketMismatch, fmt.Sprintf("%s: engines of model %q have different buckets; engine %q dropped", fam, mod.Name, rd.labels["engine"]))
			return
		}
		h = sum
	}
	mod.Histograms.Set(f.Hist, h)
	if p, ok := rd.labels["priority"]; ok && rd.n.perPriority && f.ByPriority != "" {
		rd.n.addPriority(mod, p, f.Hist, fam, m, rd.unexpected)
	}
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
func labelNumber(labels map[string]string, key string) snapshot.Value {
	s, ok := labels[key]
	if !ok {
		return snapshot.Value{}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return snapshot.Value{}
	}
	return snapshot.Some(f)
}

// familyDescs are the Descs of one row's series (nil where it has none).
type familyDescs struct {
	series, engine, window, priority *prometheus.Desc
}

// descs makes the row's Descs, recording them in ds (nil: not recorded).
func (f *family) descs(ds exposition.Descs) familyDescs {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		if ds == nil {
			return prometheus.NewDesc(name, help, labels, nil)
		}
		return ds.New(name, help, labels...)
	}
	var d familyDescs
	if !f.WindowOnly {
		d.series = desc(f.Exported, f.help(), f.labels()...)
	}
	if f.Engine != nil {
		d.engine = desc(engineSeries(f.Exported), f.EngineHelp, "model", "engine")
	}
	if f.Hist != "" {
		d.window = desc(f.windowSeries(), f.windowHelp(), "model", "window")
	}
	if f.ByPriority != "" {
		d.priority = desc(f.ByPriority, f.ByPriorityHelp, "model", "priority")
	}
	return d
}

// engineSeries names the per-engine view of an exported series.
func engineSeries(exported string) string {
	return "vllm_engine_" + strings.TrimPrefix(exported, "vllm_")
}

// render appends the row's series for model m of snapshot v.
func (f *family) render(d familyDescs, e exposition.Sink, v *snapshot.VLLM, m *snapshot.Model) {
	if d.series == nil {
		return
	}
	name, t := m.Name, f.Type.prom()
	switch {
	case f.Out != nil:
		e.Value(d.series, t, f.Out(v, m), name)
	case f.Hist != "":
		if h, ok := m.Histograms.Lookup(f.Hist); ok {
			e.Histogram(d.series, h, name)
		}
		if d.priority == nil || m.ByPriority == nil {
			return
		}
		for _, p := range sortedKeys(m.ByPriority) {
			if h, ok := m.ByPriority[p][f.Hist]; ok {
				e.Histogram(d.priority, h, name, p)
			}
		}
	case f.Map != nil:
		mp := *f.Map(m)
		for _, k := range sortedKeys(mp) {
			e.Emit(d.series, t, mp[k], name, k)
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
		e.Emit(d.series, t, 1, lv...)
	case f.StateMap != nil:
		st := *f.StateMap(m)
		for _, k := range sortedKeys(st) {
			e.Emit(d.series, t, 1, name, k, st[k])
		}
	case f.Value != nil:
		e.Value(d.series, t, *f.Value(m), name)
		if d.engine != nil && m.PerEngine != nil {
			for _, en := range sortedKeys(m.PerEngine) {
				e.Value(d.engine, t, *f.Engine(m.PerEngine[en]), name, en)
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
		if d := f.descs(nil); d.engine != nil {
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
