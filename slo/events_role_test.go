package slo

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// A prefill pod of a disaggregated pair has no TPOT or ITL of its own: its
// decode SLOs count nothing there (not even as unmeasurable), while TTFT
// is still judged; a decode or aggregated pod keeps them.
func TestPrefillPodHasNoDecodeSLOs(t *testing.T) {
	h := snapshot.Histogram{Bounds: []float64{0.05, 0.1}, Counts: []float64{8, 9}, Count: 10, Sum: 0.6}
	pod := func(role string) *snapshot.VLLM {
		return &snapshot.VLLM{Up: true, Models: map[string]*snapshot.Model{"m": {Name: "m", Role: role,
			Histograms: snapshot.HistogramsOf(map[snapshot.HistogramName]snapshot.Histogram{snapshot.TTFT: h, snapshot.InterTokenLatency: h, snapshot.RequestTPOT: h})}}}
	}
	for _, metric := range []string{"tpot", "itl", "ttft"} {
		s := &config.SLO{Name: metric, Kind: config.KindLatency, Metric: metric, Threshold: 0.05}
		for _, role := range []string{snapshot.RolePrefill, snapshot.RoleDecode, snapshot.RoleBoth} {
			out, errs := serverEvents(s, pod(role))
			want := !(role == snapshot.RolePrefill && metric != "ttft")
			if _, got := out["m"]; got != want || len(errs) != 0 {
				t.Errorf("%s on a %s pod: measured %v (errors %v), want %v", metric, role, got, errs, want)
			}
		}
	}
}

// Admission rejections (503) are failed events of the availability SLO:
// from http_requests_total's 5xx where the server has it (they are among
// those answers, so never added twice), else from
// vllm:admission_rejections_total.
func TestAvailabilityCountsAdmissionRejections(t *testing.T) {
	s := &config.SLO{Name: "avail", Kind: config.KindAvailability}
	m := &snapshot.Model{Name: "m", FinishedByReason: map[string]float64{"stop": 90, "abort": 2},
		RejectedByReason: map[string]float64{"max_num_queued_reqs": 6, "max_num_queued_tokens": 2}}
	v := &snapshot.VLLM{Up: true, Models: map[string]*snapshot.Model{"m": m}}
	out, _ := serverEvents(s, v)
	if c := out["m"]; c.Bad != 10 || c.Total != 100 || c.Series != "finished+rejected" {
		t.Errorf("without http_requests_total: %+v, want 10 bad of 100 (2 aborted + 8 rejected)", c)
	}
	v.HTTPRequests = map[string]float64{"2xx": 92, "5xx": 8}
	out, _ = serverEvents(s, v)
	if c := out["m"]; c.Bad != 10 || c.Total != 100 || c.Series != "finished+refused" {
		t.Errorf("with http_requests_total (the 8 rejections are its 5xx): %+v, want 10 bad of 100", c)
	}
}

// The generated rules judge each role as the watchdog does: a prefill pod
// observes a TPOT of 0 for each of its one-token requests (vLLM records
// decode_time/(n-1), 0 for n <= 1), which must not count as good events
// of the model's TPOT (or ITL) SLO; its TTFT still counts. Evaluated by
// promtool over a decode pod (half its requests slow), a prefill pod (all
// fast) and an aggregated pod (a tenth slow) of one model.
func TestGeneratedRulesLeavePrefillPodsOutOfDecodeSLOs(t *testing.T) {
	var slos []config.SLO
	for _, m := range []string{"tpot", "itl", "ttft"} {
		slos = append(slos, config.SLO{Name: m, Source: config.SourceServer, Kind: config.KindLatency, Metric: m, Threshold: 0.1, Objective: 0.99})
	}
	b, err := GenerateRules(slos, RuleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yml")
	if err := os.WriteFile(rules, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var in []testutil.InputSeries
	pods := []struct {
		inst, role string
		slowPerMin float64
	}{{"d", snapshot.RoleDecode, 50}, {"p", snapshot.RolePrefill, 0}, {"a", snapshot.RoleBoth, 10}}
	for _, p := range pods {
		l := fmt.Sprintf(`job="vllm",instance=%q,model="m"`, p.inst)
		in = append(in, testutil.InputSeries{Series: `vllm_pod_role_info{` + l + `,role="` + p.role + `",source="detected"}`, Values: "1x20"})
		for _, h := range []string{"vllm_request_time_per_output_token_seconds", "vllm_inter_token_latency_seconds", "vllm_time_to_first_token_seconds"} {
			in = append(in,
				testutil.InputSeries{Series: h + `_count{` + l + `}`, Values: "0+100x20"},
				testutil.InputSeries{Series: h + `_bucket{` + l + `,le="+Inf"}`, Values: "0+100x20"},
				testutil.InputSeries{Series: h + `_bucket{` + l + `,le="0.1"}`, Values: fmt.Sprintf("0+%gx20", 100-p.slowPerMin)})
		}
	}
	at := testutil.Duration(15 * time.Minute)
	ratio := func(slo string, v float64) testutil.ExprTest {
		return testutil.ExprTest{Expr: `slo:sli_error:ratio_rate5m{slo="` + slo + `"}`, EvalTime: at,
			ExpSamples: []testutil.ExpSample{{Labels: `slo:sli_error:ratio_rate5m{model="m",slo="` + slo + `"}`, Value: v}}}
	}
	testutil.RunRuleTests(t, testutil.WriteRuleTest(t, dir, "role-test.yml", testutil.RuleTestFile{
		RuleFiles:          []string{rules},
		EvaluationInterval: testutil.Duration(time.Minute),
		Tests: []testutil.RuleTest{{Interval: testutil.Duration(time.Minute), InputSeries: in, ExprTests: []testutil.ExprTest{
			// decode and aggregated pods only: (50 + 10) / 200
			ratio("tpot", 0.3), ratio("itl", 0.3),
			// every pod: (50 + 10 + 0) / 300
			ratio("ttft", 0.2),
		}}},
	}))
}
