package vllm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

func scrapeBody(t *testing.T, body []byte, contentType string) *snapshot.VLLM {
	t.Helper()
	srv := newFakeVLLM(t, body, contentType)
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	l := s.Latest()
	if !l.Up {
		t.Fatalf("scrape failed: %s", l.Error)
	}
	return l
}

// TestRealExcerpts runs the short real /metrics excerpts from public issues
// through the scraper. They are fragments, so most expected families are
// missing; what matters is schema detection, name fallbacks, and that
// nothing crashes or invents values.
func TestRealExcerpts(t *testing.T) {
	cases := []struct {
		file        string
		schema      string
		check       func(t *testing.T, v *snapshot.VLLM)
		wantMissing []string // a subset of Missing
	}{
		{"real-0.10.0-production-stack-617-excerpt.txt", SchemaV1, func(t *testing.T, v *snapshot.VLLM) {
			m := v.Models["zai-org/GLM-4.5"]
			wantValue(t, "kv", m.KVUsage, 9.75010481363281e-06)
			wantValue(t, "prefix queries (new name)", m.PrefixQueries, 32)
			// prefix_cache_hits_total is cut from the excerpt: the deprecated
			// gpu_prefix_cache_hits_total (same value in 0.10.0) stands in.
			wantValue(t, "prefix hits (deprecated name)", m.PrefixHits, 0)
			// The excerpt cuts time_per_output_token before its +Inf
			// bucket: not a histogram (invalid_histogram), nothing exported.
			if h, ok := m.Histograms.Lookup(snapshot.InterTokenLatency); ok {
				t.Errorf("ITL read from a histogram cut before +Inf: %+v", h)
			}
			if _, ok := m.Histograms.Lookup(snapshot.TTFT); ok {
				t.Error("TTFT histogram invented from a _created gauge")
			}
		}, []string{"vllm:num_requests_running", "vllm:time_to_first_token_seconds"}},
		// Histogram lines without TYPE lines are read by their suffixes;
		// these are cut (no +Inf bucket, no _sum): no histogram is kept.
		// Engine labels say V1, before the 0.9.2 renames.
		{"real-0.10.x-dp2-vllm-pr22227-excerpt.txt", SchemaV1Legacy, func(t *testing.T, v *snapshot.VLLM) {
			for name, m := range v.Models {
				if m.Histograms.Len() != 0 {
					t.Errorf("model %s: histograms from cut fragments", name)
				}
			}
		}, []string{"vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache_queries_total"}},
		{"real-0.7.3-docs-example.txt", SchemaV0, nil, []string{"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds"}},
		{"real-v0-pre-mq-vllm-8115-excerpt.txt", SchemaV0, nil, []string{"vllm:num_requests_running"}},
		// python_* and process_* only: not vLLM engine metrics at all.
		{"real-v1-0.11-vllm-26762-excerpt.txt", SchemaNone, func(t *testing.T, v *snapshot.VLLM) {
			if len(v.Models) != 0 {
				t.Errorf("models from python/process metrics: %v", v.Models)
			}
		}, []string{"vllm:num_requests_running", "vllm:request_success_total"}},
		// 0.8.x V1: no engine label, gpu_* names, prefix counter family empty;
		// V1's HELP text for num_requests_running gives it away.
		{"real-v1-0.8.x-production-stack-318-excerpt.txt", SchemaV1Legacy, func(t *testing.T, v *snapshot.VLLM) {
			m := v.Models["Qwen/Qwen2.5-Coder-32B-Instruct"]
			wantValue(t, "running", m.Running, 0)
			wantValue(t, "waiting", m.Waiting, 0)
			wantValue(t, "kv from gpu_cache_usage_perc", m.KVUsage, 0)
			if m.PerEngine != nil {
				t.Error("per-engine gauges without an engine label")
			}
		}, []string{"vllm:gpu_prefix_cache_queries_total"}},
		{"real-v1-2026-workshop-excerpt.txt", SchemaV1, func(t *testing.T, v *snapshot.VLLM) {
			m := v.Models["llama-vllm-single"]
			wantValue(t, "running", m.Running, 0)
			wantValue(t, "kv", m.KVUsage, 0)
			wantValue(t, "preemptions (not the _created gauge)", m.Preemptions, 0)
		}, []string{"vllm:request_time_per_output_token_seconds"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			v := scrapeBody(t, fixture(t, c.file), "text/plain; version=0.0.4; charset=utf-8")
			if v.Schema != c.schema {
				t.Errorf("schema = %q, want %q", v.Schema, c.schema)
			}
			for _, m := range c.wantMissing {
				if !slices.Contains(v.Missing, m) {
					t.Errorf("Missing = %v, want it to include %s", v.Missing, m)
				}
			}
			if c.check != nil {
				c.check(t, v)
			}
		})
	}
}

