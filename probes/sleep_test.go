package probes

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// While vLLM reports its engine deliberately asleep, scheduled probes are
// not sent (counted as skipped, reason asleep) and the stall verdict stays
// off; they resume when it wakes.
func TestProbesPauseWhileEngineSleeps(t *testing.T) {
	clk := newFakeClock()
	tr := &memTransport{clock: clk}
	var asleep atomic.Bool
	vllm := func() *snapshot.VLLM {
		m := &snapshot.Model{Name: "m", Running: snapshot.Some(1), Waiting: snapshot.Some(4), GenerationTokens: snapshot.Some(100),
			Sleep: snapshot.Sleep{Known: true, Awake: !asleep.Load()}}
		return &snapshot.VLLM{Time: clk.Now(), Up: true, Models: map[string]*snapshot.Model{"m": m}}
	}
	h, _ := writeConfig(t, probesYAML("m", "    - {name: p, endpoint: completions, input_tokens: 8, output_tokens: 2, interval: 1s, jitter: 100ms, timeout: 500ms}\n"))
	s := New(Options{URL: "http://127.0.0.1:1", Clock: clk, Client: &http.Client{Transport: tr}, VLLM: vllm, Seed: 3}, h, nil)
	run := func(d time.Duration) {
		for end := clk.Now().Add(d); clk.Now().Before(end); clk.Add(250 * time.Millisecond) {
			s.Tick(context.Background(), clk.Now())
		}
	}
	run(10 * time.Second)
	awakeProbes := len(tr.log)
	if awakeProbes == 0 {
		t.Fatal("no probe sent while awake")
	}
	asleep.Store(true)
	run(30 * time.Second)
	if n := len(tr.log) - awakeProbes; n > 1 { // one may have been admitted before the scrape said so
		t.Errorf("%d probes sent while the engine slept", n)
	}
	if v := testutil.ToFloat64(s.m.skipped.WithLabelValues("p", SkipAsleep)); v < 20 {
		t.Errorf("vllm_probe_skipped_total{reason=asleep} = %v, want a skip per slot (~30)", v)
	}
	if s.Latest().EngineStalled {
		t.Error("a sleeping engine reported stalled")
	}
	asleep.Store(false)
	before := len(tr.log)
	run(10 * time.Second)
	if len(tr.log) == before {
		t.Error("probes did not resume after the engine woke")
	}
}
