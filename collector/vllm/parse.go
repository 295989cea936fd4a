package vllm

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/vllm-exporter/vllm_exporter/internal/modelset"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// parsedBody is a parsed body: the families the exporter reads, and whether
// the body had any vllm:* family at all (the others are skipped unparsed).
type parsedBody struct {
	fams    map[string]*dto.MetricFamily
	anyVLLM bool
}

// parseBody parses a /metrics body with prometheus/common's text parser
// whatever the Content-Type says: vLLM sends text 0.0.4 or 1.0.0 (which
// expfmt does not recognise), both the same text format. An OpenMetrics body
// (vLLM's opt-in Rust front-end) is first rewritten into text format. Lines
// of families the exporter never reads (python_*, process_*, http_*,
// *_created, many vllm:*) are dropped before parsing: 375 of the 614 lines
// of a V1 body, and half of the parser's allocations.
func parseBody(body []byte, contentType string) (parsedBody, error) {
	return parseFiltered(body, contentType, nil, nil)
}

// parseFiltered is parseBody for a body that readNeeded already filtered
// (pre != nil): the filter is not run a second time over it. With a cache
// (c != nil) a body with the lines of the previous one reads only its
// values (parseCache); the families then belong to the cache. When
// readNeeded already wrote the values into the cache (keptSink), body is
// what it held (the tail from pre.held.tailFrom on) and pre.held.before
// the families of the rest.
func parseFiltered(body []byte, contentType string, pre *streamed, c *parseCache) (parsedBody, error) {
	if pre != nil && pre.held != nil {
		return parseTail(body[pre.held.tailFrom:], pre, c)
	}
	converted := strings.Contains(contentType, "openmetrics") || hasEOFLine(body)
	if converted {
		body = openMetricsToText(body)
	}
	var kept []byte
	var anyVLLM bool
	if pre != nil {
		kept, anyVLLM = body, pre.anyVLLM
	} else {
		kept, anyVLLM = keepNeeded(body)
	}
	var fams map[string]*dto.MetricFamily
	var err error
	if c != nil {
		fams, err = c.parse(kept, true)
		c.fromText = !converted
	} else {
		fams, err = textParse(kept)
	}
	if err != nil {
		return parsedBody{}, err
	}
	return parsedBody{fams: fams, anyVLLM: anyVLLM}, nil
}

// parseTail is parseFiltered for a body keptSink patched into the parse
// cache: the families of its parts before the tail are pre.held.before;
// the cache is rebuilt from the tail, or the text parser reads it (keptSink
// says why the two together are the body's).
func parseTail(tail []byte, pre *streamed, c *parseCache) (parsedBody, error) {
	fams := pre.held.before
	if !pre.held.patched {
		if c != nil && c.buildTail(pre.held.part, pre.held.slot, fams, tail) {
			return parsedBody{fams: c.fams, anyVLLM: pre.anyVLLM}, nil
		}
		if c != nil {
			c.reset() // built again from the next body, held whole
		}
		tf, err := textParse(tail)
		if err != nil {
			return parsedBody{}, err
		}
		for name, mf := range tf {
			fams[name] = mf
		}
	}
	return parsedBody{fams: fams, anyVLLM: pre.anyVLLM}, nil
}

// needed are the families the family table reads.
var needed = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range families {
		for _, n := range f.Names {
			m[n] = true
		}
	}
	return m
}()

// keepNeeded returns body without the lines of families the exporter does
// not read (see keepLine).
func keepNeeded(body []byte) (kept []byte, anyVLLM bool) {
	out := make([]byte, 0, len(body)/3)
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i+1], body[i+1:]
		} else {
			body = nil
		}
		keep, vllm := keepLine(line)
		anyVLLM = anyVLLM || vllm
		if keep {
			out = append(out, line...)
		}
	}
	return out, anyVLLM
}

