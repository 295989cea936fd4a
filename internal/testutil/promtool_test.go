package testutil

import (
	"math"
	"strings"
	"testing"
	"time"
)

// The writer spells promtool's format: durations as Prometheus reads them,
// empty expectations as explicit empty lists (promtool's "expect nothing"),
// missing samples as "_".
func TestRuleTestFileEncode(t *testing.T) {
	f := RuleTestFile{
		RuleFiles:          []string{"/abs/rules.yml"},
		EvaluationInterval: Duration(30 * time.Second),
		Tests: []RuleTest{{
			Name:     "t",
			Interval: Duration(15 * time.Second),
			InputSeries: []InputSeries{{
				Series: `up{job="vllm"}`,
				Values: Samples([]float64{1, math.NaN(), 0.25, 1e9}),
			}},
			AlertTests: []AlertTest{{EvalTime: Duration(90 * time.Minute), Alertname: "A"}},
			ExprTests: []ExprTest{{Expr: "up", EvalTime: Duration(24 * time.Hour),
				ExpSamples: []ExpSample{{Labels: `up{job="vllm"}`, Value: 1}}}},
		}},
	}
	b, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		"evaluation_interval: 30s\n", "interval: 15s\n", "values: 1 _ 0.25 1000000000\n",
		"eval_time: 1h30m\n", "exp_alerts: []\n", "eval_time: 1d\n", "value: 1\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("encoded file lacks %q:\n%s", want, got)
		}
	}
	if _, err := (RuleTestFile{}).Encode(); err == nil {
		t.Error("a file without tests encoded")
	}
}

func TestInterpolate(t *testing.T) {
	got := Samples(Interpolate([]float64{0, 4, math.NaN(), 10}, 2))
	if want := "0 2 4 _ _ _ 10"; got != want {
		t.Errorf("Interpolate = %s, want %s", got, want)
	}
	if got := Samples(Interpolate([]float64{0, 3}, 3)); got != "0 1 2 3" {
		t.Errorf("Interpolate k=3 = %s", got)
	}
}
