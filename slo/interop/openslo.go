package interop

import (
	"fmt"
	"strings"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/slo"
)

// OpenSLO v1 objects (github.com/OpenSLO/OpenSLO, schemas/v1).
type osloObject struct {
	APIVersion string       `yaml:"apiVersion"`
	Kind       string       `yaml:"kind"`
	Metadata   osloMetadata `yaml:"metadata"`
	Spec       any          `yaml:"spec"`
}

type osloMetadata struct {
	Name        string `yaml:"name"`
	DisplayName string `yaml:"displayName,omitempty"`
}

type osloServiceSpec struct {
	Description string `yaml:"description,omitempty"`
}

type osloTargetSpec struct {
	Description string `yaml:"description,omitempty"`
	Target      string `yaml:"target"`
}

type osloSLOSpec struct {
	Description     string             `yaml:"description,omitempty"`
	Service         string             `yaml:"service"`
	Indicator       osloIndicator      `yaml:"indicator"`
	TimeWindow      []osloTimeWindow   `yaml:"timeWindow"`
	BudgetingMethod string             `yaml:"budgetingMethod"`
	Objectives      []osloObjective    `yaml:"objectives"`
	AlertPolicies   []osloInlinePolicy `yaml:"alertPolicies"`
}

type osloIndicator struct {
	Metadata osloMetadata `yaml:"metadata"`
	Spec     osloSLISpec  `yaml:"spec"`
}

type osloSLISpec struct {
	RatioMetric osloRatio `yaml:"ratioMetric"`
}

type osloRatio struct {
	Counter bool       `yaml:"counter"`
	Bad     osloMetric `yaml:"bad"`
	Total   osloMetric `yaml:"total"`
}

type osloMetric struct {
	MetricSource osloSource `yaml:"metricSource"`
}

type osloSource struct {
	Type string            `yaml:"type"`
	Spec map[string]string `yaml:"spec"`
}

type osloTimeWindow struct {
	Duration  string `yaml:"duration"`
	IsRolling bool   `yaml:"isRolling"`
}

type osloObjective struct {
	DisplayName string  `yaml:"displayName,omitempty"`
	Target      float64 `yaml:"target"`
}

type osloInlinePolicy struct {
	Kind     string         `yaml:"kind"`
	Metadata osloMetadata   `yaml:"metadata"`
	Spec     osloPolicySpec `yaml:"spec"`
}

type osloPolicySpec struct {
	Description         string                `yaml:"description,omitempty"`
	AlertWhenBreaching  bool                  `yaml:"alertWhenBreaching"`
	AlertWhenResolved   bool                  `yaml:"alertWhenResolved"`
	Conditions          []osloInlineCondition `yaml:"conditions"`
	NotificationTargets []osloTargetRef       `yaml:"notificationTargets"`
}

type osloInlineCondition struct {
	Kind     string            `yaml:"kind"`
	Metadata osloMetadata      `yaml:"metadata"`
	Spec     osloConditionSpec `yaml:"spec"`
}

type osloConditionSpec struct {
	Description string        `yaml:"description,omitempty"`
	Severity    string        `yaml:"severity"`
	Condition   osloCondition `yaml:"condition"`
}

type osloCondition struct {
	Kind           string  `yaml:"kind"`
	Op             string  `yaml:"op"`
	Threshold      float64 `yaml:"threshold"`
	LookbackWindow string  `yaml:"lookbackWindow"`
	AlertAfter     string  `yaml:"alertAfter"`
}

type osloTargetRef struct {
	TargetRef string `yaml:"targetRef"`
}

// OpenSLOWindow is the placeholder the OpenSLO queries carry for the
// evaluation window (Sloth's convention: OpenSLO itself does not define
// how a Prometheus query is windowed).
const OpenSLOWindow = SlothWindow

// OpenSLO notification targets: one per severity, for Alertmanager.
const (
	OpenSLOPageTarget   = "vllm-page"
	OpenSLOTicketTarget = "vllm-ticket"
)

