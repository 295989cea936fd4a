package vllmhealth

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	vllmcol "github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// server serves a fixture body (or a 500) to a real scraper.
type server struct {
	mu   sync.Mutex
	body []byte
	fail bool
}

func (s *server) set(t *testing.T, fixture string) {
	b, err := os.ReadFile(filepath.Join("testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.body, s.fail = b, false
	s.mu.Unlock()
}

func (s *server) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		http.Error(w, "engine dead", http.StatusInternalServerError)
		return
	}
	w.Write(s.body)
}

type fakeProbes struct{ stalled bool }

func (f *fakeProbes) Latest() *snapshot.Probes { return &snapshot.Probes{EngineStalled: f.stalled} }

func get(t *testing.T, h http.Handler) (int, string, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, string(b), rec.Header().Get("X-VLLM-Health")
}

// The verdict follows the simulator's newest layout through a real
// scraper: starting before a scrape, serving, asleep (live but not ready),
// stalled and livelocked (neither), down, and back. Requests only read the
// verdict the last Tick computed.
func TestVerdictFromSimulatorBodies(t *testing.T) {
	srv := &server{}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	sc := vllmcol.New(vllmcol.Options{URL: hs.URL}, nil)
	probes := &fakeProbes{}
	classes := map[string]string{}
	tr := New(Sources{VLLM: sc, Probes: probes, Classes: func() map[string]string { return classes }})
	live, ready := tr.LiveHandler(), tr.ReadyHandler()
	now := time.Unix(1_790_000_000, 0)
	step := func(fixture string) {
		t.Helper()
		if fixture == "" {
			srv.mu.Lock()
			srv.fail = true
			srv.mu.Unlock()
		} else {
			srv.set(t, fixture)
		}
		now = now.Add(5 * time.Second)
		sc.ScrapeOnce(context.Background(), now)
		tr.Tick(now)
	}
	expect := func(state State, liveCode, readyCode int) {
		t.Helper()
		code, body, hdr := get(t, live)
		if code != liveCode || hdr != string(state) || !strings.HasPrefix(body, string(state)+": ") {
			t.Errorf("/-/vllm/healthy = %d %q (header %q), want %d %s", code, body, hdr, liveCode, state)
		}
		if code, body, _ := get(t, ready); code != readyCode {
			t.Errorf("/-/vllm/ready = %d %q, want %d", code, body, readyCode)
		}
	}
	expect(Starting, 503, 503)
	step("sim-latest-healthy.txt")
	expect(Serving, 200, 200)
	step("sim-latest-sleeping.txt")
	expect(Asleep, 200, 503)
	// Asleep wins over a stale stall verdict: sleep is on purpose.
	probes.stalled = true
	step("sim-latest-sleeping.txt")
	expect(Asleep, 200, 503)
	step("sim-latest-healthy.txt")
	expect(Stalled, 503, 503)
	probes.stalled = false
	classes["meta-llama/Llama-3.1-8B-Instruct"] = "deferred_livelock"
	step("sim-latest-livelock.txt")
	expect(Livelocked, 503, 503)
	classes = map[string]string{}
	step("")
	expect(Down, 503, 503)
	step("sim-latest-healthy.txt")
	expect(Serving, 200, 200)

	if err := testutil.CollectAndCompare(tr, strings.NewReader(`
# HELP vllm_health_verdict The exporter's health verdict for the vLLM server as a state set (exactly one state is 1), from the latest scrape, probes and bottleneck class; also served at /-/vllm/healthy and /-/vllm/ready.
# TYPE vllm_health_verdict gauge
vllm_health_verdict{state="asleep"} 0
vllm_health_verdict{state="down"} 0
vllm_health_verdict{state="livelocked"} 0
vllm_health_verdict{state="serving"} 1
vllm_health_verdict{state="stalled"} 0
vllm_health_verdict{state="starting"} 0
vllm_health_verdict{state="unhealthy"} 0
`)); err != nil {
		t.Error(err)
	}
}

// vllm:engine_healthy 0 (vLLM --enable-fault-tolerance) is unhealthy.
func TestEngineHealthyZeroIsUnhealthy(t *testing.T) {
	v := &snapshot.VLLM{Up: true, Models: map[string]*snapshot.Model{"m": {EngineHealthy: snapshot.Some(0)}}}
	if got := Evaluate(v, nil, nil, time.Now()); got.State != Unhealthy || got.State.Live() {
		t.Errorf("verdict %+v, want unhealthy and not live", got)
	}
}
