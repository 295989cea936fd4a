package vllm

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
	"github.com/vllm-exporter/vllm_exporter/internal/modelset"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// Bounds on label values that come from vLLM's body, so that a misbehaving
// or hostile target cannot blow up the exporter's series count. vLLM serves
// one model_name per process (plus LoRA adapters), up to a few dozen
// data-parallel engines, and five finished reasons (2026); values past a
// bound are dropped (counted in vllm_exporter_samples_dropped_total{reason}
// and logged, rate-limited), the first ones in the body kept. The model
// bound is the scraper's modelset (--vllm.max-models, shared with the SLO
// watchdog); MaxModels is its default.
const (
	MaxModels          = modelset.DefaultMax
	MaxEngines         = 64
	MaxFinishedReasons = families.MaxFinishedReasons
	// MaxPriorities bounds the per-priority view: vLLM buckets priorities
	// into five values (<-1, -1, 0, 1, >1); anything past eight is not vLLM.
	MaxPriorities = 8
	// MaxLoRAAdapters bounds the adapters kept per list of
	// vllm:lora_requests_info (running, waiting).
	MaxLoRAAdapters = families.MaxLoRAAdapters
	// MaxLabelValueBytes: a sample with a longer label value is dropped
	// (Prometheus's label_value_length_limit would otherwise fail the whole
	// scrape of the exporter).
	MaxLabelValueBytes = 512
)

// Reasons a sample of vLLM's body is dropped
// (vllm_exporter_samples_dropped_total{reason}).
const (
	DropModelLimit          = "model_limit"                    // a new model_name while --vllm.max-models are tracked
	DropEngineLimit         = "engine_limit"                   // per-engine series beyond MaxEngines (the sample still counts in the model's sum)
	DropFinishedReasonLimit = families.DropFinishedReasonLimit // finished_reason values beyond MaxFinishedReasons
	DropLabelTooLong        = "label_value_too_long"           // a label value longer than MaxLabelValueBytes
	DropInvalidHistogram    = "invalid_histogram"              // a histogram child that is not one (no +Inf, not cumulative, ...): the model's histogram is absent
	DropBucketMismatch      = "bucket_mismatch"                // engines of one model with different bucket layouts
	DropLineTooLong         = "line_too_long"                  // a line of a family the exporter reads longer than 64 KiB, skipped unread
	DropLoRAAdapterLimit    = families.DropLoRAAdapterLimit    // adapters of vllm:lora_requests_info beyond MaxLoRAAdapters per list
	DropDuplicate           = "duplicate"                      // a series the body already had: the first is kept
	DropNonFinite           = "non_finite"                     // NaN or ±Inf in a gauge or counter: the model's reading is absent
	DropNegativeCounter     = "negative_counter"               // a counter below 0: the model's reading is absent
)

var dropReasons = []string{DropModelLimit, DropEngineLimit, DropFinishedReasonLimit, DropLabelTooLong, DropInvalidHistogram,
	DropBucketMismatch, DropLineTooLong, DropLoRAAdapterLimit, DropDuplicate, DropNonFinite, DropNegativeCounter}

// counterFamily says, by famNames' index, which families are counters: a
// negative value there is not a count.
var counterFamily = func() []bool {
	out := make([]bool, len(famNames))
	for i := range families.Rows {
		if families.Rows[i].Type == families.Counter {
			for _, n := range families.Rows[i].Names {
				out[famIndex[n.Name]] = true
			}
		}
	}
	return out
}()

// badValue is why a gauge or counter sample of family fam cannot be read,
// "" when it can: a NaN or infinity is no reading, a negative counter no
// count.
func badValue(fam int, v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return DropNonFinite
	case v < 0 && counterFamily[fam]:
		return DropNegativeCounter
	}
	return ""
}

// normalizer turns a scanned body into per-model snapshot values. It keeps
// the bucket bounds of each histogram family between scrapes so that every
// snapshot in the history shares one bounds slice per family.
type normalizer struct {
	bounds map[string][]float64
	// perPriority keeps TTFT and e2e per `priority` label value.
	perPriority bool
	// admit decides whether a model_name not yet in this scrape may be
	// kept (the scraper's modelset); nil keeps the first MaxModels.
	admit func(name string) bool
	// scratch is the reading of the scrape in progress, kept between
	// scrapes so that its maps are allocated once.
	scratch reading
	// served is the model the server says it serves (/v1/models), which
	// replaces families.PlaceholderModel; "" none.
	served string
}

