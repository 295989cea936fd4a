package vllm

import (
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// pastStore owns the memory of the history's slimmed snapshots and reuses
// it: a snapshot that leaves the history (prune) gives its storage to the
// next one slimmed. It holds, per snapshot, one block of models and one of
// histogram counts, copied from the scraped snapshot (not shared with it:
// the scraped snapshot's readers keep theirs while the copy is reused).
//
// Why: at 16 models x 8 engines the history is 3 MB once it spans the
// longest window (5 minutes 10 s by default). Grown a snapshot per scrape,
// the live heap rose for five minutes and the heap goal (twice the live
// heap) and RssAnon with it, so a memory reading taken in the first minutes
// did not tell the steady figure. The store takes, on the first successful
// scrape it slims, the room of the whole full-resolution span at once,
// sized from that scrape; from then on a scrape allocates nothing for the
// history. Snapshots thinned out beyond that span, and ones with more
// models or counts than an entry holds, are taken as they come and reused
// the same way.
type pastStore struct {
	free  []*pastEntry
	owned map[*snapshot.VLLM]*pastEntry
	// span is how many slimmed snapshots the full-resolution history
	// holds: the room taken at once, and the most entries kept free.
	span int
}

// pastEntry is the storage of one slimmed snapshot.
type pastEntry struct {
	snap   snapshot.VLLM
	index  map[string]*snapshot.Model // snap.Models, cleared and refilled
	models []snapshot.Model           // what index points to
	counts []float64                  // every histogram's Counts
}

// slim returns snap as the history keeps it once it is no longer the
// newest: without what only the newest snapshot is read for (derive reads
// counters and histograms only; the per-engine gauges, label sets and
// by-label values dropped here are rendered from the newest snapshot alone;
// TestSlimmedHistoryDerivesTheSame keeps this list honest), in storage the
// store owns. A failed or empty snapshot is kept as it is: it has nothing
// to slim; one the store already owns is returned as it is.
func (p *pastStore) slim(snap *snapshot.VLLM) *snapshot.VLLM {
	if !snap.Up || len(snap.Models) == 0 {
		return snap
	}
	if _, ok := p.owned[snap]; ok {
		return snap // already slimmed: a copy would leave this entry owned by nothing in the history
	}
	counts := 0
	for _, m := range snap.Models {
		for _, h := range m.Histograms.All() {
			counts += len(h.Counts)
		}
	}
	if p.owned == nil {
		p.owned = map[*snapshot.VLLM]*pastEntry{}
		// The first snapshot slimmed sizes the whole span.
		for range p.span {
			p.free = append(p.free, newPastEntry(len(snap.Models), counts))
		}
	}
	var e *pastEntry
	if n := len(p.free); n > 0 {
		e = p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
	} else {
		e = newPastEntry(len(snap.Models), counts)
	}
	// Room that no longer fits, or is more than twice what is needed (a
	// server that shrank), is taken anew at the size needed.
	if c := cap(e.models); c < len(snap.Models) || c > 2*len(snap.Models) {
		e.models = make([]snapshot.Model, 0, len(snap.Models))
	}
	if c := cap(e.counts); c < counts || c > 2*counts {
		e.counts = make([]float64, 0, counts)
	}
	e.fill(snap)
	p.owned[&e.snap] = e
	return &e.snap
}

func newPastEntry(models, counts int) *pastEntry {
	return &pastEntry{
		index:  make(map[string]*snapshot.Model, models),
		models: make([]snapshot.Model, 0, models),
		counts: make([]float64, 0, counts),
	}
}

// fill copies snap into e, slimmed; e has room for every model and count.
func (e *pastEntry) fill(snap *snapshot.VLLM) {
	e.reset()
	e.snap = *snap
	e.snap.Models = e.index
	for name, m := range snap.Models {
		e.models = append(e.models, *m)
		mc := &e.models[len(e.models)-1]
		mc.PerEngine, mc.CacheConfig, mc.ByPriority = nil, nil, nil
		mc.WaitingByReason, mc.Sleep.Resources = nil, nil
		mc.LoRA.Running, mc.LoRA.Waiting = nil, nil
		mc.KVOffloadLoadBytes, mc.KVOffloadStoreBytes = nil, nil
		mc.KVOffloadLoadSeconds, mc.KVOffloadStoreSeconds = nil, nil
		mc.MooncakeOps, mc.MooncakeOpErrors, mc.MooncakeKeys, mc.MooncakeBytes, mc.MooncakeFailedKeys = nil, nil, nil, nil, nil
		for hn, h := range m.Histograms.All() {
			from := len(e.counts)
			e.counts = append(e.counts, h.Counts...)
			h.Counts = e.counts[from:len(e.counts):len(e.counts)]
			mc.Histograms.Set(hn, h)
		}
		e.index[name] = mc
	}
}

// reset lets go of what the last occupant referenced (the scraped
// snapshot's maps the slimmed models share).
func (e *pastEntry) reset() {
	clear(e.index)
	clear(e.models[:cap(e.models)])
	e.models, e.counts = e.models[:0], e.counts[:0]
	e.snap = snapshot.VLLM{}
}

// release takes back the storage of a snapshot that left the history. A
// snapshot the store does not own (a failed one, the newest) is left to
// the collector. At most span entries are kept free: more is room a
// history that shrank (a reload that shortened a reader's window) no
// longer needs.
func (p *pastStore) release(snap *snapshot.VLLM) {
	e, ok := p.owned[snap]
	if !ok {
		return
	}
	delete(p.owned, snap)
	if len(p.free) < p.span {
		e.reset()
		p.free = append(p.free, e)
	}
}
