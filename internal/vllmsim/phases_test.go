package vllmsim

import (
	"math"
	"testing"
	"time"
)

// TestPhaseHistogramsFollowVLLMDefinitions derives every per-request timing
// from what a client sees (submit time, output times) and checks the V1
// histograms against vLLM's definitions: TTFT and e2e from arrival, queue =
// scheduled - queued, prefill = first token - scheduled, decode = last - first
// token, inference = last token - scheduled, request TPOT = decode/(gen-1),
// one ITL observation per engine output after the first.
func TestPhaseHistogramsFollowVLLMDefinitions(t *testing.T) {
	s := newVirtual(t, Config{MaxNumSeqs: 1})
	t0 := s.Now()
	prompt := func(base, n int) []int {
		p := make([]int, n)
		for i := range p {
			p[i] = firstWordID + base + i
		}
		return p
	}
	a, err := s.Submit(Request{Prompt: prompt(0, 300), MaxTokens: 5, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Submit(Request{Prompt: prompt(1000, 40), MaxTokens: 4, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Advance(10 * time.Second)
	ao, bo := a.Poll(), b.Poll()
	if len(ao) != 5 || len(bo) != 4 {
		t.Fatalf("outputs %d and %d, want 5 and 4", len(ao), len(bo))
	}
	sec := func(d time.Duration) float64 { return d.Seconds() }
	aFirst, aLast := ao[0].Time, ao[len(ao)-1].Time
	bFirst, bLast := bo[0].Time, bo[len(bo)-1].Time
	// max_num_seqs=1: A is scheduled on arrival, B when A's last step ends.
	aSched, bSched := t0, aLast
	want := map[string]float64{
		"vllm:time_to_first_token_seconds":           sec(aFirst.Sub(t0)) + sec(bFirst.Sub(t0)),
		"vllm:e2e_request_latency_seconds":           sec(aLast.Sub(t0)) + sec(bLast.Sub(t0)),
		"vllm:request_queue_time_seconds":            sec(aSched.Sub(t0)) + sec(bSched.Sub(t0)),
		"vllm:request_prefill_time_seconds":          sec(aFirst.Sub(aSched)) + sec(bFirst.Sub(bSched)),
		"vllm:request_decode_time_seconds":           sec(aLast.Sub(aFirst)) + sec(bLast.Sub(bFirst)),
		"vllm:request_inference_time_seconds":        sec(aLast.Sub(aSched)) + sec(bLast.Sub(bSched)),
		"vllm:request_time_per_output_token_seconds": sec(aLast.Sub(aFirst))/4 + sec(bLast.Sub(bFirst))/3,
		"vllm:inter_token_latency_seconds":           sec(aLast.Sub(aFirst)) + sec(bLast.Sub(bFirst)),
	}
	counts := map[string]float64{"vllm:inter_token_latency_seconds": 4 + 3}
	fams := parseMetrics(t, s.Metrics())
	for name, w := range want {
		if got := histSum(t, fams, name); math.Abs(got-w) > 1e-9 {
			t.Errorf("%s sum = %v, want %v", name, got, w)
		}
		c := 2.0
		if n, ok := counts[name]; ok {
			c = n
		}
		if got := sumValue(t, fams, name, nil); got != c {
			t.Errorf("%s count = %v, want %v", name, got, c)
		}
	}
	if bSched.Sub(t0) <= 0 || bFirst.Sub(bSched) <= 0 {
		t.Fatal("B neither queued nor prefilled: the test exercises nothing")
	}
}
