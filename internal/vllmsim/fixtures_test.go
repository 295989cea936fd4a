package vllmsim

import (
	"bytes"
	"flag"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the sim-latest-* golden fixtures in collector/vllm/testdata")

// vllmTestdata holds every /metrics body of vLLM (real, and the
// simulator's sim-latest-* renderings) once: the exporter's parser tests
// read them there, and so do the simulator's tests.
const vllmTestdata = "../../collector/vllm/testdata"

// latestSim is a deterministic newest-layout simulator with healthy load.
func latestSim(t *testing.T, cfg Config) *Sim {
	t.Helper()
	cfg.MetricsVersion = MetricsLatest
	cfg.LoadGen = true
	if cfg.Seed == 0 {
		cfg.Seed = 13
	}
	return newVirtual(t, cfg)
}

// serveSync runs a request that needs no clock (refusals, /v1/models)
// through the full handler, instrumentator included.
func serveSync(t *testing.T, s *Sim, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec
}

// latestFixtures render the newest layout in each regime the exporter must
// read. Every one runs on the virtual clock with a fixed seed, so the bodies
// are byte-for-byte reproducible.
var latestFixtures = map[string]func(t *testing.T) *Sim{
	// Healthy load, MFU counters on, fault tolerance on, and requests refused
	// before the engine: http_requests_total shows 2xx, 4xx (429) and 5xx (503).
	"healthy": func(t *testing.T) *Sim {
		s := latestSim(t, Config{EnableMFUMetrics: true, EnableFaultTolerance: true})
		runFor(s, 60*time.Second)
		for i := 0; i < 3; i++ {
			if c := serveSync(t, s, "GET", "/v1/models", "").Code; c != 200 {
				t.Fatalf("/v1/models: %d", c)
			}
		}
		body := `{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"hi","max_tokens":4}`
		for _, rf := range []struct{ status, n int }{{429, 2}, {503, 1}} {
			if err := s.SetRefusal(Refusal{Status: rf.status, Fraction: 1}); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < rf.n; i++ {
				if c := serveSync(t, s, "POST", "/v1/completions", body).Code; c != rf.status {
					t.Fatalf("refused completion: got %d want %d", c, rf.status)
				}
			}
		}
		if err := s.SetRefusal(Refusal{}); err != nil {
			t.Fatal(err)
		}
		return s
	},
	// Level-1 sleep after 30 s of load: weights offloaded, KV released,
	// scheduler paused; arrivals queue up, nothing is generated.
	"sleeping": func(t *testing.T) *Sim {
		s := latestSim(t, Config{})
		runFor(s, 30*time.Second)
		if err := s.Sleep(1); err != nil {
			t.Fatal(err)
		}
		runFor(s, 30*time.Second)
		return s
	},
	// vllm #53130: 95% of requests deferred and holding max_num_seqs slots;
	// deferred pile up, capacity-waiting stays small, KV and generation ~0.
	"livelock": func(t *testing.T) *Sim {
		s := latestSim(t, Config{MaxNumSeqs: 64})
		sc, _ := ScenarioPreset("healthy")
		sc.Load.Rate = 6
		if err := s.ApplyScenario(sc); err != nil {
			t.Fatal(err)
		}
		runFor(s, 20*time.Second)
		if err := s.SetDefer(DeferSpec{Fraction: 0.95, Livelock: true}); err != nil {
			t.Fatal(err)
		}
		runFor(s, 100*time.Second)
		return s
	},
	// Speculative decoding, 3 draft tokens, 70% per-position acceptance.
	"spec-decode": func(t *testing.T) *Sim {
		s := latestSim(t, Config{SpecDecode: SpecDecode{NumSpeculativeTokens: 3, AcceptanceRate: 0.7}})
		runFor(s, 60*time.Second)
		return s
	},
	// Two engines behind two API servers (multiprocess mode: no _created,
	// the CPU tier's gauges per pid, LoRA info summed over servers) with
	// LoRA adapters, the offloading connector with a disk tier behind its
	// CPU one, and HF3FS.
	"connectors": func(t *testing.T) *Sim {
		s := latestSim(t, Config{DataParallelSize: 2, APIServerCount: 2})
		for _, err := range []error{
			s.SetLoRA(LoRAConfig{MaxLoRA: 2, Adapters: []string{"sql-lora", "chat-lora", "summarize-lora"}, LoadFraction: 0.5}),
			s.SetOffload(Offload{LoadBytesPerSecond: 4e9, StoreBytesPerSecond: 6e9, ExternalQueryTokensPerSecond: 2000, HitRatio: 0.3,
				CPUUsage: 0.62, CPUWriteUsage: 0.08, CPUReadUsage: 0.05, AllocationFailuresPerSecond: 0.2, StoresSkippedPerSecond: 3,
				PromotionAllocationFailuresPerSecond: 0.01,
				Tiers: []OffloadTier{{Name: "disk", ReadBytesPerSecond: 2e8, WriteBytesPerSecond: 5e8, BlockQueriesPerSecond: 40, HitRatio: 0.25,
					PromotionFailuresPerSecond: 0.05, CascadeFailuresPerSecond: 0.02, WriteUsage: 0.3, ReadUsage: 0.1}}}),
			s.SetHF3FS(HF3FS{SavesPerSecond: 5, LoadsPerSecond: 2, SaveSeconds: 0.03, LoadSeconds: 0.02, FailFraction: 0.02}),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		runFor(s, 60*time.Second)
		return s
	},
	// --custom-histogram-buckets for TTFT, ITL and the request latencies.
	"custom-buckets": func(t *testing.T) *Sim {
		s := latestSim(t, Config{CustomHistogramBuckets: fixtureBuckets})
		runFor(s, 60*time.Second)
		return s
	},
	// --scheduling-policy priority: load at priority 0 plus one request a
	// second cycling through priorities -2, -1, 0, 1, 2, 5.
	"priority": func(t *testing.T) *Sim {
		s := latestSim(t, Config{SchedulingPolicy: PolicyPriority})
		prios := []int{-2, -1, 0, 1, 2, 5}
		for i := 0; i < 60; i++ {
			if _, err := s.Submit(Request{Prompt: Tokenize(strings.Repeat("priority request ", 20+i)), MaxTokens: 40,
				IgnoreEOS: true, Priority: prios[i%len(prios)]}); err != nil {
				t.Fatal(err)
			}
			s.Advance(time.Second)
		}
		runFor(s, 10*time.Second)
		return s
	},
}

var fixtureBuckets = map[string][]float64{
	"time_to_first_token": {0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 5},
	"inter_token_latency": {0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1},
	"request_latency":     {0.5, 1, 2, 3, 4, 6, 8, 12, 16, 32},
}

func fixtureName(name string) string { return "sim-latest-" + name + ".txt" }

// TestFixturesAreReproducible regenerates every sim-latest-* fixture
// and compares it byte for byte with the copy in collector/vllm/testdata,
// where the exporter's parser tests read it (-update rewrites them).
func TestFixturesAreReproducible(t *testing.T) {
	for name, build := range latestFixtures {
		t.Run(name, func(t *testing.T) {
			body := build(t).Metrics()
			parseMetrics(t, body)
			p := filepath.Join(vllmTestdata, fixtureName(name))
			want := testutil.Golden(t, p, body, *update, "run go test ./internal/vllmsim -run TestFixturesAreReproducible -update")
			if !bytes.Equal(body, want) {
				t.Errorf("%s differs from the simulator's rendering (rerun with -update if the change is intended)\n%s", p, firstDiff(body, want))
			}
			// A second identical run renders the same bytes: nothing depends on wall time or map order.
			if again := build(t).Metrics(); !bytes.Equal(body, again) {
				t.Errorf("two runs differ\n%s", firstDiff(again, body))
			}
		})
	}
}

func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		if gl, wl := elem(g, i), elem(w, i); gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n got: " + gl + "\nwant: " + wl
		}
	}
	return ""
}
