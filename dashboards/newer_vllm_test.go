package dashboards

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/e2e"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmhealth"
	"github.com/vllm-exporter/vllm_exporter/slo/bottleneck"
)

// newerRowPanels returns the panels of the overview's newer-vLLM row, as
// the shipped JSON has them.
func newerRowPanels(t *testing.T) []dashPanel { return rowPanels(t, newerVLLMRowTitle) }

// rowPanels returns the panels of one row of the overview, as the shipped
// JSON has them (the row's panels follow its row header up to the next
// row).
func rowPanels(t *testing.T, title string) []dashPanel {
	t.Helper()
	b, err := os.ReadFile("vllm-overview.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Type string `json:"type"`
			dashPanel
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []dashPanel
	in := false
	for _, p := range d.Panels {
		if p.Type == "row" {
			in = p.Title == title
			continue
		}
		if in {
			out = append(out, p.dashPanel)
		}
	}
	if len(out) == 0 {
		t.Fatalf("vllm-overview.json has no row %q", title)
	}
	return out
}

// exporterSeries is what the exporter really exposes for a vLLM 0.20-0.33
// server: the vLLM collector's output after scraping a two-engine late-2026
// body (waiting by reason, sleep resources, engine_healthy, spec decode,
// prompt tokens by source, the stated KV pool, MFU counters, HTTP
// refusals), the health verdict's output, and the classifier's declared
// series (MFU/MBU, bottleneck class: they need a watchdog tick to have
// values). Name -> label names. Fragments (files in testdata) are appended
// to the body: families of features the two-engine body does not run.
func exporterSeries(t *testing.T, fragments ...string) map[string]map[string]bool {
	t.Helper()
	var body []byte
	for _, f := range append([]string{"vllm-late-2026-dp2-priority-spec.txt"}, fragments...) {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		body = append(body, b...)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=1.0.0; charset=utf-8")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	s := vllm.New(vllm.Options{URL: srv.URL, Interval: 5 * time.Second, Timeout: 5 * time.Second, Windows: []time.Duration{time.Minute}}, nil)
	t0 := time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC)
	s.ScrapeOnce(context.Background(), t0)
	s.ScrapeOnce(context.Background(), t0.Add(30*time.Second))
	if l := s.Latest(); l == nil || !l.Up {
		t.Fatalf("scrape of the late-2026 fixture failed: %+v", l)
	}
	health := vllmhealth.New(vllmhealth.Sources{VLLM: s})
	health.Tick(t0.Add(30 * time.Second))

	out := map[string]map[string]bool{}
	for _, names := range []map[string]map[string]bool{
		e2e.GatheredNames(t, s),
		e2e.GatheredNames(t, health),
		e2e.DescribedNames(t, bottleneck.New(bottleneck.Options{}, nil, bottleneck.Sources{}, nil)),
	} {
		for n, ls := range names {
			if out[n] == nil {
				out[n] = map[string]bool{}
			}
			for l := range ls {
				out[n][l] = true
			}
		}
	}
	return out
}

// Every series the newer-vLLM row queries is one the exporter really
// exposes, with every label the query filters or groups on: a panel on an
// invented or misspelt name (or label) would stay empty forever.
func TestNewerVLLMPanelsQueryExportedSeries(t *testing.T) {
	checkPanelsQueryExportedSeries(t, newerRowPanels(t), exporterSeries(t))
}

// checkPanelsQueryExportedSeries fails for a panel query that reads a
// series the exporter does not expose, or filters or groups on a label
// the series lacks.
func checkPanelsQueryExportedSeries(t *testing.T, panels []dashPanel, series map[string]map[string]bool) {
	t.Helper()
	byLabels := regexp.MustCompile(`\b(?:by|on)\s*\(([^)]*)\)`)
	for _, p := range panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			expr := e2e.Substitute(tg.Expr)
			sels, err := e2e.Selectors(expr)
			if err != nil {
				t.Fatalf("panel %q: %v", p.Title, err)
			}
			if len(sels) == 0 {
				t.Errorf("panel %q: no series in %s", p.Title, tg.Expr)
			}
			var names []string
			for _, sel := range sels {
				names = append(names, sel.Name)
				labels, ok := series[sel.Name]
				if !ok {
					// a histogram read as a native histogram (histq)
					labels, ok = series[sel.Name+"_bucket"]
				}
				if !ok {
					t.Errorf("panel %q: the exporter exposes no series %s (%s)", p.Title, sel.Name, tg.Expr)
					continue
				}
				for _, l := range sel.Labels {
					if l != "instance" && !labels[l] {
						t.Errorf("panel %q: series %s has no label %s", p.Title, sel.Name, l)
					}
				}
			}
			// Labels grouped on (by/on) exist on every series of the
			// query, except Prometheus' target label instance.
			for _, m := range byLabels.FindAllStringSubmatch(expr, -1) {
				for _, l := range strings.Split(m[1], ",") {
					l = strings.TrimSpace(l)
					if l == "" || l == "instance" || l == "le" {
						continue
					}
					for _, n := range names {
						if ls, ok := series[n]; ok && !ls[l] {
							t.Errorf("panel %q: groups on %s, which series %s does not have (%s)", p.Title, l, n, tg.Expr)
						}
					}
				}
			}
		}
	}
}

