package dashboards

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/e2e"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmhealth"
	"github.com/vllm-exporter/vllm_exporter/slo/bottleneck"
)

// newerRowPanels returns the panels of the overview's newer-vLLM row, as
// the shipped JSON has them (the row's panels follow its row header up to
// the next row).
func newerRowPanels(t *testing.T) []dashPanel {
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
			in = p.Title == newerVLLMRowTitle
			continue
		}
		if in {
			out = append(out, p.dashPanel)
		}
	}
	if len(out) == 0 {
		t.Fatalf("vllm-overview.json has no row %q", newerVLLMRowTitle)
	}
	return out
}

// exporterSeries is what the exporter really exposes for a vLLM 0.20-0.33
// server: the vLLM collector's output after scraping a two-engine late-2026
// body (waiting by reason, sleep resources, engine_healthy, spec decode,
// prompt tokens by source, the stated KV pool, MFU counters, HTTP
// refusals), the health verdict's output, and the classifier's declared
// series (MFU/MBU, bottleneck class: they need a watchdog tick to have
// values). Name -> label names.
func exporterSeries(t *testing.T) map[string]map[string]bool {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "vllm-late-2026-dp2-priority-spec.txt"))
	if err != nil {
		t.Fatal(err)
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
	series := exporterSeries(t)
	byLabels := regexp.MustCompile(`\b(?:by|on)\s*\(([^)]*)\)`)
	for _, p := range newerRowPanels(t) {
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
					if l == "" || l == "instance" {
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
	promtool := e2e.RequireTool(t, "promtool")
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
		p, ok := panels[title]
		if !ok {
			t.Fatalf("no panel %q in the newer-vLLM row", title)
		}
		if i >= len(p.Targets) {
			t.Fatalf("panel %q has %d targets", title, len(p.Targets))
		}
		return strings.ReplaceAll(e2e.Substitute(p.Targets[i].Expr), "'", "''")
	}
	const l = `job="vllm",instance="a:9470",model="m"`
	// Samples every 30s: $__rate_interval is 1m here, and Prometheus 3's
	// left-open range (t-1m, t] holds one sample at 1-minute steps, too few
	// for rate() (Prometheus 2's closed range held two).
	test := fmt.Sprintf(`evaluation_interval: 1m
tests:
  - interval: 30s
    input_series:
      - series: 'vllm_requests_waiting_by_reason{%[1]s,reason="capacity"}'
        values: '19x20'
      - series: 'vllm_requests_waiting_by_reason{%[1]s,reason="deferred"}'
        values: '473x20'
      - series: 'vllm_bottleneck{%[1]s,class="deferred_livelock"}'
        values: '0 0 0 0 0 0 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1'
      - series: 'vllm_bottleneck{%[1]s,class="near_optimal"}'
        values: '1 1 1 1 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0'
      - series: 'vllm_requests_refused_total{%[1]s}'
        values: '0+15x20'
      - series: 'vllm_engine_awake{%[1]s}'
        values: '1 1 1 1 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0'
      - series: 'vllm_engine_sleep_level{%[1]s}'
        values: '0 0 0 0 0 0 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2'
      - series: 'vllm_engine_sleep_resource_state{%[1]s,resource="weights",state="discarded"}'
        values: '1x20'
      - series: 'vllm_engine_sleep_resource_state{%[1]s,resource="weights",state="resident"}'
        values: '0x20'
      - series: 'vllm_health_verdict{job="vllm",instance="a:9470",state="asleep"}'
        values: '1x20'
      - series: 'vllm_health_verdict{job="vllm",instance="a:9470",state="serving"}'
        values: '0x20'
      - series: 'vllm_spec_decode_drafts_total{%[1]s}'
        values: '0+30x20'
      - series: 'vllm_spec_decode_draft_tokens_total{%[1]s}'
        values: '0+120x20'
      - series: 'vllm_spec_decode_accepted_tokens_total{%[1]s}'
        values: '0+60x20'
      - series: 'vllm_prompt_tokens_by_source_total{%[1]s,source="local_compute"}'
        values: '0+300x20'
      - series: 'vllm_prompt_tokens_by_source_total{%[1]s,source="local_cache_hit"}'
        values: '0+900x20'
      - series: 'vllm_kv_cache_size_tokens{%[1]s}'
        values: '409600x20'
      - series: 'vllm_model_flops_utilization_ratio{%[1]s}'
        values: '0.4x20'
      - series: 'vllm_model_bandwidth_utilization_ratio{%[1]s}'
        values: '0.7x20'
      - series: 'vllm_kv_cache_max_concurrency{%[1]s}'
        values: '50x20'
      - series: 'vllm_engine_healthy{%[1]s,engine="0"}'
        values: '1x20'
      - series: 'vllm_engine_healthy{%[1]s,engine="1"}'
        values: '0x20'
    promql_expr_test:
      - expr: '%[2]s'
        eval_time: 5m
        exp_samples:
          - labels: '{model="m",reason="capacity"}'
            value: 19
          - labels: '{model="m",reason="deferred"}'
            value: 473
      - expr: '%[3]s'
        eval_time: 5m
        exp_samples:
          - labels: '{model="m"}'
            value: 1
      - expr: '%[4]s'
        eval_time: 5m
        exp_samples:
          - labels: '{model="m"}'
            value: 0.5
      - expr: '%[5]s'
        eval_time: 5m
        exp_samples:
          - labels: '{model="m"}'
            value: 0
      - expr: '%[6]s'
        eval_time: 5m
        exp_samples:
          - labels: '{model="m"}'
            value: 2
      - expr: '%[7]s'
        eval_time: 5m
        exp_samples:
          - labels: '{model="m",resource="weights",state="discarded"}'
            value: 1
      - expr: '%[8]s'
        eval_time: 5m
        exp_samples:
          - labels: '{instance="a:9470",state="asleep"}'
            value: 1
      - expr: '%[9]s'
        eval_time: 5m
        exp_samples:
          - labels: '{model="m"}'
            value: 0.5
      - expr: '%[10]s'
        eval_time: 5m
        exp_samples:
          - labels: '{model="m"}'
            value: 3
      - expr: '%[11]s'
        eval_time: 5m
        exp_samples:
          - labels: '{model="m",source="local_compute"}'
            value: 10
          - labels: '{model="m",source="local_cache_hit"}'
            value: 30
      - expr: '%[12]s'
        eval_time: 5m
        exp_samples:
          - labels: '{model="m"}'
            value: 409600
      - expr: '%[13]s'
        eval_time: 5m
        exp_samples:
          - labels: '{model="m"}'
            value: 0.4
      - expr: '%[14]s'
        eval_time: 5m
        exp_samples:
          - labels: '{model="m"}'
            value: 0
      - expr: '%[15]s'
        eval_time: 5m
        exp_samples:
          - labels: '{model="m"}'
            value: 0.7
      - expr: '%[16]s'
        eval_time: 5m
        exp_samples:
          - labels: '{model="m"}'
            value: 50
`, l,
		expr("Waiting requests by reason", 0),
		expr("Deferred livelock", 0),
		expr("Requests refused (5xx, 429)", 0),
		expr("Engine awake and sleep level", 0),
		expr("Engine awake and sleep level", 1),
		expr("Sleep state per resource", 0),
		expr("Health verdict", 0),
		expr("Speculative decoding: acceptance rate", 0),
		expr("Speculative decoding: mean acceptance length", 0),
		expr("Prompt tokens: computed vs cached", 0),
		expr("KV cache pool (as vLLM states it)", 0),
		expr("MFU and MBU (vLLM's estimates)", 0),
		expr("vLLM engine healthy", 0),
		expr("MFU and MBU (vLLM's estimates)", 1),
		expr("KV cache pool (as vLLM states it)", 1),
	)
	p := filepath.Join(t.TempDir(), "newer_vllm_panels_test.yml")
	if err := os.WriteFile(p, []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "test", "rules", p).CombinedOutput(); err != nil {
		t.Fatalf("promtool: %v\n%s\n%s", err, out, test)
	}
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
