package config

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// SLO is one entry of the `slos:` list: a service level objective evaluated
// by the SLO watchdog (slo/) and compiled into Prometheus rules by
// `vllm_exporter rules`.
//
// Every SLO counts events: a total (finished requests, histogram
// observations, probes) and the bad ones among them. The objective is the
// fraction of events that must be good over the period.
type SLO struct {
	// Name identifies the SLO (the `slo` label). Lower case letters, digits,
	// '-' and '_', starting with a letter; at most 64 characters.
	Name string `yaml:"name"`
	// Description is free text shown in alert descriptions.
	Description string `yaml:"description,omitempty"`
	// Objective is the target good fraction, 0 < objective < 1 (e.g. 0.99).
	// For kind preemption it may be omitted: it is then 1 - threshold.
	Objective float64 `yaml:"objective,omitempty"`
	// Period is the error-budget period (default 30d). The alert windows
	// scale with it (5m..3d for 30d).
	Period model.Duration `yaml:"period,omitempty"`
	// Source is where events come from: "server" (the exporter's stable
	// re-exports of vLLM's histograms and counters) or "probe" (the
	// exporter's own synthetic probes, which work with no user traffic).
	Source string `yaml:"source,omitempty"`
	// Kind is "latency", "preemption" or "availability".
	Kind string `yaml:"kind"`
	// Metric is the latency histogram (kind latency only): ttft, tpot, itl,
	// e2e or queue (queue: server only).
	Metric string `yaml:"metric,omitempty"`
	// Threshold: for latency, the upper bound in seconds a good event must
	// not exceed (must be a bucket boundary of the histogram); for
	// preemption, the allowed preemptions per finished request.
	Threshold float64 `yaml:"threshold,omitempty"`
	// MinEvents is the low-traffic guard: a window with fewer events never
	// counts as burning (default 10; 0 disables the guard).
	MinEvents *float64 `yaml:"min_events,omitempty"`
	// Profiles restricts a probe SLO to these probe profiles (default: all).
	Profiles []string `yaml:"profiles,omitempty"`
}

// SLO sources and kinds.
const (
	SourceServer = "server"
	SourceProbe  = "probe"

	KindLatency      = "latency"
	KindPreemption   = "preemption"
	KindAvailability = "availability"
)

// DefaultSLOPeriod is the error-budget period when `period` is absent.
const DefaultSLOPeriod = 30 * 24 * time.Hour

// DefaultMinEvents is the low-traffic guard when `min_events` is absent.
const DefaultMinEvents = 10

