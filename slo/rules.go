package slo

import (
	"bytes"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/histq"
)

// RuleOptions tune GenerateRules.
type RuleOptions struct {
	// RunbookURL is the runbook document the alerts link to; the alert's
	// anchor is appended (#vllmsloburnratepage, #vllmsloburnrateticket).
	RunbookURL string
	// Selector is extra label matchers added to every raw series selector,
	// e.g. `job="vllm"` (empty: none).
	Selector string
	// Header is a comment written at the top of the file (without "# ").
	Header string
	// DashboardURL is the dashboard the alerts link to (annotation
	// dashboard_url; empty: none); "var-slo=<name>" is appended to its query.
	DashboardURL string
	// Buckets gives the bucket bounds latency thresholds are validated
	// against (config.File.Buckets: histogram_buckets, for vLLM's
	// --custom-histogram-buckets); nil: vLLM's default bounds.
	Buckets func(metric string) []float64
}

// DefaultRunbookURL is where alerts/runbooks.md lives in the repository.
const DefaultRunbookURL = "https://github.com/vllm-exporter/vllm_exporter/blob/main/alerts/runbooks.md"

// Alert names of the generated rules.
const (
	PageAlert   = "VLLMSLOBurnRatePage"
	TicketAlert = "VLLMSLOBurnRateTicket"
)

// Recording rule names (Sloth's level:metric:operations style). Every
// series carries `slo` and `model` (aggregated across replicas per model).
func errorRatioRecord(window string) string { return "slo:sli_error:ratio_rate" + window }
func eventsRecord(window string) string     { return "slo:sli_events:increase" + window }
func badRecord(window string) string        { return "slo:sli_bad:increase" + window }

// The availability SLO's parts, recorded ahead of its events: finished
// requests by reason and refused requests.
func finishedRecord(window string) string { return "slo:sli_finished:increase" + window }
func refusedRecord(window string) string  { return "slo:sli_refused:increase" + window }

const (
	objectiveRecord = "slo:objective:ratio"
	budgetRecord    = "slo:error_budget_remaining:ratio"
	// The page's context: the stall hold (max over StallAftermath) and
	// the waiting queue (for the preemption SLO's recovery hold).
	stallRecord   = "slo:vllm_engine_stalled:max"
	waitingRecord = "slo:vllm_requests_waiting:sum"
)

type ruleFile struct {
	Groups []ruleGroup `yaml:"groups"`
}

type ruleGroup struct {
	Name  string `yaml:"name"`
	Rules []rule `yaml:"rules"`
}

