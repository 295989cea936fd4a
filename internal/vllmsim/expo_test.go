package vllmsim

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
)

// readFixture reads a vLLM /metrics body from vllmTestdata.
func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vllmTestdata, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// trafficSim runs a little mixed traffic so every family (including those a
// multiprocess exposition shows only after a first observation) is present.
func trafficSim(t *testing.T, cfg Config) *Sim {
	t.Helper()
	cfg.LoadGen = true
	cfg.Seed = 3
	s := newVirtual(t, cfg)
	runFor(s, 20*time.Second)
	m := `"model":"` + s.Config().Models[0] + `",`
	for _, body := range []string{
		`{` + m + `"prompt":"Hello there","max_tokens":4}`,
		`{` + m + `"prompt":[5,6,7],"max_tokens":3,"stream":true}`,
	} {
		if rec := doVirtual(t, s, "POST", "/v1/completions", body, nil); rec.Code != 200 {
			t.Fatalf("completion: %d %s", rec.Code, rec.Body)
		}
	}
	if rec := doVirtual(t, s, "POST", "/v1/chat/completions", `{`+m+`"messages":[{"role":"user","content":"Hi"}],"max_tokens":2}`, nil); rec.Code != 200 {
		t.Fatalf("chat: %d %s", rec.Code, rec.Body)
	}
	doVirtual(t, s, "POST", "/v1/chat/completions", `{"messages":[],"max_tokens":2}`, nil)
	doVirtual(t, s, "GET", "/v1/models", "", nil)
	if len(s.Records()) == 0 {
		t.Fatal("no request finished in 20s of healthy load")
	}
	return s
}

func TestV1ExpositionMatchesFixture(t *testing.T) {
	s := trafficSim(t, Config{MetricsVersion: MetricsV1, MaxNumSeqs: 256})
	body := s.Metrics()
	fixture := readFixture(t, "vllm-main-2026-08-v1.txt")
	parseMetrics(t, body)
	got, want := headers(body), headers(fixture)
	if !reflect.DeepEqual(got, want) {
		for i := 0; i < len(got) || i < len(want); i++ {
			if g, w := elem(got, i), elem(want, i); g != w {
				t.Errorf("family %d: got %+v\nwant %+v", i, g, w)
			}
		}
	}
	for _, h := range want {
		if h.typ != "histogram" {
			continue
		}
		if g, w := bucketBounds(body, h.name), bucketBounds(fixture, h.name); !reflect.DeepEqual(g, w) {
			t.Errorf("%s buckets: got %v want %v", h.name, g, w)
		}
	}
	// Histogram sample order in V1: buckets, _count, _sum, and _created as its own family.
	i := strings.Index(string(body), "vllm:time_to_first_token_seconds_count{")
	j := strings.Index(string(body), "vllm:time_to_first_token_seconds_sum{")
	k := strings.Index(string(body), "# TYPE vllm:time_to_first_token_seconds_created gauge")
	if !(i > 0 && i < j && j < k) {
		t.Errorf("V1 histogram order wrong: count@%d sum@%d created@%d", i, j, k)
	}
	// Same label set per series as the fixture (sorted, engine + model_name).
	line := `vllm:request_success_total{engine="0",finished_reason="stop",model_name="meta-llama/Llama-3.1-8B-Instruct"} `
	if !strings.Contains(string(body), line) {
		t.Errorf("missing %q", line)
	}
}

func TestV0ExpositionMatchesFixture(t *testing.T) {
	s := trafficSim(t, Config{MetricsVersion: MetricsV0, MaxNumSeqs: 256, DisablePrefixCaching: true})
	body := s.Metrics()
	fixture := readFixture(t, "vllm-0.7.3-v0-multiprocess.txt")
	fams := parseMetrics(t, body)
	got, want := headers(body), headers(fixture)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("families differ:\n got %v\nwant %v", got, want)
	}
	for _, h := range want {
		if h.typ != "histogram" {
			continue
		}
		if g, w := bucketBounds(body, h.name), bucketBounds(fixture, h.name); !reflect.DeepEqual(g, w) {
			t.Errorf("%s buckets: got %v want %v", h.name, g, w)
		}
	}
	for _, bad := range []string{"_created", "python_", "process_", "engine=", "http_"} {
		if strings.Contains(string(body), bad) {
			t.Errorf("V0 multiprocess exposition must not contain %q", bad)
		}
	}
	// Multiprocess order: _sum, buckets, _count.
	i := strings.Index(string(body), "vllm:e2e_request_latency_seconds_sum{")
	j := strings.Index(string(body), "vllm:e2e_request_latency_seconds_bucket{")
	k := strings.Index(string(body), "vllm:e2e_request_latency_seconds_count{")
	if !(i > 0 && i < j && j < k) {
		t.Errorf("V0 histogram order wrong: sum@%d bucket@%d count@%d", i, j, k)
	}
	if v := sumValue(t, fams, "vllm:gpu_prefix_cache_hit_rate", nil); v != -1 {
		t.Errorf("gpu_prefix_cache_hit_rate = %v, want -1 with prefix caching off", v)
	}
}

