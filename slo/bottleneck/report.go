package bottleneck

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// Report is what `vllm_exporter diagnose` prints: everything the text and
// JSON renderings show, and nothing they compute. Absent numbers are nil.
type Report struct {
	Target       string        `json:"target"`
	Started      time.Time     `json:"started"`
	Duration     time.Duration `json:"duration_ns"`
	Scrapes      int           `json:"scrapes"`
	ScrapeErrors int           `json:"scrape_errors"`
	LastError    string        `json:"last_error,omitempty"`
	Schema       string        `json:"schema,omitempty"`
	GPUs         []string      `json:"gpus"` // "0: NVIDIA H100 80GB HBM3" ; empty: no GPU input
	Probes       []ProbeLine   `json:"probes,omitempty"`
	Models       []ModelReport `json:"models"`
	// Notes are adjustments made to the request (a window fitted to the
	// watch), printed first.
	Notes []string `json:"notes,omitempty"`
}

// ProbeLine summarises one probe profile over the watch.
type ProbeLine struct {
	Profile    string   `json:"profile"`
	Prefix     string   `json:"prefix,omitempty"`
	Requests   float64  `json:"requests"`
	Failures   float64  `json:"failures"`
	MedianTTFT *float64 `json:"median_ttft_seconds,omitempty"`
	// FailureReasons counts the failures by reason (vllm_probe_failures_total's
	// reason); LastError is the latest failure's reason and the server's
	// error text (truncated, credentials scrubbed), or why nothing was sent.
	FailureReasons map[string]float64 `json:"failure_reasons,omitempty"`
	LastError      string             `json:"last_error,omitempty"`
	// Fit says how the profile was fitted to the model's max_model_len.
	Fit string `json:"fit,omitempty"`
}

// ModelReport is one model's diagnosis.
type ModelReport struct {
	Model          string     `json:"model"`
	Class          Class      `json:"class"`
	Summary        string     `json:"summary"`
	Recommendation string     `json:"recommendation"`
	Evidence       []Evidence `json:"evidence"`
	// Pending is the class that replaces Class once the last tick's verdict
	// has disagreed with it on hold_ticks ticks (PendingTicks so far), as
	// in the running exporter; empty while they agree.
	Pending      Class   `json:"pending,omitempty"`
	PendingTicks int     `json:"pending_ticks,omitempty"`
	AlsoHeld     []Class `json:"also_held,omitempty"` // lower-priority rules that held on the last tick
	// CannotRuleOut names the causes the inputs could not exclude that
	// would make the recommendation the wrong knob (no GPU readings).
	CannotRuleOut []string           `json:"cannot_rule_out,omitempty"`
	Unavailable   []UnavailableClass `json:"unavailable,omitempty"`

	// SLOs are the configured SLOs as the SLO watchdog evaluated them.
	SLOs       []SLOLine      `json:"slos"`
	Roofline   RooflineReport `json:"roofline"`
	Throughput Throughput     `json:"throughput"`
	Capacity   CapacityReport `json:"capacity"`
}

// UnavailableClass is a class the inputs could not reach, and why.
type UnavailableClass struct {
	Class  Class  `json:"class"`
	Reason string `json:"reason"`
}

// SLOLine is one configured SLO over what the watchdog has seen (the whole
// watch for diagnose): its objective, the bad and total events, and whether
// it burns its error budget faster than it accrues (burn rate over 1).
type SLOLine struct {
	Name      string   `json:"name"`
	Objective string   `json:"objective"` // e.g. "ttft <= 1 s for 99% of requests"
	Bad       float64  `json:"bad"`
	Total     float64  `json:"total"`
	BurnRate  *float64 `json:"burn_rate,omitempty"` // nil: no events
	Page      bool     `json:"page,omitempty"`
	Ticket    bool     `json:"ticket,omitempty"`
}

// RooflineReport is the decode roofline comparison.
type RooflineReport struct {
	WeightBytes     float64  `json:"weight_bytes"`
	WeightSource    string   `json:"weight_source,omitempty"`
	KVBytes         float64  `json:"kv_bytes"`
	KVSource        string   `json:"kv_source"`
	Bandwidth       float64  `json:"bandwidth_bytes_per_second"`
	BandwidthSource string   `json:"bandwidth_source,omitempty"`
	Predicted       *float64 `json:"predicted_tokens_per_second"`
	Measured        *float64 `json:"measured_tokens_per_second"`
	Efficiency      *float64 `json:"efficiency_ratio"`
}

