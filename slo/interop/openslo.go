package interop

import (
	"fmt"
	"strings"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/slo"
)

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
//
// The documents are the specification's v1 objects written from the
// structs below, not from the OpenSLO Go SDK's types: the SDK's validation
// links go/types and go/packages into every pod for a subcommand that only
// writes YAML. The tests decode and validate the output with the SDK.
func OpenSLO(slos []config.SLO, o Options) ([]byte, error) {
	o.defaults()
	ps, err := prepare(slos, o)
	if err != nil {
		return nil, err
	}
	docs := []any{
		openSLOObj("Service", openSLOMetadata{Name: o.Service, DisplayName: "vLLM"},
			openSLODescribed{Description: "vLLM inference servers watched by vllm_exporter."}),
		openSLOObj("AlertNotificationTarget", openSLOMetadata{Name: OpenSLOPageTarget},
			openSLOTarget{Description: "Alertmanager, severity critical (" + slo.PageAlert + ").", Target: "alertmanager"}),
		openSLOObj("AlertNotificationTarget", openSLOMetadata{Name: OpenSLOTicketTarget},
			openSLOTarget{Description: "Alertmanager, severity warning (" + slo.TicketAlert + ").", Target: "alertmanager"}),
	}
	for _, p := range ps {
		docs = append(docs, openSLOOf(p, o))
	}
	return encodeDocs(o.Header, docs, nil)
}

// The OpenSLO v1 fields the exporter writes, in the specification's order
// (https://github.com/OpenSLO/OpenSLO#specification).
type (
	openSLOObject struct {
		APIVersion string          `yaml:"apiVersion"`
		Kind       string          `yaml:"kind"`
		Metadata   openSLOMetadata `yaml:"metadata"`
		Spec       any             `yaml:"spec"`
	}
	openSLOMetadata struct {
		Name        string `yaml:"name"`
		DisplayName string `yaml:"displayName,omitempty"`
	}
	openSLODescribed struct {
		Description string `yaml:"description,omitempty"`
	}
	openSLOTarget struct {
		Description string `yaml:"description,omitempty"`
		Target      string `yaml:"target"`
	}
	openSLOSpec struct {
		Description     string              `yaml:"description,omitempty"`
		Service         string              `yaml:"service"`
		Indicator       openSLOIndicator    `yaml:"indicator"`
		BudgetingMethod string              `yaml:"budgetingMethod"`
		TimeWindow      []openSLOTimeWindow `yaml:"timeWindow"`
		Objectives      []openSLOObjective  `yaml:"objectives"`
		AlertPolicies   []openSLOInline     `yaml:"alertPolicies"`
	}
	openSLOIndicator struct {
		Metadata openSLOMetadata `yaml:"metadata"`
		Spec     struct {
			RatioMetric openSLORatio `yaml:"ratioMetric"`
		} `yaml:"spec"`
	}
	openSLORatio struct {
		Counter bool              `yaml:"counter"`
		Bad     openSLOMetricSpec `yaml:"bad"`
		Total   openSLOMetricSpec `yaml:"total"`
	}
	openSLOMetricSpec struct {
		MetricSource struct {
			Type string `yaml:"type"`
			Spec struct {
				Query string `yaml:"query"`
			} `yaml:"spec"`
		} `yaml:"metricSource"`
	}
	openSLOTimeWindow struct {
		Duration  string `yaml:"duration"`
		IsRolling bool   `yaml:"isRolling"`
	}
	openSLOObjective struct {
		DisplayName string  `yaml:"displayName,omitempty"`
		Target      float64 `yaml:"target"`
	}
	// openSLOInline is an inline object of an SLO (an AlertPolicy) or of
	// an AlertPolicy (an AlertCondition): kind, metadata and spec.
	openSLOInline struct {
		Kind     string          `yaml:"kind"`
		Metadata openSLOMetadata `yaml:"metadata"`
		Spec     any             `yaml:"spec"`
	}
	openSLOAlertPolicy struct {
		Description         string             `yaml:"description,omitempty"`
		AlertWhenBreaching  bool               `yaml:"alertWhenBreaching"`
		AlertWhenResolved   bool               `yaml:"alertWhenResolved"`
		Conditions          []openSLOInline    `yaml:"conditions"`
		NotificationTargets []openSLOTargetRef `yaml:"notificationTargets"`
	}
	openSLOTargetRef struct {
		TargetRef string `yaml:"targetRef"`
	}
	openSLOCondition struct {
		Severity  string `yaml:"severity"`
		Condition struct {
			Kind           string  `yaml:"kind"`
			Op             string  `yaml:"op"`
			Threshold      float64 `yaml:"threshold"`
			LookbackWindow string  `yaml:"lookbackWindow"`
			AlertAfter     string  `yaml:"alertAfter"`
		} `yaml:"condition"`
	}
)

