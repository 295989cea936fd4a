package vllm

import (
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// Quantiles are the quantiles derived for every latency histogram.
var Quantiles = []float64{0.5, 0.9, 0.95, 0.99}

// derive computes the windowed values of every model present in both
// snapshots. Counters and histograms that went down mean vLLM restarted in
// between; the newer value is then the increase since the restart (as in
// PromQL's increase()). Rates divide by the time actually between the two
// snapshots, not by the nominal window.
func derive(window time.Duration, start, end *snapshot.VLLM) map[string]*snapshot.Derived {
	elapsed := end.Time.Sub(start.Time).Seconds()
	if elapsed <= 0 {
		return nil
	}
	out := make(map[string]*snapshot.Derived, len(end.Models))
	for name, newer := range end.Models {
		older, ok := start.Models[name]
		if !ok {
			continue
		}
		dv := &snapshot.Derived{
			Window:                    window,
			Start:                     start.Time,
			End:                       end.Time,
			FinishedPerSecondByReason: map[string]float64{},
			Quantiles:                 map[snapshot.HistogramName]map[float64]snapshot.Value{},
			Deltas:                    map[snapshot.HistogramName]snapshot.Histogram{},
		}
		rate := func(n, o snapshot.Value) snapshot.Value {
			if !n.OK || !o.OK {
				return snapshot.Value{}
			}
			return snapshot.Some(counterDelta(n.V, o.V) / elapsed)
		}
		dv.PreemptionsPerSecond = rate(newer.Preemptions, older.Preemptions)
		dv.PromptTokensPerSecond = rate(newer.PromptTokens, older.PromptTokens)
		dv.GenerationTokensPerSecond = rate(newer.GenerationTokens, older.GenerationTokens)

		finished, anyReason := 0.0, false
		for reason, n := range newer.FinishedByReason {
			o, ok := older.FinishedByReason[reason]
			if !ok {
				o = 0 // V0 creates a reason's series on its first use: it was 0 before.
			}
			inc := counterDelta(n, o)
			dv.FinishedPerSecondByReason[reason] = inc / elapsed
			finished += inc
			anyReason = true
		}
		if anyReason {
			dv.RequestsPerSecond = snapshot.Some(finished / elapsed)
			if finished > 0 && newer.Preemptions.OK && older.Preemptions.OK {
				dv.PreemptionsPerRequest = snapshot.Some(counterDelta(newer.Preemptions.V, older.Preemptions.V) / finished)
			}
		}
		if newer.PrefixQueries.OK && older.PrefixQueries.OK && newer.PrefixHits.OK && older.PrefixHits.OK {
			q := counterDelta(newer.PrefixQueries.V, older.PrefixQueries.V)
			h := counterDelta(newer.PrefixHits.V, older.PrefixHits.V)
			if q > 0 {
				dv.PrefixCacheHitRatio = snapshot.Some(h / q)
			}
		}
		for hn, nh := range newer.Histograms {
			oh, ok := older.Histograms[hn]
			if !ok {
				// V0 multiprocess mode creates a histogram on its first
				// observation: absent before means empty before.
				oh = snapshot.Histogram{Bounds: nh.Bounds, Counts: make([]float64, len(nh.Counts))}
			}
			delta, _ := nh.Sub(oh)
			dv.Deltas[hn] = delta
			qs := make(map[float64]snapshot.Value, len(Quantiles))
			for _, q := range Quantiles {
				qs[q] = delta.Quantile(q)
			}
			dv.Quantiles[hn] = qs
		}
		out[name] = dv
	}
	return out
}

// counterDelta is the increase of a counter, treating a decrease as a reset.
func counterDelta(newer, older float64) float64 {
	if newer < older {
		return newer
	}
	return newer - older
}