// keepLine decides on one line of a body: whether the parser must see it,
// and whether it names a vllm:* family. A line is only dropped when it is a
// comment or a well-formed sample (valid name, label set, float value) of a
// family the exporter does not read: anything malformed is kept, reaches
// the parser and fails the scrape. Of plain comments only OpenMetrics'
// `# EOF` is kept; a HELP/TYPE line is kept for a needed family, also when
// only its `_total` form is needed (OpenMetrics declares counters without
// the suffix).
func keepLine(line []byte) (keep, vllm bool) {
	name, isComment, ok := lineFamily(line)
	if !ok {
		return true, false
	}
	vllm = bytes.HasPrefix(name, []byte("vllm:"))
	switch {
	case isComment && name == nil:
		return bytes.Equal(bytes.TrimSpace(line), []byte("# EOF")), vllm
	case isComment:
		var total [128]byte // name + "_total" without an allocation for most names
		return isNeeded(name) || isNeeded(append(append(total[:0], name...), "_total"...)), vllm
	case isNeeded(name):
		return true, vllm
	}
	return !wellFormedSample(line[len(name):]), vllm
}

var histogramSuffixes = [][]byte{[]byte("_bucket"), []byte("_sum"), []byte("_count")}

// lineFamily returns the metric name a line is about: the name in a
// HELP/TYPE comment, or a sample's name (a prefix of line). Other comments
// have none; ok is false when the line does not start with a valid name.
func lineFamily(line []byte) (name []byte, isComment, ok bool) {
	if len(line) > 0 && line[0] == '#' {
		rest := bytes.TrimLeft(line[1:], " \t")
		for _, kw := range [][]byte{[]byte("HELP"), []byte("TYPE")} {
			if after, found := bytes.CutPrefix(rest, kw); found && len(after) > 0 && (after[0] == ' ' || after[0] == '\t') {
				after = bytes.TrimLeft(after, " \t")
				end := bytes.IndexAny(after, " \t\n")
				if end < 0 {
					end = len(after)
				}
				return after[:end], true, true
			}
		}
		return nil, true, true // a plain comment: the parser ignores it anyway
	}
	end := 0
	for end < len(line) && isNameByte(line[end], end == 0) {
		end++
	}
	if end == 0 {
		return nil, false, false
	}
	return line[:end], false, true
}

// isNeeded: name is a needed family or a histogram series of one.
func isNeeded(name []byte) bool {
	if needed[string(name)] {
		return true
	}
	for i, suffix := range histogramSuffixes {
		if base, found := bytes.CutSuffix(name, suffix); found && needed[string(base)] {
			// Token histograms are read for _sum and _count only.
			return i != 0 || !sumCountOnly[string(base)]
		}
	}
	return false
}

// sumCountOnly are the histogram families read for _sum and _count only
// (aggSumCount): their _bucket lines are skipped unparsed.
var sumCountOnly = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range families {
		if f.Agg == aggSumCount {
			for _, n := range f.Names {
				m[n] = true
			}
		}
	}
	return m
}()

func isNameByte(c byte, first bool) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
}

// wellFormedSample checks the part of a sample line after its name: an
// optional label set, then a value that parses as a float, then an optional
// timestamp.
func wellFormedSample(rest []byte) bool {
	if len(rest) > 0 && rest[0] == '{' {
		end := labelSetEnd(rest)
		if end == 0 || rest[end-1] != '}' {
			return false
		}
		rest = rest[end:]
	}
	rest = bytes.TrimSpace(rest)
	value, ts, _ := bytes.Cut(rest, []byte(" "))
	if len(value) == 0 || bytes.ContainsAny(ts, " \t") {
		return false
	}
	_, err := strconv.ParseFloat(string(value), 64)
	return err == nil
}

func hasEOFLine(body []byte) bool {
	b := bytes.TrimRight(body, "\n\r\t ")
	return bytes.HasSuffix(b, []byte("\n# EOF")) || bytes.Equal(b, []byte("# EOF"))
}

// openMetricsToText rewrites the OpenMetrics text features the Prometheus
// text parser rejects or misreads: `# EOF`, `# UNIT`, types it does not know
// (info, stateset, unknown, gaugehistogram: their samples are read untyped),
// counter families declared without their `_total` suffix, and exemplars.
func openMetricsToText(body []byte) []byte {
	out := make([]byte, 0, len(body))
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		switch {
		case bytes.Equal(bytes.TrimSpace(line), []byte("# EOF")):
			return out
		case bytes.HasPrefix(line, []byte("# UNIT ")):
			continue
		case bytes.HasPrefix(line, []byte("# TYPE ")):
			f := strings.Fields(string(line))
			if len(f) != 4 {
				break
			}
			switch f[3] {
			case "info", "stateset", "unknown", "gaugehistogram":
				continue
			case "counter":
				if !strings.HasSuffix(f[2], "_total") {
					line = []byte("# TYPE " + f[2] + "_total counter")
				}
			}
		case bytes.HasPrefix(line, []byte("# HELP ")):
			continue // HELP of a renamed counter family would create an empty family; we never read HELP.
		case len(line) > 0 && line[0] != '#':
			// An exemplar follows the value after " # "; look only past the
			// label set, whose quoted values may contain anything.
			start := labelSetEnd(line)
			if i := bytes.Index(line[start:], []byte(" # ")); i >= 0 {
				line = line[:start+i]
			}
		}
		out = append(out, line...)
		out = append(out, '\n')
	}
	return out
}

