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
	f.Comment = "Code generated; DO NOT EDIT.\n\nRun: promtool test rules"
	b, err = f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Code generated; DO NOT EDIT.\n#\n# Run: promtool test rules\nrule_files:\n"; !strings.HasPrefix(string(b), want) {
		t.Errorf("comment not written first as YAML comments:\n%s", b)
	}
	if _, err := (RuleTestFile{}).Encode(); err == nil {
		t.Error("a file without tests encoded")
	}
}

// Samples writes runs in promtool's expanding notation, and ExpandSamples
// reads back what promtool would: the values, within 1e-9, in the same
// order (no counter reset appears where a rising run meets a flat one).
func TestSamplesRuns(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		in   []float64
		want string
	}{
		{[]float64{0, 30, 60, 90, 90, 90, 90, nan, nan, 5, 3, 1, -1}, "0+30x3 90x2 _x2 5-2x3"},
		{[]float64{1, 2, nan, 7}, "1 2 _ 7"},
		{[]float64{1e9, 1e9, 1e9}, "1000000000x2"},
	} {
		if got := Samples(c.in); got != c.want {
			t.Errorf("Samples(%v) = %q, want %q", c.in, got, c.want)
		}
		if got := ExpandSamples(c.want); !sameOrder(got, c.in) || len(got) != len(c.in) {
			t.Errorf("ExpandSamples(%q) = %v, want %v", c.want, got, c.in)
		}
	}
	// a counter at 29.85 per sample, then flat: promtool's repeated
	// addition drifts from k*29.85; the flat part must not read lower
	var v []float64
	for k := range 400 {
		v = append(v, math.Round(29.85*float64(min(k, 300))*1e9)/1e9)
	}
	got := ExpandSamples(Samples(v))
	if !sameOrder(got, v) {
		t.Fatalf("Samples reordered neighbours: %s", Samples(v))
	}
	for i := range v {
		if math.Abs(got[i]-v[i]) > 1e-9*math.Max(1, v[i]) {
			t.Fatalf("sample %d reads %v, want %v", i, got[i], v[i])
		}
	}
	if n := len(strings.Fields(Samples(v))); n > 10 {
		t.Errorf("a rising then flat counter takes %d tokens: %s", n, Samples(v))
	}
}

func TestInterpolate(t *testing.T) {
	got := Samples(Interpolate([]float64{0, 4, math.NaN(), 10}, 2))
	if want := "0+2x2 _x3 10"; got != want {
		t.Errorf("Interpolate = %s, want %s", got, want)
	}
	if got := Samples(Interpolate([]float64{0, 3}, 3)); got != "0+1x3" {
		t.Errorf("Interpolate k=3 = %s", got)
	}
}
