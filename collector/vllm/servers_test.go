package vllm

import (
	"bytes"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	sharedtest "github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// fakeServer serves a metrics body at path and, when ownedBy is set,
// /v1/models listing model and a version endpoint; it counts requests
// by path.
type fakeServer struct {
	*fakeVLLM
	mu   sync.Mutex
	hits map[string]int
}

func newFakeServer(t *testing.T, path string, body []byte, ownedBy, model, versionPath, version string) *fakeServer {
	f := &fakeServer{fakeVLLM: newFakeVLLM(t, nil, ""), hits: map[string]int{}}
	f.set(nil, func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.hits[r.URL.Path]++
		f.mu.Unlock()
		switch {
		case r.URL.Path == path:
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			w.Write(body)
		case ownedBy != "" && r.URL.Path == "/v1/models":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"object":"list","data":[{"id":"` + model + `","object":"model","owned_by":"` + ownedBy + `"}]}`))
		case ownedBy != "" && r.URL.Path == versionPath:
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"version":"` + version + `"}`))
		default:
			http.NotFound(w, r)
		}
	})
	return f
}

func (f *fakeServer) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[path]
}

// scrapeServer scrapes f once with the defaults (the server learnt, not
// named) and returns the model's snapshot and what the scraper exports.
func scrapeServer(t *testing.T, f *fakeServer, model string) (*snapshot.VLLM, *snapshot.Model, sharedtest.Metrics) {
	t.Helper()
	s := newTestScraper(t, f.URL, nil)
	scrapeAt(s, t0)
	l := s.Latest()
	if !l.Up {
		t.Fatalf("scrape failed: %s", l.Error)
	}
	m := l.Models[model]
	if m == nil {
		t.Fatalf("no model %q in %v", model, l.Models)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	return l, m, sharedtest.Gather(t, reg)
}

func wantSeries(t *testing.T, got sharedtest.Metrics, name string, want float64, kv ...string) {
	t.Helper()
	v, ok := got.Value(name, kv...)
	if !ok || !approx(v, want) {
		t.Errorf("%s%v = %v (present %v), want %v", name, kv, v, ok, want)
	}
}

func wantNoSeries(t *testing.T, got sharedtest.Metrics, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, ok := got[n]; ok {
			t.Errorf("%s exported; the server cannot fill it", n)
		}
	}
}

// SGLang's documentation body (2025 releases, label model_name): every
// series it can fill, with vLLM's meaning; its per-token
// time_per_output_token_seconds and its per-batch cache_hit_rate are not
// read, and the families it lacks are reported missing by SGLang's names.
func TestSGLangDocumentationBody(t *testing.T) {
	const model = "meta-llama/Llama-3.1-8B-Instruct"
	f := newFakeServer(t, "/metrics", fixture(t, "real-sglang-docs-production-metrics.txt"), "sglang", model, "/get_server_info", "0.4.3")
	l, m, got := scrapeServer(t, f, model)
	if l.Schema != families.SchemaSGLang {
		t.Errorf("schema %q", l.Schema)
	}
	wantSeries(t, got, "vllm_server_info", 1, "server", "sglang", "version", "0.4.3", "source", "detected")
	wantSeries(t, got, "vllm_requests_running", 162, "model", model)
	wantSeries(t, got, "vllm_requests_waiting", 2826, "model", model)
	wantSeries(t, got, "vllm_kv_cache_usage_ratio", 0.28, "model", model)
	wantSeries(t, got, "vllm_prompt_tokens_total", 8.128902e+06, "model", model)
	wantSeries(t, got, "vllm_generation_tokens_total", 7.557572e+06, "model", model)
	wantSeries(t, got, "vllm_prefix_cache_queries_total", 8.128902e+06, "model", model)
	wantSeries(t, got, "vllm_time_to_first_token_seconds", 11008, "model", model)
	wantSeries(t, got, "vllm_e2e_request_latency_seconds", 11228, "model", model)
	ttft := m.Histograms.Get(snapshot.TTFT)
	if len(ttft.Bounds) != 20 || ttft.Bounds[19] != 30 || ttft.Counts[19] != 2513 {
		t.Errorf("TTFT buckets %v %v: want SGLang's 0.001-30 s, 2513 of 11008 within 30 s", ttft.Bounds, ttft.Counts)
	}
	wantNoSeries(t, got, "vllm_inter_token_latency_seconds", "vllm_request_time_per_output_token_seconds", "vllm_preemptions_total", "vllm_prefix_cache_hits_total")
	if !m.TokensAtCompletion {
		t.Error("prompt and generation tokens of finished requests read as counted per step")
	}
	// A body that never had them: no missing-family ticket, but what they
	// feed is said to lack its input.
	for _, name := range []string{"sglang:num_retracted_requests_total", "sglang:num_requests_total", "sglang:queue_time_seconds"} {
		wantSeries(t, got, "vllm_exporter_vllm_family_absent", 1, "metric", name)
	}
	if len(l.Missing) != 0 {
		t.Errorf("missing %v: this SGLang never sent them", l.Missing)
	}
}

