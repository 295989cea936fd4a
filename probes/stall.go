package probes

import (
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// stallDetector decides vllm_engine_stalled from probe outcomes and the
// scraper's view of vLLM. The engine is stalled when a probe timed out or
// got no token while vLLM reported requests in the engine (running, or
// waiting with nothing running: a wedged scheduler admits nothing) at some
// scrape since the probe started, and neither its generation-token counter
// nor its engine steps (vllm:iteration_tokens_total, the per-step
// heartbeat: a long prefill steps without generating) moved between the
// newest scrape taken no later than the probe's start and the newest
// scrape. It clears when a probe gets a token or either counter moves; an
// idle engine with flat counters keeps the verdict until then.
type stallDetector struct {
	obs     []observation // distinct scrapes, oldest first, bounded
	seq     uint64        // observations recorded so far
	stalled bool
}

// An observation is numbered rather than compared by time with the probe:
// the scheduler's clock and the scraper's timestamps need not agree.
type observation struct {
	seq      uint64
	t        time.Time
	gen      float64
	steps    float64 // engine steps; 0 where vLLM does not send them
	inEngine float64 // running + waiting
}

// progressed says whether the engine did anything between o and p.
func (o observation) progressed(p observation) bool { return o.gen != p.gen || o.steps != p.steps }

const maxObservations = 64

// observe records a scrape (ignored if nil, not up, already seen, or without
// the needed series) and clears a stall once the counter moves.
func (d *stallDetector) observe(v *snapshot.VLLM, model string) {
	m := pickModel(v, model)
	if m == nil || !m.GenerationTokens.OK || !m.Running.OK {
		return
	}
	if n := len(d.obs); n > 0 && !v.Time.After(d.obs[n-1].t) {
		return
	}
	d.seq++
	o := observation{seq: d.seq, t: v.Time, gen: m.GenerationTokens.V, steps: m.EngineSteps.V, inEngine: m.Running.V}
	if m.Waiting.OK {
		o.inEngine += m.Waiting.V
	}
	if n := len(d.obs); n > 0 && d.stalled && o.progressed(d.obs[n-1]) {
		d.stalled = false
	}
	d.obs = append(d.obs, o)
	if len(d.obs) > maxObservations {
		d.obs = d.obs[len(d.obs)-maxObservations:]
	}
}

// probeDone evaluates one finished probe; startSeq is d.seq when it started.
func (d *stallDetector) probeDone(startSeq uint64, noProgress bool) {
	if !noProgress {
		d.stalled = false
		return
	}
	n := len(d.obs)
	if n < 2 {
		return // not enough evidence either way
	}
	// base: the newest scrape seen when the probe started, but never the
	// latest itself (we need two scrapes to see a counter not moving).
	base := 0
	for i := n - 2; i >= 0; i-- {
		if d.obs[i].seq <= startSeq {
			base = i
			break
		}
	}
	busy := false
	for _, o := range d.obs[base+1:] {
		busy = busy || o.inEngine > 0
	}
	if busy && !d.obs[n-1].progressed(d.obs[base]) {
		d.stalled = true
	}
}

// pickModel returns the served model the probes target: the named one, else
// the only one; nil if the snapshot cannot say.
func pickModel(v *snapshot.VLLM, model string) *snapshot.Model {
	if v == nil || !v.Up || len(v.Models) == 0 {
		return nil
	}
	if m, ok := v.Models[model]; ok {
		return m
	}
	if len(v.Models) == 1 {
		for _, m := range v.Models {
			return m
		}
	}
	return nil
}
