package interop

import (
	"bytes"
	"strings"
	"testing"

	"github.com/OpenSLO/go-sdk/pkg/openslo"
	v1 "github.com/OpenSLO/go-sdk/pkg/openslo/v1"
	"github.com/OpenSLO/go-sdk/pkg/openslosdk"

	"github.com/vllm-exporter/vllm_exporter/slo"
)

// decodeOpenSLO decodes and validates documents with the OpenSLO Go SDK
// (github.com/OpenSLO/go-sdk, the specification's reference validation).
func decodeOpenSLO(t *testing.T, b []byte) ([]openslo.Object, error) {
	t.Helper()
	objs, err := openslosdk.Decode(bytes.NewReader(b), openslosdk.FormatYAML)
	if err != nil {
		return nil, err
	}
	return objs, openslosdk.Validate(objs...)
}

func TestOpenSLOPassesTheSDKValidationAndStatesTheSameSLOs(t *testing.T) {
	for _, fx := range fixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			b, err := OpenSLO(fx.slos, fx.opts)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decodeOpenSLO(t, b)
			if err != nil {
				t.Fatalf("OpenSLO SDK rejects the output: %v\n%s", err, b)
			}
			services := openslosdk.FilterByType[v1.Service](objs)
			service := fx.opts.Service
			if service == "" {
				service = DefaultService
			}
			if len(services) != 1 || services[0].Metadata.Name != service {
				t.Fatalf("services = %v, want one named %s", services, service)
			}
			targets := map[string]bool{}
			for _, tg := range openslosdk.FilterByType[v1.AlertNotificationTarget](objs) {
				targets[tg.Metadata.Name] = true
			}
			slos := openslosdk.FilterByType[v1.SLO](objs)
			if len(slos) != len(fx.slos) {
				t.Fatalf("%d SLO objects for %d SLOs", len(slos), len(fx.slos))
			}
			for i, got := range slos {
				want := withDefaults(fx.slos[i])
				q, err := slo.NewSLIQueries(want, fx.opts.Selector)
				if err != nil {
					t.Fatal(err)
				}
				sp := got.Spec
				if got.Metadata.DisplayName != want.Name || sp.Service != service {
					t.Errorf("%s: displayName %q service %q", want.Name, got.Metadata.DisplayName, sp.Service)
				}
				if len(sp.Objectives) != 1 || sp.Objectives[0].Target == nil || *sp.Objectives[0].Target != want.Objective {
					t.Errorf("%s: objectives %+v, want target %v", want.Name, sp.Objectives, want.Objective)
				}
				if sp.BudgetingMethod != v1.SLOBudgetingMethodOccurrences {
					t.Errorf("%s: budgetingMethod %s", want.Name, sp.BudgetingMethod)
				}
				if len(sp.TimeWindow) != 1 || !sp.TimeWindow[0].IsRolling || sp.TimeWindow[0].Duration.String() != shorthand(want.PeriodDuration()) {
					t.Errorf("%s: timeWindow %+v, want rolling %s", want.Name, sp.TimeWindow, shorthand(want.PeriodDuration()))
				}
				rm := sp.Indicator.Spec.RatioMetric
				if rm == nil || rm.Bad == nil || rm.Total == nil || rm.Good != nil {
					t.Fatalf("%s: want a bad/total ratio metric, got %+v", want.Name, sp.Indicator.Spec)
				}
				// The same event counts as the exporter's rules (and as the
				// Sloth spec, whose queries Sloth and promtool check).
				for _, c := range []struct {
					what      string
					got, want string
				}{
					{"bad", rm.Bad.MetricSource.Spec["query"].(string), q.Bad(OpenSLOWindow)},
					{"total", rm.Total.MetricSource.Spec["query"].(string), q.Total(OpenSLOWindow)},
				} {
					if c.got != c.want {
						t.Errorf("%s: %s query\n%s\nwant\n%s", want.Name, c.what, c.got, c.want)
					}
				}
				if rm.Bad.MetricSource.Type != "Prometheus" {
					t.Errorf("%s: metric source %q", want.Name, rm.Bad.MetricSource.Type)
				}
				// One policy per burn-rate pair, with the rules' factors
				// and (minute-rounded) windows.
				ws := slo.Windows(want.PeriodDuration())
				pairs := append(append([]slo.AlertPair{}, slo.PagePairs...), slo.TicketPairs...)
				if len(sp.AlertPolicies) != len(pairs) {
					t.Fatalf("%s: %d alert policies, want %d", want.Name, len(sp.AlertPolicies), len(pairs))
				}
				for j, ap := range sp.AlertPolicies {
					pr := pairs[j]
					pol := ap.SLOAlertPolicyInline
					if pol == nil || len(pol.Spec.Conditions) != 1 || pol.Spec.Conditions[0].AlertPolicyConditionInline == nil {
						t.Fatalf("%s: policy %d is not one inline condition: %+v", want.Name, j, ap)
					}
					cond := pol.Spec.Conditions[0].AlertPolicyConditionInline.Spec
					sev := "critical"
					if j >= len(slo.PagePairs) {
						sev = "warning"
					}
					c := cond.Condition
					if cond.Severity != sev || c.Kind != v1.AlertConditionKindBurnRate || c.Threshold == nil || *c.Threshold != pr.Factor ||
						c.LookbackWindow.String() != shorthand(ws[pr.Long]) || c.AlertAfter == nil || c.AlertAfter.String() != shorthand(ws[pr.Short]) {
						t.Errorf("%s: policy %d: %s %+v, want %s %vx over %s and %s", want.Name, j, cond.Severity, c, sev, pr.Factor, ws[pr.Long], ws[pr.Short])
					}
					for _, nt := range pol.Spec.NotificationTargets {
						if nt.AlertPolicyNotificationTargetRef == nil || !targets[nt.TargetRef] {
							t.Errorf("%s: policy %d notifies an undefined target %+v", want.Name, j, nt)
						}
					}
				}
			}
		})
	}
}

// The SDK's validation is not vacuous: it rejects what the spec forbids.
func TestOpenSLOValidationRejectsABrokenDocument(t *testing.T) {
	fx := fixtures(t)[0]
	b, err := OpenSLO(fx.slos, fx.opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to string }{
		{"budgetingMethod: Occurrences", "budgetingMethod: Sometimes"},
		{"op: gt", "op: bigger"},
		{"duration: 30d", "duration: 30s"},
	} {
		broken := strings.Replace(string(b), c.from, c.to, 1)
		if broken == string(b) {
			t.Fatalf("%q not in the output", c.from)
		}
		if _, err := decodeOpenSLO(t, []byte(broken)); err == nil {
			t.Errorf("OpenSLO SDK accepts %q", c.to)
		}
	}
}
