package interop

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/OpenSLO/go-sdk/pkg/openslo"
	v1 "github.com/OpenSLO/go-sdk/pkg/openslo/v1"
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
// (alertAfter). The objects are the OpenSLO Go SDK's v1 types.
func OpenSLO(slos []config.SLO, o Options) ([]byte, error) {
	o.defaults()
	ps, err := prepare(slos, o)
	if err != nil {
		return nil, err
	}
	objs := []openslo.Object{
		v1.NewService(v1.Metadata{Name: o.Service, DisplayName: "vLLM"},
			v1.ServiceSpec{Description: "vLLM inference servers watched by vllm_exporter."}),
		v1.NewAlertNotificationTarget(v1.Metadata{Name: OpenSLOPageTarget},
			v1.AlertNotificationTargetSpec{Target: "alertmanager", Description: "Alertmanager, severity critical (" + slo.PageAlert + ")."}),
		v1.NewAlertNotificationTarget(v1.Metadata{Name: OpenSLOTicketTarget},
			v1.AlertNotificationTargetSpec{Target: "alertmanager", Description: "Alertmanager, severity warning (" + slo.TicketAlert + ")."}),
	}
	for _, p := range ps {
		objs = append(objs, openSLOOf(p, o))
	}
	docs := make([]any, len(objs))
	for i, obj := range objs {
		if docs[i], err = openSLONode(obj); err != nil {
			return nil, fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return encodeDocs(o.Header, docs, nil)
}

func openSLOOf(p prepared, o Options) v1.SLO {
	s := p.s
	source := func(q string) *v1.SLIMetricSpec {
		return &v1.SLIMetricSpec{MetricSource: v1.SLIMetricSource{Type: "Prometheus", Spec: map[string]any{"query": q}}}
	}
	ws := slo.Windows(s.PeriodDuration())
	var policies []v1.SLOAlertPolicy
	add := func(sev, target, alert string, pairs []slo.AlertPair) {
		for _, pr := range pairs {
			long, short := openSLODuration(ws[pr.Long]), openSLODuration(ws[pr.Short])
			name := dnsName(p.id, sev+"-"+long.String())
			desc := fmt.Sprintf("%s: burn rate above %s over %s and %s (%s).", alert, formatFloat(pr.Factor), long, short, o.RunbookURL+"#"+strings.ToLower(alert))
			policies = append(policies, v1.SLOAlertPolicy{SLOAlertPolicyInline: &v1.SLOAlertPolicyInline{
				Kind: openslo.KindAlertPolicy, Metadata: v1.Metadata{Name: name},
				Spec: v1.AlertPolicySpec{
					Description:        desc,
					AlertWhenBreaching: true,
					AlertWhenResolved:  true,
					Conditions: []v1.AlertPolicyCondition{{AlertPolicyConditionInline: &v1.AlertPolicyConditionInline{
						Kind: openslo.KindAlertCondition, Metadata: v1.Metadata{Name: name},
						Spec: v1.AlertConditionSpec{Severity: sev, Condition: v1.AlertConditionType{
							Kind: v1.AlertConditionKindBurnRate, Operator: v1.OperatorGT, Threshold: &pr.Factor,
							LookbackWindow: long, AlertAfter: &short,
						}},
					}}},
					NotificationTargets: []v1.AlertPolicyNotificationTarget{{
						AlertPolicyNotificationTargetRef: &v1.AlertPolicyNotificationTargetRef{TargetRef: target},
					}},
				},
			}})
		}
	}
	add("critical", OpenSLOPageTarget, slo.PageAlert, slo.PagePairs)
	add("warning", OpenSLOTicketTarget, slo.TicketAlert, slo.TicketPairs)
	objective := s.Objective
	return v1.NewSLO(v1.Metadata{Name: p.id, DisplayName: s.Name}, v1.SLOSpec{
		Description: strings.TrimSpace(description(s)),
		Service:     o.Service,
		Indicator: &v1.SLOIndicatorInline{Metadata: v1.Metadata{Name: dnsName(p.id, "sli")}, Spec: v1.SLISpec{
			RatioMetric: &v1.SLIRatioMetric{Bad: source(p.q.Bad(OpenSLOWindow)), Total: source(p.q.Total(OpenSLOWindow))},
		}},
		TimeWindow:      []v1.SLOTimeWindow{{Duration: openSLODuration(s.PeriodDuration()), IsRolling: true}},
		BudgetingMethod: v1.SLOBudgetingMethodOccurrences,
		Objectives:      []v1.SLOObjective{{DisplayName: s.Name, Target: &objective}},
		AlertPolicies:   policies,
	})
}

// openSLODuration is d in OpenSLO's duration shorthand (see shorthand).
func openSLODuration(d time.Duration) v1.DurationShorthand {
	v, unit := shorthandParts(d)
	return v1.NewDurationShorthand(int(v), v1.DurationShorthandUnit(unit))
}

// openSLONode is obj as a YAML node. The SDK's types carry JSON tags only
// (its own YAML encoder sorts keys), so obj goes through its JSON form,
// which keeps the specification's field order, and loses JSON's quoting
// and flow style so the YAML reads as hand-written YAML does.
func openSLONode(obj openslo.Object) (*yaml.Node, error) {
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
