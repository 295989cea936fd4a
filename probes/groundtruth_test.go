package probes

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	sharedtest "github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
)

// simView is the stall detector's input read straight from the simulator's
// ground truth (what the vLLM scraper would publish), stamped now.
func simView(sim *vllmsim.Sim) func() *snapshot.VLLM {
	return func() *snapshot.VLLM {
		models := map[string]*snapshot.Model{}
		for _, e := range sim.Engines() {
			m := models[e.Model]
			if m == nil {
				m = &snapshot.Model{Name: e.Model, Running: snapshot.Some(0), Waiting: snapshot.Some(0), GenerationTokens: snapshot.Some(0)}
				models[e.Model] = m
			}
			m.Running.V += float64(e.Running)
			m.Waiting.V += float64(e.Waiting)
			m.GenerationTokens.V += float64(e.GenerationTokens)
		}
		return &snapshot.VLLM{Time: time.Now(), Up: true, Models: models}
	}
}

func medianOf(v []float64) float64 {
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	return median(c)
}

// recordsByID indexes the simulator's ground truth by request id.
func recordsByID(sim *vllmsim.Sim) map[string]vllmsim.RequestRecord {
	out := map[string]vllmsim.RequestRecord{}
	for _, r := range sim.Records() {
		out[r.ID] = r
	}
	return out
}

// simModel is the simulator's default served model.
const simModel = "meta-llama/Llama-3.1-8B-Instruct"

// lockTick is the virtual-time step of a lockstep run. The lockstep cost
// model below puts every engine step end of a completions probe on this grid.
const lockTick = 200 * time.Microsecond

// lockCost: decode steps of exactly 10 ms, 0.1 ms per uncached prompt token.
var lockCost = vllmsim.CostModel{StepBase: 0.010, PerPrefillToken: 0.0001}

// lockstep serves a virtual-clock simulator on loopback HTTP to probes whose
// clock is the simulator's. Virtual time moves only in lockTick steps, and
// before each step the test waits until the simulator's handler has written
// every SSE event its engine has produced so far and the probe's connection
// has read all of those bytes. A probe that stamps a chunk at the socket
// read therefore stamps it with the virtual time at which the simulator
// produced it, however slowly a loaded machine runs both sides, and its
// TTFT and TPOT can be held to the simulator's ground truth for the same
// request id. A probe that stamped late (after decoding the whole body, at
// [DONE]) would see the clock moved on; one that divided by chunks rather
// than usage tokens would be off by the stream interval.
type lockstep struct {
	sim                   *vllmsim.Sim
	url                   string
	written, read, events atomic.Int64
}

func startLockstep(t *testing.T, cfg vllmsim.Config) *lockstep {
	t.Helper()
	cfg.VirtualClock = true
	sim, err := vllmsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ls := &lockstep{sim: sim}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := sim.Handler()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&flushCounter{ResponseWriter: w, n: &ls.events}, r)
	})}
	go func() { _ = srv.Serve(&writeCountListener{Listener: ln, n: &ls.written}) }()
	t.Cleanup(func() { _ = srv.Close() })
	ls.url = "http://" + ln.Addr().String()
	return ls
}

// scheduler builds a Scheduler on the simulator's clock whose own client
// (newClient, as in production) counts the bytes its connections read.
func (ls *lockstep) scheduler(t *testing.T, yaml string) *Scheduler {
	h, _ := writeConfig(t, yaml)
	clk := simClock{ls.sim}
	client := mustNewClient(t, func(c net.Conn) net.Conn { return &countConn{Conn: c, in: &ls.read, out: new(atomic.Int64)} })
	return New(Options{URL: ls.url, Clock: clk, Client: client}, h, nil)
}

func (ls *lockstep) generated() int {
	n := 0
	for _, e := range ls.sim.Engines() {
		n += e.GenerationTokens
	}
	return n
}

// probe runs one probe of profile (output tokens out) in lockstep.
func (ls *lockstep) probe(t *testing.T, s *Scheduler, profile string, out int, chat bool) Result {
	t.Helper()
	interval := ls.sim.Config().StreamInterval
	gen0, events0 := ls.generated(), ls.events.Load()
	done := make(chan Result, 1)
	go func() {
		res, err := s.ProbeOnce(context.Background(), profile)
		if err != nil {
			res.Reason = err.Error()
		}
		done <- res
	}()
	ls.wait(t, "request to arrive", func() bool {
		e := ls.sim.Engines()[0]
		return e.Waiting+e.Running > 0
	})
	for {
		g := ls.generated() - gen0
		want := int64(sseEvents(g, out, interval, chat))
		ls.wait(t, "stream to catch up", func() bool {
			return ls.events.Load()-events0 == want && ls.read.Load() == ls.written.Load()
		})
		if g >= out {
			break
		}
		ls.sim.Advance(lockTick)
	}
	select {
	case res := <-done:
		return res
	case <-time.After(20 * time.Second):
		t.Fatal("probe did not finish")
		return Result{}
	}
}