// A DP=2 server (V1 >= 0.10, one logger for all local engines), in the
// shape of the PR#22227 excerpt.
const dp2Body = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="/home/jovyan/qwen3-8b"} 3.0
vllm:num_requests_running{engine="1",model_name="/home/jovyan/qwen3-8b"} 4.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="/home/jovyan/qwen3-8b"} 1.0
vllm:num_requests_waiting{engine="1",model_name="/home/jovyan/qwen3-8b"} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="/home/jovyan/qwen3-8b"} 0.2
vllm:kv_cache_usage_perc{engine="1",model_name="/home/jovyan/qwen3-8b"} 0.6
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="/home/jovyan/qwen3-8b"} 0.2
vllm:gpu_cache_usage_perc{engine="1",model_name="/home/jovyan/qwen3-8b"} 0.6
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="/home/jovyan/qwen3-8b"} 1.0
vllm:num_preemptions_total{engine="1",model_name="/home/jovyan/qwen3-8b"} 2.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="/home/jovyan/qwen3-8b"} 5.0
vllm:request_success_total{engine="1",finished_reason="stop",model_name="/home/jovyan/qwen3-8b"} 6.0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="2.0",model_name="/home/jovyan/qwen3-8b"} 0.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="2.5",model_name="/home/jovyan/qwen3-8b"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="5.0",model_name="/home/jovyan/qwen3-8b"} 2.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="/home/jovyan/qwen3-8b"} 3.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="/home/jovyan/qwen3-8b"} 3.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="/home/jovyan/qwen3-8b"} 12.0
vllm:e2e_request_latency_seconds_bucket{engine="1",le="2.0",model_name="/home/jovyan/qwen3-8b"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="1",le="2.5",model_name="/home/jovyan/qwen3-8b"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="1",le="5.0",model_name="/home/jovyan/qwen3-8b"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="1",le="+Inf",model_name="/home/jovyan/qwen3-8b"} 1.0
vllm:e2e_request_latency_seconds_count{engine="1",model_name="/home/jovyan/qwen3-8b"} 1.0
vllm:e2e_request_latency_seconds_sum{engine="1",model_name="/home/jovyan/qwen3-8b"} 1.5
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",num_gpu_blocks="1000"} 1.0
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="1",gpu_memory_utilization="0.9",num_gpu_blocks="1000"} 1.0
`

func TestDataParallelEngines(t *testing.T) {
	srv := newFakeVLLM(t, []byte(dp2Body), "text/plain; version=1.0.0; charset=utf-8")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	const q = `model="/home/jovyan/qwen3-8b"`
	// Sums over engines: running 3+4, waiting 1+0, preemptions 1+2, stop 5+6;
	// KV usage is the fuller engine's (max 0.2, 0.6), read once although
	// both the new and the deprecated name are present; per-engine gauges kept.
	// e2e buckets summed: 2.0: 0+1, 2.5: 1+1, 5.0: 2+1, +Inf 3+1, sum 12+1.5.
	compareNoHelp(t, s, `
