package vllmsim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
)

// sampleLine is a sample line of an exposition: name, labels, value.
var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)$`)

// metaLines are a body's HELP and TYPE lines by family.
func metaLines(body []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		l := sc.Text()
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "#" && (f[1] == "HELP" || f[1] == "TYPE") {
			out[f[2]] += l + "\n"
		}
	}
	return out
}

// checkMultiprocessForm: prometheus_client's multiprocess exposition, as
// SGLang and trtllm-serve serve it: label names sorted, every value a
// float, a histogram's _sum before its buckets, no _created and no
// process families.
func checkMultiprocessForm(t *testing.T, body []byte) {
	t.Helper()
	sumSeen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		m := sampleLine.FindStringSubmatch(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if m == nil {
			t.Fatalf("not a sample line: %q", line)
		}
		name, labels, v := m[1], m[2], m[3]
		var names []string
		for _, kv := range strings.Split(labels, ",") {
			if k, _, ok := strings.Cut(kv, "="); ok {
				names = append(names, k)
			}
		}
		if !slicesSorted(names) {
			t.Errorf("labels not sorted: %s", line)
		}
		if !strings.ContainsAny(v, ".e") && v != "+Inf" && v != "NaN" {
			t.Errorf("value not a float: %s", line)
		}
		base := strings.TrimSuffix(strings.TrimSuffix(name, "_sum"), "_bucket")
		key := base + "{" + regexp.MustCompile(`le="[^"]*",?`).ReplaceAllString(labels, "")
		switch {
		case strings.HasSuffix(name, "_created"), strings.HasPrefix(name, "process_"), strings.HasPrefix(name, "python_"):
			t.Errorf("not in a multiprocess body: %s", line)
		case strings.HasSuffix(name, "_sum"):
			sumSeen[key] = true
		case strings.HasSuffix(name, "_bucket") && !sumSeen[key]:
			t.Errorf("bucket before its _sum: %s", line)
		}
	}
}

func slicesSorted(s []string) bool {
	for i := 1; i < len(s); i++ {
		if s[i] < s[i-1] {
			return false
		}
	}
	return true
}

// checkSameMeta: every family the real body and the simulator both have
// has the same HELP and TYPE.
func checkSameMeta(t *testing.T, body []byte, fixture string) {
	t.Helper()
	real, err := os.ReadFile(filepath.Join(vllmTestdata, fixture))
	if err != nil {
		t.Fatal(err)
	}
	sim, shared := metaLines(body), 0
	for fam, meta := range metaLines(real) {
		if got, ok := sim[fam]; ok {
			shared++
			if got != meta {
				t.Errorf("%s: simulator\n%swant (%s)\n%s", fam, got, fixture, meta)
			}
		}
	}
	if shared < 3 {
		t.Errorf("only %d families shared with %s", shared, fixture)
	}
}

// The simulated SGLang renders the table's SGLang column in SGLang's form,
// its HELP and TYPE those of SGLang's documented body, scheduler families
// per data-parallel rank (repeated per tensor-parallel rank with every
// scheduler writing), tokenizer families per model.
func TestSGLangBody(t *testing.T) {
	s := newVirtual(t, Config{Engine: EngineSGLang, LoadGen: true, Seed: 5, DataParallelSize: 2, TensorParallelSize: 2, AllSchedulerMetrics: true})
	runFor(s, 30*time.Second)
	body := s.Metrics()
	checkMultiprocessForm(t, body)
	checkSameMeta(t, body, "real-sglang-docs-production-metrics.txt")
	for _, want := range []string{
		`sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="3"}`,
		`sglang:num_requests_total{is_streaming="true",model_name="meta-llama/Llama-3.1-8B-Instruct"}`,
		`sglang:time_to_first_token_seconds_bucket{is_streaming="true",le="400.0",model_name="meta-llama/Llama-3.1-8B-Instruct"}`,
	} {
		if !bytes.Contains(body, []byte(want+" ")) {
			t.Errorf("no %s", want)
		}
	}
	for name := range metaLines(body) {
		if sp, ok := families.Lookup(name); !ok || sp.Server != families.ServerSGLang {
			t.Errorf("%s is not in the table's SGLang column", name)
		}
	}
	if c := serveSync(t, s, "GET", "/version", "").Code; c != 404 {
		t.Errorf("/version: %d (SGLang has /get_server_info)", c)
	}
	var info struct{ Version string }
	if rec := serveSync(t, s, "GET", "/get_server_info", ""); json.Unmarshal(rec.Body.Bytes(), &info) != nil || info.Version == "" {
		t.Errorf("/get_server_info: %d %s", rec.Code, rec.Body)
	}
	checkModelsOwnedBy(t, s, "sglang")
}

// The simulated trtllm-serve: its column at /prometheus/metrics labelled
// model_name="undefined", gauges by pid, HELP and TYPE as its source
// defines them; /metrics answers JSON iteration stats, /health_generate
// fails while the engine is dead.
func TestTRTLLMBodyAndRoutes(t *testing.T) {
	s := newVirtual(t, Config{Engine: EngineTRTLLM, LoadGen: true, Seed: 5})
	runFor(s, 30*time.Second)
	rec := serveSync(t, s, "GET", "/prometheus/metrics", "")
	body := rec.Body.Bytes()
	checkMultiprocessForm(t, body)
	checkSameMeta(t, body, "trtllm-serve-from-source.txt")
	if !bytes.Contains(body, []byte(`trtllm_num_requests_running{engine_type="undefined",model_name="undefined",pid="`)) {
		t.Errorf("no pid-labelled gauge with the placeholder model:\n%s", body)
	}
	if rec := serveSync(t, s, "GET", "/metrics", ""); !strings.Contains(rec.Header().Get("Content-Type"), "json") || !json.Valid(rec.Body.Bytes()) {
		t.Errorf("/metrics: %q %s", rec.Header().Get("Content-Type"), rec.Body)
	}
	if c := serveSync(t, s, "GET", "/health_generate", "").Code; c != 200 {
		t.Errorf("/health_generate: %d", c)
	}
	if err := s.InjectFault(FaultSpec{Kind: Fault5xx}); err != nil {
		t.Fatal(err)
	}
	if c := serveSync(t, s, "GET", "/health_generate", "").Code; c != 503 {
		t.Errorf("/health_generate with the engine dead: %d", c)
	}
	checkModelsOwnedBy(t, s, "tensorrt_llm")
	if _, err := New(Config{Engine: EngineTRTLLM, DataParallelSize: 2}); err == nil {
		t.Error("trtllm-serve with two engines accepted")
	}
	if _, err := New(Config{Engine: EngineSGLang, MetricsVersion: MetricsV1}); err == nil {
		t.Error("SGLang with vLLM's exposition accepted")
	}
}

func checkModelsOwnedBy(t *testing.T, s *Sim, owner string) {
	t.Helper()
	var models struct {
		Data []struct {
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}
	if rec := serveSync(t, s, "GET", "/v1/models", ""); json.Unmarshal(rec.Body.Bytes(), &models) != nil || len(models.Data) == 0 || models.Data[0].OwnedBy != owner {
		t.Errorf("/v1/models: %s", rec.Body)
	}
}