func newNormalizer() *normalizer { return &normalizer{bounds: map[string][]float64{}} }

// unexpectedKey names a (vLLM family, label) pair whose values were not
// understood, the labels of vllm_exporter_vllm_unexpected_label_values.
type unexpectedKey struct{ Metric, Label string }

// result is one scrape: what the scanner dropped, then what normalize read.
type result struct {
	// vllm holds what the scrape read: schema, models, missing families
	// and the server-wide readings; the scraper adds time and Up.
	vllm     *snapshot.VLLM
	expected []string // vLLM names expected for the schema, sorted
	// unexpected counts, per family and label, the distinct values that
	// were not understood (unknown sleep state, priority past the bound);
	// unexpectedValues holds them for the log.
	unexpected       map[unexpectedKey]int
	unexpectedValues []string
	// dropped counts the samples dropped by reason; detail is the first
	// drop of each reason, for the (rate-limited) log.
	dropped map[string]float64
	detail  map[string]string
}

// drop counts one dropped sample; what describes it for the log, called
// for the first of each reason only (a body may repeat a problem on every
// line).
func (r *result) drop(reason string, what func() string) {
	if r.first(reason) {
		r.detail[reason] = what()
	}
}

// dropLine is drop for a line of the body.
func (r *result) dropLine(reason string, line int, series []byte, why string) {
	if r.first(reason) {
		r.detail[reason] = fmt.Sprintf("line %d (%.200s): %s", line, series, why)
	}
}

// first counts a drop and says whether it is the first of its reason.
func (r *result) first(reason string) bool {
	if r.dropped == nil {
		r.dropped, r.detail = map[string]float64{}, map[string]string{}
	}
	r.dropped[reason]++
	_, seen := r.detail[reason]
	return !seen
}

// reading is the state of one normalization: what the family table's rows
// (family.sample) read into.
type reading struct {
	n    *normalizer
	r    *result
	vllm *snapshot.VLLM
	// server holds the readings of server-wide families (no model_name),
	// applied to every model at the end.
	server  *snapshot.Model
	engines map[string]map[string]*snapshot.EngineGauges // model -> engine -> gauges
	// means counts the samples of each families.Mean reading.
	means          map[meanKey]int
	seenUnexpected map[string]bool
	refused        map[string]bool // model names refused, asked once per scrape
	present        []bool          // by row of families: the family is in the body
	// voided are readings a sample that could not be read leaves absent
	// rather than summed without it.
	voided []void
	// atCompletion: a token counter read counts at request completion.
	atCompletion bool
}

type meanKey struct {
	m *snapshot.Model
	f *families.Family
}

// void is a reading made absent: row f's for model (server: the
// server-wide one), by label value key for a by-label row.
type void struct {
	f          *families.Family
	model, key string
	server     bool
}

// normalize reads every family of the table from a scanned body into r.
func (n *normalizer) normalize(sc *scanner, r *result) {
	v := &snapshot.VLLM{Schema: detectSchema(sc), Models: map[string]*snapshot.Model{}}
	r.vllm, r.unexpected = v, map[unexpectedKey]int{}
	rd := n.reset(r)
	has := func(name string) bool { i, ok := famIndex[name]; return ok && sc.present(i) }
	for i := range families.Rows {
		f := &families.Rows[i]
		expected := f.Expects(v.Schema, has)
		at := slices.IndexFunc(f.Names, func(n families.Name) bool { return has(n.Name) })
		if at < 0 {
			if expected {
				r.expected = append(r.expected, f.MissingLabel(v.Schema))
				v.Missing = append(v.Missing, f.MissingLabel(v.Schema))
			}
			continue
		}
		if expected {
			r.expected = append(r.expected, f.Names[at].Name)
		}
		rd.present[i] = true
		for _, n := range f.ReadFrom(at) {
			idx := famIndex[n.Name]
			rd.atCompletion = rd.atCompletion || n.AtCompletion && len(sc.values[idx]) > 0
			for _, c := range sc.kids[idx] {
				rd.histogram(f, n, c)
			}
			for _, e := range sc.values[idx] {
				rd.sample(f, n, e.labels, e.v)
			}
			for _, e := range sc.bad[idx] {
				rd.void(f, n, e.labels)
			}
		}
	}
	rd.finish()
	sort.Strings(r.expected)
	sort.Strings(v.Missing)
}

