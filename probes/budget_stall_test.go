package probes

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// memTransport answers probes in memory with exact vLLM streams and logs
// when each was sent and how many tokens it used.
type memTransport struct {
	clock *fakeClock
	mu    sync.Mutex
	log   []spend
}

func (m *memTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet { // GET /v1/models: this server does not list models
		rec := httptest.NewRecorder()
		http.NotFound(rec, r)
		return rec.Result(), nil
	}
	var req request
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	rec := httptest.NewRecorder()
	writeStream(rec, r.URL.Path, req, streamSpec{})
	var u struct {
		Usage *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	for _, line := range bytesLines(rec.Body.Bytes()) {
		if json.Unmarshal(line, &u) == nil && u.Usage != nil {
			m.mu.Lock()
			m.log = append(m.log, spend{t: m.clock.Now(), tokens: u.Usage.PromptTokens + u.Usage.CompletionTokens})
			m.mu.Unlock()
			u.Usage = nil
		}
	}
	return rec.Result(), nil
}

func bytesLines(b []byte) [][]byte {
	var out [][]byte
	for _, l := range splitLines(b) {
		if len(l) > 6 && string(l[:6]) == "data: " {
			out = append(out, l[6:])
		}
	}
	return out
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	start := 0
	for i, c := range b {
		if c == '\n' {
			out = append(out, b[start:i])
			start = i + 1
		}
	}
	return out
}

func TestBudgetsHoldOverLongVirtualRun(t *testing.T) {
	clk := newFakeClock()
	tr := &memTransport{clock: clk}
	const maxReq, maxTok = 20, 30000
	yaml := "probes:\n  model: m\n  max_requests_per_minute: 20\n  max_tokens_per_hour: 30000\n  profiles:\n" +
		"    - {name: a, endpoint: completions, input_tokens: 100, output_tokens: 20, interval: 1s, timeout: 500ms, jitter: 400ms}\n" +
		"    - {name: b, endpoint: completions, input_tokens: 300, output_tokens: 50, interval: 2s, timeout: 1s, jitter: 1s, prefix: warm}\n" +
		"    - {name: c, endpoint: completions, input_tokens: 40, output_tokens: 8, interval: 5s, timeout: 1s, jitter: 2s}\n"
	h, _ := writeConfig(t, yaml)
	s := New(Options{URL: "http://127.0.0.1:1", Clock: clk, Client: &http.Client{Transport: tr}, Seed: 7}, h, nil)
	start := clk.Now()
	for clk.Now().Sub(start) < 3*time.Hour {
		s.Tick(context.Background(), clk.Now())
		clk.Add(500 * time.Millisecond)
	}
	log := tr.log
	if len(log) < 100 {
		t.Fatalf("only %d probes ran", len(log))
	}
	maxInMinute, maxInHour := 0, 0
	for i := range log {
		n, tok := 0, 0
		for j := i; j < len(log) && log[j].t.Sub(log[i].t) < time.Hour; j++ {
			if log[j].t.Sub(log[i].t) < time.Minute {
				n++
			}
			tok += log[j].tokens
		}
		maxInMinute, maxInHour = max(maxInMinute, n), max(maxInHour, tok)
	}
	if maxInMinute > maxReq || maxInHour > maxTok {
		t.Fatalf("budget exceeded: %d requests in a minute (max %d), %d tokens in an hour (max %d)", maxInMinute, maxReq, maxInHour, maxTok)
	}
	// The budgets were binding (so this test can fail): the profiles ask
	// for far more than either budget allows.
	var skips float64
	for _, p := range s.Latest().Profiles {
		skips += p.BudgetSkips
		if p.Requests == 0 {
			t.Errorf("profile %s starved", p.Name)
		}
	}
	if skips == 0 || maxInMinute < maxReq-2 || maxInHour < maxTok*9/10 {
		t.Fatalf("budgets not exercised: skips %v, max/minute %d, max tokens/hour %d", skips, maxInMinute, maxInHour)
	}
	if v := testutil.ToFloat64(s.m.skipped.WithLabelValues("a", SkipBudget)); v == 0 {
		t.Error("vllm_probe_skipped_total{reason=budget} not counted")
	}
}

// fakeEngine is the stall detector's view of vLLM: running requests and a
// generation-token counter, stamped with the real time on each read.
type fakeEngine struct {
	gen, running atomic.Int64
	moving       atomic.Bool
}

func (e *fakeEngine) snapshot() *snapshot.VLLM {
	if e.moving.Load() {
		e.gen.Add(5)
	}
	return &snapshot.VLLM{Time: time.Now(), Up: true, Models: map[string]*snapshot.Model{
		"m": {Name: "m", Running: snapshot.Some(float64(e.running.Load())), GenerationTokens: snapshot.Some(float64(e.gen.Load()))},
	}}
}

func TestEngineStallDetection(t *testing.T) {
	var hang atomic.Bool
	srv := newFakeVLLM(t, func(w http.ResponseWriter, r *http.Request, req request) {
		if hang.Load() {
			<-r.Context().Done()
			return
		}
		writeStream(w, r.URL.Path, req, streamSpec{})
	})
	eng := &fakeEngine{}
	eng.running.Store(1)
	eng.gen.Store(1000)
	h, _ := writeConfig(t, probesYAML("m", profile("p", "completions", 8, 2, ", timeout: 100ms")))
	s := New(Options{URL: srv.URL, VLLM: eng.snapshot}, h, nil)
	probe := func(wantReason string) {
		t.Helper()
		res, err := s.ProbeOnce(context.Background(), "p")
		if err != nil || res.Reason != wantReason {
			t.Fatalf("probe: %v %q, want %q", err, res.Reason, wantReason)
		}
	}
	stalled := func() bool {
		v := testutil.ToFloat64(s.m.stalled)
		if (v == 1) != s.Latest().EngineStalled {
			t.Fatalf("metric %v and snapshot %v disagree", v, s.Latest().EngineStalled)
		}
		return v == 1
	}

	// Timeouts while the engine produces tokens: slow, not stalled.
	hang.Store(true)
	eng.moving.Store(true)
	probe(ReasonTimeout)
	if stalled() {
		t.Fatal("stalled while generation tokens move")
	}
	// Timeouts with nothing running: vLLM never got the request.
	eng.moving.Store(false)
	eng.running.Store(0)
	probe(ReasonTimeout)
	if stalled() {
		t.Fatal("stalled with nothing running")
	}
	// Running requests, flat counter, probe gets nothing: stalled.
	eng.running.Store(2)
	probe(ReasonTimeout)
	if !stalled() {
		t.Fatal("not stalled: probe timed out, requests running, counter flat")
	}
	// Still stalled on the next flat observation.
	s.Tick(context.Background(), time.Now())
	if !stalled() {
		t.Fatal("stall cleared without recovery")
	}
	// Recovery: tokens flow and the probe succeeds.
	hang.Store(false)
	eng.moving.Store(true)
	probe("")
	if stalled() {
		t.Fatal("stall not cleared after recovery")
	}
}

func TestStallClearsOnCounterMove(t *testing.T) {
	var d stallDetector
	t0 := time.Unix(100, 0)
	snap := func(t time.Time, gen, running float64) *snapshot.VLLM {
		return &snapshot.VLLM{Time: t, Up: true, Models: map[string]*snapshot.Model{"m": {Running: snapshot.Some(running), GenerationTokens: snapshot.Some(gen)}}}
	}
	d.observe(snap(t0, 10, 1), "m")
	d.probeDone(1, true) // only one scrape: no verdict
	if d.stalled {
		t.Fatal("stalled from a single scrape")
	}
	d.observe(snap(t0.Add(15*time.Second), 10, 1), "m")
	d.probeDone(1, true)
	if !d.stalled {
		t.Fatal("not stalled")
	}
	d.observe(snap(t0.Add(15*time.Second), 99, 1), "m") // same scrape time: ignored
	if !d.stalled {
		t.Fatal("a repeated scrape cleared the stall")
	}
	d.observe(snap(t0.Add(30*time.Second), 11, 1), "m")
	if d.stalled {
		t.Fatal("counter moved but still stalled")
	}
	d.observe(snap(t0.Add(45*time.Second), 11, 1), "m")
	d.probeDone(3, true)
	if !d.stalled {
		t.Fatal("not stalled again")
	}
	d.observe(snap(t0.Add(60*time.Second), 11, 0), "m")
	if !d.stalled {
		t.Fatal("an idle engine with a flat counter cleared the stall")
	}
	d.probeDone(5, false)
	if d.stalled {
		t.Fatal("a probe that got tokens did not clear the stall")
	}
	// Requests only waiting, nothing running, counter flat: stalled too.
	d.observe(&snapshot.VLLM{Time: t0.Add(75 * time.Second), Up: true, Models: map[string]*snapshot.Model{"m": {
		Running: snapshot.Some(0), Waiting: snapshot.Some(3), GenerationTokens: snapshot.Some(11)}}}, "m")
	d.probeDone(5, true)
	if !d.stalled {
		t.Fatal("waiting requests and a flat counter: not stalled")
	}
	// A long prefill: no token generated, but the engine steps (the
	// heartbeat moves): progress, not a stall.
	prefill := func(t time.Time, steps float64) *snapshot.VLLM {
		return &snapshot.VLLM{Time: t, Up: true, Models: map[string]*snapshot.Model{"m": {
			Running: snapshot.Some(1), GenerationTokens: snapshot.Some(11), EngineSteps: snapshot.Some(steps)}}}
	}
	d.observe(prefill(t0.Add(90*time.Second), 40), "m")
	if d.stalled {
		t.Fatal("engine steps moved but still stalled")
	}
	d.observe(prefill(t0.Add(105*time.Second), 52), "m")
	d.probeDone(7, true)
	if d.stalled {
		t.Fatal("stalled while the engine steps through a prefill")
	}
	d.observe(prefill(t0.Add(120*time.Second), 52), "m")
	d.probeDone(8, true)
	if !d.stalled {
		t.Fatal("steps and tokens flat, probe got nothing: not stalled")
	}
	if pickModel(&snapshot.VLLM{Up: false}, "m") != nil || pickModel(nil, "m") != nil {
		t.Fatal("pickModel on a down scrape")
	}
}
