package bottleneck

import (
	"math"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// tailInputs is one window of a server with the given TTFT, prefill and
// queue-time quantiles and median TPOT, nothing waiting, KV half full.
func tailInputs(ttft50, ttft90, ttft99, pf99, q99, tpot50 float64) Inputs {
	now := time.Unix(1_800_000_000, 0)
	qs := func(p50, p90, p99 float64) map[float64]snapshot.Value {
		return map[float64]snapshot.Value{0.5: snapshot.Some(p50), 0.9: snapshot.Some(p90), 0.95: snapshot.Some((p90 + p99) / 2), 0.99: snapshot.Some(p99)}
	}
	w := &snapshot.Derived{Start: now.Add(-time.Minute), End: now,
		PromptTokensPerSecond: snapshot.Some(3600), RequestsPerSecond: snapshot.Some(4.1), GenerationTokensPerSecond: snapshot.Some(800),
		Quantiles: map[snapshot.HistogramName]map[float64]snapshot.Value{
			snapshot.TTFT:              qs(ttft50, ttft90, ttft99),
			snapshot.PrefillTime:       qs(ttft50*0.8, ttft90*0.9, pf99),
			snapshot.QueueTime:         qs(0.01, q99/2, q99),
			snapshot.InterTokenLatency: qs(tpot50, tpot50*4, tpot50*10),
		}}
	// 246 prefills; with a p99 past 2 s (twice the 1 s target), six
	// documents' among them.
	long := 0.0
	if pf99 > 2 {
		long = 6
	}
	w.Deltas = map[snapshot.HistogramName]snapshot.Histogram{snapshot.PrefillTime: {
		Bounds: []float64{0.3, 0.5, 1, 2, 5, math.Inf(1)}, Counts: []float64{200, 230, 240 - long, 246 - long, 246, 246}, Count: 246}}
	m := &snapshot.Model{Name: "m", Running: snapshot.Some(30), Waiting: snapshot.Some(0), KVUsage: snapshot.Some(0.5),
		PromptTokens: snapshot.Some(1e6), GenerationTokens: snapshot.Some(1e6)}
	return Inputs{Now: now, Model: m, Window: w}
}

// The prefill tail (a few long documents among short chat) is
// prefill_bound with its evidence, also when the chat requests that wait
// behind a document's prefill steps make the queue as long as the prefill
// and p90 TTFT miss the target; its near misses are not: uniformly long
// prompts (no tail), one population's spread of lengths (p99 under 6x the
// median), a tail made in the queue, a slow body (median over target),
// every step slow (median TPOT over), a tail within twice the target, long
// chat prompts whose TTFT doubles where two meet (their prefill does not),
// two long prefills in the window (not a population), and
// traffic that has just turned to long prompts (a fast median only in the
// window's past).
func TestPrefillTail(t *testing.T) {
	th := config.DefaultBottleneck()
	cases := []struct {
		name string
		in   Inputs
		want bool
	}{
		{"documents among chat", tailInputs(0.3, 0.6, 3.5, 3.4, 0.5, 0.02), true},
		{"uniformly long prompts", tailInputs(2.5, 3, 3.5, 3.4, 0.3, 0.02), false},
		{"tail made in the queue", tailInputs(0.3, 0.6, 3.5, 0.9, 3.2, 0.02), false},
		{"queue as long as prefill", tailInputs(0.3, 0.6, 3.5, 3.4, 2, 0.02), true},
		{"head-of-line blocking", tailInputs(0.3, 1.5, 3.5, 3.4, 1.5, 0.02), true},
		{"slow body", tailInputs(1.1, 2, 8, 7.9, 0.5, 0.02), false},
		{"one population's spread", tailInputs(0.5, 0.9, 2.25, 2.2, 0.1, 0.02), false},
		{"traffic just turned long", func() Inputs {
			in := tailInputs(0.3, 0.6, 3.5, 3.4, 0.5, 0.02)
			in.RecentTTFTMedian = snapshot.Some(2)
			return in
		}(), false},
		{"every step slow", tailInputs(0.3, 0.6, 3.5, 3.4, 0.5, 0.08), false},
		{"tail within target", tailInputs(0.1, 0.3, 0.9, 0.85, 0.1, 0.02), false},
		{"tail within twice the target", tailInputs(0.1, 0.3, 1.8, 1.7, 0.1, 0.02), false},
		{"long prompts meeting in the queue", tailInputs(0.1, 0.3, 2.6, 1.4, 1.2, 0.02), false},
		{"two long prompts meeting", func() Inputs {
			in := tailInputs(0.3, 0.6, 3.5, 3.4, 0.5, 0.02)
			h := in.Window.Deltas[snapshot.PrefillTime]
			h.Counts[3] = 244 // two prefills past 2 s, not a population
			in.Window.Deltas[snapshot.PrefillTime] = h
			return in
		}(), false},
	}
	for _, c := range cases {
		class, findings := Evaluate(c.in, th)
		if got := class == PrefillBound; got != c.want {
			t.Errorf("%s: class %s, want prefill_bound %v; findings %+v", c.name, class, c.want, findings)
			continue
		}
		if !c.want {
			continue
		}
		ev := map[string]Evidence{}
		for _, f := range findings {
			if f.Class == PrefillBound {
				for _, e := range f.Evidence {
					ev[e.Signal] = e
				}
			}
		}
		for _, s := range []string{"ttft_p99_seconds", "ttft_p99_over_p50_ratio", "ttft_p50_seconds", "ttft_p90_seconds", "prefill_share_of_ttft_ratio",
			"tpot_p50_seconds", "prefill_p99_seconds", "queue_time_p99_seconds"} {
			if _, ok := ev[s]; !ok {
				t.Errorf("%s: evidence lacks %s: %v", c.name, s, ev)
			}
		}
		if e := ev["prefill_p99_seconds"]; e.Value != 3.4 || e.Threshold != th.PrefillTailOverTarget*th.TTFTTargetSeconds {
			t.Errorf("%s: p99 prefill %+v, want 3.4 against %v", c.name, e, th.PrefillTailOverTarget*th.TTFTTargetSeconds)
		}
	}
}