// reset readies the normalizer's scratch reading for a new scrape into r:
// what the previous scrape's snapshot holds is handed over, never cleared
// (the engines' inner maps, the server model's readings), only forgotten.
func (n *normalizer) reset(r *result) *reading {
	rd := &n.scratch
	if rd.server == nil {
		rd.server = &snapshot.Model{}
		rd.engines = map[string]map[string]*snapshot.EngineGauges{}
		rd.present = make([]bool, len(families.Rows))
	}
	*rd.server = snapshot.Model{}
	clear(rd.engines)
	clear(rd.means)
	// Allocated anew: a body of rotating names would keep them all.
	rd.seenUnexpected, rd.refused = nil, nil
	clear(rd.present)
	rd.voided = rd.voided[:0]
	rd.atCompletion = false
	rd.n, rd.r, rd.vllm = n, r, r.vllm
	return rd
}

// finish divides the means, voids what samples that could not be read
// leave absent, applies the server-wide readings to every model, settles
// readings that combine families and keeps the per-engine view of
// data-parallel models.
func (rd *reading) finish() {
	for k, n := range rd.means {
		if v := k.f.Value(k.m); n > 1 {
			v.V /= float64(n)
		}
	}
	for _, x := range rd.voided {
		x.apply(rd)
	}
	for name, m := range rd.vllm.Models {
		for i := range families.Rows {
			if f := &families.Rows[i]; rd.present[i] && (f.Scope == families.ScopeServer || f.Scope == families.ScopeModelOrServer) {
				applyServer(f, rd.server, m)
			}
		}
		for i := range families.Rows {
			if f := &families.Rows[i]; rd.present[i] && f.Settle != nil {
				f.Settle(m)
			}
		}
		if e := rd.engines[name]; len(e) > 1 {
			m.PerEngine = e
		}
		m.TokensAtCompletion = rd.atCompletion
	}
}

// apply makes the reading absent.
func (x void) apply(rd *reading) {
	if x.f.Server != nil {
		delete(*x.f.Server(rd.vllm), x.key)
		return
	}
	m := rd.server
	if !x.server {
		if m = rd.vllm.Models[x.model]; m == nil {
			return
		}
	}
	switch f := x.f; {
	case f.Hist != "":
		m.Histograms.Delete(f.Hist)
	case f.Map != nil:
		delete(*f.Map(m), x.key)
	case f.Value != nil:
		*f.Value(m) = snapshot.Value{}
		if f.Count != nil {
			*f.Count(m) = snapshot.Value{}
		}
	}
}

// void records that a sample of row f with labels l could not be read.
func (rd *reading) void(f *families.Family, n families.Name, l families.Labels) {
	if n.Keep != nil && !n.Keep(l) {
		return
	}
	fam := n.Name
	model, hasModel := rd.modelOf(l)
	x := void{f: f, model: model}
	switch {
	case f.Server != nil:
		x.key = l.Get(f.Label)
	case f.Scope == families.ScopeServer || f.Scope == families.ScopeModelOrServer && !hasModel:
		x.server = true
	case !hasModel:
		return
	}
	if f.Map != nil && f.ReadLabels == nil {
		key, ok := f.KeyOf(fam, l)
		if !ok {
			return
		}
		x.key = key
	}
	rd.voided = append(rd.voided, x)
}

// modelOf is a sample's model: its model_name label (SGLang's 2024
// releases: name), the served model where that is a placeholder.
func (rd *reading) modelOf(l families.Labels) (string, bool) {
	m, ok := l.Lookup("model_name")
	if !ok {
		m, ok = l.Lookup("name")
	}
	if ok && m == families.PlaceholderModel && rd.n.served != "" {
		m = rd.n.served
	}
	return m, ok
}

func newModel(name string) *snapshot.Model {
	return &snapshot.Model{Name: name, FinishedByReason: map[string]float64{}}
}