// OpenSLO writes a Service, two AlertNotificationTargets (page, ticket) and
// per SLO an SLO object with an inline ratio indicator (bad and total
// events, the exporter's queries) and one inline AlertPolicy per burn-rate
// pair: OpenSLO allows one condition per policy, a burnrate condition over
// the long window (lookbackWindow) that must hold for the short window
// (alertAfter).
func OpenSLO(slos []config.SLO, o Options) ([]byte, error) {
	o.defaults()
	ps, err := prepare(slos, o)
	if err != nil {
		return nil, err
	}
	docs := []any{
		osloObject{APIVersion: "openslo/v1", Kind: "Service", Metadata: osloMetadata{Name: o.Service, DisplayName: "vLLM"},
			Spec: osloServiceSpec{Description: "vLLM inference servers watched by vllm_exporter."}},
		osloObject{APIVersion: "openslo/v1", Kind: "AlertNotificationTarget", Metadata: osloMetadata{Name: OpenSLOPageTarget},
			Spec: osloTargetSpec{Target: "alertmanager", Description: "Alertmanager, severity critical (" + slo.PageAlert + ")."}},
		osloObject{APIVersion: "openslo/v1", Kind: "AlertNotificationTarget", Metadata: osloMetadata{Name: OpenSLOTicketTarget},
			Spec: osloTargetSpec{Target: "alertmanager", Description: "Alertmanager, severity warning (" + slo.TicketAlert + ")."}},
	}
	for _, p := range ps {
		docs = append(docs, openSLOOf(p, o))
	}
	return encodeDocs(o.Header, docs, nil)
}

func openSLOOf(p prepared, o Options) osloObject {
	s := p.s
	source := func(q string) osloMetric {
		return osloMetric{MetricSource: osloSource{Type: "Prometheus", Spec: map[string]string{"query": q}}}
	}
	ws := slo.Windows(s.PeriodDuration())
	var policies []osloInlinePolicy
	add := func(sev, target, alert string, pairs []slo.AlertPair) {
		for _, pr := range pairs {
			long, short := shorthand(ws[pr.Long]), shorthand(ws[pr.Short])
			name := dnsName(p.id, sev+"-"+long)
			desc := fmt.Sprintf("%s: burn rate above %s over %s and %s (%s).", alert, formatFloat(pr.Factor), long, short, o.RunbookURL+"#"+strings.ToLower(alert))
			policies = append(policies, osloInlinePolicy{
				Kind: "AlertPolicy", Metadata: osloMetadata{Name: name},
				Spec: osloPolicySpec{
					Description:        desc,
					AlertWhenBreaching: true,
					AlertWhenResolved:  true,
					Conditions: []osloInlineCondition{{
						Kind: "AlertCondition", Metadata: osloMetadata{Name: name},
						Spec: osloConditionSpec{Severity: sev, Condition: osloCondition{
							Kind: "burnrate", Op: "gt", Threshold: pr.Factor, LookbackWindow: long, AlertAfter: short,
						}},
					}},
					NotificationTargets: []osloTargetRef{{TargetRef: target}},
				},
			})
		}
	}
	add("critical", OpenSLOPageTarget, slo.PageAlert, slo.PagePairs)
	add("warning", OpenSLOTicketTarget, slo.TicketAlert, slo.TicketPairs)
	return osloObject{
		APIVersion: "openslo/v1", Kind: "SLO", Metadata: osloMetadata{Name: p.id, DisplayName: s.Name},
		Spec: osloSLOSpec{
			Description: strings.TrimSpace(description(s)),
			Service:     o.Service,
			Indicator: osloIndicator{Metadata: osloMetadata{Name: dnsName(p.id, "sli")}, Spec: osloSLISpec{
				RatioMetric: osloRatio{Bad: source(p.q.Bad(OpenSLOWindow)), Total: source(p.q.Total(OpenSLOWindow))},
			}},
			TimeWindow:      []osloTimeWindow{{Duration: shorthand(s.PeriodDuration()), IsRolling: true}},
			BudgetingMethod: "Occurrences",
			Objectives:      []osloObjective{{DisplayName: s.Name, Target: s.Objective}},
			AlertPolicies:   policies,
		},
	}
}

// dnsName is id-suffix cut to a DNS label's 63 characters.
func dnsName(id, suffix string) string {
	max := 63 - len(suffix) - 1
	if len(id) > max {
		id = strings.TrimRight(id[:max], "-")
	}
	return id + "-" + suffix
}
