package testutil

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/vllm-exporter/vllm_exporter/internal/toolbuild"
)

// RuleTestFile is one promtool rule-unit-test file (`promtool test rules`).
// Every generated test file in the module is written from these types by
// WriteRuleTest, so the format is spelled in one place.
type RuleTestFile struct {
	// RuleFiles are the rule files under test (none: expressions only);
	// relative paths are relative to the test file, so pass absolute ones.
	RuleFiles          []string   `yaml:"rule_files,omitempty"`
	EvaluationInterval Duration   `yaml:"evaluation_interval,omitempty"`
	GroupEvalOrder     []string   `yaml:"group_eval_order,omitempty"`
	Tests              []RuleTest `yaml:"tests"`
}

// RuleTest is one test of a RuleTestFile: input series sampled every
// Interval, then alert and expression checks.
type RuleTest struct {
	Name        string        `yaml:"name,omitempty"`
	Interval    Duration      `yaml:"interval,omitempty"`
	InputSeries []InputSeries `yaml:"input_series"`
	AlertTests  []AlertTest   `yaml:"alert_rule_test,omitempty"`
	ExprTests   []ExprTest    `yaml:"promql_expr_test,omitempty"`
}

// InputSeries is one series in promtool's expanding notation: Values
// holds one value per Interval ("_" for a missing sample, "1+2x10" for a
// run); Samples writes it from numbers.
type InputSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

// AlertTest expects exactly ExpAlerts firing for Alertname at EvalTime
// (none: an empty list).
type AlertTest struct {
	EvalTime  Duration   `yaml:"eval_time"`
	Alertname string     `yaml:"alertname"`
	ExpAlerts []ExpAlert `yaml:"exp_alerts"`
}

// ExpAlert is one expected firing alert.
type ExpAlert struct {
	ExpLabels      map[string]string `yaml:"exp_labels,omitempty"`
	ExpAnnotations map[string]string `yaml:"exp_annotations,omitempty"`
}

// ExprTest expects Expr at EvalTime to return exactly ExpSamples (none:
// an empty result).
type ExprTest struct {
	Expr       string      `yaml:"expr"`
	EvalTime   Duration    `yaml:"eval_time"`
	ExpSamples []ExpSample `yaml:"exp_samples"`
}

// ExpSample is one expected sample: Labels in series notation
// (`name{a="b"}`, or `{a="b"}` for an expression's result).
type ExpSample struct {
	Labels string  `yaml:"labels"`
	Value  float64 `yaml:"value"`
}

// Duration is a time.Duration written the way Prometheus reads durations
// ("90s", "1h30m", "1d").
type Duration time.Duration

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return model.Duration(d).String(), nil }

// IsZero lets omitempty drop an unset Duration.
func (d Duration) IsZero() bool { return d == 0 }

// Samples renders values in promtool's input notation, "_" for NaN (no
// sample), each number exactly as Go formats it.
func Samples(values []float64) string {
	s := make([]string, len(values))
	for i, v := range values {
		if math.IsNaN(v) {
			s[i] = "_"
		} else {
			s[i] = strconv.FormatFloat(v, 'f', -1, 64) // no exponent: "1e+09" reads as a series expansion
		}
	}
	return strings.Join(s, " ")
}

// Encode renders f as YAML.
func (f RuleTestFile) Encode() ([]byte, error) {
	if len(f.Tests) == 0 {
		return nil, fmt.Errorf("promtool test file without tests")
	}
	return yaml.Marshal(f)
}

// WriteRuleTest writes f as name in dir (a test's TempDir) and returns the
// path, for RunRuleTests.
func WriteRuleTest(t testing.TB, dir, name string, f RuleTestFile) string {
	t.Helper()
	b, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// PromtoolResult is what one pinned promtool said.
type PromtoolResult struct {
	Version string // "3.16", "3.5"
	Output  string
	Err     error
	Took    time.Duration
}

// RunRuleTests runs `promtool test rules` on the test files with every
// pinned promtool (Prometheus 3.16 and the 3.5 LTS: rules must hold on
// both; the versions run concurrently) and fails the test, naming the
// version and with the end of promtool's output, unless every one passes.
// Like Promtool it skips locally when promtool cannot be built and fails
// under CI=true.
func RunRuleTests(t testing.TB, files ...string) []PromtoolResult {
	t.Helper()
	return runPromtool(t, "test rules", append([]string{"test", "rules"}, files...))
}

// CheckRules runs `promtool check rules` on the rule files with every
// pinned promtool and fails the test unless each accepts them.
func CheckRules(t testing.TB, files ...string) []PromtoolResult {
	t.Helper()
	return runPromtool(t, "check rules", append([]string{"check", "rules"}, files...))
}

func runPromtool(t testing.TB, what string, args []string) []PromtoolResult {
	t.Helper()
	if len(args) == 2 {
		t.Fatalf("promtool %s: no files", what)
	}
	versions := toolbuild.RequireVersions(t, "promtool")
	bins := make([]string, len(versions))
	for i, v := range versions {
		bins[i] = toolbuild.Require(t, "promtool", v)
	}
	res := make([]PromtoolResult, len(versions))
	var wg sync.WaitGroup
	for i := range versions {
		wg.Go(func() {
			start := time.Now()
			out, err := exec.Command(bins[i], args...).CombinedOutput()
			res[i] = PromtoolResult{Version: versions[i], Output: string(out), Err: err, Took: time.Since(start)}
		})
	}
	wg.Wait()
	for _, r := range res {
		switch {
		case r.Err != nil:
			t.Errorf("promtool %s %s: %v\n%s", r.Version, what, r.Err, toolbuild.Tail(r.Output, 60))
		case !strings.Contains(r.Output, "SUCCESS"):
			t.Errorf("promtool %s %s printed no SUCCESS:\n%s", r.Version, what, toolbuild.Tail(r.Output, 60))
		default:
			t.Logf("promtool %s %s: passed in %v", r.Version, what, r.Took.Round(time.Millisecond))
		}
	}
	return res
}

// Interpolate returns v with k-1 evenly spaced values inserted between
// each pair of neighbours (linear; NaN where either neighbour is NaN), for
// input series k times denser than the simulation that made them (one
// sample a minute becomes one every 30 s with k=2). Prometheus 3 range
// selectors are left-open: a [1m] window over one sample a minute holds a
// single sample, and rate() over it is empty.
func Interpolate(v []float64, k int) []float64 {
	if k < 1 {
		k = 1
	}
	out := make([]float64, 0, k*len(v))
	for i, x := range v {
		out = append(out, x)
		if i+1 == len(v) {
			break
		}
		for j := 1; j < k; j++ {
			out = append(out, x+(v[i+1]-x)*float64(j)/float64(k))
		}
	}
	return out
}