// SGLang's first documented body (2024): the model in label name,
// num_requests_running/waiting, the queue time as
// waiting_request_latency_seconds, the pool size from
// max_total_num_tokens; cache_hit_rate (10.61, a percentage) is read
// nowhere.
func TestSGLangDocumentation2024Body(t *testing.T) {
	const model = "google/gemma-2-9b-it"
	f := newFakeServer(t, "/metrics", fixture(t, "real-sglang-docs-2024-name-label.txt"), "", "", "", "")
	l, m, got := scrapeServer(t, f, model)
	wantSeries(t, got, "vllm_server_info", 1, "server", "sglang", "version", "", "source", "detected")
	wantSeries(t, got, "vllm_requests_running", 0, "model", model)
	wantSeries(t, got, "vllm_requests_waiting", 0, "model", model)
	wantSeries(t, got, "vllm_kv_cache_usage_ratio", 0.01, "model", model)
	wantSeries(t, got, "vllm_kv_cache_size_tokens", 161721, "model", model)
	wantSeries(t, got, "vllm_request_queue_time_seconds", 2104, "model", model)
	wantSeries(t, got, "vllm_time_to_first_token_seconds", 2124, "model", model)
	wantNoSeries(t, got, "vllm_inter_token_latency_seconds", "vllm_prefix_cache_hit_ratio")
	for _, v := range []snapshot.Value{m.PrefixHits, m.Preemptions} {
		wantAbsent(t, "prefix hits and preemptions of a 2024 body", v)
	}
	if len(l.Models) != 1 {
		t.Errorf("models %v", l.Models)
	}
}

// SGLang PR #1853's body names the model by its path in label name.
func TestSGLangModelNamedByPath(t *testing.T) {
	const model = "/shared/public/elr-models/meta-llama/Llama-3.2-3B/5cc0ffe09ee49f7be6ca7c794ee6bd7245e84e60/"
	f := newFakeServer(t, "/metrics", fixture(t, "real-sglang-pr1853-excerpt.txt"), "", "", "", "")
	_, _, got := scrapeServer(t, f, model)
	wantSeries(t, got, "vllm_kv_cache_size_tokens", 570979, "model", model)
	wantSeries(t, got, "vllm_prompt_tokens_total", 230794, "model", model)
}