// labelSetEnd returns the index just past a sample line's label set (or 0
// when it has none), skipping quoted label values.
func labelSetEnd(line []byte) int {
	open := bytes.IndexByte(line, '{')
	if open < 0 || bytes.IndexByte(line[:open], ' ') >= 0 {
		return 0
	}
	inQuote := false
	for i := open + 1; i < len(line); i++ {
		switch c := line[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == '}':
			return i + 1
		}
	}
	return len(line)
}

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
	MaxFinishedReasons = 16
	// MaxPriorities bounds the per-priority view: vLLM buckets priorities
	// into five values (<-1, -1, 0, 1, >1); anything past eight is not vLLM.
	MaxPriorities = 8
	// maxMapLabels bounds the other label-keyed maps (waiting reasons,
	// prompt-token sources, HTTP statuses, sleep resources).
	maxMapLabels = 16
	// MaxLoRAAdapters bounds the adapters kept per list of
	// vllm:lora_requests_info (running, waiting).
	MaxLoRAAdapters = 32
	// MaxLabelValueBytes: a sample with a longer label value is dropped
	// (Prometheus's label_value_length_limit would otherwise fail the whole
	// scrape of the exporter).
	MaxLabelValueBytes = 512
)

// Reasons a sample of vLLM's body is dropped
// (vllm_exporter_samples_dropped_total{reason}).
const (
	DropModelLimit          = "model_limit"           // a new model_name while --vllm.max-models are tracked
	DropEngineLimit         = "engine_limit"          // per-engine series beyond MaxEngines (the sample still counts in the model's sum)
	DropFinishedReasonLimit = "finished_reason_limit" // finished_reason values beyond MaxFinishedReasons
	DropLabelTooLong        = "label_value_too_long"  // a label value longer than MaxLabelValueBytes
	DropInvalidHistogram    = "invalid_histogram"     // negative, infinite or NaN counts, not a histogram
	DropBucketMismatch      = "bucket_mismatch"       // engines of one model with different bucket layouts
	DropLineTooLong         = "line_too_long"         // a line of a needed family longer than 64 KiB, skipped unread
	DropLoRAAdapterLimit    = "lora_adapter_limit"    // adapters of vllm:lora_requests_info beyond MaxLoRAAdapters per list
)

var dropReasons = []string{DropModelLimit, DropEngineLimit, DropFinishedReasonLimit, DropLabelTooLong, DropInvalidHistogram, DropBucketMismatch, DropLineTooLong, DropLoRAAdapterLimit}

// longLabel returns the name of a label whose value exceeds
// MaxLabelValueBytes, or "".
func longLabel(labels map[string]string) string {
	for k, v := range labels {
		if len(v) > MaxLabelValueBytes {
			return k
		}
	}
	return ""
}

// normalizer turns parsed families into per-model snapshot values. It keeps
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
}

func newNormalizer() *normalizer { return &normalizer{bounds: map[string][]float64{}} }

// unexpectedKey names a (vLLM family, label) pair whose values were not
// understood, the labels of vllm_exporter_vllm_unexpected_label_values.
type unexpectedKey struct{ Metric, Label string }

// result is one normalized scrape.
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

// drop counts one dropped sample; what describes it for the log.
func (r *result) drop(reason, what string) {
	if r.dropped == nil {
		r.dropped, r.detail = map[string]float64{}, map[string]string{}
	}
	r.dropped[reason]++
	if _, ok := r.detail[reason]; !ok {
		r.detail[reason] = what
	}
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
	// means counts the samples of each aggMean reading.
	means          map[meanKey]int
	seenUnexpected map[string]bool
	refused        map[string]bool // model names refused, asked once per scrape
	present        []bool          // by row of families: the family is in the body
	// labels are the current sample's; one map reused for every sample (a
	// map per sample was half of what a large body's normalization
	// allocated).
	labels map[string]string
}

