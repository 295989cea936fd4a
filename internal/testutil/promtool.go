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
	// Comment is written first, as YAML comment lines (a checked-in file
	// says where it comes from).
	Comment string `yaml:"-"`
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
// sample), runs in its expanding notation: "_xN" for N missing samples,
// "vxN" for v repeated N+1 times, "a+bxN" for a, a+b, ... a+N*b (promtool
// adds b N times, so a run may differ from the values by float rounding,
// at most 1e-9 relative; where that would reorder two neighbours, as a
// rising counter followed by a flat one could, the series is written with
// exact runs only). ExpandSamples reads the notation back: compute
// expectations from what promtool reads.
func Samples(values []float64) string {
	s := samples(values, 1e-9)
	if !sameOrder(values, ExpandSamples(s)) {
		s = samples(values, 0)
	}
	return s
}

func samples(values []float64, tol float64) string {
	var out []string
	num := func(v float64) string {
		return strconv.FormatFloat(v, 'f', -1, 64) // no exponent: "1e+09" reads as a series expansion
	}
	for i := 0; i < len(values); {
		v := values[i]
		if math.IsNaN(v) {
			j := i
			for j < len(values) && math.IsNaN(values[j]) {
				j++
			}
			if out = append(out, "_"); j-i > 1 {
				out[len(out)-1] = fmt.Sprintf("_x%d", j-i)
			}
			i = j
			continue
		}
		j := i + 1 // values[i:j] is the run
		var step float64
		if j < len(values) && !math.IsNaN(values[j]) {
			step = values[j] - v
			if tol > 0 { // the step as written, not as subtracted: 29.85, not 29.850000000000364
				step, _ = strconv.ParseFloat(strconv.FormatFloat(step, 'g', 12, 64), 64)
			}
			x := v + step
			for ; j < len(values) && !math.IsNaN(values[j]) && math.Abs(x-values[j]) <= tol*math.Max(1, math.Abs(values[j])); x += step {
				j++
			}
			// the run's last value as promtool adds it up must compare
			// with the next value as the exact one does
			if last := x - step; j < len(values) && !math.IsNaN(values[j]) && order(last, values[j]) != order(values[j-1], values[j]) {
				j--
			}
		}
		switch n := j - i; {
		case n < 3:
			out = append(out, num(v))
			i++
			continue
		case step == 0:
			out = append(out, fmt.Sprintf("%sx%d", num(v), n-1))
		case step > 0:
			out = append(out, fmt.Sprintf("%s+%sx%d", num(v), num(step), n-1))
		default:
			out = append(out, fmt.Sprintf("%s-%sx%d", num(v), num(-step), n-1))
		}
		i = j
	}
	return strings.Join(out, " ")
}

// sameOrder reports whether each neighbour pair compares alike in a and b.
func sameOrder(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 1; i < len(a); i++ {
		if order(a[i-1], a[i]) != order(b[i-1], b[i]) {
			return false
		}
	}
	return true
}

// order compares x and y (2: either is NaN).
func order(x, y float64) int {
	switch {
	case math.IsNaN(x) || math.IsNaN(y):
		return 2
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// ExpandSamples reads the notation Samples writes as promtool expands it
// (NaN for "_"); it panics on anything else.
func ExpandSamples(s string) []float64 {
	var out []float64
	parse := func(x string) float64 {
		v, err := strconv.ParseFloat(x, 64)
		if err != nil {
			panic(fmt.Sprintf("ExpandSamples: %q: %v", s, err))
		}
		return v
	}
	for _, tok := range strings.Fields(s) {
		head, times, repeated := strings.Cut(tok, "x")
		if !repeated {
			if tok == "_" {
				out = append(out, math.NaN())
			} else {
				out = append(out, parse(tok))
			}
			continue
		}
		n := int(parse(times))
		if head == "_" {
			for range n {
				out = append(out, math.NaN())
			}
			continue
		}
		var a, step float64
		if i := strings.LastIndexAny(head, "+-"); i > 0 {
			a, step = parse(head[:i]), parse(head[i:])
		} else {
			a = parse(head)
		}
		for range n + 1 {
			out = append(out, a)
			a += step
		}
	}
	return out
}

// Encode renders f as YAML.
func (f RuleTestFile) Encode() ([]byte, error) {
	if len(f.Tests) == 0 {
		return nil, fmt.Errorf("promtool test file without tests")
	}
	b, err := yaml.Marshal(f)
	if err != nil || f.Comment == "" {
		return b, err
	}
	var head strings.Builder
	for _, l := range strings.Split(strings.TrimRight(f.Comment, "\n"), "\n") {
		head.WriteString(strings.TrimRight("# "+l, " ") + "\n")
	}
	return append([]byte(head.String()), b...), nil
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