// modelFor returns the model a sample is about, nil when the model bound
// refuses its name.
func (rd *reading) modelFor(name string) *snapshot.Model {
	m := rd.vllm.Models[name]
	if m == nil {
		if rd.refused[name] || !rd.n.admitModel(name, len(rd.vllm.Models)) {
			if rd.refused == nil {
				rd.refused = map[string]bool{}
			}
			rd.refused[name] = true
			rd.r.drop(DropModelLimit, func() string {
				return fmt.Sprintf("model_name %q dropped: --vllm.max-models names already tracked", name)
			})
			return nil
		}
		m = newModel(name)
		rd.vllm.Models[name] = m
	}
	return m
}

// engineFor returns the per-engine gauges of a model's engine; past
// MaxEngines a throwaway (the sample still counts in the model's sum).
func (rd *reading) engineFor(model, engine string) *snapshot.EngineGauges {
	if rd.engines[model] == nil {
		rd.engines[model] = map[string]*snapshot.EngineGauges{}
	}
	e := rd.engines[model][engine]
	if e == nil {
		if len(rd.engines[model]) >= MaxEngines {
			rd.r.drop(DropEngineLimit, func() string {
				return fmt.Sprintf("engine %q of model %q dropped from the per-engine series: more than %d engines", engine, model, MaxEngines)
			})
			return &snapshot.EngineGauges{}
		}
		e = &snapshot.EngineGauges{}
		rd.engines[model][engine] = e
	}
	return e
}

// unexpected counts a label value that was not understood, once per scrape.
func (rd *reading) unexpected(family, label, value string) {
	k := family + "\x00" + label + "\x00" + value
	if rd.seenUnexpected[k] {
		return
	}
	if rd.seenUnexpected == nil {
		rd.seenUnexpected = map[string]bool{}
	}
	rd.seenUnexpected[k] = true
	rd.r.unexpected[unexpectedKey{family, label}]++
	if len(rd.r.unexpectedValues) < families.MaxMapLabels {
		rd.r.unexpectedValues = append(rd.r.unexpectedValues, fmt.Sprintf("%s{%s=%q}", family, label, value))
	}
}

// putBounded sets m[k] += v unless that would add a key past max (then
// counted as an unexpected label value).
func (rd *reading) putBounded(family, label string, max int, m map[string]float64, k string, v float64) map[string]float64 {
	if m == nil {
		m = map[string]float64{}
	}
	if _, seen := m[k]; !seen && len(m) >= max {
		rd.unexpected(family, label, k)
		return m
	}
	m[k] += v
	return m
}

// addPriority adds one child of a TTFT or e2e family to the model's
// per-priority view, bounded by MaxPriorities.
func (rd *reading) addPriority(mod *snapshot.Model, p string, hn snapshot.HistogramName, family string, h snapshot.Histogram) {
	if mod.ByPriority == nil {
		mod.ByPriority = map[string]map[snapshot.HistogramName]snapshot.Histogram{}
	}
	byName := mod.ByPriority[p]
	if byName == nil {
		if len(mod.ByPriority) >= MaxPriorities {
			rd.unexpected(family, "priority", p)
			return
		}
		byName = map[snapshot.HistogramName]snapshot.Histogram{}
		mod.ByPriority[p] = byName
	}
	if old, seen := byName[hn]; seen {
		if sum, ok := old.Add(h); ok {
			h = sum
		}
	} else {
		h.Counts = slices.Clone(h.Counts) // the model's sum adds into the first engine's
	}
	byName[hn] = h
}

// admitModel decides on a model_name new to this scrape, which already
// holds have models.
func (n *normalizer) admitModel(name string, have int) bool {
	if n.admit == nil {
		return have < MaxModels
	}
	return n.admit(name)
}

// present says whether the scrape read a sample of family fam.
func (s *scanner) present(fam int) bool {
	return len(s.values[fam]) > 0 || len(s.kids[fam]) > 0 || len(s.bad[fam]) > 0
}

