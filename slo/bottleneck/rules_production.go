package bottleneck

import (
	"math"
	"slices"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// Rules of production vLLM's features (issue 24): admission control,
// disaggregated prefill/decode, LoRA adapters and KV block residency.

// admissionLimited: requests are refused at admission (vLLM 0.32+,
// --max-num-queued-requests / --max-num-queued-tokens) while the queue
// holds requests: the waiting queue is at its cap. Refusals are the share
// of the requests that arrived over the window (refused + finished).
func (r rules) admissionLimited() Finding {
	m, w := r.in.Model, r.in.Window
	if m == nil || w == nil || !w.RejectedPerSecond.OK || !m.Waiting.OK {
		return Finding{Class: AdmissionLimited}
	}
	rejected := w.RejectedPerSecond.V
	arrived := rejected
	if w.RequestsPerSecond.OK {
		arrived += w.RequestsPerSecond.V
	}
	if !(arrived > 0) {
		return Finding{Class: AdmissionLimited}
	}
	ev := []Evidence{
		gate("admission_rejected_ratio", rejected/arrived, ">=", r.th.AdmissionRejectedRatioMin, "ratio"),
		// vLLM's cap counts every queued request, deferred ones included.
		gate("requests_waiting", m.Waiting.V, ">=", r.th.QueueingMinWaiting, "requests"),
		note("admission_rejections_per_second", rejected, "1/s"),
	}
	if ttft := r.slo(snapshot.TTFT, 0.99); ttft.OK {
		ev = append(ev, note("ttft_p99_seconds", ttft.V, "seconds"))
	}
	return all(AdmissionLimited, ev...)
}

// minTransfers is how many KV transfers (and first tokens) a window needs
// before their mean times are compared.
const minTransfers = 3

// kvTransferBound: a pod that reads its prompts' KV from a prefill pod
// (the NIXL connector's decode side: only it observes
// vllm:nixl_xfer_time_seconds) with TTFT over its target, a large share of
// which is the transfer. A decode pod's TTFT counts from the request's
// arrival there, so the wait for its KV is inside it. Means, not
// quantiles: the transfer histogram's buckets (5 ms to 5 s, a factor of 2
// to 5 apart) are too coarse for a p99 ratio, and every request is one
// transfer and one first token.
func (r rules) kvTransferBound() Finding {
	w := r.in.Window
	if w == nil || r.in.Model.Prefill() {
		return Finding{Class: KVTransferBound}
	}
	x, okX := w.Deltas[snapshot.KVTransferTime]
	t, okT := w.Deltas[snapshot.TTFT]
	ttft := r.slo(snapshot.TTFT, r.th.SLOQuantile)
	if !okX || !okT || x.Count < minTransfers || t.Count < minTransfers || !(t.Sum > 0) || !ttft.OK {
		return Finding{Class: KVTransferBound}
	}
	meanX, meanT := x.Sum/x.Count, t.Sum/t.Count
	ev := []Evidence{
		gate("ttft_seconds", ttft.V, ">", r.th.TTFTTargetSeconds, "seconds"),
		gate("kv_transfer_share_of_ttft_ratio", math.Min(meanX/meanT, 1), ">=", r.th.KVTransferShareMin, "ratio"),
		note("kv_transfer_mean_seconds", meanX, "seconds"),
		note("ttft_mean_seconds", meanT, "seconds"),
	}
	if q := quantile(w, snapshot.KVTransferTime, 0.99); q.OK {
		ev = append(ev, note("kv_transfer_p99_seconds", q.V, "seconds"))
	}
	if w.KVTransferBytesPerSecond.OK {
		ev = append(ev, note("kv_transfer_bytes_per_second", w.KVTransferBytesPerSecond.V, "bytes/s"))
	}
	if d := r.in.Model.WaitingDeferred(); d.OK {
		ev = append(ev, note("requests_waiting_deferred", d.V, "requests"))
	}
	for _, c := range []struct {
		signal string
		v      snapshot.Value
	}{{"kv_transfer_failures_per_second", w.KVTransferFailuresPerSecond}, {"kv_transfer_expired_per_second", w.KVTransferExpiredPerSecond}} {
		if c.v.OK {
			ev = append(ev, note(c.signal, c.v.V, "1/s"))
		}
	}
	return all(KVTransferBound, ev...)
}

// loraQueueing: requests wait on the LoRA budget. Every one of max_lora
// slots holds an adapter with running requests, adapters with waiting
// requests are not among them (so they cannot join the batch), requests
// wait (deferred ones included: ≈0.20+ counts a request skipped for its
// adapter as deferred) and p99 TTFT misses its target. A full KV cache
// would have won first (kv_cache_exhausted): the wait is for a slot, not
// for KV capacity.
func (r rules) loraQueueing() Finding {
	m := r.in.Model
	if m == nil || !m.LoRA.Known || !m.LoRA.Max.OK || !m.Waiting.OK {
		return Finding{Class: LoRAQueueing}
	}
	ttft := r.slo(snapshot.TTFT, 0.99)
	if !ttft.OK {
		return Finding{Class: LoRAQueueing}
	}
	blocked := 0.0
	for a := range m.LoRA.Waiting {
		if _, running := m.LoRA.Running[a]; !running {
			blocked++
		}
	}
	ev := []Evidence{
		gate("lora_slots_used", float64(len(m.LoRA.Running)), ">=", m.LoRA.Max.V, "adapters"),
		gate("lora_adapters_waiting_for_slot", blocked, ">=", 1, "adapters"),
		gate("requests_waiting", m.Waiting.V, ">=", r.th.QueueingMinWaiting, "requests"),
		gate("ttft_p99_seconds", ttft.V, ">", r.th.TTFTTargetSeconds, "seconds"),
	}
	if kv := r.kv(); kv.OK {
		ev = append(ev, note("kv_cache_usage_ratio", kv.V, "ratio"))
	}
	return all(LoRAQueueing, ev...)
}

// minResidencySamples is how many sampled block evictions and reuses a
// window needs before their quantiles are compared: a p90 of ten samples
// is their largest one.
const minResidencySamples = 30

// residency is the KV block residency over the window (--kv-cache-metrics):
// the median idle time of evicted blocks and the p90 gap between reuses of
// a block; ok is false without enough samples of both.
func residency(w *snapshot.Derived) (idle50, gap90 snapshot.Value, ok bool) {
	if w == nil {
		return idle50, gap90, false
	}
	idle, okI := w.Deltas[snapshot.KVBlockIdleBeforeEvict]
	gap, okG := w.Deltas[snapshot.KVBlockReuseGap]
	if !okI || !okG || idle.Count < minResidencySamples || gap.Count < minResidencySamples {
		return idle50, gap90, false
	}
	idle50, gap90 = quantile(w, snapshot.KVBlockIdleBeforeEvict, 0.5), quantile(w, snapshot.KVBlockReuseGap, 0.9)
	return idle50, gap90, idle50.OK && gap90.OK
}

// residencyNotes is the residency as context for the prefix-cache verdict.
func residencyNotes(w *snapshot.Derived) []Evidence {
	idle50, gap90, ok := residency(w)
	if !ok {
		return nil
	}
	ev := []Evidence{note("kv_block_idle_before_evict_p50_seconds", idle50.V, "seconds"), note("kv_block_reuse_gap_p90_seconds", gap90.V, "seconds")}
	if l := quantile(w, snapshot.KVBlockLifetime, 0.5); l.OK {
		ev = append(ev, note("kv_block_lifetime_p50_seconds", l.V, "seconds"))
	}
	return ev
}

// prefixThrash: the prefix cache thrashes. vLLM records a reuse gap only
// for a block that survived until its reuse, so under LRU the reuse gaps
// are cut off at the eviction horizon (the idle time of evicted blocks). A
// healthy cache reuses its blocks far sooner than it evicts dead ones; a
// thrashing one sees reuses right up to that horizon (p90 reuse gap a
// large fraction of the median idle-before-evict): blocks that would have
// been reused a little later are evicted, and the hit ratio stays low. It
// needs no better past (the collapse rule does): a cache too small for its
// working set from the start thrashes too.
func (r rules) prefixThrash() Finding {
	w := r.in.Window
	// The hit ratio over the window the residency was sampled in, not
	// since the last tick, which one long unique prompt swings.
	idle50, gap90, ok := residency(w)
	hit := HitRatio(w)
	if !ok || !hit.OK || !(idle50.V > 0) {
		return Finding{Class: PrefixCacheMiss}
	}
	ev := []Evidence{
		gate("kv_block_reuse_gap_p90_over_idle_before_evict_ratio", gap90.V/idle50.V, ">=", r.th.PrefixThrashReuseGapOverEvict, "ratio"),
		gate("prefix_cache_hit_ratio", hit.V, "<", r.th.PrefixHitRatioBaselineMin, "ratio"),
	}
	return all(PrefixCacheMiss, append(ev, residencyNotes(w)...)...)
}

// decodeClasses are the classes that judge decode (TPOT, the decode batch):
// a prefill pod of a disaggregated pair has none of them.
var decodeClasses = []Class{Throttled, CommunicationBound, MemoryBoundDecode, DecodeOverhead, BatchTooSmall}

// prefillPodSkips reports whether a class does not apply to the model's
// pod (a decode-side class on a prefill pod).
func prefillPodSkips(m *snapshot.Model, c Class) bool {
	return m.Prefill() && slices.Contains(decodeClasses, c)
}