// sseEvents is how many events the simulator has flushed for a request once
// g of its out tokens exist: the first token alone (chat: after the role
// delta), then one event per interval tokens, the rest with the last token,
// then the usage chunk and [DONE].
func sseEvents(g, out, interval int, chat bool) int {
	if g == 0 {
		return 0
	}
	n := 1 + (g-1)/interval
	if g >= out {
		n = 1 + (out-1+interval-1)/interval + 2
	}
	if chat {
		n++
	}
	return n
}

// wait polls ok at a fine period (each lockstep step waits here, and the
// stream travels a real socket testing/synctest cannot see).
func (ls *lockstep) wait(t *testing.T, what string, ok func() bool) {
	t.Helper()
	sharedtest.Poll(t, 20*time.Second, 20*time.Microsecond, "lockstep: the "+what, nil, func() (bool, string) {
		return ok(), fmt.Sprintf("events %d, written %d, read %d", ls.events.Load(), ls.written.Load(), ls.read.Load())
	})
}

type simClock struct{ sim *vllmsim.Sim }

func (c simClock) Now() time.Time                     { return c.sim.Now() }
func (simClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

// flushCounter counts the SSE events the simulator's handler has flushed
// (each event's write starts with "data: "; a header-only flush counts none).
type flushCounter struct {
	http.ResponseWriter
	n       *atomic.Int64
	pending int64
}

func (f *flushCounter) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte("data: ")) {
		f.pending++
	}
	return f.ResponseWriter.Write(p)
}

func (f *flushCounter) Flush() {
	f.ResponseWriter.(http.Flusher).Flush()
	f.n.Add(f.pending)
	f.pending = 0
}

type writeCountListener struct {
	net.Listener
	n *atomic.Int64
}

func (l *writeCountListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countConn{Conn: c, in: new(atomic.Int64), out: l.n}, nil
}

// countConn counts the bytes its Reads and Writes moved. On the probe's
// side it sits above the stamped connection, so a read is counted only
// after it was stamped.
type countConn struct {
	net.Conn
	in, out *atomic.Int64
}

func (c *countConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Add(int64(n))
	return n, err
}

func (c *countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.Add(int64(n))
	return n, err
}

func (c *countConn) NetConn() net.Conn { return c.Conn }

func TestSimTTFTAndTPOTMatchGroundTruth(t *testing.T) {
	// Chunks of two tokens (--stream-interval 2): TPOT must divide by
	// usage tokens, not chunks (17 chunks carry the 32 tokens).
	ls := startLockstep(t, vllmsim.Config{Cost: lockCost, Seed: 1, StreamInterval: 2})
	s := ls.scheduler(t, probesYAML(simModel,
		profile("c", "completions", 128, 32, ", timeout: 9s"),
		profile("chat", "chat", 64, 8, ", timeout: 9s")))

	check := func(name string, in, out, chunks int, chat bool) (probeTTFT, simTTFT, probeTPOT, simTPOT float64) {
		t.Helper()
		res := ls.probe(t, s, name, out, chat)
		if res.Reason != "" {
			t.Fatalf("%s probe: %q", name, res.Reason)
		}
		rec, ok := recordsByID(ls.sim)[res.RequestID]
		if !ok {
			t.Fatalf("simulator has no record of %s", res.RequestID)
		}
		if rec.OutputTokens != out || res.CompletionTokens != out || res.PromptTokens != rec.PromptTokens || (!chat && rec.PromptTokens != in) {
			t.Fatalf("%s lengths: sim %d/%d, usage %d/%d", name, rec.PromptTokens, rec.OutputTokens, res.PromptTokens, res.CompletionTokens)
		}
		if res.Chunks != chunks || len(res.ITL) != chunks-1 {
			t.Fatalf("%s: %d chunks, %d ITL gaps; want %d chunks", name, res.Chunks, len(res.ITL), chunks)
		}
		// Each probe, not just the median: the lockstep makes the
		// comparison exact to one tick.
		if d := res.TTFT - rec.TTFT; d < -lockTick || d > lockTick {
			t.Errorf("%s %s: TTFT probe %v, simulator %v", name, res.RequestID, res.TTFT, rec.TTFT)
		}
		if d := res.E2E - rec.E2E; d < -lockTick || d > lockTick {
			t.Errorf("%s %s: E2E probe %v, simulator %v", name, res.RequestID, res.E2E, rec.E2E)
		}
		return res.TTFT.Seconds(), rec.TTFT.Seconds(), res.TPOT.Seconds(), rec.TPOT.Seconds()
	}

	// A chat probe too: 5 content chunks carry its 8 tokens; the role-only
	// delta before them carries no text and is not counted.
	check("chat", 64, 8, 1+(8-1+1)/2, true)

	var probeTTFT, probeTPOT, simTTFT, simTPOT []float64
	for range 5 {
		pT, sT, pP, sP := check("c", 128, 32, 1+(32-1+1)/2, false)
		probeTTFT, simTTFT = append(probeTTFT, pT), append(simTTFT, sT)
		probeTPOT, simTPOT = append(probeTPOT, pP), append(simTPOT, sP)
	}
	pT, sT := medianOf(probeTTFT), medianOf(simTTFT)
	if math.Abs(pT-sT) > 0.002 {
		t.Errorf("median TTFT: probe %.4fs, simulator %.4fs: more than 2 ms apart", pT, sT)
	}
	pP, sP := medianOf(probeTPOT), medianOf(simTPOT)
	if math.Abs(pP/sP-1) > 0.01 {
		t.Errorf("median TPOT: probe %.5fs, simulator %.5fs: more than 1%% apart", pP, sP)
	}
	if sT < 0.02 || sP < 0.009 {
		t.Fatalf("simulator truth implausible for the cost model: TTFT %.4fs TPOT %.5fs", sT, sP)
	}
	t.Logf("median TTFT probe %.5fs sim %.5fs; TPOT probe %.6fs sim %.6fs", pT, sT, pP, sP)
}

