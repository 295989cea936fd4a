package e2e

import (
	"reflect"
	"testing"
)

func names(t *testing.T, expr string) []string {
	t.Helper()
	sels, err := Selectors(expr)
	if err != nil {
		t.Fatalf("%q: %v", expr, err)
	}
	var out []string
	for _, s := range sels {
		n := s.Name
		if n == "" {
			n = "~" + s.NameRegex
		}
		out = append(out, n)
	}
	return out
}

func TestSelectors(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`vllm_up == 0 and on (job, instance) (up == 1)`, []string{"vllm_up", "up"}},
		{`histogram_quantile(0.99, sum by (model, le) (rate(vllm_time_to_first_token_seconds_bucket{model=~"a|b", instance="x:1"}[5m])))`,
			[]string{"vllm_time_to_first_token_seconds_bucket"}},
		{`sum without (le) (x) / ignoring (reason) group_left (foo, bar) y offset 1h`, []string{"x", "y"}},
		{`max by (job) (avg_over_time(a{reason=~"hw_slowdown|sw_power_cap"}[10m])) > 0.25`, []string{"a"}},
		{`sum(rate(x[5m:30s])) by (model)`, []string{"x"}},
		{`clamp_min(sum by (model) (rate(b_total[5m])), 1e-9) > bool 2`, []string{"b_total"}},
		{`model:vllm_generation_tokens:rate5m{model=~".*"} * on() group_left vector(1)`, []string{"model:vllm_generation_tokens:rate5m"}},
		{`{__name__=~"slo:sli_error:ratio_rate.+", slo="ttft"} / 0.01`, []string{"~slo:sli_error:ratio_rate.+"}},
		{`{__name__="vllm_up"}`, []string{"vllm_up"}},
		{`time() - max(vllm_exporter_last_successful_scrape_timestamp_seconds) # the "age" of it`, []string{"vllm_exporter_last_successful_scrape_timestamp_seconds"}},
		{`count_values("v", x) or label_replace(y, "a", "$1", "b", "(.*)")`, []string{"x", "y"}},
		{`ALERTS{alertstate="firing"} unless z @ end()`, []string{"ALERTS", "z"}},
		{`topk by (gpu) (3, q) and nan`, []string{"q"}},
	}
	for _, c := range cases {
		if got := names(t, c.expr); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s\n got %v\nwant %v", c.expr, got, c.want)
		}
	}
}

func TestSelectorLabels(t *testing.T) {
	sels, err := Selectors(`rate(m{model=~"$model", instance!="a", le="1.0"}[1m])`)
	if err != nil {
		t.Fatal(err)
	}
	if len(sels) != 1 || !reflect.DeepEqual(sels[0].Labels, []string{"model", "instance", "le"}) {
		t.Fatalf("got %+v", sels)
	}
}

func TestSelectorErrors(t *testing.T) {
	for _, bad := range []string{`x{a="b"`, `x{a=}`, `rate(x[5m)`, `x{a="unterminated}`} {
		if _, err := Selectors(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestSubstitute(t *testing.T) {
	got := Substitute(`rate(x{model=~"$model",instance=~"${instance}",g=~"${gpu:regex}"}[$__rate_interval])`)
	want := `rate(x{model=~".*",instance=~".*",g=~".*"}[1m])`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestVariableExpr(t *testing.T) {
	for q, want := range map[string]string{
		`label_values(vllm_requests_running{job="x"}, model)`:        `count by (model) (vllm_requests_running{job="x",model!=""})`,
		`label_values(vllm_requests_running{}, model)`:               `count by (model) (vllm_requests_running{model!=""})`,
		`label_values(vllm_gpu_info, gpu)`:                           `count by (gpu) (vllm_gpu_info{gpu!=""})`,
		`query_result(max by (instance) (up{job="v"}) or vector(1))`: `max by (instance) (up{job="v"}) or vector(1)`,
	} {
		if got, err := VariableExpr(q); err != nil || got != want {
			t.Errorf("%s: got %q %v, want %q", q, got, err, want)
		}
	}
	if _, err := VariableExpr("metrics(up)"); err == nil {
		t.Error("want an error for an unsupported variable query")
	}
}