// Throughput is the last window's rates.
type Throughput struct {
	Window                time.Duration `json:"window_ns"`
	RequestsPerSecond     *float64      `json:"requests_per_second"`
	OutputTokensPerSecond *float64      `json:"output_tokens_per_second"`
	PromptTokensPerSecond *float64      `json:"prompt_tokens_per_second"`
	KVCacheUsage          *float64      `json:"kv_cache_usage_ratio"`
	Running               *float64      `json:"requests_running"`
	Waiting               *float64      `json:"requests_waiting"`
}

// CapacityReport is sustained throughput while the SLOs held, and cost.
type CapacityReport struct {
	RequestsPerSecond     *float64 `json:"requests_per_second"`
	OutputTokensPerSecond *float64 `json:"output_tokens_per_second"`
	GPUs                  int      `json:"gpus"`
	GPUHour               float64  `json:"gpu_hour,omitempty"`
	CostPerMillionOutput  *float64 `json:"cost_per_million_output_tokens,omitempty"`
	Plan                  *GPUPlan `json:"plan,omitempty"`
	// Saturated: measured at capacity; otherwise RequestsPerSecond is the
	// offered load and ExtrapolatedRequestsPerSecond the KV-capacity
	// extrapolation (see KVExtrapolation), at KVUsage.
	Saturated                     bool     `json:"saturated"`
	KVUsage                       *float64 `json:"kv_cache_usage_ratio,omitempty"`
	ExtrapolatedRequestsPerSecond *float64 `json:"extrapolated_requests_per_second,omitempty"`
}

func ptr(v snapshot.Value) *float64 {
	if !v.OK {
		return nil
	}
	x := v.V
	return &x
}

// findingOf returns the evidence of class c in the last tick's findings.
func findingOf(st ModelState, c Class) []Evidence {
	for _, f := range st.Findings {
		if f.Class == c {
			return f.Evidence
		}
	}
	return nil
}

// ModelReportFrom turns a classifier state into its report section: the
// published class (hysteresis included, as the running exporter publishes
// it) with its evidence on the last tick, and the class pending to replace
// it, if any.
func ModelReportFrom(st ModelState, window time.Duration, gpuHour float64, slos []SLOLine) ModelReport {
	class := st.Class
	a := AdviceFor(class)
	mr := ModelReport{
		Model: st.Model, Class: class, Summary: a.Summary, Recommendation: a.Recommendation,
		Evidence: withBuckets(findingOf(st, class), st.Window), CannotRuleOut: CannotRuleOut(class, st.Unavailable),
		Pending: st.Candidate, PendingTicks: st.CandidateTicks, SLOs: slos,
	}
	for _, f := range st.Findings {
		if f.Holds && f.Class != class && f.Class != NearOptimal {
			mr.AlsoHeld = append(mr.AlsoHeld, f.Class)
		}
	}
	for _, c := range Classes {
		if r, ok := st.Unavailable[c]; ok {
			mr.Unavailable = append(mr.Unavailable, UnavailableClass{Class: c, Reason: r})
		}
	}
	r := st.Roofline
	mr.Roofline = RooflineReport{WeightBytes: r.WeightBytes, WeightSource: r.WeightSource, KVBytes: r.KVBytes, KVSource: r.KVSource,
		Bandwidth: r.Bandwidth, BandwidthSource: r.BandwidthSource,
		Predicted: ptr(r.Predicted), Measured: ptr(r.Measured), Efficiency: ptr(r.Efficiency)}
	mr.Throughput.Window = window
	if w := st.Window; w != nil {
		mr.Throughput.RequestsPerSecond = ptr(w.RequestsPerSecond)
		mr.Throughput.OutputTokensPerSecond = ptr(w.GenerationTokensPerSecond)
		mr.Throughput.PromptTokensPerSecond = ptr(w.PromptTokensPerSecond)
	}
	if m := st.Latest; m != nil {
		mr.Throughput.KVCacheUsage, mr.Throughput.Running, mr.Throughput.Waiting = ptr(m.KVUsage), ptr(m.Running), ptr(m.Waiting)
	}
	c := st.Capacity
	mr.Capacity = CapacityReport{RequestsPerSecond: ptr(c.RequestsPerSecond), OutputTokensPerSecond: ptr(c.OutputTokensPerSecond),
		GPUs: c.GPUs, GPUHour: gpuHour, CostPerMillionOutput: ptr(c.CostPerMillionOutput), Plan: c.Plan,
		Saturated: c.Saturated, KVUsage: ptr(c.KVUsage)}
	if !c.Saturated && c.RequestsPerSecond.OK {
		mr.Capacity.ExtrapolatedRequestsPerSecond = ptr(KVExtrapolation(c.RequestsPerSecond.V, c.KVUsage))
	}
	return mr
}