// Latency histogram bucket boundaries (seconds) as vLLM (>= 0.8.4) defines
// them; the exporter re-exports them unchanged, and the probes use the same
// boundaries so that server and probe SLOs compare.
var (
	// TTFTBuckets: vllm:time_to_first_token_seconds.
	TTFTBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	// TokenLatencyBuckets: vllm:inter_token_latency_seconds,
	// vllm:request_time_per_output_token_seconds and the older
	// vllm:time_per_output_token_seconds.
	TokenLatencyBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	// RequestLatencyBuckets: vllm:e2e_request_latency_seconds and the
	// request phase histograms (queue, prefill, decode, inference).
	RequestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// LatencyMetrics lists the accepted `metric` values in documentation order.
var LatencyMetrics = []string{"ttft", "tpot", "itl", "e2e", "queue"}

// MetricBuckets returns the bucket boundaries of the histogram behind a
// latency metric name, or nil for an unknown name.
func MetricBuckets(metric string) []float64 {
	switch metric {
	case "ttft":
		return TTFTBuckets
	case "tpot", "itl":
		return TokenLatencyBuckets
	case "e2e", "queue":
		return RequestLatencyBuckets
	}
	return nil
}

var sloNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// UnmarshalYAML refuses a period, objective or source given as zero or
// empty: zero is also how an absent field reads, and would silently become
// the default (a 30d period for "0s"). It uses the decoder's own unmarshal
// callback so unknown fields stay errors.
func (s *SLO) UnmarshalYAML(unmarshal func(any) error) error {
	type plain SLO
	var given map[string]any
	if err := unmarshal((*plain)(s)); err != nil {
		return err
	}
	if err := unmarshal(&given); err != nil {
		return err
	}
	for _, c := range []struct {
		key, why string
		zero     bool
	}{
		{"period", "0s is no period (omit period for 30d)", s.Period == 0},
		{"objective", "0 must be between 0 and 1 exclusive (e.g. 0.99; a preemption SLO may omit it)", s.Objective == 0},
		{"source", `"" is not one of server, probe (omit source for server)`, s.Source == ""},
	} {
		if _, ok := given[c.key]; ok && c.zero {
			return fmt.Errorf("%s: %s", c.key, c.why)
		}
	}
	return nil
}

// ApplyDefaults fills the fields that have defaults. Validate calls it.
func (s *SLO) ApplyDefaults() {
	if s.Period == 0 {
		s.Period = model.Duration(DefaultSLOPeriod)
	}
	if s.Source == "" {
		s.Source = SourceServer
	}
	if s.MinEvents == nil {
		v := float64(DefaultMinEvents)
		s.MinEvents = &v
	}
	if s.Kind == KindPreemption && s.Objective == 0 && s.Threshold > 0 && s.Threshold < 1 {
		s.Objective = 1 - s.Threshold
	}
}

// MinEventsValue is min_events after defaults.
func (s *SLO) MinEventsValue() float64 {
	if s.MinEvents == nil {
		return DefaultMinEvents
	}
	return *s.MinEvents
}

// PeriodDuration is the period after defaults.
func (s *SLO) PeriodDuration() time.Duration {
	if s.Period == 0 {
		return DefaultSLOPeriod
	}
	return time.Duration(s.Period)
}

// ErrorBudget is 1 - objective: the allowed fraction of bad events,
// rounded to 12 decimals so 1 - 0.99 is 0.01 (not 0.010000000000000009) in
// the watchdog and in generated rules alike.
func (s *SLO) ErrorBudget() float64 { return math.Round((1-s.Objective)*1e12) / 1e12 }

// Validate applies defaults and checks one SLO against vLLM's default
// bucket bounds. Errors name the field.
func (s *SLO) Validate() error { return s.ValidateWith(MetricBuckets) }

// ValidateWith is Validate with the bucket bounds of each latency metric
// given (File.Buckets: histogram_buckets, else vLLM's defaults).
func (s *SLO) ValidateWith(buckets func(metric string) []float64) error {
	s.ApplyDefaults()
	if s.Name == "" {
		return errors.New("name: required")
	}
	if !sloNameRE.MatchString(s.Name) {
		return fmt.Errorf("name: %q must match %s", s.Name, sloNameRE)
	}
	switch s.Source {
	case SourceServer, SourceProbe:
	default:
		return fmt.Errorf("source: %q is not one of server, probe", s.Source)
	}
	p := s.PeriodDuration()
	if p < time.Hour {
		return fmt.Errorf("period: %s is shorter than 1h (the shortest alert window would be under 10s)", s.Period)
	}
	if p > 400*24*time.Hour {
		return fmt.Errorf("period: %s is longer than 400d", s.Period)
	}
	if mv := s.MinEventsValue(); mv < 0 || math.IsNaN(mv) || math.IsInf(mv, 0) {
		return fmt.Errorf("min_events: %v must be a finite number >= 0", mv)
	}
	if len(s.Profiles) > 0 && s.Source != SourceProbe {
		return errors.New("profiles: only valid with source: probe")
	}
	for i, pr := range s.Profiles {
		if pr == "" {
			return fmt.Errorf("profiles[%d]: empty profile name", i)
		}
	}
	switch s.Kind {
	case KindLatency:
		b := buckets(s.Metric)
		if s.Metric == "" {
			return fmt.Errorf("metric: required for kind latency (one of %s)", strings.Join(LatencyMetrics, ", "))
		}
		if MetricBuckets(s.Metric) == nil {
			return fmt.Errorf("metric: %q is not one of %s", s.Metric, strings.Join(LatencyMetrics, ", "))
		}
		if s.Source == SourceProbe && s.Metric == "queue" {
			return errors.New("metric: queue is only measured by the server (source: server)")
		}
		if !isBoundary(b, s.Threshold) {
			return fmt.Errorf("threshold: %v is not a bucket boundary of the %s histogram; boundaries are %s (vLLM run with --custom-histogram-buckets: list its bounds under histogram_buckets)",
				s.Threshold, s.Metric, formatBounds(b))
		}
	case KindPreemption:
		if s.Source != SourceServer {
			return errors.New("source: kind preemption is measured by the server only (source: server)")
		}
		if s.Metric != "" {
			return errors.New("metric: only valid with kind latency")
		}
		if !(s.Threshold > 0 && s.Threshold < 1) {
			return fmt.Errorf("threshold: %v must be the allowed preemptions per finished request, 0 < threshold < 1", s.Threshold)
		}
		if math.Abs(s.Objective-(1-s.Threshold)) > 1e-9 {
			return fmt.Errorf("objective: %v contradicts threshold %v (a preemption SLO's objective is 1 - threshold; omit objective)", s.Objective, s.Threshold)
		}
	case KindAvailability:
		if s.Metric != "" {
			return errors.New("metric: only valid with kind latency")
		}
		if s.Threshold != 0 {
			return errors.New("threshold: not used by kind availability")
		}
	case "":
		return errors.New("kind: required (latency, preemption or availability)")
	default:
		return fmt.Errorf("kind: %q is not one of latency, preemption, availability", s.Kind)
	}
	if !(s.Objective > 0 && s.Objective < 1) {
		return fmt.Errorf("objective: %v must be between 0 and 1 exclusive (e.g. 0.99)", s.Objective)
	}
	return nil
}

// Fingerprint identifies what an SLO counts: two SLOs with the same
// fingerprint count the same events into the same window geometry, so saved
// window state carries over across reloads and restarts. The objective and
// min_events are not part of it (changing them re-judges the same events).
func (s *SLO) Fingerprint() string {
	pr := append([]string(nil), s.Profiles...)
	sort.Strings(pr)
	return strings.Join([]string{s.Source, s.Kind, s.Metric,
		strconv.FormatFloat(s.Threshold, 'g', -1, 64),
		s.PeriodDuration().String(), strings.Join(pr, ",")}, "|")
}

// MaxBucketBounds bounds one histogram_buckets list (vLLM's longest
// default has 22 bounds).
const MaxBucketBounds = 64

// Buckets returns the bucket bounds of a latency metric: histogram_buckets
// when it lists the metric, else vLLM's default bounds (nil for an unknown
// metric).
func (f *File) Buckets(metric string) []float64 {
	if b, ok := f.HistogramBuckets[metric]; ok {
		return b
	}
	return MetricBuckets(metric)
}

func validateBuckets(m map[string][]float64) error {
	for metric, b := range m {
		if MetricBuckets(metric) == nil {
			return fmt.Errorf("%q is not one of %s", metric, strings.Join(LatencyMetrics, ", "))
		}
		if len(b) == 0 || len(b) > MaxBucketBounds {
			return fmt.Errorf("%s: between 1 and %d bounds, got %d", metric, MaxBucketBounds, len(b))
		}
		for i, x := range b {
			if !(x > 0) || math.IsInf(x, 0) {
				return fmt.Errorf("%s: bound %v must be a finite number > 0 (+Inf is implied)", metric, x)
			}
			if i > 0 && !(x > b[i-1]) {
				return fmt.Errorf("%s: bounds must be strictly ascending (%v after %v)", metric, x, b[i-1])
			}
		}
	}
	return nil
}

func isBoundary(b []float64, v float64) bool {
	for _, x := range b {
		if x == v {
			return true
		}
	}
	return false
}

func formatBounds(b []float64) string {
	s := make([]string, len(b))
	for i, x := range b {
		s[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(s, ", ")
}
