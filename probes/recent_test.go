package probes

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// recordAt records res as a finished probe of profile, as execute does.
func recordAt(t *testing.T, s *Scheduler, profile string, res Result) {
	t.Helper()
	s.mu.Lock()
	st := s.profiles[profile]
	st.inFlight = true
	s.mu.Unlock()
	s.record(&job{st: st, cfg: st.cfg, model: "m", reqID: fmt.Sprintf("id-%d", res.Start.UnixNano())}, &res)
}

// gatherPedantic gathers s through a pedantic registry (which checks
// every metric against its descriptor).
func gatherPedantic(t *testing.T, s *Scheduler) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// windowSummary gathers s and returns the window summary of one latency.
func windowSummary(t *testing.T, s *Scheduler, name string) *dto.Summary {
	t.Helper()
	for _, mf := range gatherPedantic(t, s) {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			for _, l := range m.GetLabel() {
				if l.GetName() == "window" && l.GetValue() != "5m" {
					t.Errorf("%s: window label %q, want 5m", name, l.GetValue())
				}
			}
			return m.GetSummary()
		}
	}
	t.Fatalf("%s not exported", name)
	return nil
}

func quantiles(s *dto.Summary) map[float64]float64 {
	out := map[float64]float64{}
	for _, q := range s.GetQuantile() {
		out[q.GetQuantile()] = q.GetValue()
	}
	return out
}

// TestWindowQuantilesAreExact: the window summaries hold numpy's
// percentiles (linear interpolation) of the successful probes of the last
// five minutes, whatever the classic buckets are: for TTFTs 0.1 .. 1.0 s
// (shuffled) the median is 0.55 and the p99 0.991; ITL gaps of every probe
// pooled; failures leave them alone; _count and _sum stay cumulative when
// the observations age out, and the quantile lines go.
func TestWindowQuantilesAreExact(t *testing.T) {
	clk := newFakeClock()
	h, _ := writeConfig(t, probesYAML("m", profile("p", "completions", 16, 4, "")))
	s := New(Options{URL: "http://127.0.0.1:1", Clock: clk}, h, nil)
	if q := quantiles(windowSummary(t, s, "vllm_probe_time_to_first_token_window_seconds")); len(q) != 0 {
		t.Fatalf("quantile lines before any probe: %v", q)
	}
	for _, k := range []int{3, 7, 1, 10, 5, 2, 9, 4, 8, 6} {
		v := time.Duration(k) * 100 * time.Millisecond
		recordAt(t, s, "p", Result{Start: clk.Now(), Chunks: 4, TTFT: v, E2E: v + 30*time.Millisecond, TPOT: 10 * time.Millisecond, HasTPOT: true,
			ITL: []time.Duration{time.Duration(k) * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond}})
		recordAt(t, s, "p", Result{Start: clk.Now(), Reason: ReasonTimeout, Detail: "slow"})
		clk.Add(10 * time.Second)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	ttft := windowSummary(t, s, "vllm_probe_time_to_first_token_window_seconds")
	if q := quantiles(ttft); !near(q[0.5], 0.55) || !near(q[0.99], 0.991) || ttft.GetSampleCount() != 10 || !near(ttft.GetSampleSum(), 5.5) {
		t.Errorf("TTFT window: quantiles %v count %d sum %v, want 0.55 / 0.991, 10, 5.5", q, ttft.GetSampleCount(), ttft.GetSampleSum())
	}
	// 30 gaps: 1..10 ms, ten of 20 ms, ten of 30 ms.
	if q := quantiles(windowSummary(t, s, "vllm_probe_inter_token_latency_window_seconds")); !near(q[0.5], 0.02) || !near(q[0.99], 0.03) {
		t.Errorf("ITL window quantiles %v, want 0.02 / 0.03", q)
	}
	if q := quantiles(windowSummary(t, s, "vllm_probe_time_per_output_token_window_seconds")); !near(q[0.5], 0.01) {
		t.Errorf("TPOT window quantiles %v, want 0.01", q)
	}
	// The first probes age out as the window slides (at the scheduler's
	// next step), the rest stay: after 5m, probes 2..10 of the list remain.
	clk.Add(QuantileWindow - 100*time.Second + time.Second)
	s.mu.Lock()
	s.profiles["p"].next = clk.Now().Add(time.Hour)
	s.mu.Unlock()
	if jobs := s.dueJobs(clk.Now()); len(jobs) != 0 { // a step that sends nothing
		t.Fatalf("%d probes due", len(jobs))
	}
	if q := quantiles(windowSummary(t, s, "vllm_probe_time_to_first_token_window_seconds")); !near(q[0.5], 0.6) {
		t.Errorf("after the first probe aged out: TTFT quantiles %v, want median 0.6 of 0.1,0.2,0.4 .. 1.0", q)
	}
	clk.Add(QuantileWindow)
	s.mu.Lock()
	s.publishRecentLocked(clk.Now())
	s.mu.Unlock()
	ttft = windowSummary(t, s, "vllm_probe_time_to_first_token_window_seconds")
	if q := quantiles(ttft); len(q) != 0 || ttft.GetSampleCount() != 10 {
		t.Errorf("window past every probe: quantiles %v (want none), count %d (want the cumulative 10)", q, ttft.GetSampleCount())
	}
}

// TestRecentProbesAreABoundedRing: Recent lists the last RecentProbes
// probes, newest first, each with its outcome, reason and the failure's
// text as the probe produced it.
func TestRecentProbesAreABoundedRing(t *testing.T) {
	clk := newFakeClock()
	h, _ := writeConfig(t, probesYAML("m", profile("p", "completions", 16, 4, "")))
	s := New(Options{URL: "http://127.0.0.1:1", Clock: clk}, h, nil)
	for i := range RecentProbes + 13 {
		res := Result{Start: clk.Now(), Chunks: 4, TTFT: time.Duration(i+1) * time.Millisecond, E2E: 50 * time.Millisecond, CompletionTokens: 4}
		if i%3 == 0 {
			res = Result{Start: clk.Now(), Reason: ReasonHTTP5xx, StatusCode: 503, Detail: fmt.Sprintf("overloaded %d", i)}
		}
		clk.Add(time.Second)
		recordAt(t, s, "p", res)
	}
	got := s.Recent().Probes
	if len(got) != RecentProbes {
		t.Fatalf("%d recent probes, want %d", len(got), RecentProbes)
	}
	newest, oldest := got[0], got[len(got)-1]
	if !newest.Time.After(oldest.Time) || oldest.TTFT != 14*time.Millisecond || newest.Duration != time.Second {
		t.Errorf("ring order or content: newest %+v, oldest %+v (want probe 63 first, probe 14 last)", newest, oldest)
	}
	fail := got[2] // probe 60
	if fail.Reason != ReasonHTTP5xx || fail.StatusCode != 503 || fail.Detail != "overloaded 60" || fail.Profile != "p" || fail.Model != "m" || fail.TTFT != 0 {
		t.Errorf("failed probe recorded as %+v", fail)
	}
}
