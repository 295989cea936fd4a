package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/e2e"
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

// Panels say why they are empty, and the queries that explain it return
// what they should, evaluated by promtool on series shaped like the
// exporter's: the roofline panels name the missing flag; the evidence table
// has a "no bottleneck" row for a near_optimal model; while probes fail,
// the last-probe panel shows the failure reasons (and no stale TTFT); a
// budget on a young period shows the share of the period covered instead
// of an alarming overspend, and the budget once the period is covered.
func TestPanelsSayWhyTheyAreEmpty(t *testing.T) {
	promtool := e2e.RequireTool(t, "promtool")
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
		return strings.ReplaceAll(e2e.Substitute(p.Targets[i].Expr), "'", "''")
	}
	evidence := expr(ov["Bottleneck evidence"], 0)
	failing := expr(pr["Last probe TTFT and age"], 2)
	lastTTFT := expr(pr["Last probe TTFT and age"], 0)
	budget := expr(ov["SLO error budget remaining"], 0)
	budgetSLOs := expr(sl["Error budget remaining"], 0)
	test := fmt.Sprintf(`evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'vllm_bottleneck{job="vllm",instance="a:9470",model="m",class="near_optimal"}'
        values: '1x10'
      - series: 'vllm_bottleneck{job="vllm",instance="a:9470",model="m",class="queueing"}'
        values: '0x10'
      - series: 'vllm_probe_last_success{job="vllm",instance="a:9470",profile="short"}'
        values: '1 1 1 1 0 0 0 0 0 0 0'
      - series: 'vllm_probe_last_ttft_seconds{job="vllm",instance="a:9470",profile="short"}'
        values: '0.2x10'
      - series: 'vllm_probe_failures_total{job="vllm",instance="a:9470",profile="short",reason="timeout"}'
        values: '0 0 0 0 1 2 3 4 5 6 7'
      - series: 'vllm_slo_error_budget_remaining_ratio{job="vllm",instance="a:9470",slo="young",model="m"}'
        values: '-22.38x10'
      - series: 'vllm_slo_period_covered_ratio{job="vllm",instance="a:9470",slo="young",model="m"}'
        values: '0.001x10'
      - series: 'vllm_slo_error_budget_remaining_ratio{job="vllm",instance="a:9470",slo="old",model="m"}'
        values: '0.8x10'
      - series: 'vllm_slo_period_covered_ratio{job="vllm",instance="a:9470",slo="old",model="m"}'
        values: '0.5x10'
    promql_expr_test:
      - expr: '%s'
        eval_time: 5m
        exp_samples:
          - labels: '{model="m",class="near_optimal",signal="no bottleneck"}'
            value: 1
      - expr: '%s'
        eval_time: 8m
        exp_samples:
          - labels: '{profile="short",reason="timeout"}'
            value: 5
      - expr: '%s'
        eval_time: 2m
        exp_samples:
          - labels: '{profile="short"}'
            value: 0.2
      - expr: '%s'
        eval_time: 8m
        exp_samples: []
      - expr: '%s'
        eval_time: 5m
        exp_samples:
          - labels: '{slo="young",model="m",shown="young period: share covered"}'
            value: 0.001
          - labels: '{slo="old",model="m",shown="budget left"}'
            value: 0.8
      - expr: '%s'
        eval_time: 5m
        exp_samples:
          - labels: '{slo="young",model="m",shown="young period: share covered"}'
            value: 0.001
          - labels: '{slo="old",model="m",shown="budget left"}'
            value: 0.8
`, evidence, failing, lastTTFT, lastTTFT, budget, budgetSLOs)
	p := filepath.Join(t.TempDir(), "panels_test.yml")
	if err := os.WriteFile(p, []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "test", "rules", p).CombinedOutput(); err != nil {
		t.Fatalf("promtool: %v\n%s\n%s", err, out, test)
	}
}