type meanKey struct {
	m *snapshot.Model
	f *family
}

// normalize reads every family of the table from a parsed body.
func (n *normalizer) normalize(e parsedBody) *result {
	v := &snapshot.VLLM{Schema: detectSchema(e), Models: map[string]*snapshot.Model{}}
	r := &result{vllm: v, unexpected: map[unexpectedKey]int{}}
	rd := n.reset(r)
	has := func(name string) bool { _, ok := e.fams[name]; return ok }
	for i := range families {
		f := &families[i]
		expected := f.Expected != nil && f.Expected(v.Schema, has)
		mf := f.lookup(e.fams)
		if mf == nil {
			if expected {
				r.expected = append(r.expected, f.missingLabel(v.Schema))
				v.Missing = append(v.Missing, f.missingLabel(v.Schema))
			}
			continue
		}
		if expected {
			r.expected = append(r.expected, mf.GetName())
		}
		rd.present[i] = true
		for _, m := range mf.GetMetric() {
			rd.labels = fillLabels(rd.labels, m)
			if l := longLabel(rd.labels); l != "" {
				r.drop(DropLabelTooLong, fmt.Sprintf("%s sample dropped: its %s label value is longer than %d bytes", mf.GetName(), l, MaxLabelValueBytes))
				continue
			}
			rd.sample(f, mf.GetName(), m)
		}
	}
	rd.finish()
	sort.Strings(r.expected)
	sort.Strings(v.Missing)
	return r
}

// reset readies the normalizer's scratch reading for a new scrape into r:
// what the previous scrape's snapshot holds is handed over, never cleared
// (the engines' inner maps, the server model's readings), only forgotten.
func (n *normalizer) reset(r *result) *reading {
	rd := &n.scratch
	if rd.server == nil {
		rd.server = &snapshot.Model{}
		rd.engines = map[string]map[string]*snapshot.EngineGauges{}
		rd.present = make([]bool, len(families))
	}
	*rd.server = snapshot.Model{}
	clear(rd.engines)
	clear(rd.means)
	clear(rd.seenUnexpected)
	clear(rd.refused)
	clear(rd.present)
	rd.n, rd.r, rd.vllm = n, r, r.vllm
	return rd
}

