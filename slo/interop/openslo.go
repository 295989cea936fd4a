package interop

import (
	"encoding/json"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

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
// pulls golang.org/x/tools/go/packages and go/types into whatever links it
// (8.8 MB of the sidecar's 26 MB of code, mapped in every pod, and 1.4 MiB
// of heap its validators build at start-up) for a subcommand that only
// writes YAML. The tests decode and validate the output with the SDK.
func OpenSLO(slos []config.SLO, o Options) ([]byte, error) {
	o.defaults()
	ps, err := prepare(slos, o)
	if err != nil {
		return nil, err
	}
	objs := []openSLOObject{
		openSLOObj("Service", openSLOMetadata{Name: o.Service, DisplayName: "vLLM"},
			openSLODescribed{Description: "vLLM inference servers watched by vllm_exporter."}),
		openSLOObj("AlertNotificationTarget", openSLOMetadata{Name: OpenSLOPageTarget},
			openSLOTarget{Description: "Alertmanager, severity critical (" + slo.PageAlert + ").", Target: "alertmanager"}),
		openSLOObj("AlertNotificationTarget", openSLOMetadata{Name: OpenSLOTicketTarget},
			openSLOTarget{Description: "Alertmanager, severity warning (" + slo.TicketAlert + ").", Target: "alertmanager"}),
	}
	for _, p := range ps {
		objs = append(objs, openSLOOf(p, o))
	}
	docs := make([]any, len(objs))
	for i, obj := range objs {
		if docs[i], err = openSLONode(obj); err != nil {
			return nil, fmt.Errorf("%s %s: %w", obj.Kind, obj.Metadata.Name, err)
		}
	}
	return encodeDocs(o.Header, docs, nil)
}

// The OpenSLO v1 fields the exporter writes, in the specification's order
// (https://github.com/OpenSLO/OpenSLO#specification).
type (
	openSLOObject struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Metadata   openSLOMetadata `json:"metadata"`
		Spec       any             `json:"spec"`
	}
	openSLOMetadata struct {
		Name        string `json:"name"`
		DisplayName string `json:"displayName,omitempty"`
	}
	openSLODescribed struct {
		Description string `json:"description,omitempty"`
	}
	openSLOTarget struct {
		Description string `json:"description,omitempty"`
		Target      string `json:"target"`
	}
	openSLOSpec struct {
		Description     string              `json:"description,omitempty"`
		Service         string              `json:"service"`
		Indicator       openSLOIndicator    `json:"indicator"`
		BudgetingMethod string              `json:"budgetingMethod"`
		TimeWindow      []openSLOTimeWindow `json:"timeWindow"`
		Objectives      []openSLOObjective  `json:"objectives"`
		AlertPolicies   []openSLOInline     `json:"alertPolicies"`
	}
	openSLOIndicator struct {
		Metadata openSLOMetadata `json:"metadata"`
		Spec     struct {
			RatioMetric openSLORatio `json:"ratioMetric"`
		} `json:"spec"`
	}
	openSLORatio struct {
		Counter bool              `json:"counter"`
		Bad     openSLOMetricSpec `json:"bad"`
		Total   openSLOMetricSpec `json:"total"`
	}
	openSLOMetricSpec struct {
		MetricSource struct {
			Type string `json:"type"`
			Spec struct {
				Query string `json:"query"`
			} `json:"spec"`
		} `json:"metricSource"`
	}
	openSLOTimeWindow struct {
		Duration  string `json:"duration"`
		IsRolling bool   `json:"isRolling"`
	}
	openSLOObjective struct {
		DisplayName string  `json:"displayName,omitempty"`
		Target      float64 `json:"target"`
	}
	// openSLOInline is an inline object of an SLO (an AlertPolicy) or of
	// an AlertPolicy (an AlertCondition): kind, metadata and spec.
	openSLOInline struct {
		Kind     string          `json:"kind"`
		Metadata openSLOMetadata `json:"metadata"`
		Spec     any             `json:"spec"`
	}
	openSLOAlertPolicy struct {
		Description         string          `json:"description,omitempty"`
		AlertWhenBreaching  bool            `json:"alertWhenBreaching"`
		AlertWhenResolved   bool            `json:"alertWhenResolved"`
		Conditions          []openSLOInline `json:"conditions"`
		NotificationTargets []struct {
			TargetRef string `json:"targetRef"`
		} `json:"notificationTargets"`
	}
	openSLOCondition struct {
		Severity  string `json:"severity"`
		Condition struct {
			Kind           string  `json:"kind"`
			Op             string  `json:"op"`
			Threshold      float64 `json:"threshold"`
			LookbackWindow string  `json:"lookbackWindow"`
			AlertAfter     string  `json:"alertAfter"`
		} `json:"condition"`
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
				Description:        fmt.Sprintf("%s: burn rate above %s over %s and %s (%s).", alert, formatFloat(pr.Factor), long, short, o.RunbookURL+"#"+strings.ToLower(alert)),
				AlertWhenBreaching: true,
				AlertWhenResolved:  true,
				Conditions:         []openSLOInline{{Kind: "AlertCondition", Metadata: openSLOMetadata{Name: name}, Spec: cond}},
			}
			policy.NotificationTargets = append(policy.NotificationTargets, struct {
				TargetRef string `json:"targetRef"`
			}{target})
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

// openSLONode is obj as a YAML node. obj goes through its JSON form (the
// field order above), and loses JSON's quoting and flow style so the YAML
// reads as hand-written YAML does.
func openSLONode(obj openSLOObject) (*yaml.Node, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	var plain func(n *yaml.Node)
	plain = func(n *yaml.Node) {
		n.Style = 0
		for _, c := range n.Content {
			plain(c)
		}
	}
	plain(&doc)
	return doc.Content[0], nil
}

// dnsName is id-suffix cut to a DNS label's 63 characters.
func dnsName(id, suffix string) string {
	max := 63 - len(suffix) - 1
	if len(id) > max {
		id = strings.TrimRight(id[:max], "-")
	}
	return id + "-" + suffix
}
