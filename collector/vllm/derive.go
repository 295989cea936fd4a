package vllm

import (
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// Quantiles are the quantiles derived for every latency histogram.
var Quantiles = []float64{0.5, 0.9, 0.95, 0.99}

// derive computes the windowed values of every model present at both ends
// of span (oldest first; span[0] and the last element are the window's start
// and end). Like PromQL's increase(), every successful snapshot in between is
// looked at: a counter or histogram that went down means vLLM restarted, and
// the increase is then summed piecewise (before the restart, plus the value
// since it). Looking only at the two ends would miss a restart after which
// the counter already grew past its old value, and would drop the increase
// made before the restart. Rates divide by the time actually between the two
// ends, not by the nominal window.
func derive(window time.Duration, span []*snapshot.VLLM) map[string]*snapshot.Derived {
	if len(span) < 2 {
		return nil
	}
	start, end := span[0], span[len(span)-1]
	elapsed := end.Time.Sub(start.Time).Seconds()
	if elapsed <= 0 {
		return nil
	}
	out := make(map[string]*snapshot.Derived, len(end.Models))
	chain := make([]*snapshot.Model, 0, len(span))
	for name, newer := range end.Models {
		older, ok := start.Models[name]
		if !ok {
			continue
		}
		// The model's readings through the window; failed scrapes and
		// scrapes without the model carry nothing.
		chain = append(chain[:0], older)
		for _, h := range span[1 : len(span)-1] {
			if m := h.Models[name]; h.Up && m != nil {
				chain = append(chain, m)
			}
		}
		chain = append(chain, newer)

		dv := &snapshot.Derived{
			Window:                    window,
			Start:                     start.Time,
			End:                       end.Time,
			FinishedPerSecondByReason: map[string]float64{},
			Quantiles:                 map[snapshot.HistogramName]map[float64]snapshot.Value{},
			Deltas:                    map[snapshot.HistogramName]snapshot.Histogram{},
		}
		preemptions := increase(chain, func(m *snapshot.Model) snapshot.Value { return m.Preemptions })
		rate := func(inc snapshot.Value) snapshot.Value {
			if !inc.OK {
				return inc
			}
			return snapshot.Some(inc.V / elapsed)
		}
		dv.PreemptionsPerSecond = rate(preemptions)
		dv.PromptTokensPerSecond = rate(increase(chain, func(m *snapshot.Model) snapshot.Value { return m.PromptTokens }))
		dv.GenerationTokensPerSecond = rate(increase(chain, func(m *snapshot.Model) snapshot.Value { return m.GenerationTokens }))

		finished, anyReason := finishedIncrease(chain, elapsed, dv.FinishedPerSecondByReason)
		if anyReason {
			dv.RequestsPerSecond = snapshot.Some(finished / elapsed)
			if finished > 0 && preemptions.OK {
				dv.PreemptionsPerRequest = snapshot.Some(preemptions.V / finished)
			}
		}
		deriveNewer(dv, chain, rate)
		dv.PrefixCacheHitRatio = hitRatio(increase(chain, func(m *snapshot.Model) snapshot.Value { return m.PrefixHits }),
			increase(chain, func(m *snapshot.Model) snapshot.Value { return m.PrefixQueries }))
		for hn := range newer.Histograms.All() {
			delta := histogramIncrease(chain, hn)
			dv.Deltas[hn] = delta
			qs := make(map[float64]snapshot.Value, len(Quantiles))
			for _, q := range Quantiles {
				qs[q] = delta.Quantile(q)
			}
			dv.Quantiles[hn] = qs
		}
		if d, ok := dv.Deltas[snapshot.KVTransferSize]; ok {
			dv.KVTransferBytesPerSecond = rate(snapshot.Some(d.Sum))
		}
		out[name] = dv
	}
	return out
}

// finishedIncrease fills perSecond with the finished requests per second by
// reason along chain and returns their total increase; anyReason is false
// when no reading has the family.
func finishedIncrease(chain []*snapshot.Model, elapsed float64, perSecond map[string]float64) (total float64, anyReason bool) {
	reasons := map[string]bool{}
	for _, m := range chain {
		for reason := range m.FinishedByReason {
			reasons[reason] = true
		}
	}
	for reason := range reasons {
		// V0 creates a reason's series on its first use (again after a
		// restart): absent is 0.
		inc := increase(chain, func(m *snapshot.Model) snapshot.Value { return snapshot.Some(m.FinishedByReason[reason]) })
		perSecond[reason] = inc.V / elapsed
		total += inc.V
	}
	return total, len(reasons) > 0
}

// deriveNewer fills the windowed values of the families of newer vLLM
// versions (spec decode, prompt tokens by source, MFU estimates).
func deriveNewer(dv *snapshot.Derived, chain []*snapshot.Model, rate func(snapshot.Value) snapshot.Value) {
	inc := func(get func(*snapshot.Model) snapshot.Value) snapshot.Value { return increase(chain, get) }
	drafts := inc(func(m *snapshot.Model) snapshot.Value { return m.SpecDrafts })
	draftTokens := inc(func(m *snapshot.Model) snapshot.Value { return m.SpecDraftTokens })
	accepted := inc(func(m *snapshot.Model) snapshot.Value { return m.SpecAcceptedTokens })
	if accepted.OK && draftTokens.OK && draftTokens.V > 0 {
		dv.SpecAcceptanceRatio = snapshot.Some(accepted.V / draftTokens.V)
	}
	if accepted.OK && drafts.OK && drafts.V > 0 {
		dv.SpecMeanAcceptanceLength = snapshot.Some(1 + accepted.V/drafts.V)
	}

	source := func(name string) func(*snapshot.Model) snapshot.Value {
		return func(m *snapshot.Model) snapshot.Value {
			if m.PromptTokensBySource == nil {
				return snapshot.Value{}
			}
			return snapshot.Some(m.PromptTokensBySource[name])
		}
	}
	// Computed: the local_compute source; else all prompt tokens minus the
	// cached ones; else the per-request computed-KV histogram's sum (counted
	// when requests finish, so it lags).
	computed := inc(source("local_compute"))
	if !computed.OK {
		computed = inc(func(m *snapshot.Model) snapshot.Value {
			if !m.PromptTokens.OK || !m.PromptTokensCached.OK {
				return snapshot.Value{}
			}
			return snapshot.Some(m.PromptTokens.V - m.PromptTokensCached.V)
		})
	}
	if !computed.OK {
		computed = inc(func(m *snapshot.Model) snapshot.Value { return m.PrefillKVComputedSum })
	}
	dv.PromptTokensComputedPerSecond = rate(computed)
	cached := inc(func(m *snapshot.Model) snapshot.Value { return m.PromptTokensCached })
	if !cached.OK {
		cached = inc(func(m *snapshot.Model) snapshot.Value {
			hit, ext := source("local_cache_hit")(m), source("external_kv_transfer")(m)
			if !hit.OK {
				return hit
			}
			return snapshot.Some(hit.V + ext.V)
		})
	}
	dv.PromptTokensCachedPerSecond = rate(cached)

	dv.ExternalPrefixCacheHitRatio = hitRatio(inc(func(m *snapshot.Model) snapshot.Value { return m.ExternalPrefixHits }),
		inc(func(m *snapshot.Model) snapshot.Value { return m.ExternalPrefixQueries }))
	// vLLM creates a reason's rejection counter on the first rejection for
	// it: a window whose later readings have the family counts an earlier
	// reading without it as 0, so the first rejections are not lost for a
	// whole window.
	for _, m := range chain {
		if m.RejectedByReason != nil {
			dv.RejectedPerSecond = rate(inc(func(m *snapshot.Model) snapshot.Value { return snapshot.Some(sumValues(m.RejectedByReason)) }))
			break
		}
	}
	dv.KVTransferFailuresPerSecond = rate(inc(func(m *snapshot.Model) snapshot.Value { return m.KVTransferFailures }))
	dv.KVTransferExpiredPerSecond = rate(inc(func(m *snapshot.Model) snapshot.Value { return m.KVTransferExpiredRequests }))
	dv.MMCacheHitRatio = hitRatio(inc(func(m *snapshot.Model) snapshot.Value { return m.MMCacheHits }),
		inc(func(m *snapshot.Model) snapshot.Value { return m.MMCacheQueries }))

	// The estimates stay 0 without --enable-mfu-metrics: no increase, no value.
	if f := inc(func(m *snapshot.Model) snapshot.Value { return m.EstimatedFlops }); f.OK && f.V > 0 {
		dv.EstimatedFlopsPerSecond = rate(f)
	}
	rd := inc(func(m *snapshot.Model) snapshot.Value { return m.EstimatedReadBytes })
	wr := inc(func(m *snapshot.Model) snapshot.Value { return m.EstimatedWriteBytes })
	if rd.OK && wr.OK && rd.V+wr.V > 0 {
		dv.EstimatedBytesPerSecond = rate(snapshot.Some(rd.V + wr.V))
	}
}

// sumValues is the sum of a map's values.
func sumValues(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// hitRatio is hits / queries over a window, absent without queries.
func hitRatio(hits, queries snapshot.Value) snapshot.Value {
	if !hits.OK || !queries.OK || queries.V <= 0 {
		return snapshot.Value{}
	}
	return snapshot.Some(hits.V / queries.V)
}

// increase sums a counter's increases along chain, a decrease counting as
// a reset (the newer value is the increase since it). It is absent when
// either end lacks the counter; readings in between that lack it are
// skipped.
func increase(chain []*snapshot.Model, get func(*snapshot.Model) snapshot.Value) snapshot.Value {
	prev := get(chain[0])
	if !prev.OK || !get(chain[len(chain)-1]).OK {
		return snapshot.Value{}
	}
	total := 0.0
	for _, m := range chain[1:] {
		v := get(m)
		if !v.OK {
			continue
		}
		total += counterDelta(v.V, prev.V)
		prev = v
	}
	return snapshot.Some(total)
}

// histogramIncrease is the bucket-wise increase of histogram hn along chain
// (whose last element has it). A reading without it counts as empty: V0's
// multiprocess mode creates a histogram on its first observation, and a
// restarted V0 engine starts without it. Without a reset anywhere along the
// chain this is the difference of the two ends.
func histogramIncrease(chain []*snapshot.Model, hn snapshot.HistogramName) snapshot.Histogram {
	newest := chain[len(chain)-1].Histograms.Get(hn)
	var empty *snapshot.Histogram
	get := func(m *snapshot.Model) snapshot.Histogram {
		if h, ok := m.Histograms.Lookup(hn); ok {
			return h
		}
		if empty == nil {
			empty = &snapshot.Histogram{Bounds: newest.Bounds, Counts: make([]float64, len(newest.Counts))}
		}
		return *empty
	}
	resets := false
	for i := 1; i < len(chain) && !resets; i++ {
		resets = wentDown(get(chain[i]), get(chain[i-1]))
	}
	if !resets {
		delta, _ := newest.Sub(get(chain[0]))
		return delta
	}
	total, _ := get(chain[1]).Sub(get(chain[0]))
	for i := 2; i < len(chain); i++ {
		d, _ := get(chain[i]).Sub(get(chain[i-1]))
		if sum, ok := total.Add(d); ok {
			total = sum
		} else {
			total = d // new bucket layout (vLLM upgraded): only its increase can be kept
		}
	}
	return total
}

// wentDown is a cheap, allocation-free test for what Histogram.Sub calls a
// reset: a different bucket layout, or a count, sum or bucket that went down.
func wentDown(newer, older snapshot.Histogram) bool {
	if newer.Count < older.Count || newer.Sum < older.Sum || len(newer.Counts) != len(older.Counts) || len(newer.Bounds) != len(older.Bounds) {
		return true
	}
	for i := range newer.Counts {
		if newer.Counts[i] < older.Counts[i] || newer.Bounds[i] != older.Bounds[i] {
			return true
		}
	}
	return false
}

// counterDelta is the increase of a counter, treating a decrease as a reset.
func counterDelta(newer, older float64) float64 {
	if newer < older {
		return newer
	}
	return newer - older
}