// finish applies the server-wide readings to every model, divides the
// means, settles readings that combine families and keeps the per-engine
// view of data-parallel models.
func (rd *reading) finish() {
	for k, n := range rd.means {
		if v := k.f.Value(k.m); n > 1 {
			v.V /= float64(n)
		}
	}
	for name, m := range rd.vllm.Models {
		for i := range families {
			if f := &families[i]; rd.present[i] && (f.Scope == scopeServer || f.Scope == scopeModelOrServer) {
				f.applyServer(rd.server, m)
			}
		}
		for i := range families {
			if f := &families[i]; rd.present[i] && f.Settle != nil {
				f.Settle(m)
			}
		}
		if e := rd.engines[name]; len(e) > 1 {
			m.PerEngine = e
		}
	}
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
			rd.r.drop(DropModelLimit, fmt.Sprintf("model_name %q dropped: --vllm.max-models names already tracked", name))
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
			rd.r.drop(DropEngineLimit, fmt.Sprintf("engine %q of model %q dropped from the per-engine series: more than %d engines", engine, model, MaxEngines))
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
	if len(rd.r.unexpectedValues) < maxMapLabels {
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
func (n *normalizer) addPriority(mod *snapshot.Model, p string, hn snapshot.HistogramName, family string, m *dto.Metric, unexpected func(family, label, value string)) {
	if mod.ByPriority == nil {
		mod.ByPriority = map[string]map[snapshot.HistogramName]snapshot.Histogram{}
	}
	byName := mod.ByPriority[p]
	if byName == nil {
		if len(mod.ByPriority) >= MaxPriorities {
			unexpected(family, "priority", p)
			return
		}
		byName = map[snapshot.HistogramName]snapshot.Histogram{}
		mod.ByPriority[p] = byName
	}
	h, err := n.histogram(family, m)
	if err != nil {
		return
	}
	if old, seen := byName[hn]; seen {
		if sum, ok := old.Add(h); ok {
			h = sum
		}
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

// detectSchema tells the engine generation from the body: the first of
// schemaMarks (names.go) that matches it wins; a body with vllm:* families
// and no mark is V0, one without any is "none".
func detectSchema(e parsedBody) string {
	if !e.anyVLLM {
		return SchemaNone
	}
	for _, mk := range schemaMarks {
		if mk.family != "" {
			mf := e.fams[mk.family]
			if mf != nil && (mk.help == "" || mf.GetHelp() == mk.help) {
				return mk.schema
			}
			continue
		}
		for name, mf := range e.fams {
			if strings.HasPrefix(name, "vllm:") && len(mf.GetMetric()) > 0 && hasLabel(mf.GetMetric()[0], mk.label) {
				return mk.schema
			}
		}
	}
	return SchemaV0
}

func hasLabel(m *dto.Metric, name string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return true
		}
	}
	return false
}

// fillLabels empties l (allocating it when nil) and fills it with m's labels.
func fillLabels(l map[string]string, m *dto.Metric) map[string]string {
	if l == nil {
		l = make(map[string]string, len(m.GetLabel()))
	}
	clear(l)
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// scalar reads a gauge, counter or untyped sample (OpenMetrics counters and
// info series arrive untyped after openMetricsToText).
func scalar(m *dto.Metric) (float64, bool) {
	var v float64
	switch {
	case m.Gauge != nil:
		v = m.GetGauge().GetValue()
	case m.Counter != nil:
		v = m.GetCounter().GetValue()
	case m.Untyped != nil:
		v = m.GetUntyped().GetValue()
	default:
		return 0, false
	}
	if math.IsNaN(v) {
		return 0, false
	}
	return v, true
}

func (n *normalizer) histogram(family string, m *dto.Metric) (snapshot.Histogram, error) {
	dh := m.GetHistogram()
	if dh == nil {
		return snapshot.Histogram{}, fmt.Errorf("%s: not a histogram", family)
	}
	buckets := dh.GetBucket()
	if !slices.IsSortedFunc(buckets, func(a, b *dto.Bucket) int { return cmpFloat(a.GetUpperBound(), b.GetUpperBound()) }) {
		buckets = slices.Clone(buckets)
		slices.SortFunc(buckets, func(a, b *dto.Bucket) int { return cmpFloat(a.GetUpperBound(), b.GetUpperBound()) })
	}
	h := snapshot.Histogram{Sum: dh.GetSampleSum(), Count: count(dh.SampleCountFloat, dh.GetSampleCount())}
	// The bounds are nearly always the family's cached ones: they are
	// compared in place, and copied only when they differ.
	cached := n.bounds[family]
	same := true
	h.Counts = make([]float64, 0, len(buckets))
	for _, b := range buckets {
		c := count(b.CumulativeCountFloat, b.GetCumulativeCount())
		if math.IsInf(b.GetUpperBound(), 1) {
			h.Count = math.Max(h.Count, c)
			continue
		}
		if i := len(h.Counts); i >= len(cached) || cached[i] != b.GetUpperBound() {
			same = false
		}
		h.Counts = append(h.Counts, c)
	}
	var bounds []float64
	if same && len(cached) == len(h.Counts) {
		bounds = cached
	} else {
		bounds = make([]float64, 0, len(h.Counts))
		for _, b := range buckets {
			if !math.IsInf(b.GetUpperBound(), 1) {
				bounds = append(bounds, b.GetUpperBound())
			}
		}
	}
	if !validCount(h.Count) || math.IsNaN(h.Sum) {
		return snapshot.Histogram{}, fmt.Errorf("%s: invalid count or sum", family)
	}
	for _, c := range h.Counts {
		if !validCount(c) {
			return snapshot.Histogram{}, fmt.Errorf("%s: invalid bucket count %v", family, c)
		}
	}
	if !slices.Equal(cached, bounds) {
		n.bounds[family] = bounds
	}
	h.Bounds = bounds
	return h, nil
}

// validCount: a count must be a finite non-negative number to be re-exported
// as an integer.
func validCount(c float64) bool { return c >= 0 && !math.IsInf(c, 1) }

func count(f *float64, u uint64) float64 {
	if f != nil {
		return *f
	}
	return float64(u)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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