// AIBrix #1614's data-parallel ranks carry their global tp_rank and a
// pid: not repeats of one another, eight engines.
func TestDataParallelRanksAreNotRepeats(t *testing.T) {
	groups := map[string]bool{}
	for _, line := range bytes.Split(fixture(t, "real-sglang-aibrix-1614-dp8-excerpt.txt"), []byte("\n")) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		_, end, err := seriesKey(line)
		if err != nil {
			t.Fatal(err)
		}
		ls, err := parseLabels(string(line[:end]), false)
		if err != nil {
			t.Fatal(err)
		}
		_, g := repeatKey(famIndex["sglang:num_running_reqs"], ls)
		if g == "" {
			t.Fatalf("%s: no repeat group for labels with tp_rank and pid", line)
		}
		groups[g] = true
	}
	if len(groups) != 8 { // ranks 0-7 across the two families' lines
		t.Errorf("%d groups, want one per data-parallel rank (8)", len(groups))
	}
}

// trtllm-serve as its source defines it: the served model from
// /v1/models replaces model_name "undefined", the finished reasons map
// to vLLM's (cancelled is abort, failed requests are error), no
// preemption counter and no per-step ITL, tokens counted at completion.
func TestTRTLLMFromSource(t *testing.T) {
	const model = "Qwen/Qwen3-8B"
	f := newFakeServer(t, "/prometheus/metrics", fixture(t, "trtllm-serve-from-source.txt"), "tensorrt_llm", model, "/version", "1.3.0")
	l, m, got := scrapeServer(t, f, model)
	if l.Schema != families.SchemaTRTLLM || len(l.Models) != 1 {
		t.Fatalf("schema %q, models %v", l.Schema, l.Models)
	}
	wantSeries(t, got, "vllm_server_info", 1, "server", "trtllm", "version", "1.3.0", "source", "detected")
	wantSeries(t, got, "vllm_requests_running", 2, "model", model)
	wantSeries(t, got, "vllm_requests_waiting", 1, "model", model)
	wantSeries(t, got, "vllm_kv_cache_usage_ratio", 0.125, "model", model)
	for reason, n := range map[string]float64{"stop": 38, "length": 1, "abort": 1, "error": 2} {
		wantSeries(t, got, "vllm_requests_finished_total", n, "model", model, "finished_reason", reason)
	}
	wantSeries(t, got, "vllm_prefix_cache_queries_total", 20480, "model", model)
	wantSeries(t, got, "vllm_prefix_cache_hits_total", 8192, "model", model)
	for _, h := range []string{"vllm_time_to_first_token_seconds", "vllm_request_time_per_output_token_seconds", "vllm_e2e_request_latency_seconds",
		"vllm_request_queue_time_seconds", "vllm_request_prefill_time_seconds", "vllm_request_decode_time_seconds", "vllm_request_inference_time_seconds"} {
		wantSeries(t, got, h, 40, "model", model)
	}
	wantNoSeries(t, got, "vllm_preemptions_total", "vllm_inter_token_latency_seconds")
	if !m.TokensAtCompletion || len(l.Missing) != 0 {
		t.Errorf("tokens at completion %v, missing %v", m.TokensAtCompletion, l.Missing)
	}
	if n := f.count("/metrics"); n != 0 {
		t.Errorf("/metrics (JSON iteration stats) asked %d times with the server known", n)
	}
}

// AIBrix #2004's paste: the first collector's unprefixed names, cut inside
// a histogram. The cut histogram is dropped, not exported short.
func TestTRTLLMFirstCollectorExcerpt(t *testing.T) {
	f := newFakeServer(t, "/prometheus/metrics", fixture(t, "real-trtllm-aibrix-2004-excerpt.txt"), "tensorrt_llm", "Qwen3-8B", "/version", "1.2.0rc2")
	s := newTestScraper(t, f.URL, nil)
	scrapeAt(s, t0)
	l := s.Latest()
	if !l.Up || l.Schema != families.SchemaTRTLLM {
		t.Fatalf("up %v schema %q", l.Up, l.Schema)
	}
	if m := l.Models["Qwen3-8B"]; m == nil || m.Histograms.Has(snapshot.E2E) {
		t.Errorf("models %v: want Qwen3-8B without the cut e2e histogram", l.Models)
	}
	if st := s.state.Load(); st.dropped[DropInvalidHistogram] != 1 {
		t.Errorf("drops %v", st.dropped)
	}
}

