package histq

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/e2e"
)

// Each form reads only its own representation: the classic one the
// _bucket/_sum/_count series, the native one the histogram itself.
func TestFormsReadTheirRepresentation(t *testing.T) {
	h := H{Name: "x", Matchers: `job="j"`, Window: "5m"}
	for name, e := range map[string]Either{
		"Quantile":   h.Quantile("0.9", "model"),
		"Count":      h.Count("increase", "model"),
		"Mean":       h.Mean("model"),
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
// NaN. Evaluated by promtool (Prometheus' own engine).
func TestSameAnswerInEveryRepresentation(t *testing.T) {
	promtool := e2e.RequireTool(t, "promtool")
	// Every 30s: 1 observation <= 0.5, 2 in (0.5, 1], 1 in (1, 2].
	const steps = "x40"
	classic := func(model string) string {
		var b strings.Builder
		for _, s := range []struct{ le, inc string }{{"0.5", "1"}, {"1.0", "3"}, {"2.0", "4"}, {"+Inf", "4"}} {
			fmt.Fprintf(&b, "      - series: 'h_bucket{model=%q,le=%q}'\n        values: '0+%s%s'\n", model, s.le, s.inc, steps)
		}
		fmt.Fprintf(&b, "      - series: 'h_count{model=%q}'\n        values: '0+4%s'\n", model, steps)
		fmt.Fprintf(&b, "      - series: 'h_sum{model=%q}'\n        values: '0+3.2%s'\n", model, steps)
		return b.String()
	}
	nhcb := func(model string) string {
		return fmt.Sprintf("      - series: 'h{model=%q}'\n        values: '{{schema:-53 sum:0 count:0 custom_values:[0.5 1 2] buckets:[0 0 0 0]}}+{{schema:-53 sum:3.2 count:4 custom_values:[0.5 1 2] buckets:[1 2 1 0]}}%s'\n", model, steps)
	}
	// schema 0: bucket i holds (2^(i-1), 2^i]; offset -1 starts at (0.25, 0.5]
	native := "      - series: 'h{model=\"native\"}'\n        values: '{{schema:0 sum:0 count:0 offset:-1 buckets:[0 0 0]}}+{{schema:0 sum:3.2 count:4 offset:-1 buckets:[1 2 1]}}" + steps + "'\n"
	empty := "      - series: 'h{model=\"empty\"}'\n        values: '{{schema:-53 sum:0 count:0 custom_values:[1] buckets:[0 0]}}" + steps + "'\n"
	series := classic("classic") + nhcb("nhcb") + native + classic("both") + nhcb("both") + empty

	h := H{Name: "h", Window: "5m"}
	le := `1|1\\.0`
	all := func(v string, models ...string) map[string]string {
		m := map[string]string{}
		for _, x := range models {
			m[x] = v
		}
		return m
	}
	// Values are scaled to integers and rounded at 1e-9 (exact up to
	// float rounding); NaN, the empty histogram's ratios, is filtered.
	exact := func(expr, scale string) string { return "round((" + expr + ") * " + scale + " * 1e9)" }
	ratio := func(a, b Either) string { return "(" + a.String() + ") / (" + b.String() + ")" }
	checks := []struct {
		expr    string
		samples map[string]string // model -> value
	}{
		{exact(h.AboveRatio(1, le, "model").String(), "4") + " >= 0", all("1e9", "classic", "nhcb", "native", "both")},
		{exact(ratio(h.Below("increase", 1, le, "model"), h.Count("increase", "model")), "4") + " >= 0", all("3e9", "classic", "nhcb", "native", "both")},
		{exact(ratio(h.Above("increase", 1, le, "model"), h.Count("increase", "model")), "4") + " >= 0", all("1e9", "classic", "nhcb", "native", "both")},
		{"(" + h.Above("increase", 1, le, "model").String() + ") == 0", all("0", "empty")},
		{exact(h.Count("rate", "model").String(), "30") + " > 0", all("4e9", "classic", "nhcb", "native", "both")},
		{exact(h.Mean("model").String(), "100") + " > 0", all("80e9", "classic", "nhcb", "native", "both")},
		// linear interpolation in (0.5, 1]: the median is 0.75 with
		// classic buckets and NHCB alike
		{exact(h.Quantile("0.5", "model").String(), "4") + ` >= 0 unless {model="native"}`, all("3e9", "classic", "nhcb", "both")},
	}
	var b strings.Builder
	b.WriteString("evaluation_interval: 30s\ntests:\n  - interval: 30s\n    input_series:\n")
	b.WriteString(series)
	b.WriteString("    promql_expr_test:\n")
	for _, c := range checks {
		fmt.Fprintf(&b, "      - expr: '%s'\n        eval_time: 15m\n        exp_samples:\n", strings.ReplaceAll(c.expr, "'", "''"))
		for _, m := range []string{"classic", "nhcb", "native", "both", "empty"} {
			if v, ok := c.samples[m]; ok {
				fmt.Fprintf(&b, "          - labels: '{model=%q}'\n            value: %s\n", m, v)
			}
		}
	}
	p := filepath.Join(t.TempDir(), "histq_test.yml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "test", "rules", p).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s\n%s", err, out, b.String())
	}
}
