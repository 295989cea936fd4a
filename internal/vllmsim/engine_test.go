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
	// 3 requests of 122 tokens need 24 blocks; the cache has 10.
	tight := newVirtual(t, Config{NumGPUBlocks: 10, BlockSize: 16, MaxModelLen: 160})
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