// Pointed at trtllm-serve with defaults and no /v1/models (an API key the
// exporter lacks), the scraper finds the Prometheus text after the JSON of
// /metrics, then asks only there; after redetectAfter failed scrapes it
// learns the server again.
func TestMetricsPathFoundOnceAndAgainAfterFailures(t *testing.T) {
	body := fixture(t, "trtllm-serve-from-source.txt")
	f := &fakeServer{fakeVLLM: newFakeVLLM(t, nil, ""), hits: map[string]int{}}
	var fail bool
	f.set(nil, func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.hits[r.URL.Path]++
		down := fail
		f.mu.Unlock()
		switch {
		case down:
			http.Error(w, "down", http.StatusBadGateway)
		case r.URL.Path == "/metrics":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte("[]"))
		case r.URL.Path == "/prometheus/metrics":
			w.Write(body)
		default:
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		}
	})
	var logs logLines
	s := New(Options{URL: f.URL, Interval: 5 * time.Second, Timeout: 2 * time.Second}, log.NewLogfmtLogger(&logs))
	at := t0
	for range 5 {
		scrapeAt(s, at)
		at = at.Add(5 * time.Second)
	}
	if l := s.Latest(); !l.Up || l.Models[families.PlaceholderModel] == nil {
		t.Fatalf("up %v error %q models %v: want the body's placeholder model (no /v1/models to name it)", l.Up, l.Error, l.Models)
	}
	if a, b, c := f.count("/metrics"), f.count("/prometheus/metrics"), f.count("/v1/models"); a != 1 || b != 5 || c != 1 {
		t.Fatalf("/metrics %d, /prometheus/metrics %d, /v1/models %d: want 1, 5, 1", a, b, c)
	}
	f.mu.Lock()
	fail = true
	f.mu.Unlock()
	for range redetectAfter + 1 {
		scrapeAt(s, at)
		at = at.Add(5 * time.Second)
	}
	if n := f.count("/v1/models"); n != 2 {
		t.Errorf("/v1/models asked %d times: want once more after %d failed scrapes", n, redetectAfter)
	}
	// Redetecting a server that has not changed says nothing new.
	said := logs.count(`msg="inference server detected"`)
	for range 4 * redetectAfter {
		scrapeAt(s, at)
		at = at.Add(5 * time.Second)
	}
	if n := logs.count(`msg="inference server detected"`); n != said {
		t.Errorf("logged the same detection %d more times:\n%s", n-said, logs.String())
	}
}

// docs/exporter.md carries each engine's table rendered from the rows'
// columns. After changing a row, run go test ./collector/vllm -run
// TestDocsShowTheEngineTables -update.
func TestDocsShowTheEngineTables(t *testing.T) {
	for _, server := range []string{families.ServerSGLang, families.ServerTRTLLM} {
		docHoldsTable(t, "../../docs/exporter.md", families.ServerTable(server), "TestDocsShowTheEngineTables")
	}
}

// --vllm.server names the server: its metrics path is scraped at once
// (no /metrics JSON first), and vllm_server_info says the flag.
func TestServerNamedByFlag(t *testing.T) {
	f := newFakeServer(t, "/prometheus/metrics", fixture(t, "trtllm-serve-from-source.txt"), "", "", "", "")
	s := newTestScraper(t, f.URL, func(o *Options) { o.Server = families.ServerTRTLLM })
	scrapeAt(s, t0)
	if l := s.Latest(); !l.Up || f.count("/metrics") != 0 {
		t.Fatalf("up %v (%s), /metrics asked %d times", l.Up, l.Error, f.count("/metrics"))
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	wantSeries(t, sharedtest.Gather(t, reg), "vllm_server_info", 1, "server", "trtllm", "version", "", "source", "flag")
}
