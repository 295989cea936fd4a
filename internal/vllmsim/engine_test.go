package vllmsim

import (
	"context"
	"testing"
	"time"
)

func collect(t *testing.T, s *Sim, hs []*Handle) []string {
	t.Helper()
	out := make([]string, len(hs))
	for i, h := range hs {
		for _, o := range h.Poll() {
			out[i] += o.Text
		}
	}
	return out
}

func TestPreemptionByRecomputeKeepsOutputs(t *testing.T) {
	submit := func(s *Sim, n int) []*Handle {
		var hs []*Handle
		for i := 0; i < n; i++ {
			seed := int64(100 + i)
			prompt := make([]int, 32)
			for j := range prompt {
				prompt[j] = firstWordID + 1000*i + j
			}
			h, err := s.Submit(Request{Prompt: prompt, MaxTokens: 90, IgnoreEOS: true, Seed: &seed})
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h)
		}
		return hs
	}
	// 3 requests of 122 tokens need 24 blocks; the cache has 10 (+ the null block).
	tight := newVirtual(t, Config{NumGPUBlocks: 11, BlockSize: 16, MaxModelLen: 160})
	hs := submit(tight, 3)
	runFor(tight, 30*time.Second)
	roomy := newVirtual(t, Config{})
	ref := submit(roomy, 3)
	runFor(roomy, 30*time.Second)

	recs := tight.Records()
	if len(recs) != 3 {
		t.Fatalf("%d finished, want 3", len(recs))
	}
	preempted := 0
	for _, r := range recs {
		if r.OutputTokens != 90 || r.FinishReason != FinishLength {
			t.Fatalf("request %s: %d tokens (%s)", r.ID, r.OutputTokens, r.FinishReason)
		}
		preempted += r.Preemptions
	}
	e := tight.Engines()[0]
	if preempted == 0 || e.Preemptions != preempted || e.FreeBlocks != 10 {
		t.Fatalf("preemptions: records %d, engine %d; free blocks %d", preempted, e.Preemptions, e.FreeBlocks)
	}
	// vLLM preempts from the tail of the running list: the oldest request
	// is never the victim, the newest one is.
	if recs[0].ID != hs[0].ID() || recs[0].Preemptions != 0 {
		t.Fatalf("the oldest request was preempted: %+v", recs[0])
	}
	for _, r := range recs {
		if r.ID == hs[2].ID() && r.Preemptions == 0 {
			t.Fatalf("the newest request was never preempted: %+v", recs)
		}
	}
	got, want := collect(t, tight, hs), collect(t, roomy, ref)
	for i := range got {
		if got[i] != want[i] || got[i] == "" {
			t.Fatalf("request %d output changed by preemption:\n%q\n%q", i, got[i], want[i])
		}
	}
	// The preempted requests took longer than the same requests without pressure.
	slow := false
	for i, r := range recs {
		if r.E2E > roomy.Records()[i].E2E {
			slow = true
		}
	}
	if !slow {
		t.Error("preemption cost no time")
	}
}

func TestChunkedPrefillInterleavesDecode(t *testing.T) {
	s := newVirtual(t, Config{MaxNumBatchedTokens: 512})
	dec, _ := s.Submit(Request{Prompt: []int{300, 301, 302}, MaxTokens: 200, IgnoreEOS: true})
	s.Advance(50 * time.Millisecond)
	long := make([]int, 4000)
	for i := range long {
		long[i] = firstWordID + i
	}
	if _, err := s.Submit(Request{Prompt: long, MaxTokens: 1}); err != nil {
		t.Fatal(err)
	}
	before := len(dec.Poll())
	// While the 4000-token prompt is prefilled in 512-token chunks (8 steps),
	// the decoding request keeps getting one token per step.
	s.Advance(120 * time.Millisecond)
	during := len(dec.Poll())
	if before == 0 || during < 4 {
		t.Fatalf("decode stalled during chunked prefill: %d then %d tokens", before, during)
	}
	runFor(s, 5*time.Second)
	var longRec RequestRecord
	for _, r := range s.Records() {
		if r.PromptTokens == 4000 {
			longRec = r
		}
	}
	if longRec.Prefill < s.PrefillTime(4000, 0) {
		t.Fatalf("long prefill %v shorter than its idle-engine time %v", longRec.Prefill, s.PrefillTime(4000, 0))
	}
	rest := dec.Poll()
	if n := before + during + len(rest); n != 200 || rest[len(rest)-1].FinishReason != FinishLength {
		t.Fatalf("decode request delivered %d outputs", n)
	}
	if _, ok := dec.Next(context.Background()); ok {
		t.Fatal("Next returned an output after the final one")
	}
}

