// Package families is the family table: one row per family of an inference
// server's /metrics that the exporter reads (rows.go), and the families it
// knows and leaves unread (ignored.go). A row says everything about one
// family: the engine's names for it by generation with their HELP text, how
// the simulator fills each, how the exporter's scanner reads it, where a
// reading lands in the snapshot, how engines combine, what each window
// derives and what is exported. collector/vllm reads bodies with it,
// internal/vllmsim renders bodies from it, and docs/exporter.md shows it.
// An engine is a column of names: its own generation of Names on the row.
package families

import (
	"fmt"
	"strings"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// Family is one row of the table.
type Family struct {
	// Exported is the stable series the family is exported as.
	Exported string
	// Names are the engine's names for the family, preferred first. The
	// first one present in a scrape wins and the others are ignored: vLLM
	// emits old and new names with identical values during its
	// deprecation periods, and adding them would double-count.
	Names []Name
	Type  Type
	Scope Scope
	// Agg says how the samples of one model combine: over data-parallel
	// engines, and over source labels the exporter drops (priority).
	Agg Agg

	// Label is a source label kept on the exported series (finished_reason,
	// reason, source, status): the reading is a map by its value, bounded
	// by Limit. "" keeps none.
	Label string
	Limit Limit
	// Key, when set, gives a by-label reading's key instead of Label's
	// value: from the engine's name and the sample's labels (kv_offload's
	// older transfer_type "CPU_to_GPU" and newer kv_offload_load_* both
	// land on tier "cpu" of the load row). ok false: the sample is not this
	// row's.
	Key func(fam string, l Labels) (key string, ok bool)
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
	// EngineHelp is the HELP of the per-engine series (Scope ScopeEngine).
	Help, EngineHelp string
	// Versions documents which vLLM versions emit which name.
	Versions string
	// NotFrom says, by server, why the row has no name of that server
	// (docs/'s engine tables; a row without says the server has no such
	// family).
	NotFrom map[string]string
	// Expected says for which detected schemas a missing family is reported
	// by vllm_exporter_expected_metric_missing.
	Expected func(schema string, has func(name string) bool) bool

	// Where a reading lands in the snapshot: exactly one of Value (with
	// Count for SumCount), Map (with Label), Info, State, StateMap (with
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
	// ReadLabels reads a sample whose meaning is in its label values
	// (vllm:lora_requests_info's adapter lists) into the model, returning
	// how many values it dropped past a bound; it must give the same
	// result when several rows read the same family. Map or Out is then
	// what the row exports, and Share hands a server-wide reading to every
	// model.
	ReadLabels func(m *snapshot.Model, l Labels, v float64) (dropped int)
	Share      func(server, m *snapshot.Model)

	// Settle, when set, recomputes what a model's readings of several
	// families mean together (the sleep verdict); it runs after every
	// sample was read, for every model, when the family was present, and
	// must give the same result when it runs again.
	Settle func(*snapshot.Model)
	// Out, when set, is the exported value, computed from the readings
	// (a verdict, a sum over a server-wide map) instead of the reading
	// itself. Absent values export nothing.
	Out func(*snapshot.VLLM, *snapshot.Model) snapshot.Value
	// Windows are the values the row derives over each window, exported
	// as gauges with --vllm.opt-in=window-series.
	Windows []Window
	// WindowOnly: the family is exported only through its Windows (the
	// first named Exported); it has no series of its own.
	WindowOnly bool
	// OptIn: the family is read (verdicts may use it) but exported only
	// when --vllm.opt-in names Exported: no shipped alert, panel or
	// verdict reads its series, so by default it costs no series.
	OptIn bool
}

// Name is one of an engine's names for a family, as its body prints it
// (a counter with its _total).
type Name struct {
	Name string
	// Help is vLLM's HELP text (the newest; the simulator keeps older
	// texts with its older layouts). "" where another row describes the
	// family: a family read by several rows is described once.
	Help string
	// Sim is how the simulator fills it.
	Sim Sim
	// Server is the inference server whose name it is ("" vLLM): an engine
	// is a column of the rows' names (servers.go).
	Server string
	// Plus: read together with the name before it, into the same reading
	// (SGLang's P/D queues wait beside its waiting queue).
	Plus bool
	// Keep, when set, picks the samples the reading takes (the total of a
	// breakdown, one cache tier).
	Keep func(Labels) bool
	// FromLabel: the value is this label of the samples (a number: "None",
	// negative or non-finite values are absent), not the sample value.
	FromLabel string
	// AtCompletion: the server counts it when a request finishes, not at
	// each step, so it stands still while requests run.
	AtCompletion bool
	// Note says, in docs/'s engine tables, how the reading converts.
	Note string
}

// ServerName is the server the name belongs to.
func (n Name) ServerName() string {
	if n.Server == "" {
		return ServerVLLM
	}
	return n.Server
}

// Sim says how the simulator (internal/vllmsim) renders a family.
type Sim struct {
	// Source names the simulator's quantity: a per-engine value or
	// histogram, or a renderer of the family's own children
	// (internal/vllmsim/sources.go); "" the simulator does not emit it.
	Source string
	// Label and Values: the label vLLM adds to model_name and engine, and
	// the children it creates ahead of use, in its order.
	Label  string
	Values []string
	// When names the feature that registers the family ("" always).
	When string
	// PerModel: one series per model, not per data-parallel engine (SGLang's
	// tokenizer process writes it; trtllm-serve writes every family so).
	PerModel bool
	// Buckets are a histogram's default bounds; Tokens: 1-2-5 steps up
	// to max_model_len instead. Custom is its key in vLLM's
	// --custom-histogram-buckets.
	Buckets []float64
	Tokens  bool
	Custom  string
}

// Window is a value a row derives over each window. Series is the gauge
// it is exported as with --vllm.opt-in=window-series (labelled model and
// window, and the row's Label for a ByLabel one); "" keeps it in process.
// Consumers read Field, or Derived.Series by name when Field is nil.
type Window struct {
	Series, Help string
	Field        func(*snapshot.Derived) *snapshot.Value
	// ByLabel, for a by-label row, holds a rate per label value instead.
	ByLabel func(*snapshot.Derived) *map[string]float64
	Of      func(w Span) snapshot.Value
}

// Span is what a window's value is derived from: one model's readings
// through the window (collector/vllm's derive implements it).
type Span interface {
	// Rate divides an increase by the window's length.
	Rate(inc snapshot.Value) snapshot.Value
	// Inc is the increase of the row exported as name ("": the row
	// deriving), a by-label row's summed over its label values.
	Inc(name string) snapshot.Value
	// IncOf is the increase of any reading.
	IncOf(get func(*snapshot.Model) snapshot.Value) snapshot.Value
	// Delta is a histogram's increase.
	Delta(h snapshot.HistogramName) (snapshot.Histogram, bool)
}

// PerSecond is the row's increase per second over the window.
func PerSecond(series, help string, field func(*snapshot.Derived) *snapshot.Value) Window {
	return Window{Series: series, Help: help, Field: field, Of: func(w Span) snapshot.Value { return w.Rate(w.Inc("")) }}
}

// RatioTo is the row's increase over the increase of the row exported as
// of, absent while that one does not grow (hits / queries).
func RatioTo(of, series, help string, field func(*snapshot.Derived) *snapshot.Value) Window {
	return Window{Series: series, Help: help, Field: field, Of: func(w Span) snapshot.Value { return Ratio(w.Inc(""), w.Inc(of)) }}
}

// Ratio is a / b over a window, absent while b does not grow.
func Ratio(a, b snapshot.Value) snapshot.Value {
	if !a.OK || !b.OK || b.V <= 0 {
		return snapshot.Value{}
	}
	return snapshot.Some(a.V / b.V)
}

// Type is the exported series' type.
type Type int

const (
	Gauge     Type = iota
	Counter        // a counter; the exported series keeps `_total`
	Histogram      // vLLM's buckets re-exported
	Info           // labels only, value 1
	StateSet       // one sample per state, value 1 for the current one
)

func (t Type) String() string {
	return [...]string{"gauge", "counter", "histogram", "info", "state set"}[t]
}

// Scope is what the family's samples describe.
type Scope int

const (
	ScopeModel  Scope = iota // a sample carries model_name; one without is not ours
	ScopeEngine              // per model, and per data-parallel engine (vllm_engine_* series)
	ScopeServer              // no model_name: the whole server; applies to every model
	// ScopeModelOrServer: per model where a sample has model_name, else the
	// whole server (vLLM documents it labelled by engine only).
	ScopeModelOrServer
)

func (s Scope) String() string {
	return [...]string{"per model", "per model and engine", "server-wide (every model)", "per model; without model_name server-wide"}[s]
}

// Agg is how the samples of one model combine.
type Agg int

const (
	Sum        Agg = iota
	Max            // a ratio of one engine's pool
	Min            // a health or awake flag
	Mean           // a per-GPU counter of each engine's GPUs
	Buckets        // a histogram: bucket-wise sum
	SumCount       // a histogram read for _sum and _count only (buckets skipped unparsed), summed
	First          // the first sample (an info family, identical on every engine)
	LeastAwake     // a state set: the least awake current state
	Latest         // the sample with the largest value (a timestamp): lora_requests_info
)

func (a Agg) String() string {
	return [...]string{"sum", "max", "min", "mean", "bucket-wise sum", "sum of _sum and _count", "first sample", "least awake state", "latest sample (largest value)"}[a]
}

// Limit bounds the distinct values of a kept label per model. Past it, a
// sample is dropped: counted under Drop in
// vllm_exporter_samples_dropped_total when Drop is set, else as an
// unexpected label value.
type Limit struct {
	Max  int
	Drop string
}

// VLLMType is the type vLLM's TYPE line gives the row's families.
func (f *Family) VLLMType() string {
	switch {
	case f.Agg == Buckets || f.Agg == SumCount:
		return "histogram"
	case f.Type == Counter:
		return "counter"
	}
	return "gauge"
}

// Expects says whether f's absence is news for a body of schema: the row
// says so and the schema's server has a name for it.
func (f *Family) Expects(schema string, has func(string) bool) bool {
	return f.Expected != nil && len(f.NamesOf(ServerOf(schema))) > 0 && f.Expected(schema, has)
}

// MissingLabel is the name reported when f is expected but absent: the
// name the detected schema would use.
func (f *Family) MissingLabel(schema string) string {
	server := ServerOf(schema)
	names := f.NamesOf(server)
	if schema == SchemaV1 || server != ServerVLLM {
		return names[0]
	}
	return names[len(names)-1]
}

// NamesOf are f's names on a server, preferred first.
func (f *Family) NamesOf(server string) []string {
	var out []string
	for _, n := range f.Names {
		if n.ServerName() == server {
			out = append(out, n.Name)
		}
	}
	return out
}

// NameList is f's names.
func (f *Family) NameList() []string {
	out := make([]string, len(f.Names))
	for i, n := range f.Names {
		out[i] = n.Name
	}
	return out
}

// ReadFrom are the names read when f.Names[at] is the first one present:
// it and the Plus names that follow it.
func (f *Family) ReadFrom(at int) []Name {
	end := at + 1
	for end < len(f.Names) && f.Names[end].Plus {
		end++
	}
	return f.Names[at:end]
}

// SeriesLabels are the exported series' label names.
func (f *Family) SeriesLabels() []string {
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

// SeriesHelp is the exported series' HELP.
func (f *Family) SeriesHelp() string {
	if f.Type == Histogram {
		return f.Help + f.inUnit() + ", vLLM's buckets summed over engines; from " + f.sources() + "."
	}
	return f.Help
}

// WindowHelp is the HELP of a histogram's window quantiles.
func (f *Family) WindowHelp() string {
	return f.Help + f.inUnit() + ", quantiles over the window (histogram_quantile of bucket increases, absent when the window saw no observation), _sum and _count cumulative; from " + f.sources() + "."
}

// sources names the vLLM families a HELP says the series comes from.
func (f *Family) sources() string { return strings.Join(f.NamesOf(ServerVLLM), " or ") }

func (f *Family) inUnit() string {
	if f.Unit == "" {
		return ""
	}
	return " in " + f.Unit
}

// WindowSeries names a histogram's window quantiles: Exported with
// "_window" before its unit (vllm_time_to_first_token_window_seconds).
func (f *Family) WindowSeries() string {
	if f.Unit == "" {
		return f.Exported + "_window"
	}
	return strings.TrimSuffix(f.Exported, "_"+f.Unit) + "_window_" + f.Unit
}

// KeyOf is a by-label reading's key for a sample with labels l; ok false:
// the sample is not this row's.
func (f *Family) KeyOf(fam string, l Labels) (string, bool) {
	if f.Key != nil {
		return f.Key(fam, l)
	}
	return l.Get(f.Label), true
}

// EngineSeries names the per-engine view of an exported series.
func EngineSeries(exported string) string {
	return "vllm_engine_" + strings.TrimPrefix(exported, "vllm_")
}

// MarkdownTable renders the table for docs/exporter.md.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| exported series | type | scope | engines combined by | labels kept | vLLM source (preferred first) | versions |\n|---|---|---|---|---|---|---|\n")
	for i := range Rows {
		f := &Rows[i]
		names := f.NamesOf(ServerVLLM)
		for i, n := range names {
			names[i] = "`" + n + "`"
		}
		var kept []string
		if l := f.SeriesLabels()[1:]; len(l) > 0 {
			kept = append(kept, "`"+strings.Join(l, "`, `")+"`")
		}
		if f.Engine != nil {
			kept = append(kept, "`engine` in `"+EngineSeries(f.Exported)+"`")
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