// The newer-vLLM panels say why they can be empty (which vLLM version or
// flag the series needs), and their queries compute what their titles say,
// evaluated by promtool on series shaped like the exporter's: waiting by
// reason, the livelock class, refusals, sleep, spec-decode acceptance rate
// and length, prompt tokens by source, the KV pool, MFU/MBU.
func TestNewerVLLMPanelsComputeWhatTheySay(t *testing.T) {
	panels := map[string]dashPanel{}
	for _, p := range newerRowPanels(t) {
		panels[p.Title] = p
		// The verdict always has a state, the livelock class exists once the
		// classifier ran (whatever the vLLM); every other panel reads a
		// family only some vLLM versions or flags emit.
		switch p.Title {
		case "Health verdict":
			continue
		case "Deferred livelock":
			if p.FieldConfig.Defaults.NoValue == "" {
				t.Errorf("panel %q: no no-data text", p.Title)
			}
			continue
		}
		if nv := p.FieldConfig.Defaults.NoValue; !strings.Contains(nv, "vLLM") || !regexp.MustCompile(`\d+\.\d+\+|--[a-z]`).MatchString(nv) {
			t.Errorf("panel %q: no-data text %q does not name the vLLM version or flag the series needs", p.Title, nv)
		}
	}
	expr := func(title string, i int) string {
		return e2e.Substitute(panelExpr(t, panels, title, i)) // the writer quotes it
	}
	// Series shaped like the exporter's, a sample every 30 s for 10
	// minutes (Prometheus 3 range selectors are left-open: a [1m] window
	// over one sample a minute holds one sample, and rate() over it is
	// empty). Counters grow by a fixed amount per minute; the expected
	// rates and ratios are computed from those amounts.
	const (
		l        = `job="vllm",instance="a:9470",model="m"`
		step     = 30 * time.Second
		n        = int(10*time.Minute/step) + 1
		switchAt = 3 * time.Minute // the engine falls asleep, the livelock class fires
	)
	const (
		refusedPerMin, draftsPerMin, draftTokensPerMin, acceptedPerMin = 30.0, 60.0, 240.0, 120.0
		computedPerMin, cachedPerMin                                   = 600.0, 1800.0
	)
	gauge, counter := panelSeries(n, step)
	switched := func(before, after float64) string {
		v := make([]float64, n)
		for i := range v {
			v[i] = before
			if time.Duration(i)*step >= switchAt {
				v[i] = after
			}
		}
		return testutil.Samples(v)
	}
	in := []testutil.InputSeries{
		{Series: `vllm_requests_waiting_by_reason{` + l + `,reason="capacity"}`, Values: gauge(19)},
		{Series: `vllm_requests_waiting_by_reason{` + l + `,reason="deferred"}`, Values: gauge(473)},
		{Series: `vllm_bottleneck{` + l + `,class="deferred_livelock"}`, Values: switched(0, 1)},
		{Series: `vllm_bottleneck{` + l + `,class="near_optimal"}`, Values: switched(1, 0)},
		{Series: `vllm_requests_refused_total{` + l + `}`, Values: counter(refusedPerMin)},
		{Series: `vllm_engine_awake{` + l + `}`, Values: switched(1, 0)},
		{Series: `vllm_engine_sleep_level{` + l + `}`, Values: switched(0, 2)},
		{Series: `vllm_engine_sleep_resource_state{` + l + `,resource="weights",state="discarded"}`, Values: gauge(1)},
		{Series: `vllm_engine_sleep_resource_state{` + l + `,resource="weights",state="resident"}`, Values: gauge(0)},
		{Series: `vllm_health_verdict{job="vllm",instance="a:9470",state="asleep"}`, Values: gauge(1)},
		{Series: `vllm_health_verdict{job="vllm",instance="a:9470",state="serving"}`, Values: gauge(0)},
		{Series: `vllm_spec_decode_drafts_total{` + l + `}`, Values: counter(draftsPerMin)},
		{Series: `vllm_spec_decode_draft_tokens_total{` + l + `}`, Values: counter(draftTokensPerMin)},
		{Series: `vllm_spec_decode_accepted_tokens_total{` + l + `}`, Values: counter(acceptedPerMin)},
		{Series: `vllm_decode_spec_acceptance_length{` + l + `}`, Values: gauge(2.5)},
		{Series: `vllm_prompt_tokens_by_source_total{` + l + `,source="local_compute"}`, Values: counter(computedPerMin)},
		{Series: `vllm_prompt_tokens_by_source_total{` + l + `,source="local_cache_hit"}`, Values: counter(cachedPerMin)},
		{Series: `vllm_kv_cache_size_tokens{` + l + `}`, Values: gauge(409600)},
		{Series: `vllm_model_flops_utilization_ratio{` + l + `}`, Values: gauge(0.4)},
		{Series: `vllm_model_bandwidth_utilization_ratio{` + l + `}`, Values: gauge(0.7)},
		{Series: `vllm_kv_cache_max_concurrency{` + l + `}`, Values: gauge(50)},
		{Series: `vllm_engine_healthy{` + l + `,engine="0"}`, Values: gauge(1)},
		{Series: `vllm_engine_healthy{` + l + `,engine="1"}`, Values: gauge(0)},
	}
	m := modelSample
	check := func(title string, i int, want ...testutil.ExpSample) testutil.ExprTest {
		return testutil.ExprTest{Expr: expr(title, i), EvalTime: testutil.Duration(5 * time.Minute), ExpSamples: want}
	}
	checks := []testutil.ExprTest{
		check("Waiting requests by reason", 0, m(19, "reason", "capacity"), m(473, "reason", "deferred")),
		check("Deferred livelock", 0, m(1)),
		check("Requests refused (5xx, 429)", 0, m(refusedPerMin/60)),
		check("Engine awake and sleep level", 0, m(0)),
		check("Engine awake and sleep level", 1, m(2)),
		check("Sleep state per resource", 0, m(1, "resource", "weights", "state", "discarded")),
		check("Health verdict", 0, testutil.ExpSample{Labels: `{instance="a:9470",state="asleep"}`, Value: 1}),
		check("Speculative decoding: acceptance rate", 0, m(acceptedPerMin/draftTokensPerMin)),
		check("Speculative decoding: mean acceptance length", 0, m(1+acceptedPerMin/draftsPerMin)),
		check("Speculative decoding: mean acceptance length", 1, m(2.5)),
		check("Prompt tokens: computed vs cached", 0, m(computedPerMin/60, "source", "local_compute"), m(cachedPerMin/60, "source", "local_cache_hit")),
		check("KV cache pool (as vLLM states it)", 0, m(409600)),
		check("MFU and MBU (vLLM's estimates)", 0, m(0.4)),
		check("vLLM engine healthy", 0, m(0)),
		check("MFU and MBU (vLLM's estimates)", 1, m(0.7)),
		check("KV cache pool (as vLLM states it)", 1, m(50)),
	}
	testutil.RunRuleTests(t, testutil.WriteRuleTest(t, t.TempDir(), "newer_vllm_panels_test.yml", testutil.RuleTestFile{
		EvaluationInterval: testutil.Duration(time.Minute),
		Tests:              []testutil.RuleTest{{Interval: testutil.Duration(step), InputSeries: in, ExprTests: checks}},
	}))
	// Every panel of the row is evaluated above.
	evaluated := []string{"Waiting requests by reason", "Deferred livelock", "Requests refused (5xx, 429)", "Engine awake and sleep level",
		"Sleep state per resource", "Health verdict", "Speculative decoding: acceptance rate", "Speculative decoding: mean acceptance length",
		"Prompt tokens: computed vs cached", "KV cache pool (as vLLM states it)", "MFU and MBU (vLLM's estimates)", "vLLM engine healthy"}
	for title := range panels {
		if !slices.Contains(evaluated, title) {
			t.Errorf("panel %q of the newer-vLLM row is not evaluated by this test", title)
		}
	}
}

// panelSeries returns writers of promtool input values, n samples step
// apart: a gauge holding v, and a counter growing by perMin a minute.
func panelSeries(n int, step time.Duration) (gauge func(v float64) string, counter func(perMin float64) string) {
	gauge = func(v float64) string { return testutil.Samples(slices.Repeat([]float64{v}, n)) }
	counter = func(perMin float64) string {
		v := make([]float64, n)
		for i := range v {
			v[i] = perMin * (time.Duration(i) * step).Minutes()
		}
		return testutil.Samples(v)
	}
	return gauge, counter
}

// modelSample is an expected sample of model "m" with more labels (name,
// value pairs).
func modelSample(v float64, kv ...string) testutil.ExpSample {
	labels := `model="m"`
	for i := 0; i+1 < len(kv); i += 2 {
		labels += fmt.Sprintf(",%s=%q", kv[i], kv[i+1])
	}
	return testutil.ExpSample{Labels: "{" + labels + "}", Value: v}
}
