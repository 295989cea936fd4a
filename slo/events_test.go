package slo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	vllmcol "github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// fixtureServer serves collector/vllm/testdata/vllm-late-2026-dp2-priority-spec.txt (a vLLM
// 0.20-0.33 body: custom TTFT buckets, http 5xx answers, sleep states) with
// series values replaced, and a real scraper reads it.
type fixtureServer struct {
	t    *testing.T
	base string
	srv  *testutil.BodyServer
	s    *vllmcol.Scraper
}

func newFixtureServer(t *testing.T) *fixtureServer {
	raw := testutil.VLLMBody(t, "vllm-late-2026-dp2-priority-spec.txt")
	l := &fixtureServer{t: t, base: raw, srv: testutil.NewBodyServer(t, raw)}
	l.s = vllmcol.New(vllmcol.Options{URL: l.srv.URL, Interval: 10 * time.Second}, nil)
	return l
}

// scrape serves the base body with values replaced and scrapes it at now.
func (l *fixtureServer) scrape(now time.Time, values map[string]string) {
	l.t.Helper()
	l.srv.Set(testutil.WithValues(l.t, l.base, values))
	l.s.ScrapeOnce(context.Background(), now)
}

const lateModel = "Qwen/Qwen3-32B"

func lateHTTP(handler, status string) string {
	return `http_requests_total{handler="` + handler + `",method="POST",status="` + status + `"}`
}

func lateEngine(name, engine string, extra ...string) string {
	return name + "{" + strings.Join(append([]string{`engine="` + engine + `"`, `model_name="` + lateModel + `"`}, extra...), ",") + "}"
}

// Requests the server refused (5xx) count in the availability SLI as failed
// events; a deliberately sleeping engine's refusals do not.
func TestAvailabilityCountsRefusalsNotSleep(t *testing.T) {
	l := newFixtureServer(t)
	w := New(Options{}, holderFor(t, "slos:\n  - {name: avail, kind: availability, objective: 0.99, min_events: 1}\n"), Sources{VLLM: l.s}, nil)
	stop := `vllm:request_success_total{engine="0",finished_reason="stop",model_name="` + lateModel + `",priority="0"}`
	l.scrape(t0, nil)
	w.Tick(t0)
	// 90 more finished, 10 more 5xx answers.
	l.scrape(t0.Add(10*time.Second), map[string]string{stop: "390.0", lateHTTP("/v1/chat/completions", "5xx"): "40.0"})
	w.Tick(t0.Add(10 * time.Second))
	r := resultFor(t, w, "avail", lateModel)
	if wr := window5m(&r); wr.Bad != 10 || wr.Total != 100 {
		t.Fatalf("5m window %g bad / %g total, want 10 / 100 (refusals are failed events)", wr.Bad, wr.Total)
	}

	// Asleep (level 1): the server answers 503s meanwhile; no bad events.
	asleep := map[string]string{
		stop: "390.0",
		lateEngine("vllm:engine_sleep_state", "0", `sleep_state="awake"`):             "0.0",
		lateEngine("vllm:engine_sleep_state", "0", `sleep_state="weights_offloaded"`): "1.0",
	}
	for i, refused := range []string{"60.0", "90.0"} {
		asleep[lateHTTP("/v1/chat/completions", "5xx")] = refused
		at := t0.Add(time.Duration(20+10*i) * time.Second)
		l.scrape(at, asleep)
		w.Tick(at)
	}
	r = resultFor(t, w, "avail", lateModel)
	if wr := window5m(&r); wr.Bad != 10 || wr.Total != 100 {
		t.Fatalf("after sleeping: %g bad / %g total, want still 10 / 100", wr.Bad, wr.Total)
	}
	// Awake again: a new refusal counts.
	l.scrape(t0.Add(40*time.Second), map[string]string{stop: "390.0", lateHTTP("/v1/chat/completions", "5xx"): "91.0"})
	w.Tick(t0.Add(40 * time.Second))
	r = resultFor(t, w, "avail", lateModel)
	if wr := window5m(&r); wr.Bad != 11 || wr.Total != 101 {
		t.Fatalf("awake again: %g bad / %g total, want 11 / 101", wr.Bad, wr.Total)
	}
}

func window5m(r *Result) WindowResult {
	wr, _ := r.Window("5m")
	return wr
}

// resultFor is the watchdog's latest result for one SLO and model.
func resultFor(t *testing.T, w *Watchdog, slo, model string) Result {
	t.Helper()
	for _, r := range w.Status() {
		if r.SLO == slo && r.Model == model {
			return r
		}
	}
	t.Fatalf("no result for %s{model=%q} in %v", slo, model, w.Status())
	return Result{}
}