func TestSimColdVsWarmPrefix(t *testing.T) {
	ls := startLockstep(t, vllmsim.Config{Cost: lockCost, Seed: 2})
	s := ls.scheduler(t, probesYAML(simModel,
		profile("cold", "completions", 1024, 4, ", timeout: 9s"),
		profile("warm", "completions", 1024, 4, ", prefix: warm, timeout: 9s")))
	if res := ls.probe(t, s, "warm", 4, false); res.Reason != "" { // fills the cache
		t.Fatalf("priming probe: %q", res.Reason)
	}
	// The warm prompt is fixed: ask the simulator what it will find cached.
	var warmCfg config.ProbeProfile
	for _, p := range s.cfg.Profiles {
		if p.Name == "warm" {
			warmCfg = p
		}
	}
	pm := &prompter{idMin: 1000, idMax: 20000}
	wantCached := ls.sim.PrefixCachedTokens("", 0, pm.tokens(&warmCfg))
	if wantCached < 1024-ls.sim.Config().BlockSize {
		t.Fatalf("simulator would cache only %d of 1024 warm tokens", wantCached)
	}
	ttft := map[string][]float64{}
	truth := map[string][]float64{}
	for range 3 {
		for _, name := range []string{"cold", "warm"} {
			res := ls.probe(t, s, name, 4, false)
			if res.Reason != "" {
				t.Fatalf("%s: %q", name, res.Reason)
			}
			rec := recordsByID(ls.sim)[res.RequestID]
			want := 0
			if name == "warm" {
				want = wantCached
			}
			if rec.CachedTokens != want {
				t.Fatalf("%s probe hit %d cached tokens, simulator says %d", name, rec.CachedTokens, want)
			}
			ttft[name] = append(ttft[name], res.TTFT.Seconds())
			truth[name] = append(truth[name], rec.TTFT.Seconds())
		}
	}
	probeGain := medianOf(ttft["cold"]) - medianOf(ttft["warm"])
	simGain := medianOf(truth["cold"]) - medianOf(truth["warm"])
	t.Logf("cold-warm TTFT: probes %.5fs, simulator %.5fs", probeGain, simGain)
	// The simulator's prefill model: 0.1 ms per uncached prompt token.
	if want := float64(wantCached) * lockCost.PerPrefillToken; math.Abs(simGain-want) > 1e-6 {
		t.Fatalf("simulator's prefix-cache gain %.5fs, its cost model says %.5fs", simGain, want)
	}
	if math.Abs(probeGain-simGain) > 2*lockTick.Seconds() {
		t.Fatalf("prefix cache TTFT gain: probes %.5fs, simulator %.5fs", probeGain, simGain)
	}
}