// --long-prefill-token-threshold: a long prompt in the running list no
// longer takes the whole step budget, so a short prompt that arrives during
// its prefill is admitted in the next step instead of waiting for the long
// prefill to end; without the cap it waits.
func TestLongPrefillThresholdLetsShortPromptsIn(t *testing.T) {
	shortTTFT := func(threshold int) (short, long time.Duration) {
		t.Helper()
		s := newVirtual(t, Config{MaxNumBatchedTokens: 2048, LongPrefillTokenThreshold: threshold, MaxModelLen: 16384, NumGPUBlocks: 2048})
		prompt := make([]int, 12000)
		for i := range prompt {
			prompt[i] = firstWordID + i%1000
		}
		if _, err := s.Submit(Request{Prompt: prompt, MaxTokens: 1}); err != nil {
			t.Fatal(err)
		}
		s.Advance(30 * time.Millisecond) // the long prefill has started
		if _, err := s.Submit(Request{Prompt: []int{300, 301, 302}, MaxTokens: 1}); err != nil {
			t.Fatal(err)
		}
		runFor(s, 10*time.Second)
		for _, r := range s.Records() {
			if r.PromptTokens == 3 {
				short = r.TTFT
			} else {
				long = r.Prefill
			}
		}
		return short, long
	}
	uncappedShort, uncappedLong := shortTTFT(0)
	cappedShort, cappedLong := shortTTFT(512)
	if cappedShort*4 > uncappedShort {
		t.Errorf("short prompt TTFT %v with the threshold, %v without: the cap should let it in early", cappedShort, uncappedShort)
	}
	if cappedLong <= uncappedLong {
		t.Errorf("long prefill %v with the threshold, %v without: smaller chunks take more steps", cappedLong, uncappedLong)
	}
	s := newVirtual(t, Config{MaxNumBatchedTokens: 2048, LongPrefillTokenThreshold: 512})
	if got, want := s.PrefillTime(2048, 0), s.StepTime(1, 512, 512)+s.StepTime(1, 1024, 512)+s.StepTime(1, 1536, 512)+s.StepTime(1, 2048, 512); got != want {
		t.Errorf("PrefillTime with the threshold %v, want four 512-token steps %v", got, want)
	}
}

func TestMaxNumSeqsCapsRunning(t *testing.T) {
	s := newVirtual(t, Config{MaxNumSeqs: 4})
	for i := 0; i < 10; i++ {
		if _, err := s.Submit(Request{Prompt: []int{400 + i}, MaxTokens: 50, IgnoreEOS: true}); err != nil {
			t.Fatal(err)
		}
	}
	s.Advance(100 * time.Millisecond)
	e := s.Engines()[0]
	if e.Running != 4 || e.Waiting != 6 {
		t.Fatalf("running %d waiting %d, want 4 and 6", e.Running, e.Waiting)
	}
	runFor(s, 10*time.Second)
	if n := len(s.Records()); n != 10 {
		t.Fatalf("%d finished", n)
	}
}

func TestV1NullBlockLeftOutOfKVUsage(t *testing.T) {
	p := newBlockPool(11, 16, true, true)
	if b := p.alloc(5); len(b) != 5 || p.usage() != 0.5 {
		t.Fatalf("5 of 10 usable blocks: usage %v, want 0.5 (null block excluded)", p.usage())
	}
	if p.alloc(6) != nil || p.alloc(5) == nil || p.usage() != 1 {
		t.Fatalf("the null block must never be allocated; usage %v", p.usage())
	}
	v0 := newBlockPool(11, 16, true, false)
	if v0.alloc(11) == nil || v0.usage() != 1 {
		t.Fatal("V0 has no null block: all 11 blocks are usable")
	}
	if _, err := New(Config{NumGPUBlocks: 10, BlockSize: 16, MaxModelLen: 160}); err == nil {
		t.Error("V1: 9 usable blocks cannot hold max_model_len 160, want a config error")
	}
	if _, err := New(Config{NumGPUBlocks: 10, BlockSize: 16, MaxModelLen: 160, MetricsVersion: MetricsV0}); err != nil {
		t.Errorf("V0: 10 blocks hold 160 tokens: %v", err)
	}
}