func openSLOObj(kind string, md openSLOMetadata, spec any) openSLOObject {
	return openSLOObject{APIVersion: "openslo/v1", Kind: kind, Metadata: md, Spec: spec}
}

func openSLOOf(p prepared, o Options) openSLOObject {
	s := p.s
	source := func(q string) openSLOMetricSpec {
		var m openSLOMetricSpec
		m.MetricSource.Type = "Prometheus"
		m.MetricSource.Spec.Query = q
		return m
	}
	ws := slo.Windows(s.PeriodDuration())
	var policies []openSLOInline
	add := func(sev, target, alert string, pairs []slo.AlertPair) {
		for _, pr := range pairs {
			long, short := shorthand(ws[pr.Long]), shorthand(ws[pr.Short])
			name := dnsName(p.id, sev+"-"+long)
			var cond openSLOCondition
			cond.Severity = sev
			c := &cond.Condition
			c.Kind, c.Op, c.Threshold, c.LookbackWindow, c.AlertAfter = "burnrate", "gt", pr.Factor, long, short
			policy := openSLOAlertPolicy{
				Description:         fmt.Sprintf("%s: burn rate above %v over %s and %s (%s).", alert, pr.Factor, long, short, o.RunbookURL+"#"+strings.ToLower(alert)),
				AlertWhenBreaching:  true,
				AlertWhenResolved:   true,
				Conditions:          []openSLOInline{{Kind: "AlertCondition", Metadata: openSLOMetadata{Name: name}, Spec: cond}},
				NotificationTargets: []openSLOTargetRef{{target}},
			}
			policies = append(policies, openSLOInline{Kind: "AlertPolicy", Metadata: openSLOMetadata{Name: name}, Spec: policy})
		}
	}
	add("critical", OpenSLOPageTarget, slo.PageAlert, slo.PagePairs)
	add("warning", OpenSLOTicketTarget, slo.TicketAlert, slo.TicketPairs)
	spec := openSLOSpec{
		Description:     strings.TrimSpace(description(s)),
		Service:         o.Service,
		BudgetingMethod: "Occurrences",
		TimeWindow:      []openSLOTimeWindow{{Duration: shorthand(s.PeriodDuration()), IsRolling: true}},
		Objectives:      []openSLOObjective{{DisplayName: s.Name, Target: s.Objective}},
		AlertPolicies:   policies,
	}
	spec.Indicator.Metadata = openSLOMetadata{Name: dnsName(p.id, "sli")}
	spec.Indicator.Spec.RatioMetric = openSLORatio{Bad: source(p.q.Bad(OpenSLOWindow)), Total: source(p.q.Total(OpenSLOWindow))}
	return openSLOObj("SLO", openSLOMetadata{Name: p.id, DisplayName: s.Name}, spec)
}

// dnsName is id-suffix cut to a DNS label's 63 characters.
func dnsName(id, suffix string) string {
	max := 63 - len(suffix) - 1
	if len(id) > max {
		id = strings.TrimRight(id[:max], "-")
	}
	return id + "-" + suffix
}