func TestV0HistogramsAbsentBeforeTraffic(t *testing.T) {
	s := newVirtual(t, Config{MetricsVersion: MetricsV0})
	body := string(s.Metrics())
	if strings.Contains(body, "vllm:time_to_first_token_seconds") || strings.Contains(body, "request_success_total{") {
		t.Error("V0 multiprocess mode shows histograms and success children only after the first observation")
	}
	if !strings.Contains(body, "vllm:num_requests_running{model_name=") {
		t.Error("gauges must be present")
	}
}

func TestV1_0_10CarriesDeprecatedAndNewNames(t *testing.T) {
	s := trafficSim(t, Config{MetricsVersion: MetricsV1_0_10})
	body := s.Metrics()
	fams := parseMetrics(t, body)
	for _, pair := range [][2]string{
		{"vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"},
		{"vllm:gpu_prefix_cache_queries_total", "vllm:prefix_cache_queries_total"},
		{"vllm:gpu_prefix_cache_hits_total", "vllm:prefix_cache_hits_total"},
		{"vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"},
	} {
		if a, b := sumValue(t, fams, pair[0], nil), sumValue(t, fams, pair[1], nil); a != b {
			t.Errorf("%s = %v but %s = %v; they carry the same value", pair[0], a, pair[1], b)
		}
	}
	if histSum(t, fams, "vllm:time_per_output_token_seconds") != histSum(t, fams, "vllm:inter_token_latency_seconds") {
		t.Error("TPOT and ITL histograms must observe the same values in 0.10.2")
	}
	for _, absent := range []string{"vllm:request_time_per_output_token_seconds", "vllm:engine_sleep_state", "vllm:num_requests_waiting_by_reason", `finished_reason="error"`} {
		if strings.Contains(string(body), absent) {
			t.Errorf("0.10.2 has no %s", absent)
		}
	}
	if !strings.Contains(string(body), "# TYPE vllm:gpu_prefix_cache_queries_created gauge") {
		t.Error("V1 0.10.2 exposes _created families")
	}
}

func TestDataParallelAndSeveralModels(t *testing.T) {
	s := trafficSim(t, Config{Models: []string{"a/m1", "b/m2"}, DataParallelSize: 2})
	fams := parseMetrics(t, s.Metrics())
	for _, m := range []string{"a/m1", "b/m2"} {
		for _, e := range []string{"0", "1"} {
			if n := sumValue(t, fams, "vllm:e2e_request_latency_seconds", map[string]string{"model_name": m, "engine": e}); n == 0 {
				t.Errorf("model %s engine %s served nothing (load should spread over engines)", m, e)
			}
		}
	}
	if n := len(fams["vllm:num_requests_running"].GetMetric()); n != 4 {
		t.Errorf("%d running series, want 4 (2 models × 2 engines)", n)
	}
	if n := len(fams["vllm:cache_config_info"].GetMetric()); n != 4 {
		t.Errorf("%d cache_config_info series, want one per engine", n)
	}
}

func TestCreatedStableAcrossScrapes(t *testing.T) {
	s := trafficSim(t, Config{})
	a := parseMetrics(t, s.Metrics())
	s.Advance(5 * time.Second)
	b := parseMetrics(t, s.Metrics())
	for name, f := range a {
		if !strings.HasSuffix(name, "_created") {
			continue
		}
		for i, m := range f.GetMetric() {
			if i >= len(b[name].GetMetric()) {
				break
			}
			if m.GetGauge().GetValue() != b[name].GetMetric()[i].GetGauge().GetValue() {
				t.Errorf("%s child %d changed between scrapes", name, i)
			}
		}
	}
}

func TestV1MultiprocessWithSeveralAPIServers(t *testing.T) {
	s := trafficSim(t, Config{DataParallelSize: 2, APIServerCount: 2})
	body := string(s.Metrics())
	parseMetrics(t, []byte(body))
	for _, bad := range []string{"_created", "python_", "process_"} {
		if strings.Contains(body, bad) {
			t.Errorf("multiprocess body contains %q", bad)
		}
	}
	i := strings.Index(body, `vllm:time_to_first_token_seconds_sum{engine="1"`)
	j := strings.Index(body, `vllm:time_to_first_token_seconds_bucket{engine="1"`)
	if !(i > 0 && i < j) {
		t.Errorf("multiprocess histograms start with _sum: sum@%d bucket@%d", i, j)
	}
}

var (
	reLabelValue  = regexp.MustCompile(`="(?:[^"\\]|\\.)*"`)
	reSampleValue = regexp.MustCompile(`^([^#][^ ]*) \S+$`)
)