# TYPE vllm_requests_running gauge
vllm_requests_running{`+q+`} 7
# TYPE vllm_requests_waiting gauge
vllm_requests_waiting{`+q+`} 1
# TYPE vllm_kv_cache_usage_ratio gauge
vllm_kv_cache_usage_ratio{`+q+`} 0.6
# TYPE vllm_engine_kv_cache_usage_ratio gauge
vllm_engine_kv_cache_usage_ratio{engine="0",`+q+`} 0.2
vllm_engine_kv_cache_usage_ratio{engine="1",`+q+`} 0.6
# TYPE vllm_engine_requests_running gauge
vllm_engine_requests_running{engine="0",`+q+`} 3
vllm_engine_requests_running{engine="1",`+q+`} 4
# TYPE vllm_engine_requests_waiting gauge
vllm_engine_requests_waiting{engine="0",`+q+`} 1
vllm_engine_requests_waiting{engine="1",`+q+`} 0
# TYPE vllm_preemptions_total counter
vllm_preemptions_total{`+q+`} 3
# TYPE vllm_requests_finished_total counter
vllm_requests_finished_total{finished_reason="stop",`+q+`} 11
# TYPE vllm_e2e_request_latency_seconds histogram
vllm_e2e_request_latency_seconds_bucket{le="2",`+q+`} 1
vllm_e2e_request_latency_seconds_bucket{le="2.5",`+q+`} 2
vllm_e2e_request_latency_seconds_bucket{le="5",`+q+`} 3
vllm_e2e_request_latency_seconds_bucket{le="+Inf",`+q+`} 4
vllm_e2e_request_latency_seconds_sum{`+q+`} 13.5
vllm_e2e_request_latency_seconds_count{`+q+`} 4
# TYPE vllm_cache_config_info gauge
vllm_cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",gpu_memory_utilization="0.9",`+q+`,num_gpu_blocks="1000"} 1
`, "vllm_requests_running", "vllm_requests_waiting", "vllm_kv_cache_usage_ratio", "vllm_engine_kv_cache_usage_ratio",
		"vllm_engine_requests_running", "vllm_engine_requests_waiting", "vllm_preemptions_total", "vllm_requests_finished_total",
		"vllm_e2e_request_latency_seconds", "vllm_cache_config_info")
}

func TestSeveralModelNames(t *testing.T) {
	body := `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="a"} 1.0
vllm:num_requests_running{model_name="b"} 2.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="a"} 0.1
vllm:gpu_cache_usage_perc{model_name="b"} 0.2
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="32",cache_dtype="fp8",enable_prefix_caching="False",gpu_memory_utilization="0.8",num_gpu_blocks="10"} 1.0
`
	srv := newFakeVLLM(t, []byte(body), "text/plain")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	compareNoHelp(t, s, `
# TYPE vllm_requests_running gauge
vllm_requests_running{model="a"} 1
vllm_requests_running{model="b"} 2
# TYPE vllm_kv_cache_usage_ratio gauge
vllm_kv_cache_usage_ratio{model="a"} 0.1
vllm_kv_cache_usage_ratio{model="b"} 0.2
# TYPE vllm_cache_config_info gauge
vllm_cache_config_info{block_size="32",cache_dtype="fp8",enable_prefix_caching="False",gpu_memory_utilization="0.8",model="a",num_gpu_blocks="10"} 1
vllm_cache_config_info{block_size="32",cache_dtype="fp8",enable_prefix_caching="False",gpu_memory_utilization="0.8",model="b",num_gpu_blocks="10"} 1
`, "vllm_requests_running", "vllm_kv_cache_usage_ratio", "vllm_cache_config_info", "vllm_engine_requests_running")
}

// A histogram printed le="1.0" (prometheus_client) in one scrape and le="1"
// (Prometheus 3 style, Rust client) in the next is the same histogram: no
// reset, and bound lookups work with either spelling.
func TestLeSpellings(t *testing.T) {
	body := func(le1 string, c1, c2, n float64, sum float64) []byte {
		return []byte(strings.NewReplacer("LE1", le1).Replace(`# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 0
