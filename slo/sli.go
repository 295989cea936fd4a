package slo

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
)

// SLIQueries is the PromQL of one SLO's events, summed by model, exactly as
// the recording rules of GenerateRules count them. Other SLO tools (Sloth,
// OpenSLO; package slo/interop) take these so that they measure the same
// events as the exporter's own rules.
type SLIQueries struct{ x sli }

// NewSLIQueries validates s (applying its defaults) and the extra label
// matchers (as RuleOptions.Selector) and builds its queries.
func NewSLIQueries(s config.SLO, selector string) (SLIQueries, error) {
	if err := s.Validate(); err != nil {
		return SLIQueries{}, fmt.Errorf("%s: %w", s.Name, err)
	}
	if selector != "" && !selectorRE.MatchString(selector) {
		return SLIQueries{}, fmt.Errorf("selector %q: want label matchers like job=\"vllm\",namespace=~\"prod-.*\"", selector)
	}
	return SLIQueries{buildSLI(&s, selector)}, nil
}

// Bad is the number of bad events over window (a PromQL duration, or a
// template placeholder such as Sloth's {{.window}}), per model.
func (q SLIQueries) Bad(window string) string { return q.x.bad(window, nil) }

// Total is the number of events over window, per model.
func (q SLIQueries) Total(window string) string { return q.x.events(window, nil) }

// EventSeries names the raw series behind an SLO for tools that take plain
// series selectors rather than queries (Pyrra). It cannot say everything the
// queries say: see Approximate.
type EventSeries struct {
	// Histogram is the latency histogram's base name (kind latency); the
	// good events are its bucket at Threshold (le = LeValue), the total its
	// _count.
	Histogram string
	// Fallbacks are histograms the queries use where Histogram is absent
	// (older vLLM), in order.
	Fallbacks []string
	// LeValue is the bucket boundary as the exposition writes it ("1",
	// "0.1"); LeRegex matches every spelling of it (Prometheus 3 writes
	// "1.0").
	LeValue, LeRegex string
	// Errors and Total are counter selectors (kinds preemption and
	// availability), each with the SLO's matchers.
	Errors, Total string
	// Matchers are the extra matchers every series carries (selector,
	// probe profiles), comma-separated, without braces.
	Matchers string
}

// NewEventSeries describes the raw series of s (validated, defaults applied).
func NewEventSeries(s config.SLO, selector string) (EventSeries, error) {
	if _, err := NewSLIQueries(s, selector); err != nil {
		return EventSeries{}, err
	}
	s.ApplyDefaults()
	ms := []string{}
	if strings.TrimSpace(selector) != "" {
		ms = append(ms, strings.TrimSpace(selector))
	}
	if len(s.Profiles) > 0 {
		alts := make([]string, len(s.Profiles))
		for i, p := range s.Profiles {
			alts[i] = strings.ReplaceAll(regexp.QuoteMeta(p), `\`, `\\`)
		}
		ms = append(ms, `profile=~"`+strings.Join(alts, "|")+`"`)
	}
	e := EventSeries{Matchers: strings.Join(ms, ",")}
	sel := matchers(ms...)
	switch s.Kind {
	case config.KindLatency:
		hs := serverHistograms[s.Metric]
		if s.Source == config.SourceProbe {
			hs = []string{probeHistograms[s.Metric]}
		}
		e.Histogram, e.Fallbacks = hs[0], hs[1:]
		e.LeValue, e.LeRegex = fmtFloat(s.Threshold), leRegex(s.Threshold)
	case config.KindPreemption:
		e.Errors, e.Total = "vllm_preemptions_total"+sel, "vllm_requests_finished_total"+sel
	default:
		if s.Source == config.SourceProbe {
			e.Errors, e.Total = "vllm_probe_failures_total"+sel, "vllm_probe_requests_total"+sel
		} else {
			e.Errors = "vllm_requests_finished_total" + matchers(append(ms, `finished_reason=~"abort|error"`)...)
			e.Total = "vllm_requests_finished_total" + sel
		}
	}
	return e, nil
}
