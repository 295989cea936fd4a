package bottleneck

import (
	"math/rand"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// driveRegime runs 20 healthy ticks, then 12 of r, and returns the
// published states of the regime's ticks.
func driveRegime(t *testing.T, r regime, seed int64) []ModelState {
	t.Helper()
	lead := healthy()
	lead.role = r.role
	return driveAfter(t, lead, r, seed)
}

// driveAfter is driveRegime with its own lead-in.
func driveAfter(t *testing.T, lead, r regime, seed int64) []ModelState {
	t.Helper()
	th := config.DefaultBottleneck()
	f := &fakeSources{}
	c := newTestClassifier(f, testSpec)
	rng := rand.New(rand.NewSource(seed))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out []ModelState
	for i := 0; i < 32; i++ {
		reg := lead
		if i >= 20 {
			reg = r
		}
		now = now.Add(15 * time.Second)
		reg.apply(f, now, rng, th)
		c.Tick(now)
		st, _ := c.State(model)
		if i < 20 && st.Class != NearOptimal {
			t.Fatalf("healthy lead-in tick %d: %s", i, st.Class)
		}
		if i >= 20 {
			out = append(out, st)
		}
	}
	return out
}

func hasSignal(ev []Evidence, signal string) bool {
	for _, e := range ev {
		if e.Signal == signal {
			return true
		}
	}
	return false
}

// A prefix cache too small for its working set thrashes from the start:
// no better hit ratio to collapse from, but KV blocks are evicted after
// idling 8 s (median) while reuses still come up to 6 s apart (p90), and
// the hit ratio stays at 20%. The prefix-cache verdict says so, with the
// residency as its evidence; a cache whose reuses come within 3 s while
// dead blocks idle a minute before eviction does not.
func TestPrefixThrashFeedsThePrefixCacheVerdict(t *testing.T) {
	thrash := healthy()
	thrash.hit, thrash.hitBase, thrash.idle50, thrash.gap90 = 0.2, 0.2, 8, 6
	// After a healthy cache (hit ratio 60%): the collapse, with the
	// residency behind it as evidence.
	for i, st := range driveRegime(t, thrash, 21) {
		if i+1 < config.DefaultBottleneck().HoldTicks {
			continue
		}
		if st.Class != PrefixCacheMiss || !hasSignal(rawEvidence(st), "kv_block_idle_before_evict_p50_seconds") || !hasSignal(rawEvidence(st), "kv_block_reuse_gap_p90_seconds") {
			t.Fatalf("tick %d: %s, evidence %v; want prefix_cache_miss citing the block residency", i+1, st.Class, rawEvidence(st))
		}
	}
	// A cache that never served well (no better past to collapse from):
	// the residency alone names it.
	small := healthy()
	small.hit, small.hitBase = 0.2, 0.2
	for i, st := range driveAfter(t, small, thrash, 21) {
		if i+1 < config.DefaultBottleneck().HoldTicks {
			continue
		}
		if st.Class != PrefixCacheMiss || !hasSignal(rawEvidence(st), "kv_block_reuse_gap_p90_over_idle_before_evict_ratio") {
			t.Fatalf("tick %d: %s, evidence %v; want prefix_cache_miss on the block residency", i+1, st.Class, rawEvidence(st))
		}
	}
	kept := thrash
	kept.idle50, kept.gap90 = 60, 3 // blocks are reused long before the dead ones are evicted
	for i, st := range driveAfter(t, small, kept, 21) {
		if st.Class != NearOptimal {
			t.Fatalf("tick %d: blocks outlive their reuse gap, yet %s (%v)", i+1, st.Class, rawEvidence(st))
		}
	}
}

// A prefill pod of a disaggregated pair has no decode to judge: the
// regimes of decode_overhead, memory_bound_decode and batch_too_small on
// it are not those classes (the decode-side rules say why: prefill_pod).
func TestPrefillPodGetsNoDecodeClass(t *testing.T) {
	for _, c := range []Class{DecodeOverhead, MemoryBoundDecode, BatchTooSmall, Throttled} {
		r := healthy()
		regimes[c](&r)
		r.role = snapshot.RolePrefill
		for i, st := range driveRegime(t, r, legacySeed[c]) {
			if st.Class == c || st.Raw == c {
				t.Fatalf("%s regime on a prefill pod, tick %d: class %s raw %s", c, i+1, st.Class, st.Raw)
			}
		}
	}
	// The same regimes on a decode pod keep their class.
	r := healthy()
	regimes[DecodeOverhead](&r)
	r.role = snapshot.RoleDecode
	if sts := driveRegime(t, r, legacySeed[DecodeOverhead]); sts[len(sts)-1].Class != DecodeOverhead {
		t.Fatalf("decode pod: %s, want decode_overhead", sts[len(sts)-1].Class)
	}
}

// A decode pod's TTFT includes the KV transfer; when the transfer is most
// of it the verdict is kv_transfer_bound and its evidence cites the
// transfer time. The same TTFT on a pod whose transfers are quick is not.
func TestKVTransferBoundCitesTheTransfer(t *testing.T) {
	r := healthy()
	regimes[KVTransferBound](&r)
	sts := driveRegime(t, r, 5)
	last := sts[len(sts)-1]
	if last.Class != KVTransferBound || !hasSignal(rawEvidence(last), "kv_transfer_mean_seconds") || !hasSignal(rawEvidence(last), "kv_transfer_share_of_ttft_ratio") {
		t.Fatalf("%s, evidence %v", last.Class, rawEvidence(last))
	}
	r.xfer = 0.05
	for i, st := range driveRegime(t, r, 5) {
		if st.Class == KVTransferBound {
			t.Fatalf("tick %d: 50 ms transfers, yet kv_transfer_bound (%v)", i+1, rawEvidence(st))
		}
	}
}