# TYPE vllm:time_to_first_token_seconds histogram
`) + fmtHist("vllm:time_to_first_token_seconds", le1, c1, c2, n, sum))
	}
	srv := newFakeVLLM(t, body("1.0", 5, 8, 10, 9), "text/plain")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	srv.set(body("1", 7, 12, 14, 12), nil)
	scrapeAt(s, t0.Add(time.Minute))
	d := s.Window(time.Minute)["m"]
	if d == nil {
		t.Fatal("no window")
	}
	delta := d.Deltas[snapshot.TTFT]
	if c, ok := delta.CountAtOrBelow(1); !ok || c != 2 {
		t.Fatalf("delta count <= 1 = %v, %v; want 2 (7-5), no reset", c, ok)
	}
	if delta.Count != 4 || delta.Sum != 3 {
		t.Fatalf("delta = %+v, want count 4 sum 3", delta)
	}
}

func fmtHist(name, le1 string, c1, c2, n, sum float64) string {
	return strings.NewReplacer("NAME", name, "LE1", le1).Replace(
		`NAME_bucket{le="LE1",model_name="m"} ` + ftoa(c1) + "\n" +
			`NAME_bucket{le="2.5",model_name="m"} ` + ftoa(c2) + "\n" +
			`NAME_bucket{le="+Inf",model_name="m"} ` + ftoa(n) + "\n" +
			`NAME_count{model_name="m"} ` + ftoa(n) + "\n" +
			`NAME_sum{model_name="m"} ` + ftoa(sum) + "\n")
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// vLLM's opt-in Rust front-end serves OpenMetrics text: counters declared
// without _total, _created inside families, # UNIT, info type, exemplars,
// # EOF.
const openMetricsBody = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3
# HELP vllm:num_preemptions Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0",model_name="m"} 5
vllm:num_preemptions_created{engine="0",model_name="m"} 1.7e9
# TYPE vllm:kv_cache_usage_perc gauge
# UNIT vllm:kv_cache_usage_perc ratio
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 1 # {trace_id="abc"} 0.05 1.7e9
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 2
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.5
vllm:time_to_first_token_seconds_created{engine="0",model_name="m"} 1.7e9
# TYPE vllm:cache_config info
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",gpu_memory_utilization="0.9",num_gpu_blocks="100"} 1
# EOF
`

func TestOpenMetricsBody(t *testing.T) {
	v := scrapeBody(t, []byte(openMetricsBody), "application/openmetrics-text; version=1.0.0; charset=utf-8")
	m := v.Models["m"]
	wantValue(t, "running", m.Running, 3)
	wantValue(t, "preemptions", m.Preemptions, 5)
	wantValue(t, "kv", m.KVUsage, 0.25)
	h := m.Histograms.Get(snapshot.TTFT)
	if h.Count != 2 || h.Sum != 0.5 || len(h.Counts) != 1 || h.Counts[0] != 1 {
		t.Errorf("ttft = %+v", h)
	}
	if m.CacheConfig["block_size"] != "16" {
		t.Errorf("cache config = %v", m.CacheConfig)
	}
	if v.Schema != SchemaV1 {
		t.Errorf("schema %s", v.Schema)
	}
}

// prometheus_client prints floats >= 1e10 with a three-digit exponent.
func TestThreeDigitExponent(t *testing.T) {
	v := scrapeBody(t, []byte(`# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="m"} 1.3873303552e+010
`), "text/plain")
	wantValue(t, "prompt tokens", v.Models["m"].PromptTokens, 13873303552)
}

