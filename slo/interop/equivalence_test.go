package interop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/slo"
)

// seriesFor are promtool input series (1m apart, 41 samples) for each
// fixture: two models with different bad fractions, and what the
// exporter's queries must tell apart: a model on an older vLLM (TPOT from
// the inter-token histogram), a model without failure series, series of
// another job and of a probe profile the regex must not match.
var seriesFor = map[string][]string{
	"default": {
		`vllm_time_to_first_token_seconds_count{model="a"} 0+60x40`,
		`vllm_time_to_first_token_seconds_bucket{le="1",model="a"} 0+54x40`,
		`vllm_time_to_first_token_seconds_count{model="b"} 0+30x40`,
		`vllm_time_to_first_token_seconds_bucket{le="1",model="b"} 0+29x40`,
		`vllm_request_time_per_output_token_seconds_count{model="a"} 0+60x40`,
		`vllm_request_time_per_output_token_seconds_bucket{le="0.1",model="a"} 0+57x40`,
		`vllm_inter_token_latency_seconds_count{model="b"} 0+600x40`,
		`vllm_inter_token_latency_seconds_bucket{le="0.1",model="b"} 0+540x40`,
		`vllm_e2e_request_latency_seconds_count{model="a"} 0+60x40`,
		`vllm_e2e_request_latency_seconds_bucket{le="60",model="a"} 0+59x40`,
		`vllm_e2e_request_latency_seconds_count{model="b"} 0+30x40`,
		`vllm_e2e_request_latency_seconds_bucket{le="60",model="b"} 0+27x40`,
		`vllm_requests_finished_total{finished_reason="stop",model="a"} 0+58x40`,
		`vllm_requests_finished_total{finished_reason="abort",model="a"} 0+1x40`,
		`vllm_requests_finished_total{finished_reason="error",model="a"} 0+1x40`,
		`vllm_requests_finished_total{finished_reason="length",model="b"} 0+30x40`,
		`vllm_requests_refused_total{model="b"} 0+2x40`,
		`vllm_preemptions_total{model="a"} 0+3x40`,
		`vllm_preemptions_total{model="b"} 0+0x40`,
	},
	"custom": {
		`vllm_probe_time_to_first_token_seconds_count{job="vllm",model="a",profile="short-chat"} 0+4x40`,
		`vllm_probe_time_to_first_token_seconds_bucket{job="vllm",le="2.5",model="a",profile="short-chat"} 0+3x40`,
		`vllm_probe_time_to_first_token_seconds_count{job="vllm",model="a",profile="long.prompt"} 0+1x40`,
		`vllm_probe_time_to_first_token_seconds_bucket{job="vllm",le="2.5",model="a",profile="long.prompt"} 0+1x40`,
		`vllm_probe_time_to_first_token_seconds_count{job="vllm",model="a",profile="longXprompt"} 0+100x40`,
		`vllm_probe_time_to_first_token_seconds_bucket{job="vllm",le="2.5",model="a",profile="longXprompt"} 0+0x40`,
		`vllm_probe_time_to_first_token_seconds_count{job="other",model="a",profile="short-chat"} 0+100x40`,
		`vllm_probe_time_to_first_token_seconds_bucket{job="other",le="2.5",model="a",profile="short-chat"} 0+0x40`,
		`vllm_probe_requests_total{job="vllm",model="a",profile="short-chat"} 0+4x40`,
		`vllm_probe_failures_total{job="vllm",model="a",profile="short-chat"} 0+1x40`,
		`vllm_probe_requests_total{job="vllm",model="b",profile="short-chat"} 0+4x40`,
		`vllm_request_queue_time_seconds_count{job="vllm",model="a"} 0+60x40`,
		`vllm_request_queue_time_seconds_bucket{job="vllm",le="5",model="a"} 0+50x40`,
		`vllm_inter_token_latency_seconds_count{job="vllm",model="a"} 0+600x40`,
		`vllm_inter_token_latency_seconds_bucket{job="vllm",le="0.05",model="a"} 0+597x40`,
		`vllm_requests_finished_total{finished_reason="stop",job="vllm",model="a"} 0+60x40`,
		`vllm_preemptions_total{job="vllm",model="a"} 0+1x40`,
		`vllm_preemptions_total{job="other",model="a"} 0+50x40`,
	},
}

// modelsOf lists, per fixture and SLO, the models the SLO has events for in
// seriesFor (both must be in every tool's result, and nothing else).
var modelsOf = map[string]map[string][]string{
	"default": {
		"ttft-p99": {"a", "b"}, "tpot-p99": {"a", "b"}, "e2e-p99": {"a", "b"},
		"preemption": {"a", "b"}, "availability": {"a", "b"},
	},
	"custom": {
		"probe_ttft": {"a"}, "probe-availability": {"a", "b"}, "queue-p95": {"a"},
		"itl": {"a"}, "preemption-strict": {"a"},
	},
}

// sameRatio is a promtool expression test asserting that, for every model,
// the error ratio record `ours` equals `theirs` (within float noise).
type sameRatio struct {
	ours, theirs string
	models       []string
}

type promtoolTest struct {
	RuleFiles          []string   `yaml:"rule_files"`
	EvaluationInterval string     `yaml:"evaluation_interval"`
	Tests              []testCase `yaml:"tests"`
}

type testCase struct {
	Interval    string     `yaml:"interval"`
	InputSeries []inputSer `yaml:"input_series"`
	ExprTests   []exprTest `yaml:"promql_expr_test"`
}

type inputSer struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type exprTest struct {
	Expr       string      `yaml:"expr"`
	EvalTime   string      `yaml:"eval_time"`
	ExpSamples []expSample `yaml:"exp_samples"`
}

type expSample struct {
	Labels string  `yaml:"labels"`
	Value  float64 `yaml:"value"`
}

// promtoolSame loads the exporter's rules for fx and the other tool's
// generated rule files into one promtool unit test over seriesFor[fx] and
// checks every sameRatio at 40m.
func promtoolSame(t *testing.T, fx fixture, toolRules map[string][]byte, checks []sameRatio) {
	t.Helper()
	pt := testutil.Promtool(t)
	dir := t.TempDir()
	ours, err := slo.GenerateRules(fx.slos, slo.RuleOptions{Selector: fx.opts.Selector})
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"exporter.yml"}
	if err := os.WriteFile(filepath.Join(dir, "exporter.yml"), ours, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, b := range toolRules {
		files = append(files, name)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tc := testCase{Interval: "1m"}
	for _, s := range seriesFor[fx.name] {
		i := strings.LastIndexByte(s, ' ')
		tc.InputSeries = append(tc.InputSeries, inputSer{Series: s[:i], Values: s[i+1:]})
	}
	for _, c := range checks {
		et := exprTest{EvalTime: "40m",
			Expr: fmt.Sprintf("abs(%s - on (model) %s) < bool 1e-9", c.ours, c.theirs)}
		for _, m := range c.models {
			et.ExpSamples = append(et.ExpSamples, expSample{Labels: fmt.Sprintf(`{model=%q}`, m), Value: 1})
		}
		tc.ExprTests = append(tc.ExprTests, et)
	}
	b, err := yaml.Marshal(promtoolTest{RuleFiles: files, EvaluationInterval: "1m", Tests: []testCase{tc}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "test.yml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pt, "test", "rules", "test.yml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: the tool's SLIs differ from the exporter's: %v\n%s", err, out)
	}
}