// With vLLM's --custom-histogram-buckets, an SLO whose threshold is a bound
// of the scrape is measured (the config lists the custom bounds under
// histogram_buckets); one whose threshold the scrape lacks is marked
// unmeasurable with its reason and counts nothing.
func TestCustomBucketsMeasurability(t *testing.T) {
	l := newFixtureServer(t)
	custom := New(Options{}, holderFor(t, `histogram_buckets:
  ttft: [0.05, 0.1, 0.2, 0.35, 0.5, 1, 2, 5]
slos:
  - {name: ttft-custom, kind: latency, metric: ttft, threshold: 0.35, objective: 0.99, min_events: 1}
`), Sources{VLLM: l.s}, nil)
	// 0.25 is one of vLLM's default TTFT bounds, not of this server's.
	stale := New(Options{}, holderFor(t, `slos:
  - {name: ttft-default, kind: latency, metric: ttft, threshold: 0.25, objective: 0.99, min_events: 1}
`), Sources{VLLM: l.s}, nil)
	l.scrape(t0, nil)
	custom.Tick(t0)
	stale.Tick(t0)
	bucket := func(le, _ string) string {
		return `vllm:time_to_first_token_seconds_bucket{engine="0",le="` + le + `",model_name="` + lateModel + `",priority="1"}`
	}
	// Priority 1 on engine 0: 51 requests, cumulative 26,41,48,51,... at
	// 0.05,0.1,0.2,0.35; add 10 requests at 0.3 s (good at 0.35).
	later := map[string]string{
		bucket("0.35", ""): "61.0", bucket("0.5", ""): "61.0", bucket("1.0", ""): "61.0", bucket("2.0", ""): "61.0",
		bucket("5.0", ""): "61.0", bucket("+Inf", ""): "61.0",
		lateEngine("vllm:time_to_first_token_seconds_count", "0", `priority="1"`): "61.0",
		lateEngine("vllm:time_to_first_token_seconds_sum", "0", `priority="1"`):   "18.3",
	}
	l.scrape(t0.Add(10*time.Second), later)
	custom.Tick(t0.Add(10 * time.Second))
	stale.Tick(t0.Add(10 * time.Second))
	if um := custom.Unmeasurable(); len(um) != 0 {
		t.Errorf("custom-bound SLO reported unmeasurable: %v", um)
	}
	rc := resultFor(t, custom, "ttft-custom", lateModel)
	if wr := window5m(&rc); wr.Total != 10 || wr.Bad != 0 {
		t.Errorf("ttft-custom 5m window %g bad / %g total, want 0 / 10", wr.Bad, wr.Total)
	}
	if um := stale.Unmeasurable(); len(um["ttft-default"]) != 1 || um["ttft-default"][0] != UnmeasurableNoBound {
		t.Errorf("threshold missing from the scrape: unmeasurable = %v, want ttft-default: no_bucket_bound", um)
	}
	if err := promtestutil.CollectAndCompare(stale, strings.NewReader(`
# HELP vllm_slo_unmeasurable 1 while the SLO's last evaluation could not measure it for some model, by reason: no_bucket_bound (the scrape's histogram has no bucket bound at the threshold, e.g. vLLM --custom-histogram-buckets without it) or series_missing; the SLO counts no events for that model until it is measurable.
# TYPE vllm_slo_unmeasurable gauge
vllm_slo_unmeasurable{reason="no_bucket_bound",slo="ttft-default"} 1
`), "vllm_slo_unmeasurable"); err != nil {
		t.Error(err)
	}
	for _, r := range stale.Status() {
		if r.SLO == "ttft-default" {
			t.Errorf("an unmeasurable SLO has a result: %v", r)
		}
	}
}

// A preemption SLO counts preemptions (bad) against finished requests
// (total), so bad is not a subset of total: a window can hold preemptions
// and no finished request (an engine thrashing without completing
// anything). The watchdog has no ratio for an empty window and never burns
// on it, even with min_events: 0; the generated rules, where the ratio is
// +Inf, must not page either. Same input series for both.
func TestPreemptionWithoutFinishedRequestsAgrees(t *testing.T) {
	const cfg = `
slos:
  - {name: preempt, kind: preemption, threshold: 0.01, min_events: 0}
`
	src := &fakeVLLM{}
	w := New(Options{}, holderFor(t, cfg), Sources{VLLM: src}, nil)
	tr := &traffic{good: 100}
	var finished, preempt []float64
	for k := 0; k <= 60; k++ {
		if k > 0 {
			tr.preemptions += 10
		}
		now := t0.Add(time.Duration(k) * time.Minute)
		tickAt(w, src, tr, now)
		if r := only(t, w); r.Page || r.Ticket {
			t.Fatalf("watchdog alerted on preemptions without finished requests: %v", r)
		}
		finished = append(finished, tr.good)
		preempt = append(preempt, tr.preemptions)
	}
	h, err := holderFromPath(writeTemp(t, "c.yml", cfg))
	if err != nil {
		t.Fatal(err)
	}
	b, err := GenerateRules(h.Get().SLOs, RuleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules := writeTemp(t, "rules.yml", string(b))
	var checks []testutil.ExprTest
	for _, m := range []int{10, 30, 60} {
		checks = append(checks, testutil.ExprTest{Expr: `ALERTS{slo="preempt"}`, EvalTime: testutil.Duration(time.Duration(m) * time.Minute)})
	}
	// A sample every 30 s (the watchdog's minutes, interpolated): every
	// window, the fast tier's [1m] included, holds two samples or more on
	// Prometheus 3's left-open ranges.
	test := testutil.WriteRuleTest(t, t.TempDir(), "test.yml", testutil.RuleTestFile{
		RuleFiles:          []string{rules},
		EvaluationInterval: testutil.Duration(time.Minute),
		Tests: []testutil.RuleTest{{
			Interval: testutil.Duration(30 * time.Second),
			InputSeries: []testutil.InputSeries{
				{Series: `vllm_requests_finished_total{model="m",finished_reason="stop"}`, Values: testutil.Samples(testutil.Interpolate(finished, 2))},
				{Series: `vllm_preemptions_total{model="m"}`, Values: testutil.Samples(testutil.Interpolate(preempt, 2))},
			},
			ExprTests: checks,
		}},
	})
	testutil.RunRuleTests(t, test)
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