// Bad data from vLLM never costs the process: the text parser refuses a
// non-UTF-8 label value (the whole scrape is a parse error, as in
// Prometheus), and a histogram with an infinite bucket count, which the
// parser accepts, is dropped while the rest of the scrape is kept.
func TestInvalidSamples(t *testing.T) {
	srv := newFakeVLLM(t, []byte("# TYPE vllm:num_requests_running gauge\n"+
		"vllm:num_requests_running{model_name=\"bad\xff\"} 2\n"), "text/plain")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	if l := s.Latest(); l.Up || l.Error != ReasonParse {
		t.Fatalf("non-UTF-8 label: up %v error %q, want a parse error", l.Up, l.Error)
	}

	srv.set([]byte("# TYPE vllm:num_requests_running gauge\n"+
		"vllm:num_requests_running{model_name=\"ok\"} 1\n"+
		"# TYPE vllm:e2e_request_latency_seconds histogram\n"+
		"vllm:e2e_request_latency_seconds_bucket{le=\"1\",model_name=\"ok\"} +Inf\n"+
		"vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\",model_name=\"ok\"} 1\n"+
		"vllm:e2e_request_latency_seconds_count{model_name=\"ok\"} 1\n"+
		"vllm:e2e_request_latency_seconds_sum{model_name=\"ok\"} 0.5\n"), nil)
	scrapeAt(s, t0.Add(5*time.Second))
	l := s.Latest()
	if !l.Up || l.Models["ok"] == nil {
		t.Fatalf("up %v error %q", l.Up, l.Error)
	}
	if _, ok := l.Models["ok"].Histograms.Lookup(snapshot.E2E); ok {
		t.Error("histogram with an infinite bucket count kept")
	}
	compareNoHelp(t, s, `
# TYPE vllm_requests_running gauge
vllm_requests_running{model="ok"} 1
`, "vllm_requests_running", "vllm_e2e_request_latency_seconds")
}

// Label values come from vLLM's body: a misbehaving target with thousands of
// model names, engines or finish reasons must not multiply our series.
func TestLabelValuesAreBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("# TYPE vllm:num_requests_running gauge\n")
	for i := range MaxModels + 5 {
		fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"0\",model_name=\"m%03d\"} 1.0\n", i)
	}
	for e := range MaxEngines + 5 {
		fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"%d\",model_name=\"m000\"} 1.0\n", e+1)
	}
	b.WriteString("# TYPE vllm:request_success_total counter\n")
	for i := range MaxFinishedReasons + 5 {
		fmt.Fprintf(&b, "vllm:request_success_total{engine=\"0\",finished_reason=\"r%03d\",model_name=\"m000\"} 1.0\n", i)
	}
	srv := newFakeVLLM(t, []byte(b.String()), "text/plain")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	l := s.Latest()
	if !l.Up {
		t.Fatalf("scrape failed: %s", l.Error)
	}
	if len(l.Models) != MaxModels || l.Models["m000"] == nil || l.Models[fmt.Sprintf("m%03d", MaxModels-1)] == nil {
		t.Fatalf("%d models kept, want the first %d", len(l.Models), MaxModels)
	}
	m := l.Models["m000"]
	if len(m.PerEngine) != MaxEngines {
		t.Errorf("%d per-engine entries, want %d", len(m.PerEngine), MaxEngines)
	}
	// Every engine still counts in the model's total: 1 + MaxEngines+5.
	wantValue(t, "running of m000", m.Running, float64(1+MaxEngines+5))
	if len(m.FinishedByReason) != MaxFinishedReasons {
		t.Errorf("%d finish reasons kept, want %d", len(m.FinishedByReason), MaxFinishedReasons)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	if n, _ := testutil.GatherAndCount(reg, "vllm_requests_running"); n != MaxModels {
		t.Errorf("%d vllm_requests_running series, want %d", n, MaxModels)
	}
}

// Text 1.0.0 may quote a metric or label name (inside the label set);
// label values carry escapes; blanks may sit around the label set's
// items. All read as the same series they would be unquoted.
func TestQuotedNamesAndEscapes(t *testing.T) {
	body := "# TYPE vllm:num_requests_running gauge\n" +
		`{"vllm:num_requests_running","model_name"="a\"b\\c"} 3` + "\n" +
		`vllm:num_requests_waiting { engine = "0" , model_name="a\"b\\c" , } 2 1786351200000` + "\n" +
		`vllm:num_preemptions_total{model_name="a\"b\\c"} 4 # {trace_id="x"} 1 1.7e9` + "\n" +
		"# EOF\nnot a line after EOF\n"
	v := scrapeBody(t, []byte(body), "text/plain; version=1.0.0")
	m := v.Models[`a"b\c`]
	if m == nil {
		t.Fatalf("models %v", v.Models)
	}
	wantValue(t, "running", m.Running, 3)
	wantValue(t, "waiting", m.Waiting, 2)
	wantValue(t, "preemptions", m.Preemptions, 4)
}