func TestSimStallOnWithinTwoIntervalsAndOff(t *testing.T) {
	sim := vllmsimtest.Start(t, vllmsim.Config{Seed: 3})
	clk := newFakeClock()
	h, _ := writeConfig(t, probesYAML("", strings.Replace(profile("p", "completions", 32, 4, ", timeout: 300ms"), "interval: 10s", "interval: 1s", 1)))
	s := New(Options{URL: sim.URL(), VLLM: simView(sim), Clock: clk}, h, nil)
	ctx := context.Background()
	interval := time.Second
	tick := func() bool {
		s.Tick(ctx, clk.Now())
		clk.Add(interval)
		return s.Latest().EngineStalled
	}
	if tick() {
		t.Fatal("stalled while healthy")
	}
	if got := s.Latest().Profiles["p"].Requests; got != 1 {
		t.Fatalf("%v probes sent on the first tick", got)
	}
	if err := sim.SetScenario("stalled"); err != nil {
		t.Fatal(err)
	}
	on := 0
	for i := 1; i <= 2 && on == 0; i++ {
		if tick() {
			on = i
		}
	}
	if on == 0 {
		t.Fatal("vllm_engine_stalled not on within two probe intervals of the stall")
	}
	if f := s.Latest().Profiles["p"].Failures[ReasonTimeout]; f < 1 {
		t.Fatalf("no probe timed out: %v", s.Latest().Profiles["p"].Failures)
	}
	if err := sim.SetScenario("healthy"); err != nil {
		t.Fatal(err)
	}
	// Back-off after the failed probes may delay the next one, never
	// beyond backoff_max; the first probe that gets tokens clears the stall.
	for i := 0; i < 70 && s.Latest().EngineStalled; i++ {
		tick()
	}
	if s.Latest().EngineStalled {
		t.Fatal("vllm_engine_stalled still on after recovery")
	}
	if !s.Latest().Profiles["p"].LastSuccess {
		t.Fatal("no successful probe after recovery")
	}
}

func TestSimFaultsCountedOnce(t *testing.T) {
	cases := []struct {
		fault vllmsim.FaultSpec
		want  string
	}{
		{vllmsim.FaultSpec{Kind: vllmsim.Fault5xx}, ReasonHTTP5xx},
		{vllmsim.FaultSpec{Kind: vllmsim.FaultStreamCut, AfterChunks: 2}, ReasonStreamError},
		{vllmsim.FaultSpec{Kind: vllmsim.FaultStreamError, AfterChunks: 2}, ReasonStreamError},
		{vllmsim.FaultSpec{Kind: vllmsim.FaultHang}, ReasonTimeout},
		{vllmsim.FaultSpec{Kind: vllmsim.FaultDown}, ReasonConnect},
	}
	for _, c := range cases {
		t.Run(string(c.fault.Kind), func(t *testing.T) {
			sim := vllmsimtest.Start(t, vllmsim.Config{Seed: 4})
			// A generous timeout: the healthy baseline probe must not time
			// out on a loaded CI machine; only the hang case waits it out.
			h, _ := writeConfig(t, probesYAML("", profile("p", "completions", 16, 4, ", timeout: 3s")))
			s := New(Options{URL: sim.URL()}, h, nil)
			if s.Model() != "" {
				t.Fatal("model known before discovery")
			}
			if res, _ := s.ProbeOnce(context.Background(), "p"); res.Reason != "" { // discovers the model
				t.Fatalf("healthy probe: %q", res.Reason)
			}
			if err := sim.InjectFault(c.fault); err != nil {
				t.Fatal(err)
			}
			res, _ := s.ProbeOnce(context.Background(), "p")
			if res.Reason != c.want {
				t.Fatalf("reason %q, want %q", res.Reason, c.want)
			}
			f := s.Latest().Profiles["p"].Failures
			for _, r := range Reasons {
				want := 0.0
				if r == c.want {
					want = 1
				}
				if f[r] != want {
					t.Errorf("failures[%s] = %v, want %v", r, f[r], want)
				}
			}
		})
	}

	t.Run("wrong api key", func(t *testing.T) {
		sim := vllmsimtest.Start(t, vllmsim.Config{Seed: 5, APIKey: "right"})
		h, _ := writeConfig(t, probesYAML("meta-llama/Llama-3.1-8B-Instruct", profile("p", "chat", 16, 4, "")))
		s := New(Options{URL: sim.URL(), APIKey: "wrong"}, h, nil)
		if res, _ := s.ProbeOnce(context.Background(), "p"); res.Reason != ReasonHTTP4xx {
			t.Fatalf("reason %q", res.Reason)
		}
		s2 := New(Options{URL: sim.URL(), APIKey: "right"}, h, nil)
		if res, _ := s2.ProbeOnce(context.Background(), "p"); res.Reason != "" {
			t.Fatalf("right key: reason %q", res.Reason)
		}
	})
}
