package histq

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// Each form reads only its own representation: the classic one the
// _bucket/_sum/_count series, the native one the histogram itself.
func TestFormsReadTheirRepresentation(t *testing.T) {
	h := H{Name: "x", Matchers: `job="j"`, Window: "5m"}
	for name, e := range map[string]Either{
		"Quantile":   h.Quantile("0.9", "model"),
		"Count":      h.Count("increase", "model"),
		"Mean":       h.Mean("model"),
		"Sum":        h.Sum("rate", "model"),
		"Below":      h.Below("increase", 1, `1|1\\.0`, "model"),
		"Above":      h.Above("increase", 1, `1|1\\.0`, "model"),
		"AboveRatio": h.AboveRatio(1, `1|1\\.0`, "model"),
	} {
		if !strings.Contains(e.Classic, "x_") || strings.Contains(e.Classic, "x{") {
			t.Errorf("%s: classic form %q must read only x_bucket/_sum/_count", name, e.Classic)
		}
		if strings.Contains(e.Native, "x_") || !strings.Contains(e.Native, `x{job="j"}[5m]`) {
			t.Errorf("%s: native form %q must read only the histogram x", name, e.Native)
		}
		if e.String() != e.Classic+" or "+e.Native {
			t.Errorf("%s: String() = %q", name, e.String())
		}
	}
	if got := (H{Name: "x", Window: "1m"}).Count("rate").Classic; got != "sum by () (rate(x_count[1m]))" {
		t.Errorf("no matchers, no labels: %q", got)
	}
}

// The expressions give the same, exact answers on the same observations
// stored as classic buckets (model "classic"), as a native histogram with
// custom buckets (NHCB, "nhcb"), as an exponential native histogram with a
// bound at the threshold ("native"), and as both classic and NHCB ("both":
// one series, not two); an empty native histogram counts 0 bad events, not
// NaN. Evaluated by promtool (Prometheus' own engine), every pinned
// version (3.16 and the 3.5 LTS).
func TestSameAnswerInEveryRepresentation(t *testing.T) {
	// Every 30s: 1 observation <= 0.5, 2 in (0.5, 1], 1 in (1, 2]; the
	// observations sum to 3.2. 41 samples (20m) cover the 5m windows at
	// 15m.
	const steps = "x40"
	var in []testutil.InputSeries
	classic := func(model string) {
		for _, s := range []struct{ le, inc string }{{"0.5", "1"}, {"1.0", "3"}, {"2.0", "4"}, {"+Inf", "4"}} {
			in = append(in, testutil.InputSeries{Series: fmt.Sprintf(`h_bucket{model=%q,le=%q}`, model, s.le), Values: "0+" + s.inc + steps})
		}
		in = append(in,
			testutil.InputSeries{Series: fmt.Sprintf(`h_count{model=%q}`, model), Values: "0+4" + steps},
			testutil.InputSeries{Series: fmt.Sprintf(`h_sum{model=%q}`, model), Values: "0+3.2" + steps})
	}
	nhcb := func(model string) {
		in = append(in, testutil.InputSeries{Series: fmt.Sprintf(`h{model=%q}`, model),
			Values: "{{schema:-53 sum:0 count:0 custom_values:[0.5 1 2] buckets:[0 0 0 0]}}+{{schema:-53 sum:3.2 count:4 custom_values:[0.5 1 2] buckets:[1 2 1 0]}}" + steps})
	}
	classic("classic")
	nhcb("nhcb")
	// schema 0: bucket i holds (2^(i-1), 2^i]; offset -1 starts at (0.25, 0.5]
	in = append(in, testutil.InputSeries{Series: `h{model="native"}`,
		Values: "{{schema:0 sum:0 count:0 offset:-1 buckets:[0 0 0]}}+{{schema:0 sum:3.2 count:4 offset:-1 buckets:[1 2 1]}}" + steps})
	classic("both")
	nhcb("both")
	in = append(in, testutil.InputSeries{Series: `h{model="empty"}`,
		Values: "{{schema:-53 sum:0 count:0 custom_values:[1] buckets:[0 0]}}" + steps})

	h := H{Name: "h", Window: "5m"}
	le := `1|1\\.0`
	all := func(v float64, models ...string) map[string]float64 {
		m := map[string]float64{}
		for _, x := range models {
			m[x] = v
		}
		return m
	}
	// Values are scaled to integers and rounded at 1e-9 (exact up to
	// float rounding); NaN, the empty histogram's ratios, is filtered.
	// From the observations above: 1 of 4 above 1 (x4: 1), 3 of 4 at or
	// below 1 (x4: 3), a rate of 4/30 per second (x30: 4), a mean of
	// 3.2/4 = 0.8 (x100: 80).
	exact := func(expr, scale string) string { return "round((" + expr + ") * " + scale + " * 1e9)" }
	ratio := func(a, b Either) string { return "(" + a.String() + ") / (" + b.String() + ")" }
	checks := []struct {
		expr    string
		samples map[string]float64 // model -> value
	}{
		{exact(h.AboveRatio(1, le, "model").String(), "4") + " >= 0", all(1e9, "classic", "nhcb", "native", "both")},
		{exact(ratio(h.Below("increase", 1, le, "model"), h.Count("increase", "model")), "4") + " >= 0", all(3e9, "classic", "nhcb", "native", "both")},
		{exact(ratio(h.Above("increase", 1, le, "model"), h.Count("increase", "model")), "4") + " >= 0", all(1e9, "classic", "nhcb", "native", "both")},
		{"(" + h.Above("increase", 1, le, "model").String() + ") == 0", all(0, "empty")},
		{exact(h.Count("rate", "model").String(), "30") + " > 0", all(4e9, "classic", "nhcb", "native", "both")},
		{exact(h.Mean("model").String(), "100") + " > 0", all(80e9, "classic", "nhcb", "native", "both")},
		// 3.2 every 30s: a sum rate of 3.2/30 per second (x300: 32)
		{exact(h.Sum("rate", "model").String(), "300") + " > 0", all(32e9, "classic", "nhcb", "native", "both")},
		// linear interpolation in (0.5, 1]: the median is 0.75 with
		// classic buckets and NHCB alike
		{exact(h.Quantile("0.5", "model").String(), "4") + ` >= 0 unless {model="native"}`, all(3e9, "classic", "nhcb", "both")},
	}
	var exprs []testutil.ExprTest
	for _, c := range checks {
		e := testutil.ExprTest{Expr: c.expr, EvalTime: testutil.Duration(15 * time.Minute)}
		for _, m := range []string{"classic", "nhcb", "native", "both", "empty"} {
			if v, ok := c.samples[m]; ok {
				e.ExpSamples = append(e.ExpSamples, testutil.ExpSample{Labels: fmt.Sprintf(`{model=%q}`, m), Value: v})
			}
		}
		exprs = append(exprs, e)
	}
	p := testutil.WriteRuleTest(t, t.TempDir(), "histq_test.yml", testutil.RuleTestFile{
		EvaluationInterval: testutil.Duration(30 * time.Second),
		Tests: []testutil.RuleTest{{
			Interval:    testutil.Duration(30 * time.Second),
			InputSeries: in,
			ExprTests:   exprs,
		}},
	})
	testutil.RunRuleTests(t, p)
}
