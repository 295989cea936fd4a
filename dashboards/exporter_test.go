package dashboards

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/e2e"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// The queries that fold a series that can be absent into one that is
// there compute what they say, evaluated by promtool on series shaped like
// the exporter's: the exporter row keeps the runtime series of exporter
// targets only and shows GOMEMLIMIT only when set, lists collectors up,
// failing and absent, shows a 0 "none" row only while every vLLM label
// value was understood; the capacity table names each verdict; the SLOs
// dashboard shows each SLO measurable (0) or not (1, by reason), and the
// ticks it could not measure.
func TestFoldedPanelsComputeWhatTheySay(t *testing.T) {
	ov, sl := panelsOf(t, "vllm-overview.json"), panelsOf(t, "vllm-slos.json")
	panels := map[string]dashPanel{}
	for _, p := range rowPanels(t, exporterRowTitle) {
		panels[p.Title] = p
	}
	for _, title := range []string{"Capacity, cost and GPUs needed", "Throughput vs capacity (measured while the SLOs held)"} {
		panels[title] = ov[title]
	}
	panels["SLOs not measurable"] = sl["SLOs not measurable"]
	expr := func(title string, i int) string { return e2e.Substitute(panelExpr(t, panels, title, i)) }
	const (
		step = 30 * time.Second
		n    = int(10*time.Minute/step) + 1
	)
	// Two exporters (a: GOMEMLIMIT set, an unexpected label value, a
	// failing probe collector; b: GOMEMLIMIT unset, nothing unexpected,
	// no GPU) and Prometheus itself, whose runtime series no panel shows.
	const a, b, prom = `job="vllm",instance="a:9470"`, `job="vllm",instance="b:9470"`, `job="prometheus",instance="localhost:9090"`
	gauge, counter := panelSeries(n, step)
	const (
		cpuPerMin, rss, limit = 3.0, 30 << 20, 40 << 20
		openFDs, maxFDs       = 12.0, 1024.0
	)
	var in []testutil.InputSeries
	add := func(series, values string) { in = append(in, testutil.InputSeries{Series: series, Values: values}) }
	for _, l := range []string{a, b} {
		add(`vllm_exporter_build_info{`+l+`,version="x"}`, gauge(1))
		add(`process_cpu_seconds_total{`+l+`}`, counter(cpuPerMin))
		add(`process_resident_memory_bytes{`+l+`}`, gauge(rss))
		add(`process_open_fds{`+l+`}`, gauge(openFDs))
		add(`process_max_fds{`+l+`}`, gauge(maxFDs))
		add(`vllm_exporter_vllm_schema_info{`+l+`,schema="v1"}`, gauge(1))
		add(`vllm_exporter_collector_up{`+l+`,collector="vllm"}`, gauge(1))
	}
	add(`process_cpu_seconds_total{`+prom+`}`, counter(60))
	add(`process_resident_memory_bytes{`+prom+`}`, gauge(1<<30))
	add(`go_gc_gomemlimit_bytes{`+a+`}`, gauge(limit))
	add(`go_gc_gomemlimit_bytes{`+b+`}`, gauge(math.MaxInt64))
	add(`vllm_exporter_collector_up{`+a+`,collector="probes"}`, gauge(0))
	add(`vllm_exporter_collector_absent{`+b+`,collector="gpu",reason="nvml_library_not_found"}`, gauge(1))
	add(`vllm_exporter_vllm_unexpected_label_values{`+a+`,metric="vllm:engine_sleep_state",label="state"}`, gauge(2))
	add(`vllm_exporter_vllm_unknown_families{`+b+`}`, gauge(3))
	const m = `model="m"`
	add(`vllm_capacity_requests_per_second{`+a+`,`+m+`}`, gauge(2.5))
	add(`vllm_capacity_output_tokens_per_second{`+a+`,`+m+`}`, gauge(400))
	add(`vllm_cost_per_million_output_tokens{`+a+`,`+m+`}`, gauge(1.7))
	add(`vllm_slo_objective_ratio{`+a+`,slo="ttft",`+m+`}`, gauge(0.99))
	add(`vllm_slo_objective_ratio{`+a+`,slo="itl",`+m+`}`, gauge(0.99))
	add(`vllm_slo_unmeasurable{`+a+`,slo="itl",reason="no_bucket_bound"}`, gauge(1))
	add(`vllm_exporter_slo_evaluation_errors_total{`+a+`,slo="itl"}`, counter(60))

	s := func(v float64, labels string) testutil.ExpSample {
		return testutil.ExpSample{Labels: "{" + labels + "}", Value: v}
	}
	ia, ib := `instance="a:9470"`, `instance="b:9470"`
	check := func(title string, i int, want ...testutil.ExpSample) testutil.ExprTest {
		return testutil.ExprTest{Expr: expr(title, i), EvalTime: testutil.Duration(5 * time.Minute), ExpSamples: want}
	}
	checks := []testutil.ExprTest{
		check("Exporter CPU", 0, s(cpuPerMin/60, ia), s(cpuPerMin/60, ib)),
		check("Exporter memory", 0, s(rss, ia+`,series="RSS"`), s(rss, ib+`,series="RSS"`), s(limit, ia+`,series="GOMEMLIMIT"`)),
		check("Exporter open file descriptors", 0, s(openFDs/maxFDs, ia), s(openFDs/maxFDs, ib)),
		check("Collectors", 0, s(1, ia+`,collector="vllm",state="up"`), s(1, ib+`,collector="vllm",state="up"`),
			s(0, ia+`,collector="probes",state="failing"`), s(1, ib+`,collector="gpu",reason="nvml_library_not_found",state="absent"`)),
		check("vLLM samples dropped, unexpected label values, unknown families", 1,
			s(2, ia+`,metric="vllm:engine_sleep_state",label="state"`), s(0, ib+`,metric="none"`)),
		check("vLLM samples dropped, unexpected label values, unknown families", 2, s(3, ib)),
		check("Capacity, cost and GPUs needed", 0, s(2.5, m+`,verdict="requests/s while SLOs held"`),
			s(400, m+`,verdict="output tokens/s while SLOs held"`), s(1.7, m+`,verdict="cost per 1M output tokens (--cost.gpu-hour)"`)),
		check("SLOs not measurable", 0, s(1, `slo="itl",reason="no_bucket_bound"`), s(0, `slo="ttft",reason="measurable"`)),
		// 60 a minute since 0 at minute 0: increase over [1h] at minute
		// 5 is the counter's whole history (no extrapolation below 0).
		check("SLOs not measurable", 1, s(60*5, `slo="itl"`), s(0, `slo="ttft"`)),
	}
	testutil.RunRuleTests(t, testutil.WriteRuleTest(t, t.TempDir(), "folded_panels_test.yml", testutil.RuleTestFile{
		RuleFiles:          []string{fleetRules(t)},
		EvaluationInterval: testutil.Duration(time.Minute),
		Tests:              []testutil.RuleTest{{Interval: testutil.Duration(step), InputSeries: in, ExprTests: checks}},
	}))
}

// fleetRules is alerts/vllm-recording.yml, the fleet recording rules the
// fleet-wide panels read.
func fleetRules(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "alerts", "vllm-recording.yml"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