// ProbeLines summarises a probe snapshot, sorted by profile.
func ProbeLines(p *snapshot.Probes) []ProbeLine {
	if p == nil {
		return nil
	}
	var out []ProbeLine
	for name, pr := range p.Profiles {
		if pr == nil {
			continue
		}
		l := ProbeLine{Profile: name, Prefix: pr.Prefix, Requests: pr.Requests, LastError: pr.LastError, Fit: pr.FitNote}
		for r, n := range pr.Failures {
			l.Failures += n
			if n > 0 {
				if l.FailureReasons == nil {
					l.FailureReasons = map[string]float64{}
				}
				l.FailureReasons[r] = n
			}
		}
		l.MedianTTFT = ptr(pr.TTFT.Quantile(0.5))
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Profile < out[j].Profile })
	return out
}

// GPULines names each GPU in a snapshot ("0: NVIDIA H100 (peak 3.35 TB/s)").
func GPULines(g *snapshot.GPU) []string {
	var out []string
	for _, d := range upDevices(g) {
		l := fmt.Sprintf("%d: %s", d.Index, d.Name)
		if d.PeakMemBandwidthBytesPerSecond.OK {
			l += fmt.Sprintf(" (peak memory bandwidth %s)", bytesRate(d.PeakMemBandwidthBytesPerSecond.V))
		}
		out = append(out, l)
	}
	return out
}

