package dashboards

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/e2e"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

type dashPanel struct {
	Title       string `json:"title"`
	FieldConfig struct {
		Defaults struct {
			NoValue string `json:"noValue"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func panelsOf(t *testing.T, file string) map[string]dashPanel {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []dashPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]dashPanel{}
	for _, p := range d.Panels {
		out[p.Title] = p
	}
	return out
}

// panelExpr is the query (as written, with Grafana variables) of target i
// of the panel titled title; the test fails without it.
func panelExpr(t *testing.T, panels map[string]dashPanel, title string, i int) string {
	t.Helper()
	p, ok := panels[title]
	if !ok {
		t.Fatalf("no panel %q", title)
	}
	if i >= len(p.Targets) {
		t.Fatalf("panel %q has %d targets", title, len(p.Targets))
	}
	return p.Targets[i].Expr
}

// Panels say why they are empty, and the queries that explain it return
// what they should, evaluated by promtool on series shaped like the
// exporter's: the roofline panels name the missing flag; the evidence table
// has a "no bottleneck" row for a near_optimal model; while probes fail,
// the last-probe panel shows the failure reasons (and no stale TTFT); a
// budget on a young period shows the share of the period covered instead
// of an alarming overspend, and the budget once the period is covered.
func TestPanelsSayWhyTheyAreEmpty(t *testing.T) {
	ov, pr, sl := panelsOf(t, "vllm-overview.json"), panelsOf(t, "vllm-probes.json"), panelsOf(t, "vllm-slos.json")
	for _, title := range []string{"Decode: measured vs roofline", "Decode efficiency (measured / roofline)"} {
		if nv := ov[title].FieldConfig.Defaults.NoValue; !strings.Contains(nv, "--model.weight-bytes") || !strings.Contains(nv, "--model.memory-bandwidth") {
			t.Errorf("overview %q: no-data text %q does not name the flags", title, nv)
		}
	}
	for file, panels := range map[string]map[string]dashPanel{"overview": ov, "slos": sl} {
		for title, p := range panels {
			if strings.Contains(title, "budget remaining") && !strings.Contains(title, "over time") && !strings.Contains(title, "recording rules") && p.FieldConfig.Defaults.NoValue == "" {
				t.Errorf("%s %q: no no-data text", file, title)
			}
		}
	}
	expr := func(p dashPanel, i int) string {
		if i >= len(p.Targets) {
			t.Fatalf("panel %q has %d targets", p.Title, len(p.Targets))
		}
		return e2e.Substitute(p.Targets[i].Expr) // the writer quotes it
	}
	evidence := expr(ov["Bottleneck evidence"], 0)
	failing := expr(pr["Last probe TTFT and age"], 2)
	lastTTFT := expr(pr["Last probe TTFT and age"], 0)
	budget := expr(ov["SLO error budget remaining"], 0)
	budgetSLOs := expr(sl["Error budget remaining"], 0)
	// A sample every 30 s for 10 minutes (Prometheus 3 range selectors
	// are left-open); the probe starts failing at minute 4 and times out
	// once a minute from then.
	const (
		l         = `job="vllm",instance="a:9470"`
		step      = 30 * time.Second
		n         = int(10*time.Minute/step) + 1
		failsFrom = 4 * time.Minute
	)
	gauge := func(v float64) string { return testutil.Samples(slices.Repeat([]float64{v}, n)) }
	success, failures := make([]float64, n), make([]float64, n)
	for i := range success {
		at := time.Duration(i) * step
		success[i] = 1
		if at >= failsFrom {
			success[i] = 0
			failures[i] = (at - failsFrom).Minutes() + 1 // one timeout a minute from minute 4
		}
	}
	// The failure reasons panel: increase over [5m] at 8m, the timeouts
	// counted in (3m, 8m] (the counter is 0 before the first, so
	// Prometheus does not extrapolate below it).
	at := 8 * time.Minute
	timeouts := failures[int(at/step)] - failures[int((at-5*time.Minute)/step)]
	in := []testutil.InputSeries{
		{Series: `vllm_bottleneck{` + l + `,model="m",class="near_optimal"}`, Values: gauge(1)},
		{Series: `vllm_bottleneck{` + l + `,model="m",class="queueing"}`, Values: gauge(0)},
		{Series: `vllm_probe_last_success{` + l + `,profile="short"}`, Values: testutil.Samples(success)},
		{Series: `vllm_probe_last_ttft_seconds{` + l + `,profile="short"}`, Values: gauge(0.2)},
		{Series: `vllm_probe_failures_total{` + l + `,profile="short",reason="timeout"}`, Values: testutil.Samples(failures)},
		{Series: `vllm_slo_error_budget_remaining_ratio{` + l + `,slo="young",model="m"}`, Values: gauge(-22.38)},
		{Series: `vllm_slo_period_covered_ratio{` + l + `,slo="young",model="m"}`, Values: gauge(0.001)},
		{Series: `vllm_slo_error_budget_remaining_ratio{` + l + `,slo="old",model="m"}`, Values: gauge(0.8)},
		{Series: `vllm_slo_period_covered_ratio{` + l + `,slo="old",model="m"}`, Values: gauge(0.5)},
	}
	budgetShown := []testutil.ExpSample{
		{Labels: `{slo="young",model="m",shown="young period: share covered"}`, Value: 0.001},
		{Labels: `{slo="old",model="m",shown="budget left"}`, Value: 0.8},
	}
	d := func(m int) testutil.Duration { return testutil.Duration(time.Duration(m) * time.Minute) }
	checks := []testutil.ExprTest{
		{Expr: evidence, EvalTime: d(5), ExpSamples: []testutil.ExpSample{{Labels: `{model="m",class="near_optimal",signal="no bottleneck"}`, Value: 1}}},
		{Expr: failing, EvalTime: testutil.Duration(at), ExpSamples: []testutil.ExpSample{{Labels: `{profile="short",reason="timeout"}`, Value: timeouts}}},
		{Expr: lastTTFT, EvalTime: d(2), ExpSamples: []testutil.ExpSample{{Labels: `{profile="short"}`, Value: 0.2}}},
		{Expr: lastTTFT, EvalTime: d(8)}, // failing: no stale TTFT
		{Expr: budget, EvalTime: d(5), ExpSamples: budgetShown},
		{Expr: budgetSLOs, EvalTime: d(5), ExpSamples: budgetShown},
	}
	testutil.RunRuleTests(t, testutil.WriteRuleTest(t, t.TempDir(), "panels_test.yml", testutil.RuleTestFile{
		RuleFiles:          []string{fleetRules(t)},
		EvaluationInterval: testutil.Duration(time.Minute),
		Tests:              []testutil.RuleTest{{Interval: testutil.Duration(step), InputSeries: in, ExprTests: checks}},
	}))
}