type rule struct {
	Record      string            `yaml:"record,omitempty"`
	Alert       string            `yaml:"alert,omitempty"`
	Expr        string            `yaml:"expr"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

var selectorRE = regexp.MustCompile(`^\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*(,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*)*$`)

// GenerateRules compiles SLOs into a Prometheus rule file equivalent to the
// watchdog: per SLO one group holding the recording rules (error ratio and
// event count per window, aggregated `sum by (model)` across replicas, the
// period ratio, budget remaining, objective) followed by the page and ticket
// alerts, so an evaluation sees the records of the same cycle.
func GenerateRules(slos []config.SLO, opts RuleOptions) ([]byte, error) {
	if opts.RunbookURL == "" {
		opts.RunbookURL = DefaultRunbookURL
	}
	if opts.Selector != "" && !selectorRE.MatchString(opts.Selector) {
		return nil, fmt.Errorf("selector %q: want label matchers like job=\"vllm\",namespace=~\"prod-.*\"", opts.Selector)
	}
	f := ruleFile{Groups: []ruleGroup{}}
	for i := range slos {
		s := slos[i]
		buckets := opts.Buckets
		if buckets == nil {
			buckets = config.MetricBuckets
		}
		if err := s.ValidateWith(buckets); err != nil {
			return nil, fmt.Errorf("slos[%d] (%s): %w", i, s.Name, err)
		}
		f.Groups = append(f.Groups, sloGroup(&s, opts))
	}
	var buf bytes.Buffer
	if opts.Header != "" {
		for _, l := range strings.Split(strings.TrimRight(opts.Header, "\n"), "\n") {
			buf.WriteString("# " + l + "\n")
		}
	}
	if err := EncodeYAML(&buf, f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// EncodeYAML appends v to buf as one YAML document indented by two spaces:
// the layout of the rule files and of slo/interop's documents.
func EncodeYAML(buf *bytes.Buffer, v any) error {
	enc := yaml.NewEncoder(buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return enc.Close()
}

// leRegex matches a bucket boundary however it is written: Prometheus 2
// keeps the exposition's text ("1"), Prometheus 3 normalises classic
// histogram `le` labels to floats ("1.0").
func leRegex(v float64) string {
	s := strconv.FormatFloat(v, 'g', -1, 64)
	alts := []string{regexp.QuoteMeta(s)}
	if !strings.ContainsAny(s, ".eE") {
		alts = append(alts, regexp.QuoteMeta(s+".0"))
	} else if strings.HasSuffix(s, ".0") {
		alts = append(alts, regexp.QuoteMeta(strings.TrimSuffix(s, ".0")))
	}
	// The regex goes into a PromQL double-quoted string: escape backslashes.
	return strings.ReplaceAll(strings.Join(alts, "|"), `\`, `\\`)
}

// nonEmpty drops blank matchers and trims the rest.
func nonEmpty(ms ...string) []string {
	var out []string
	for _, m := range ms {
		if strings.TrimSpace(m) != "" {
			out = append(out, strings.TrimSpace(m))
		}
	}
	return out
}

// matchers joins label matchers into a selector body.
func matchers(ms ...string) string {
	out := nonEmpty(ms...)
	if len(out) == 0 {
		return ""
	}
	return "{" + strings.Join(out, ",") + "}"
}

var probeHistograms = map[string]string{
	"ttft": "vllm_probe_time_to_first_token_seconds",
	"tpot": "vllm_probe_time_per_output_token_seconds",
	"itl":  "vllm_probe_inter_token_latency_seconds",
	"e2e":  "vllm_probe_e2e_latency_seconds",
}

var serverHistograms = map[string][]string{
	// tpot: vLLM >= 0.11's per-request histogram where the server has it,
	// the inter-token latency otherwise (same buckets).
	"tpot":  {"vllm_request_time_per_output_token_seconds", "vllm_inter_token_latency_seconds"},
	"ttft":  {"vllm_time_to_first_token_seconds"},
	"itl":   {"vllm_inter_token_latency_seconds"},
	"e2e":   {"vllm_e2e_request_latency_seconds"},
	"queue": {"vllm_request_queue_time_seconds"},
}

// sli is one SLO's events per model over a window w as PromQL. Given rec
// (its recording rules' series), events and bad read what parts(w)
// records ahead of them and take the zeros a missing series needs from a
// recorded series: the recording rules read each raw series once per
// window. Without rec (nil) they read only raw series (SLIQueries).
type sli struct {
	events, bad func(w string, rec recorded) string
	parts       func(w string) []rule
}

// recorded selects one of the SLO's recorded series, with extra matchers.
type recorded func(name string, ms ...string) string

func sumBy(fn, series, sel, w string) string {
	return fmt.Sprintf("sum by (model) (%s(%s%s[%s]))", fn, series, sel, w)
}

// buildSLI is the SLO's events and bad events as PromQL, per kind.
func buildSLI(s *config.SLO, selector string) sli {
	var profileSel string
	if len(s.Profiles) > 0 {
		alts := make([]string, len(s.Profiles))
		for i, p := range s.Profiles {
			alts[i] = strings.ReplaceAll(regexp.QuoteMeta(p), `\`, `\\`)
		}
		profileSel = `profile=~"` + strings.Join(alts, "|") + `"`
	}
	sel := matchers(selector, profileSel)
	switch s.Kind {
	case config.KindLatency:
		return latencySLI(s, selector, profileSel)
	case config.KindPreemption:
		return sli{
			events: func(w string, _ recorded) string { return sumBy("increase", "vllm_requests_finished_total", sel, w) },
			bad:    func(w string, _ recorded) string { return sumBy("increase", "vllm_preemptions_total", sel, w) },
		}
	default:
		return availabilitySLI(s, selector, sel)
	}
}

// latencySLI reads each histogram however Prometheus stores it (classic
// buckets, native, NHCB; package histq); the threshold is a bucket boundary
// (validated), so the classic and NHCB forms are exact.
func latencySLI(s *config.SLO, selector, profileSel string) sli {
	var hs []string
	if s.Source == config.SourceProbe {
		hs = []string{probeHistograms[s.Metric]}
	} else {
		hs = serverHistograms[s.Metric]
	}
	ms := strings.Join(nonEmpty(selector, profileSel), ",")
	le := leRegex(s.Threshold)
	// A prefill pod of a disaggregated pair owns no decode: vLLM still
	// observes a TPOT of 0 for each of its one-token requests, which
	// would count as good events of the model's TPOT SLO. Its series are
	// left out, as the watchdog leaves the pod out (decodeMetric).
	var unless string
	if s.Source != config.SourceProbe && decodeMetric(s.Metric) {
		unless = fmt.Sprintf(`on (job, instance, model) (vllm_pod_role_info%s)`, matchers(selector, `role="prefill"`))
	}
	// Each form reads its own series: absent ones cost an index lookup.
	either := func(w string, f func(h histq.H) histq.Either) string {
		var parts []string
		for _, name := range hs {
			e := f(histq.H{Name: name, Matchers: ms, Window: w, Unless: unless})
			parts = append(parts, e.Classic, e.Native)
		}
		for i := range parts {
			parts[i] = "(\n" + indent(parts[i]) + "\n)"
		}
		return strings.Join(parts, "\nor\n")
	}
	return sli{
		events: func(w string, _ recorded) string {
			return either(w, func(h histq.H) histq.Either { return h.Count("increase", "model") })
		},
		bad: func(w string, _ recorded) string {
			return either(w, func(h histq.H) histq.Either { return h.Above("increase", s.Threshold, le, "model") })
		},
	}
}

// availabilitySLI counts failed requests (the probes' failures, or the
// server's aborted and errored requests plus those refused before the
// engine) against all requests. A failure series may not exist yet (vLLM
// V0 creates a finished_reason child on first use): it counts as zero
// for each model of the totals.
func availabilitySLI(s *config.SLO, selector, sel string) sli {
	if s.Source == config.SourceProbe {
		total := func(w string, _ recorded) string { return sumBy("increase", "vllm_probe_requests_total", sel, w) }
		return sli{events: total, bad: func(w string, rec recorded) string {
			return orZero(sumBy("increase", "vllm_probe_failures_total", sel, w), read(rec, eventsRecord(w), total(w, nil)))
		}}
	}
	// Server: requests refused before the engine (5xx, 429;
	// vllm_requests_refused_total) are failed events too, except those
	// of a replica whose engine sleeps on purpose; absent before vLLM
	// 0.8.3 (counted as zero). Admission rejections (503 at
	// --max-num-queued-requests / -tokens) are among those answers; where
	// the server has no http_requests_total they are counted from
	// vllm_requests_rejected_total instead (never both: no double count).
	refused := func(w string) string {
		of := func(series string) string {
			return fmt.Sprintf("sum by (model) (increase(%s%s[%s]) unless on (job, instance, model) (vllm_engine_awake%s == 0))", series, sel, w, sel)
		}
		return fmt.Sprintf("(\n  %s\n  or\n  %s\n)", of("vllm_requests_refused_total"), of("vllm_requests_rejected_total"))
	}
	finished := func(w string, rec recorded, ms ...string) string {
		return read(rec, finishedRecord(w), sumBy("increase", "vllm_requests_finished_total", matchers(append([]string{selector}, ms...)...), w), ms...)
	}
	return sli{
		parts: func(w string) []rule {
			return []rule{
				{Record: finishedRecord(w), Expr: fmt.Sprintf("sum by (model, finished_reason) (increase(vllm_requests_finished_total%s[%s]))", sel, w)},
				{Record: refusedRecord(w), Expr: refused(w)},
			}
		},
		events: func(w string, rec recorded) string {
			return finished(w, rec) + "\n+\n" + read(rec, refusedRecord(w), refused(w)) + "\nor\n" + finished(w, rec)
		},
		bad: func(w string, rec recorded) string {
			return orZero(finished(w, rec, `finished_reason=~"abort|error"`), finished(w, rec)) + "\n+\n" + orZero(read(rec, refusedRecord(w), refused(w)), finished(w, rec))
		},
	}
}

// read is raw, or with rec the recorded series name summed by model.
func read(rec recorded, name, raw string, ms ...string) string {
	if rec == nil {
		return raw
	}
	return "sum by (model) (" + rec(name, ms...) + ")"
}

// orZero is expr, or 0 for each model of total where expr has none.
func orZero(expr, total string) string {
	return "(\n" + indent(expr) + "\n  or\n  0 * " + total + "\n)"
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// escapeTemplate keeps user text out of Prometheus' template engine.
func escapeTemplate(s string) string {
	s = strings.ReplaceAll(s, "{{", "{{`{{`}}")
	return s
}

// sloRules is what one SLO's rule group is built from: its windows, the
// selector of its recorded series and its error budget.
type sloRules struct {
	s      *config.SLO
	opts   RuleOptions
	x      sli
	ws     []time.Duration
	names  []string // the burn-rate windows, shortest first
	fast   []string // the fast tier's two windows
	period string
	sel    string            // selects the SLO's recorded series
	lbl    map[string]string // labels of its recording rules
	budget float64
	min    float64
	enough string // "has events" condition on a window's event count
}

func sloGroup(s *config.SLO, opts RuleOptions) ruleGroup {
	r := newSLORules(s, opts)
	rules := r.records()
	rules = append(rules, r.pageAlert(), r.ticketAlert())
	return ruleGroup{Name: "vllm-slo-" + s.Name, Rules: rules}
}

func newSLORules(s *config.SLO, opts RuleOptions) *sloRules {
	ws := Windows(s.PeriodDuration())
	r := &sloRules{s: s, opts: opts, x: buildSLI(s, opts.Selector), ws: ws, names: make([]string, len(ws)),
		fast:   []string{WindowName(FastWindows[0]), WindowName(FastWindows[1])},
		period: WindowName(s.PeriodDuration()), sel: fmt.Sprintf(`{slo=%q}`, s.Name),
		lbl: map[string]string{"slo": s.Name}, budget: s.ErrorBudget(), min: s.MinEventsValue()}
	for i, d := range ws {
		r.names[i] = WindowName(d)
	}
	// Like the watchdog, a window burns only when it holds events (at least
	// min_events, and always more than none): a preemption SLO's bad events
	// are not a subset of its total, so its ratio is +Inf over a window with
	// preemptions and no finished request.
	r.enough = ">= " + fmtFloat(r.min)
	if r.min <= 0 {
		r.enough = "> 0"
	}
	return r
}

// records are the SLO's recording rules. Only the short windows (the
// shortest burn-rate window b and the fast tier's) read raw series, each
// once: events, bad events (and the parts those read), where the
// classic/native and TPOT/ITL choices are made. The longer windows, the
// period and the page's context (stall hold, waiting queue) derive from
// recorded series, so the alerts read nothing else.
func (r *sloRules) records() []rule {
	x, names, sel, period := r.x, r.names, r.sel, r.period
	var out []rule
	add := func(name, expr string) { out = append(out, rule{Record: name, Expr: expr, Labels: r.lbl}) }
	rec := func(name string, ms ...string) string {
		return name + matchers(append([]string{fmt.Sprintf("slo=%q", r.s.Name)}, ms...)...)
	}
	raw := []string{names[0]}
	for _, w := range r.fast {
		if !slices.Contains(raw, w) {
			raw = append(raw, w)
		}
	}
	for _, w := range raw {
		if x.parts != nil {
			for _, p := range x.parts(w) {
				add(p.Record, p.Expr)
			}
		}
		add(eventsRecord(w), x.events(w, rec))
		add(badRecord(w), x.bad(w, rec))
		add(errorRatioRecord(w), badRecord(w)+sel+" / "+eventsRecord(w)+sel)
	}
	// A longer window W (and the period, over all of it) sums the b
	// records of its last W - b: each record counts the b before it, so
	// every event counted lies within W, and each is counted in as many
	// records (b / evaluation interval) in both sums, whatever the
	// interval. Its event count tiles W with a subquery stepping by b:
	// exact when the evaluation interval divides b (15s, 30s, 1m, 5m for
	// 5m), unbiased otherwise. docs/slo.md says what changes near an edge.
	b := names[0]
	sums := func(w, over string) {
		add(errorRatioRecord(w), fmt.Sprintf("sum_over_time(%s%s[%s])\n/\nsum_over_time(%s%s[%s])", badRecord(b), sel, over, eventsRecord(b), sel, over))
		add(eventsRecord(w), fmt.Sprintf("sum_over_time(%s%s[%s:%s])", eventsRecord(b), sel, w, b))
	}
	for i, w := range names[1:] {
		if !slices.Contains(raw, w) {
			sums(w, WindowName(r.ws[i+1]-r.ws[0]))
		}
	}
	sums(period, period)
	add(budgetRecord, fmt.Sprintf("1 - %s%s / %s", errorRatioRecord(period), sel, fmtFloat(r.budget)))
	add(objectiveRecord, fmt.Sprintf("vector(%s)", fmtFloat(r.s.Objective)))
	add(stallRecord+WindowName(StallAftermath), recentStall(r.s.Source, r.opts.Selector))
	if r.s.Kind == config.KindPreemption {
		add(waitingRecord, fmt.Sprintf("sum by (model) (vllm_requests_waiting%s)", matchers(r.opts.Selector)))
	}
	return out
}

// burns is "window w burns faster than factor and holds events".
func (r *sloRules) burns(w int, factor float64) string {
	return fmt.Sprintf("(%s%s / %s > %s and %s%s %s)", errorRatioRecord(r.names[w]), r.sel, fmtFloat(r.budget), fmtFloat(factor),
		eventsRecord(r.names[w]), r.sel, r.enough)
}

// pairs is any of the burn-rate pairs ps burning in both windows.
func (r *sloRules) pairs(ps []AlertPair) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("(\n  %s\n  and\n  %s\n)", r.burns(p.Long, p.Factor), r.burns(p.Short, p.Factor)))
	}
	return strings.Join(out, "\nor\n")
}

// explain says the pairs ps in words for an alert's description.
func (r *sloRules) explain(ps []AlertPair) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%sx over %s and %s", fmtFloat(p.Factor), r.names[p.Long], r.names[p.Short]))
	}
	return strings.Join(out, ", or ")
}

// fastExpr is the fast tier: a hard breach over both short windows, with
// more events than min_events; a preemption burst while a queue recovers
// pages only if it persists.
func (r *sloRules) fastExpr() string {
	fastF := fmtFloat(FastFactor(r.budget))
	fast := fmt.Sprintf("(\n  (%s%s / %s > %s and %s%s >= %s)\n  and\n  %s\n)",
		errorRatioRecord(r.fast[0]), r.sel, fmtFloat(r.budget), fastF, eventsRecord(r.fast[0]), r.sel, fmtFloat(FastMin(r.min)),
		fmt.Sprintf("(%s%s / %s > %s and %s%s %s)", errorRatioRecord(r.fast[1]), r.sel, fmtFloat(r.budget), fastF, eventsRecord(r.fast[1]), r.sel, r.enough))
	if r.s.Kind == config.KindPreemption {
		// While a queue recovers, its backlog is admitted at once and
		// preemptions come in a burst: page on them only if they persist.
		fast = fmt.Sprintf("%s\nunless on (model)\n(\n%s\n  unless on (model)\n  min_over_time(%s%s[%s]) / %s > %s\n)", fast,
			indent(r.queueRecovering()), errorRatioRecord(r.fast[1]), r.sel, WindowName(PreemptionPersist), fmtFloat(r.budget), fastF)
	}
	return fast
}

// A deliberately sleeping engine adds no bad events: it finishes no
// requests, its probes pause, its refusals are left out.
const sleepingNote = " An engine put to sleep on purpose (vllm_engine_awake 0) adds no events."

const onModel = "{{ with $labels.model }} on model {{ . }}{{ end }}"

// common opens both alerts' descriptions: the SLO, its objective and
// period, and its min_events.
func (r *sloRules) common() string {
	what := r.s.Description
	if what == "" {
		what = describe(r.s)
	}
	return fmt.Sprintf("SLO %s (%s; objective %s over %s, min %s events per window)",
		r.s.Name, escapeTemplate(strings.TrimSuffix(what, ".")), fmtFloat(r.s.Objective), r.period, fmtFloat(r.min))
}

func (r *sloRules) pageAlert() rule {
	s, period := r.s, r.period
	// A stalled engine pages on its own (VLLMEngineStalled). While it
	// stalls and for StallAftermath after, the SLO pages it causes (the
	// latency histograms observe the hung requests only once tokens flow
	// again, the backlog is admitted at once) are the same incident.
	pageExpr := r.pairs(PagePairs) + "\nor\n" + r.fastExpr()
	pageExpr = "(\n" + indent(pageExpr) + "\n)\nunless on (model)\n(" + stallRecord + WindowName(StallAftermath) + r.sel + " == 1)"
	fastF := fmtFloat(FastFactor(r.budget))
	return rule{Alert: PageAlert, Expr: pageExpr,
		Labels: map[string]string{"severity": "critical", "slo": s.Name},
		Annotations: withDashboard(map[string]string{
			"summary": "SLO " + s.Name + " is burning its error budget fast" + onModel,
			"description": r.common() + onModel + " burns its error budget at {{ printf \"%.1f\" $value }}x over the long window (page: " +
				r.explain(PagePairs) + ", or " + fastF + "x over " + r.fast[0] + " and " + r.fast[1] + " with at least " + fmtFloat(FastMin(r.min)) + " events: a hard breach" + preemptionNote(s) +
				"; not within " + WindowName(StallAftermath) + " of an engine stall, which pages on its own). At 14.4x a " + period + " budget is gone in " + WindowName(time.Duration(float64(s.PeriodDuration())/14.4).Round(time.Minute)) + "." + sleepingNote,
			"runbook_url": r.opts.RunbookURL + "#" + strings.ToLower(PageAlert),
		}, r.opts.DashboardURL, s.Name)}
}

func (r *sloRules) ticketAlert() rule {
	s := r.s
	return rule{Alert: TicketAlert, Expr: r.pairs(TicketPairs),
		Labels: map[string]string{"severity": "warning", "slo": s.Name},
		Annotations: withDashboard(map[string]string{
			"summary": "SLO " + s.Name + " is burning its error budget" + onModel,
			"description": r.common() + onModel + " burns its error budget at {{ printf \"%.1f\" $value }}x over the long window (ticket: " +
				r.explain(TicketPairs) + "); it will be spent before the " + r.period + " period ends." + sleepingNote,
			"runbook_url": r.opts.RunbookURL + "#" + strings.ToLower(TicketAlert),
		}, r.opts.DashboardURL, s.Name)}
}

func preemptionNote(s *config.SLO) string {
	if s.Kind != config.KindPreemption {
		return ""
	}
	return ", which while the queue recovers needs " + WindowName(PreemptionPersist) + " of burning"
}

// recentStall is, per model (for probe SLOs, model "": any model), 1 if a
// replica serving it reported an engine stall within the last
// StallAftermath. vllm_engine_stalled is per exporter;
// vllm_requests_running gives the models each exporter's vLLM serves.
func recentStall(source, selector string) string {
	sel := matchers(selector)
	stalled := fmt.Sprintf(`max_over_time(vllm_engine_stalled%s[%s])`, sel, WindowName(StallAftermath))
	if source == config.SourceProbe {
		return "max(" + stalled + ")"
	}
	return fmt.Sprintf("max by (model) (\n  %s\n  * on (job, instance) group_right ()\n  (max by (job, instance, model) (vllm_requests_running%s) * 0 + 1)\n)", stalled, sel)
}

// queueRecovering selects the models whose waiting queue (summed across
// replicas) is under half of its peak within RecoveryWindow.
func (r *sloRules) queueRecovering() string {
	return fmt.Sprintf("%s%s\n< 0.5 * max_over_time(%s%s[%s])", waitingRecord, r.sel, waitingRecord, r.sel, WindowName(RecoveryWindow))
}

// withDashboard adds the dashboard_url annotation, opened on this SLO.
func withDashboard(ann map[string]string, dashboard, slo string) map[string]string {
	if dashboard == "" {
		return ann
	}
	sep := "?"
	if strings.Contains(dashboard, "?") {
		sep = "&"
	}
	ann["dashboard_url"] = dashboard + sep + "var-slo=" + url.QueryEscape(slo)
	return ann
}

// describe is the default SLO description.
func describe(s *config.SLO) string {
	src := "requests"
	if s.Source == config.SourceProbe {
		src = "probes"
	}
	pct := fmtFloat(math.Round(s.Objective*100*1e9) / 1e9)
	switch s.Kind {
	case config.KindLatency:
		return fmt.Sprintf("%s%% of %s with %s <= %ss", pct, src, s.Metric, fmtFloat(s.Threshold))
	case config.KindPreemption:
		return fmt.Sprintf("at most %s preemptions per finished request", fmtFloat(s.Threshold))
	default:
		return fmt.Sprintf("%s%% of %s succeed", pct, src)
	}
}

// DefaultRulesHeader heads the SLO rules of the shipped default SLOs (the
// alerts package, which writes alerts/slo-rules.yml, adds its own).
const DefaultRulesHeader = "Code generated by `vllm_exporter rules` from the shipped default SLOs; DO NOT EDIT."