// vLLM caches a request's full blocks when they are allocated (allocate_slots
// -> cache_blocks), so a second request with the same prompt admitted in the
// same step already hits them.
func TestPrefixBlocksCachedAtScheduling(t *testing.T) {
	s := newVirtual(t, Config{})
	prompt := make([]int, 1000)
	for i := range prompt {
		prompt[i] = firstWordID + 7*i
	}
	for i := 0; i < 2; i++ {
		if _, err := s.Submit(Request{Prompt: prompt, MaxTokens: 2, IgnoreEOS: true}); err != nil {
			t.Fatal(err)
		}
	}
	s.Advance(5 * time.Second)
	recs := s.Records()
	if len(recs) != 2 || recs[0].CachedTokens != 0 || recs[1].CachedTokens != 992 {
		t.Fatalf("cached tokens %+v, want 0 then 992 (62 full blocks, capped below the prompt length)", recs)
	}
	if recs[1].Scheduled != recs[0].Scheduled {
		t.Fatal("both requests should be admitted in the same step")
	}
}

// V1 counts a request's whole prompt when its first token is produced; V0
// counts each prefill chunk as it is computed.
func TestPromptTokensCountedPerVersion(t *testing.T) {
	for _, c := range []struct {
		version string
		mid     float64
	}{{MetricsV1, 0}, {MetricsV0, 64}} {
		s := newVirtual(t, Config{MetricsVersion: c.version, MaxNumBatchedTokens: 64, DisablePrefixCaching: true})
		prompt := make([]int, 200)
		for i := range prompt {
			prompt[i] = firstWordID + i
		}
		if _, err := s.Submit(Request{Prompt: prompt, MaxTokens: 3, IgnoreEOS: true}); err != nil {
			t.Fatal(err)
		}
		first := s.StepTime(1, 64, 64)
		s.Advance(first + first/4) // one 64-token chunk done, the second running
		if got := sumValue(t, parseMetrics(t, s.Metrics()), "vllm:prompt_tokens_total", nil); got != c.mid {
			t.Errorf("%s: prompt_tokens_total mid-prefill = %v, want %v", c.version, got, c.mid)
		}
		s.Advance(time.Second)
		fams := parseMetrics(t, s.Metrics())
		if got := sumValue(t, fams, "vllm:prompt_tokens_total", nil); got != 200 {
			t.Errorf("%s: prompt_tokens_total = %v, want 200", c.version, got)
		}
		if got := histSum(t, fams, "vllm:iteration_tokens_total"); got != 203 {
			t.Errorf("%s: iteration tokens sum %v, want 200 prompt + 3 generated", c.version, got)
		}
	}
}

// A prefix-cache hit never covers the whole prompt (the last token must be
// computed for logits), and freed cached blocks are evicted least recently
// freed first.
func TestPrefixHitCapAndLRUEviction(t *testing.T) {
	s := newVirtual(t, Config{})
	prompt := make([]int, 64) // exactly 4 blocks
	for i := range prompt {
		prompt[i] = firstWordID + 3*i
	}
	for i := 0; i < 2; i++ {
		if _, err := s.Submit(Request{Prompt: prompt, MaxTokens: 1}); err != nil {
			t.Fatal(err)
		}
		s.Advance(time.Second)
	}
	if recs := s.Records(); len(recs) != 2 || recs[1].CachedTokens != 48 {
		t.Fatalf("repeat of a 64-token prompt hit %+v, want 48 (3 of 4 blocks)", recs)
	}

	p := newBlockPool(9, 4, true, true) // 8 usable blocks of 4 tokens
	seq := func(base int) []int {
		out := make([]int, 8)
		for i := range out {
			out[i] = base + i
		}
		return out
	}
	hashes := func(toks []int) []uint64 { return chainHashes(nil, toks, 4) }
	a, b := p.alloc(2), p.alloc(2)
	for i, h := range hashes(seq(100)) {
		p.register(a[i], h)
	}
	for i, h := range hashes(seq(200)) {
		p.register(b[i], h)
	}
	p.release(a) // freed first: evicted first
	p.release(b)
	if p.peek(hashes(seq(100)), 2) != 2 || p.peek(hashes(seq(200)), 2) != 2 {
		t.Fatal("freed blocks must stay cached until reused")
	}
	p.alloc(5) // 4 never-used blocks, then the least recently freed cached one
	if p.peek(hashes(seq(200)), 2) != 2 {
		t.Error("the most recently freed prefix was evicted before the older one")
	}
	if p.peek(hashes(seq(100)), 2) == 2 {
		t.Error("the least recently freed prefix survived an allocation that needed its block")
	}
}
