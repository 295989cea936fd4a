package bottleneck

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// While vLLM cannot be scraped the class becomes unavailable after
// hold_ticks, and every series derived from the scrape (roofline, measured
// decode speed, capacity, cost) disappears instead of keeping its last
// value; they come back with the server.
func TestDownServerIsUnavailableAndDerivedSeriesDisappear(t *testing.T) {
	f := &fakeSources{}
	c := New(Options{Model: testSpec, Cost: CostSpec{GPUHour: 3}}, nil, Sources{VLLM: f, GPU: fakeGPU{f}, Probes: fakeProbes{f}}, nil)
	th := defaultTh()
	rng := newRand(3)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	derived := []string{"vllm_decode_roofline_tokens_per_second", "vllm_decode_measured_tokens_per_second",
		"vllm_capacity_requests_per_second", "vllm_cost_per_million_output_tokens"}
	for i := 0; i < 5; i++ {
		now = now.Add(15 * time.Second)
		healthy().apply(f, now, rng, th)
		c.Tick(now)
	}
	for _, name := range derived {
		if n := testutil.CollectAndCount(c, name); n != 1 {
			t.Fatalf("healthy: %d series of %s, want 1", n, name)
		}
	}
	down := healthy()
	down.down = true
	for i := 1; i <= th.HoldTicks; i++ {
		now = now.Add(15 * time.Second)
		down.apply(f, now, rng, th)
		c.Tick(now)
		for _, name := range derived {
			if n := testutil.CollectAndCount(c, name); n != 0 {
				t.Fatalf("down tick %d: %d series of %s left, want none", i, n, name)
			}
		}
	}
	st, _ := c.State(model)
	if st.Class != ServerUnavailable {
		t.Fatalf("after %d down ticks: class %s, want %s", th.HoldTicks, st.Class, ServerUnavailable)
	}
	if ev := st.Evidence(); len(ev) == 0 || ev[0].Signal != "seconds_since_last_scrape_success" || ev[0].Value != float64(th.HoldTicks*15) {
		t.Fatalf("unavailable evidence %v", ev)
	}
	for i := 0; i < th.HoldTicks; i++ {
		now = now.Add(15 * time.Second)
		healthy().apply(f, now, rng, th)
		c.Tick(now)
	}
	if st, _ := c.State(model); st.Class != NearOptimal {
		t.Fatalf("back up: class %s", st.Class)
	}
	if n := testutil.CollectAndCount(c, "vllm_capacity_requests_per_second"); n != 1 {
		t.Fatalf("back up: %d capacity series, want 1", n)
	}
}

// Capacity is a measured figure (and plans GPUs) only when the server was
// saturated while the SLOs held; otherwise it is offered load, extrapolated
// by KV usage when that is within 10x, and plans nothing.
func TestCapacityOnlyFromASaturatedMeasurement(t *testing.T) {
	th := defaultTh()
	th.DailyRequests = 1e6
	for _, c := range []struct {
		name      string
		waiting   float64
		saturated bool
	}{{"busy, requests waiting, SLOs held", 2, true}, {"underused", 0, false}} {
		f := &fakeSources{}
		cl := New(Options{Model: testSpec, Thresholds: &th}, nil, Sources{VLLM: f, GPU: fakeGPU{f}, Probes: fakeProbes{f}}, nil)
		rng := newRand(5)
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := 0; i < 10; i++ {
			now = now.Add(15 * time.Second)
			r := healthy()
			r.waiting = c.waiting
			r.apply(f, now, rng, th)
			cl.Tick(now)
		}
		st, _ := cl.State(model)
		capy := st.Capacity
		if !capy.RequestsPerSecond.OK || capy.Saturated != c.saturated || (capy.Plan != nil) != c.saturated {
			t.Fatalf("%s: capacity %+v", c.name, capy)
		}
		mr := ModelReportFrom(st, th.Window, 0, nil)
		ex := mr.Capacity.ExtrapolatedRequestsPerSecond
		if c.saturated != (ex == nil) {
			t.Fatalf("%s: extrapolation %v", c.name, ex)
		}
		if ex != nil && (*ex < capy.RequestsPerSecond.V*1.5 || *ex > capy.RequestsPerSecond.V/capy.KVUsage.V*1.0001) {
			t.Fatalf("%s: extrapolated %v from %v at KV %v", c.name, *ex, capy.RequestsPerSecond.V, capy.KVUsage.V)
		}
	}
	if v := KVExtrapolation(2, snapshot.Some(0.016)); v.OK {
		t.Errorf("extrapolated 60x from 1.6%% KV usage: %v", v.V)
	}
}