// shape reduces an exposition to its line structure: label values and sample
// values blanked, consecutive identical lines collapsed.
func shape(body []byte) []string {
	var out []string
	for _, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		if !strings.HasPrefix(line, "#") {
			line = reSampleValue.ReplaceAllString(reLabelValue.ReplaceAllString(line, `=""`), "$1")
		}
		if len(out) == 0 || out[len(out)-1] != line {
			out = append(out, line)
		}
	}
	return out
}

func TestExpositionLineStructureMatchesFixtures(t *testing.T) {
	for _, c := range []struct {
		fixture string
		cfg     Config
	}{
		{"vllm-main-2026-08-v1.txt", Config{MetricsVersion: MetricsV1, MaxNumSeqs: 256}},
		{"vllm-0.7.3-v0-multiprocess.txt", Config{MetricsVersion: MetricsV0, MaxNumSeqs: 256, DisablePrefixCaching: true}},
	} {
		got, want := shape(trafficSim(t, c.cfg).Metrics()), shape(readFixture(t, c.fixture))
		if !reflect.DeepEqual(got, want) {
			for i := 0; i < len(got) && i < len(want); i++ {
				if got[i] != want[i] {
					t.Errorf("%s: line %d: got %q want %q", c.fixture, i, got[i], want[i])
					break
				}
			}
			t.Errorf("%s: %d vs %d structural lines", c.fixture, len(got), len(want))
		}
	}
}

// Real dumps (excerpts from public issues) share HELP texts and series shapes
// with the simulator's rendering of the same version.
func TestMatchesRealExcerpts(t *testing.T) {
	for _, c := range []struct {
		file string
		cfg  Config
	}{
		{"real-0.10.0-production-stack-617-excerpt.txt", Config{MetricsVersion: MetricsV1_0_10, Models: []string{"zai-org/GLM-4.5"}}},
		{"real-0.10.x-dp2-vllm-pr22227-excerpt.txt", Config{MetricsVersion: MetricsV1_0_10, Models: []string{"/home/jovyan/qwen3-8b"}, DataParallelSize: 2}},
		{"real-v1-2026-workshop-excerpt.txt", Config{MetricsVersion: MetricsV1, Models: []string{"llama-vllm-single"}}},
	} {
		body := string(trafficSim(t, c.cfg).Metrics())
		checked := 0
		for _, line := range strings.Split(string(readFixture(t, c.file)), "\n") {
			switch {
			case strings.HasPrefix(line, "# HELP vllm:time_per_output_token_seconds "):
				// 0.10.2 appended the DEPRECATED note (#24110) to the 0.10.0 text.
				if !strings.Contains(body, line+"DEPRECATED: Use vllm:inter_token_latency_seconds instead.\n") {
					t.Errorf("%s: TPOT HELP drifted from %q", c.file, line)
				}
			case strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE "):
				if !strings.Contains(body, line+"\n") {
					t.Errorf("%s: missing %q", c.file, line)
				}
			case strings.HasPrefix(line, "vllm:"):
				if !strings.Contains(body, "\n"+reSampleValue.ReplaceAllString(line, "$1")+" ") {
					t.Errorf("%s: no series %q", c.file, line)
				}
			default:
				continue
			}
			checked++
		}
		if checked < 5 {
			t.Fatalf("%s: only %d lines checked", c.file, checked)
		}
	}
}

// BenchmarkRenderMetrics renders /metrics of 16 models x 8 engines (the
// body scripts/growth.sh scrapes, about 4 MB) after a minute of load.
func BenchmarkRenderMetrics(b *testing.B) {
	var models []string
	for i := range 16 {
		models = append(models, fmt.Sprintf("model-%d", i))
	}
	s, err := New(Config{VirtualClock: true, Seed: 1, LoadGen: true, Models: models, DataParallelSize: 8})
	if err != nil {
		b.Fatal(err)
	}
	s.Advance(time.Minute)
	b.ReportAllocs()
	for b.Loop() {
		b.SetBytes(int64(len(s.Metrics())))
	}
}

// Every family the table says the simulator fills has a source here (a
// histogram one of the engines' histograms), and every feature it names
// a switch.
func TestEveryTableSourceIsSimulated(t *testing.T) {
	for _, sp := range families.Specs() {
		src := sp.Sim.Source
		if src == "" {
			continue
		}
		v := versions[MetricsLatest]
		if sp.Server != "" { // the server's own layout
			v = versions[sp.Server]
		}
		b := bucketsFor(v, &Config{MaxModelLen: 8192, MaxNumSeqs: 128})
		if _, ok := sources[src]; !ok && (sp.Type != "histogram" || b[src] == nil) {
			t.Errorf("%s: no simulator source %q", sp.Name.Name, src)
		}
		if w := sp.Sim.When; w != "" && features[w] == nil {
			t.Errorf("%s: no feature %q", sp.Name.Name, w)
		}
	}
}
