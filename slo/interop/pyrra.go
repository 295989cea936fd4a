package interop

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
)

// Pyrra's ServiceLevelObjective (pyrra.dev/v1alpha1).
type pyrraSLO struct {
	APIVersion string        `yaml:"apiVersion"`
	Kind       string        `yaml:"kind"`
	Metadata   pyrraMetadata `yaml:"metadata"`
	Spec       pyrraSpec     `yaml:"spec"`
}

type pyrraMetadata struct {
	Name   string `yaml:"name"`
	Labels labels `yaml:"labels,omitempty"`
}

type pyrraSpec struct {
	Description string         `yaml:"description,omitempty"`
	Target      string         `yaml:"target"`
	Window      string         `yaml:"window"`
	Indicator   pyrraIndicator `yaml:"indicator"`
	Alerting    pyrraAlerting  `yaml:"alerting"`
}

type pyrraIndicator struct {
	Ratio   *pyrraEvents `yaml:"ratio,omitempty"`
	Latency *pyrraEvents `yaml:"latency,omitempty"`
}

type pyrraQuery struct {
	Metric string `yaml:"metric"`
}

// pyrraEvents is a ratio indicator (errors) or a latency one (success).
type pyrraEvents struct {
	Errors   *pyrraQuery `yaml:"errors,omitempty"`
	Success  *pyrraQuery `yaml:"success,omitempty"`
	Total    pyrraQuery  `yaml:"total"`
	Grouping []string    `yaml:"grouping"`
}

type pyrraAlerting struct {
	Name string `yaml:"name"`
}

// PyrraAlertName is the burn-rate alert Pyrra generates for every SLO.
const PyrraAlertName = "VLLMSLOErrorBudgetBurn"

// Pyrra writes one ServiceLevelObjective per SLO, named after the SLO (so
// Pyrra's `slo` label matches the exporter's), grouped by model. Pyrra takes
// series selectors, not queries: latency SLOs read the bucket at the
// threshold with the exposition's `le` spelling, a server TPOT SLO reads
// vLLM's per-request TPOT histogram only, and a server availability SLO
// needs the failure series to exist (see docs/slo.md, "SLO interop").
func Pyrra(slos []config.SLO, o Options) ([]byte, error) {
	o.defaults()
	ps, err := prepare(slos, o)
	if err != nil {
		return nil, err
	}
	docs := make([]any, 0, len(ps))
	comments := make([]string, 0, len(ps))
	for _, p := range ps {
		s, e := p.s, p.series
		doc := pyrraSLO{
			APIVersion: "pyrra.dev/v1alpha1",
			Kind:       "ServiceLevelObjective",
			Metadata: pyrraMetadata{Name: p.id, Labels: labels{
				"app.kubernetes.io/name": "vllm_exporter",
				"pyrra.dev/service":      o.Service,
			}},
			Spec: pyrraSpec{
				Description: strings.TrimSpace(description(s)),
				Target:      strconv.FormatFloat(percent(s.Objective), 'f', -1, 64),
				Window:      shorthand(s.PeriodDuration()),
				Alerting:    pyrraAlerting{Name: PyrraAlertName},
			},
		}
		var note []string
		switch s.Kind {
		case config.KindLatency:
			sel := e.Matchers
			if sel != "" {
				sel += ","
			}
			doc.Spec.Indicator.Latency = &pyrraEvents{
				Success:  &pyrraQuery{Metric: fmt.Sprintf(`%s_bucket{%sle=%q}`, e.Histogram, sel, e.LeValue)},
				Total:    pyrraQuery{Metric: e.Histogram + "_count" + braces(e.Matchers)},
				Grouping: []string{"model"},
			}
			if !strings.ContainsAny(e.LeValue, ".eE") {
				note = append(note, fmt.Sprintf(`Prometheus 3 stores this bucket as le="%s.0": change the le matcher there.`, e.LeValue))
			}
			if len(e.Fallbacks) > 0 {
				note = append(note, fmt.Sprintf("vLLM releases without %s: use %s instead.", e.Histogram, strings.Join(e.Fallbacks, ", ")))
			}
		default:
			doc.Spec.Indicator.Ratio = &pyrraEvents{
				Errors:   &pyrraQuery{Metric: e.Errors},
				Total:    pyrraQuery{Metric: e.Total},
				Grouping: []string{"model"},
			}
		}
		docs = append(docs, doc)
		comments = append(comments, strings.Join(note, "\n"))
	}
	return encodeDocs(o.Header, docs, comments)
}

func braces(ms string) string {
	if ms == "" {
		return ""
	}
	return "{" + ms + "}"
}