// detectSchema tells the engine generation from the body: the first of
// schemaMarks (names.go) that matches it wins; a body with vllm:* families
// and no mark is V0, one without any is "none".
func detectSchema(sc *scanner) string {
	if !sc.anyVLLM {
		for fam, server := range famServer {
			if server != families.ServerVLLM && sc.present(fam) {
				return families.ServerOf(server)
			}
		}
		return SchemaNone
	}
	for _, mk := range schemaMarks {
		if mk.family != "" {
			if sc.present(famIndex[mk.family]) && (mk.help == "" || sc.helps[mk.family]) {
				return mk.schema
			}
			continue
		}
		for fam, name := range famNames {
			if name[:min(5, len(name))] == "vllm:" && sc.labelled(fam, mk.label) {
				return mk.schema
			}
		}
	}
	return SchemaV0
}

// labelled says whether family fam's first sample of this scrape has the
// label.
func (s *scanner) labelled(fam int, label string) bool {
	var l families.Labels
	switch {
	case len(s.values[fam]) > 0:
		l = s.values[fam][0].labels
	case len(s.kids[fam]) > 0:
		l = s.kids[fam][0].labels
	default:
		return false
	}
	_, ok := l.Lookup(label)
	return ok
}

func add(v *snapshot.Value, x float64) { v.V += x; v.OK = true }

func minOf(v *snapshot.Value, x float64) {
	if !v.OK || x < v.V {
		v.V, v.OK = x, true
	}
}

func maxOf(v *snapshot.Value, x float64) {
	if !v.OK || x > v.V {
		v.V, v.OK = x, true
	}
}

// histogram assembles a child's buckets, _sum and _count into a cumulative
// histogram (V0's multiprocess bodies print _sum first; any order reads),
// or says why the child is not one: no +Inf bucket (a truncated body), a
// count that is negative or not finite, buckets that decrease, _count
// unequal to the +Inf bucket, no _sum. A sumCount child needs _sum and
// _count only. The bounds are cached when equal to it (one slice per
// family across the history).
func (c *child) histogram(sumCount bool, cached []float64) (h snapshot.Histogram, problem string) {
	switch {
	case c.dup:
		return h, "a second _sum or _count"
	case c.has&hasSum == 0:
		return h, "no _sum"
	case math.IsNaN(c.sum) || math.IsInf(c.sum, 0) || c.sum < 0:
		return h, fmt.Sprintf("_sum %v", c.sum)
	}
	h.Sum = c.sum
	if sumCount {
		if c.has&hasCount == 0 || !validCount(c.count) {
			return h, "no valid _count"
		}
		h.Count = c.count
		return h, ""
	}
	bs := c.buckets
	if !slices.IsSortedFunc(bs, func(a, b bucket) int { return cmpFloat(a.le, b.le) }) {
		slices.SortFunc(bs, func(a, b bucket) int { return cmpFloat(a.le, b.le) })
	}
	switch {
	case len(bs) == 0 && c.has&hasCount == 0:
		return h, "neither buckets nor _count"
	case len(bs) == 0:
		h.Count = c.count
	case !math.IsInf(bs[len(bs)-1].le, 1):
		return h, "no +Inf bucket"
	default:
		h.Count = bs[len(bs)-1].v
		if c.has&hasCount != 0 && c.count != h.Count {
			return h, fmt.Sprintf("_count %v but +Inf bucket %v", c.count, h.Count)
		}
		bs = bs[:len(bs)-1]
	}
	if !validCount(h.Count) {
		return h, fmt.Sprintf("count %v", h.Count)
	}
	h.Counts = make([]float64, len(bs))
	same := len(cached) == len(bs)
	for i, b := range bs {
		switch {
		case math.IsNaN(b.le) || math.IsInf(b.le, 0):
			return h, "a bucket without a finite le"
		case i > 0 && b.le == bs[i-1].le:
			return h, fmt.Sprintf("bucket le=%v twice", b.le)
		case !validCount(b.v) || b.v > h.Count || i > 0 && b.v < bs[i-1].v:
			return h, fmt.Sprintf("bucket le=%v holds %v: not cumulative", b.le, b.v)
		}
		h.Counts[i] = b.v
		same = same && cached[i] == b.le
	}
	if h.Bounds = cached; !same {
		h.Bounds = make([]float64, len(bs))
		for i, b := range bs {
			h.Bounds[i] = b.le
		}
	}
	return h, ""
}

// validCount: a finite, non-negative count.
func validCount(c float64) bool { return c >= 0 && !math.IsInf(c, 1) }

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	case a == b:
		return 0
	case math.IsNaN(a):
		return -1
	}
	return 1
}