// RenderJSON writes the report as indented JSON.
func RenderJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// RenderText writes the report a person reads at 3 a.m.: the verdict and
// the knob first, then the numbers behind each claim.
func RenderText(w io.Writer, r Report) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("vLLM diagnosis of %s", r.Target)
	p("  watched %s from %s: %d scrapes, %d failed%s", r.Duration.Round(time.Second), r.Started.UTC().Format(time.RFC3339), r.Scrapes, r.ScrapeErrors, schemaNote(r.Schema))
	if r.LastError != "" {
		p("  last scrape error: %s", r.LastError)
	}
	for _, n := range r.Notes {
		p("  note: %s", n)
	}
	if len(r.GPUs) == 0 {
		p("  GPUs: none visible (no NVML): gpu_fault, throttled and communication_bound cannot be diagnosed;")
		p("    a throttled or NVLink-bound GPU reads as a decode class or near_optimal, a lost GPU as engine_stalled or failed scrapes")
	} else {
		p("  GPUs: %s", strings.Join(r.GPUs, "; "))
	}
	if len(r.Models) == 0 {
		p("")
		p("NO DIAGNOSIS: no model was seen in a successful scrape of %s/metrics", strings.TrimRight(r.Target, "/"))
	}
	for _, m := range r.Models {
		renderModel(p, m)
	}
	if len(r.Probes) > 0 {
		p("")
		p("Probes:")
		for _, l := range r.Probes {
			failed := fmt.Sprintf("%3.0f failed", l.Failures)
			if len(l.FailureReasons) > 0 {
				var parts []string
				for _, reason := range slices.Sorted(maps.Keys(l.FailureReasons)) {
					parts = append(parts, fmt.Sprintf("%s %.0f", reason, l.FailureReasons[reason]))
				}
				failed += " (" + strings.Join(parts, ", ") + ")"
			}
			p("  %-12s %-5s %3.0f sent, %s, median TTFT %s", l.Profile, l.Prefix, l.Requests, failed, secs(l.MedianTTFT))
			if l.Fit != "" {
				p("    %s", l.Fit)
			}
			if l.LastError != "" {
				p("    last error: %s", l.LastError)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printf writes one line of the text report.
type printf func(format string, a ...any)

// renderModel writes one model's section: the verdict, the evidence, the
// SLO, the roofline, the load and the capacity.
func renderModel(p printf, m ModelReport) {
	p("")
	p("== model %s ==", m.Model)
	p("BOTTLENECK: %s", m.Class)
	p("  %s", m.Summary)
	p("RECOMMENDATION: %s", m.Recommendation)
	if len(m.Evidence) > 0 {
		p("Evidence:")
		for _, e := range m.Evidence {
			p("  %s", evidenceLine(e))
		}
	}
	if m.Pending != "" {
		p("CHANGING: the last %d tick(s) say %s; it replaces %s once hold_ticks ticks in a row do", m.PendingTicks, m.Pending, m.Class)
	}
	if len(m.AlsoHeld) > 0 {
		p("Also held (lower priority): %s", joinClasses(m.AlsoHeld))
	}
	for _, c := range m.CannotRuleOut {
		p("CANNOT RULE OUT: %s", c)
	}
	p("SLOs (configured; events over the watch):")
	if len(m.SLOs) == 0 {
		p("  none measured")
	}
	for _, l := range m.SLOs {
		state := "no events"
		switch {
		case l.Page:
			state = "PAGE"
		case l.Ticket:
			state = "TICKET"
		case l.BurnRate != nil && *l.BurnRate > 1:
			state = "BURNING"
		case l.BurnRate != nil:
			state = "OK"
		}
		burn := "n/a"
		if l.BurnRate != nil {
			burn = sigFig(*l.BurnRate) + "x"
		}
		p("  %-14s %s: %s of %s bad, burn rate %s  %s", l.Name, l.Objective, sigFig(l.Bad), sigFig(l.Total), burn, state)
	}
	renderRoofline(p, m.Roofline)
	t := m.Throughput
	p("Load (last %s): %s req/s, %s output tok/s, %s prompt tok/s; running %s, waiting %s, KV cache %s",
		t.Window, num(t.RequestsPerSecond), num(t.OutputTokensPerSecond), num(t.PromptTokensPerSecond),
		num(t.Running), num(t.Waiting), pct(t.KVCacheUsage))
	c := m.Capacity
	switch {
	case c.OutputTokensPerSecond != nil && c.Saturated:
		p("Capacity while SLOs held (measured at saturation): %s req/s, %s output tok/s on %d GPU(s)", num(c.RequestsPerSecond), num(c.OutputTokensPerSecond), c.GPUs)
	case c.OutputTokensPerSecond != nil:
		p("Capacity: NOT MEASURED: the server was not saturated (nothing waiting, no preemption, KV cache %s); %s req/s, %s output tok/s is the offered load, a lower bound",
			pct(c.KVUsage), num(c.RequestsPerSecond), num(c.OutputTokensPerSecond))
		if c.ExtrapolatedRequestsPerSecond != nil {
			p("  extrapolation: about %s req/s on %d GPU(s) if throughput grew with KV-cache occupancy until the cache is full (%s req/s / KV usage %s); latency rises before that, so load-test before sizing on it",
				num(c.ExtrapolatedRequestsPerSecond), c.GPUs, num(c.RequestsPerSecond), pct(c.KVUsage))
		}
	default:
		p("Capacity while SLOs held: unknown (the SLOs did not hold, or were not measurable, during the watch)")
	}
	if c.CostPerMillionOutput != nil {
		p("  cost: %.4f per million output tokens at %.2f per GPU-hour", *c.CostPerMillionOutput, c.GPUHour)
	}
	if pl := c.Plan; pl != nil {
		p("  for %.0f requests/day: %.2f req/s needed, %d GPU(s), %d with %.1fx headroom", pl.DailyRequests, pl.RequiredPerSecond, pl.GPUs, pl.GPUsWithHeadroom, pl.Headroom)
	}
	if len(m.Unavailable) > 0 {
		var parts []string
		for _, u := range m.Unavailable {
			parts = append(parts, fmt.Sprintf("%s (%s)", u.Class, u.Reason))
		}
		p("Could not be diagnosed with these inputs: %s", strings.Join(parts, ", "))
	}
}

// renderRoofline writes the decode roofline: predicted, measured and their
// ratio.
func renderRoofline(p printf, rf RooflineReport) {
	p("Decode roofline (per stream):")
	switch {
	case rf.Predicted != nil && rf.KVSource == "none":
		p("  predicted %s = %s (%s) / %s weights (KV traffic not counted: give --model.kv-cache-bytes, or run where NVML sees the GPU)",
			tokRate(rf.Predicted), bytesRate(rf.Bandwidth), bandwidthNote(rf.BandwidthSource), bytesSize(rf.WeightBytes)+weightNote(rf.WeightSource))
	case rf.Predicted != nil:
		p("  predicted %s = %s (%s) / (%s weights + %s KV in use, pool size from %s)",
			tokRate(rf.Predicted), bytesRate(rf.Bandwidth), bandwidthNote(rf.BandwidthSource), bytesSize(rf.WeightBytes)+weightNote(rf.WeightSource), bytesSize(rf.KVBytes), kvNote(rf.KVSource))
	default:
		p("  predicted: unknown (give --model.weight-bytes or --model.parameters with --model.bytes-per-parameter (or --model.kv-cache-bytes where NVML sees vLLM's processes), and a GPU or --model.memory-bandwidth)")
	}
	if rf.Measured != nil {
		p("  measured  %s (1 / mean time per output token %s)", tokRate(rf.Measured), secs(ptrOf(1 / *rf.Measured)))
	} else {
		p("  measured: unknown (no TPOT or inter-token latency observations in the window)")
	}
	if rf.Efficiency != nil {
		p("  efficiency %.2f of the roofline", *rf.Efficiency)
	}
}

func evidenceLine(e Evidence) string {
	v := value(e.Value, e.Unit)
	if len(e.Bucket) == 2 {
		v = bucketRange(e.Bucket[0], e.Bucket[1])
	}
	s := fmt.Sprintf("%-36s %12s", e.Signal, v)
	if e.Op == "" {
		return s
	}
	mark := "holds"
	if !e.Holds() {
		mark = "does not hold"
	}
	return fmt.Sprintf("%s  %-2s %-12s %s", s, e.Op, value(e.Threshold, e.Unit), mark)
}

// bucketRange prints a histogram bucket's bounds in seconds: where a
// quantile lies inside one wide bucket that range is all the data says.
func bucketRange(lo, hi float64) string {
	if hi < 1 {
		return sigFig(lo*1000) + "-" + sigFig(hi*1000) + " ms"
	}
	return sigFig(lo) + "-" + sigFig(hi) + " s"
}

func value(v float64, unit string) string {
	switch unit {
	case "seconds":
		return secs(&v)
	case "bytes/s":
		return bytesRate(v)
	case "tokens/s":
		return sigFig(v) + " tok/s"
	}
	return sigFig(v)
}

func schemaNote(s string) string {
	if s == "" {
		return ""
	}
	return ", metrics schema " + s
}

// weightNote says where the weight bytes came from when it was not a flag.
func weightNote(src string) string {
	if src == "process_memory" {
		return " (vLLM process memory - KV pool - overhead)"
	}
	return ""
}

func kvNote(src string) string {
	switch src {
	case "flag":
		return "--model.kv-cache-bytes"
	case "cache_config":
		return "vLLM's stated pool (cache_config_info)"
	}
	return "GPU memory x gpu_memory_utilization"
}

func bandwidthNote(src string) string {
	if src == "gpu" {
		return "GPU peak x bandwidth_efficiency"
	}
	return "--model.memory-bandwidth"
}

func joinClasses(cs []Class) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = string(c)
	}
	return strings.Join(s, ", ")
}

func ptrOf(v float64) *float64 { return &v }

func secs(v *float64) string {
	if v == nil {
		return "n/a"
	}
	if *v < 1 {
		return sigFig(*v*1000) + " ms"
	}
	return sigFig(*v) + " s"
}

func num(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return sigFig(*v)
}

func pct(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return sigFig(*v*100) + "%"
}

func tokRate(v *float64) string { return sigFig(*v) + " tok/s" }

func bytesSize(v float64) string { return fmt.Sprintf("%.1f GB", v/1e9) }

func bytesRate(v float64) string {
	if v >= 1e12 {
		return fmt.Sprintf("%.2f TB/s", v/1e12)
	}
	return fmt.Sprintf("%.1f GB/s", v/1e9)
}
