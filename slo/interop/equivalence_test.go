package interop

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/slo"
)

// seriesFor are promtool input series (30s apart, 81 samples: a [1m]
// window holds two on Prometheus 3's left-open ranges) for each
// fixture: two models with different bad fractions, and what the
// exporter's queries must tell apart: a model on an older vLLM (TPOT from
// the inter-token histogram), a model without failure series, series of
// another job and of a probe profile the regex must not match.
var seriesFor = map[string][]string{
	"default": {
		`vllm_time_to_first_token_seconds_count{model="a"} 0+30x80`,
		`vllm_time_to_first_token_seconds_bucket{le="1",model="a"} 0+27x80`,
		`vllm_time_to_first_token_seconds_count{model="b"} 0+15x80`,
		`vllm_time_to_first_token_seconds_bucket{le="1",model="b"} 0+14.5x80`,
		`vllm_request_time_per_output_token_seconds_count{model="a"} 0+30x80`,
		`vllm_request_time_per_output_token_seconds_bucket{le="0.1",model="a"} 0+28.5x80`,
		`vllm_inter_token_latency_seconds_count{model="b"} 0+300x80`,
		`vllm_inter_token_latency_seconds_bucket{le="0.1",model="b"} 0+270x80`,
		`vllm_e2e_request_latency_seconds_count{model="a"} 0+30x80`,
		`vllm_e2e_request_latency_seconds_bucket{le="60",model="a"} 0+29.5x80`,
		`vllm_e2e_request_latency_seconds_count{model="b"} 0+15x80`,
		`vllm_e2e_request_latency_seconds_bucket{le="60",model="b"} 0+13.5x80`,
		`vllm_requests_finished_total{finished_reason="stop",model="a"} 0+29x80`,
		`vllm_requests_finished_total{finished_reason="abort",model="a"} 0+0.5x80`,
		`vllm_requests_finished_total{finished_reason="error",model="a"} 0+0.5x80`,
		`vllm_requests_finished_total{finished_reason="length",model="b"} 0+15x80`,
		`vllm_requests_refused_total{model="b"} 0+1x80`,
		`vllm_preemptions_total{model="a"} 0+1.5x80`,
		`vllm_preemptions_total{model="b"} 0+0x80`,
	},
	"custom": {
		`vllm_probe_time_to_first_token_seconds_count{job="vllm",model="a",profile="short-chat"} 0+2x80`,
		`vllm_probe_time_to_first_token_seconds_bucket{job="vllm",le="2.5",model="a",profile="short-chat"} 0+1.5x80`,
		`vllm_probe_time_to_first_token_seconds_count{job="vllm",model="a",profile="long.prompt"} 0+0.5x80`,
		`vllm_probe_time_to_first_token_seconds_bucket{job="vllm",le="2.5",model="a",profile="long.prompt"} 0+0.5x80`,
		`vllm_probe_time_to_first_token_seconds_count{job="vllm",model="a",profile="longXprompt"} 0+50x80`,
		`vllm_probe_time_to_first_token_seconds_bucket{job="vllm",le="2.5",model="a",profile="longXprompt"} 0+0x80`,
		`vllm_probe_time_to_first_token_seconds_count{job="other",model="a",profile="short-chat"} 0+50x80`,
		`vllm_probe_time_to_first_token_seconds_bucket{job="other",le="2.5",model="a",profile="short-chat"} 0+0x80`,
		`vllm_probe_requests_total{job="vllm",model="a",profile="short-chat"} 0+2x80`,
		`vllm_probe_failures_total{job="vllm",model="a",profile="short-chat"} 0+0.5x80`,
		`vllm_probe_requests_total{job="vllm",model="b",profile="short-chat"} 0+2x80`,
		`vllm_request_queue_time_seconds_count{job="vllm",model="a"} 0+30x80`,
		`vllm_request_queue_time_seconds_bucket{job="vllm",le="5",model="a"} 0+25x80`,
		`vllm_inter_token_latency_seconds_count{job="vllm",model="a"} 0+300x80`,
		`vllm_inter_token_latency_seconds_bucket{job="vllm",le="0.05",model="a"} 0+298.5x80`,
		`vllm_requests_finished_total{finished_reason="stop",job="vllm",model="a"} 0+30x80`,
		`vllm_preemptions_total{job="vllm",model="a"} 0+0.5x80`,
		`vllm_preemptions_total{job="other",model="a"} 0+25x80`,
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

// promtoolSame loads the exporter's rules for fx and the other tool's
// generated rule files into one promtool unit test over seriesFor[fx] and
// checks every sameRatio at 40m.
func promtoolSame(t *testing.T, fx fixture, toolRules map[string][]byte, checks []sameRatio) {
	t.Helper()
	dir := t.TempDir()
	ours, err := slo.GenerateRules(fx.slos, slo.RuleOptions{Selector: fx.opts.Selector})
	if err != nil {
		t.Fatal(err)
	}
	files := []string{filepath.Join(dir, "exporter.yml")}
	if err := os.WriteFile(files[0], ours, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, b := range toolRules {
		files = append(files, filepath.Join(dir, name))
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tc := testutil.RuleTest{Interval: testutil.Duration(30 * time.Second)}
	for _, s := range seriesFor[fx.name] {
		i := strings.LastIndexByte(s, ' ')
		tc.InputSeries = append(tc.InputSeries, testutil.InputSeries{Series: s[:i], Values: s[i+1:]})
	}
	for _, c := range checks {
		et := testutil.ExprTest{EvalTime: testutil.Duration(40 * time.Minute),
			Expr: fmt.Sprintf("abs(%s - on (model) %s) < bool 1e-9", c.ours, c.theirs)}
		for _, m := range c.models {
			et.ExpSamples = append(et.ExpSamples, testutil.ExpSample{Labels: fmt.Sprintf(`{model=%q}`, m), Value: 1})
		}
		tc.ExprTests = append(tc.ExprTests, et)
	}
	test := testutil.WriteRuleTest(t, dir, "test.yml", testutil.RuleTestFile{
		RuleFiles:          files,
		EvaluationInterval: testutil.Duration(time.Minute),
		Tests:              []testutil.RuleTest{tc},
	})
	for _, r := range testutil.RunRuleTests(t, test) {
		if r.Err != nil {
			t.Errorf("promtool %s: the tool's SLIs differ from the exporter's", r.Version)
		}
	}
}
