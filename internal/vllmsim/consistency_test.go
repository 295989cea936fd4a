package vllmsim

import (
	"math"
	"testing"
	"time"
)

// drain advances until every engine is idle (load generator off).
func drain(t *testing.T, s *Sim) {
	t.Helper()
	s.SetLoadGen(false)
	for i := 0; i < 3600; i++ {
		idle := true
		for _, e := range s.Engines() {
			if e.Running+e.Waiting > 0 {
				idle = false
			}
		}
		if idle {
			return
		}
		s.Advance(time.Second)
	}
	t.Fatal("engines did not drain within an hour of virtual time")
}

type abortedReq struct {
	tokens, prompt, preemptions, cached int
	firstToken, scheduled               bool
	ttft                                float64
}

func TestMetricsSelfConsistentAfterMixedTraffic(t *testing.T) {
	for _, version := range []string{MetricsV1, MetricsV1_0_10, MetricsV0} {
		t.Run(version, func(t *testing.T) {
			cfg := Config{Seed: 11, LoadGen: true, NumGPUBlocks: 256, MaxModelLen: 2048, MetricsVersion: version}
			if version != MetricsV0 {
				cfg.DataParallelSize = 2
			}
			s := newVirtual(t, cfg)
			// A small KV cache under long requests: preemptions happen.
			if err := s.ApplyScenario(Scenario{Name: "pressure", StepFactor: 1, Load: LoadProfile{Rate: 1.5,
				Prompt: Dist{Mean: 600, CV: 0.3, Min: 100, Max: 1200}, Output: Dist{Mean: 400, CV: 0.3, Min: 50, Max: 800},
				MaxTokens: 600, SharedPrefixFraction: 0.5, SharedPrefixTokens: 256, PrefixGroups: 2}}); err != nil {
				t.Fatal(err)
			}
			var aborted []abortedReq
			var direct []*Handle
			for round := 0; round < 12; round++ {
				s.Advance(2 * time.Second)
				for i := 0; i < 3; i++ {
					seed := int64(round*10 + i)
					h, err := s.Submit(Request{Prompt: Tokenize("shared system prompt for everyone. question number " + string(rune('a'+round))),
						MaxTokens: 40, Seed: &seed})
					if err != nil {
						t.Fatal(err)
					}
					direct = append(direct, h)
				}
				if round%3 == 2 { // abort a request mid-flight (client disconnect)
					s.Advance(time.Duration(round) * 15 * time.Millisecond)
					h := direct[len(direct)-1]
					if h.r.state == stateFinished {
						t.Fatal("request finished before the abort: test setup wrong")
					}
					h.Abort()
					r := h.r
					a := abortedReq{tokens: r.outputs(), prompt: r.promptLen, preemptions: r.preemptions,
						cached: r.cachedTokens, firstToken: r.outputs() > 0, scheduled: r.everSched}
					if a.firstToken {
						a.ttft = r.firstTok.Sub(r.arrival).Seconds()
					}
					aborted = append(aborted, a)
				}
			}
			if version == MetricsV1 {
				if err := s.SetScenario("prefix_warm"); err != nil {
					t.Fatal(err)
				}
				s.Advance(10 * time.Second)
			}
			drain(t, s)
			fams := parseMetrics(t, s.Metrics())
			recs := s.Records()

			var gen, prompt, preempt, cached, itl, length, queried int
			var ttftSum, e2eSum, queueSum float64
			for _, r := range recs {
				gen += r.OutputTokens
				prompt += r.PromptTokens
				preempt += r.Preemptions
				cached += r.CachedTokens
				queried += r.PromptTokens
				itl += r.OutputTokens - 1
				ttftSum += r.TTFT.Seconds()
				e2eSum += r.E2E.Seconds()
				queueSum += r.Queue.Seconds()
				if r.FinishReason == FinishLength {
					length++
				}
			}
			ttftCount := len(recs)
			for _, a := range aborted {
				gen += a.tokens
				preempt += a.preemptions
				if a.scheduled {
					cached += a.cached
					queried += a.prompt
				}
				if a.firstToken {
					prompt += a.prompt
					ttftCount++
					ttftSum += a.ttft
					itl += a.tokens - 1
				}
			}
			eq := func(what string, got, want float64) {
				t.Helper()
				if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
					t.Errorf("%s = %v, want %v", what, got, want)
				}
			}
			finished := float64(len(recs))
			eq("Σ request_success_total", sumValue(t, fams, "vllm:request_success_total", nil), finished)
			eq("request_success_total{length}", sumValue(t, fams, "vllm:request_success_total", map[string]string{"finished_reason": "length"}), float64(length))
			for _, h := range []string{"vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds", "vllm:request_inference_time_seconds",
				"vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds", "vllm:request_prompt_tokens", "vllm:request_generation_tokens"} {
				eq(h+" count", sumValue(t, fams, h, nil), finished)
			}
			eq("generation_tokens_total", sumValue(t, fams, "vllm:generation_tokens_total", nil), float64(gen))
			promptTotal := sumValue(t, fams, "vllm:prompt_tokens_total", nil)
			if version != MetricsV0 {
				// V1: every prompt token (cache hits included) once, at the first token.
				eq("prompt_tokens_total", promptTotal, float64(prompt))
			} else if promptTotal <= float64(prompt) {
				// V0 counts prefill chunks as computed; recomputation after a
				// preemption prefills prompt + outputs again.
				t.Errorf("V0 prompt_tokens_total %v should exceed the prompts %d after %d preemptions", promptTotal, prompt, preempt)
			}
			eq("num_preemptions_total", sumValue(t, fams, "vllm:num_preemptions_total", nil), float64(preempt))
			eq("time_to_first_token count", sumValue(t, fams, "vllm:time_to_first_token_seconds", nil), float64(ttftCount))
			eq("time_to_first_token sum", histSum(t, fams, "vllm:time_to_first_token_seconds"), ttftSum)
			eq("e2e sum", histSum(t, fams, "vllm:e2e_request_latency_seconds"), e2eSum)
			eq("queue sum", histSum(t, fams, "vllm:request_queue_time_seconds"), queueSum)
			itlName := "vllm:inter_token_latency_seconds"
			if version == MetricsV0 {
				itlName = "vllm:time_per_output_token_seconds"
			}
			eq("ITL count", sumValue(t, fams, itlName, nil), float64(itl))
			eq("request_generation_tokens sum", histSum(t, fams, "vllm:request_generation_tokens"), float64(gen-sumAborted(aborted)))
			// V1 observes iteration tokens per output batch: full prompt at the
			// first token plus generated tokens, so the sums match the counters.
			// Both engines' iteration histograms sum the tokens their counters count.
			eq("iteration_tokens_total sum", histSum(t, fams, "vllm:iteration_tokens_total"), promptTotal+float64(gen))
			usage := "vllm:kv_cache_usage_perc"
			if version == MetricsV0 {
				usage = "vllm:gpu_cache_usage_perc"
			}
			eq("KV usage after drain", sumValue(t, fams, usage, nil), 0)
			eq("running after drain", sumValue(t, fams, "vllm:num_requests_running", nil), 0)
			if version != MetricsV0 {
				eq("prefix_cache_hits_total", sumValue(t, fams, "vllm:prefix_cache_hits_total", nil), float64(cached))
				// Queries in tokens, once per request at its first admission
				// (lookups of preempted requests go to vLLM's preempted_* stats).
				eq("prefix_cache_queries_total", sumValue(t, fams, "vllm:prefix_cache_queries_total", nil), float64(queried))
			}
			if version == MetricsV1 {
				eq("prompt_tokens_cached_total", sumValue(t, fams, "vllm:prompt_tokens_cached_total", nil),
					sumValue(t, fams, "vllm:prompt_tokens_by_source_total", map[string]string{"source": "local_cache_hit"}))
				eq("prompt_tokens_by_source sum", sumValue(t, fams, "vllm:prompt_tokens_by_source_total", nil), float64(prompt))
				if sumValue(t, fams, "vllm:prefix_cache_hits_total", nil) == 0 {
					t.Error("prefix_warm traffic produced no prefix cache hits")
				}
			}
			if preempt == 0 {
				t.Error("kv_exhausted traffic produced no preemptions: the test exercises nothing")
			}
			withTok := 0
			for _, a := range aborted {
				if a.firstToken {
					withTok++
				}
			}
			if len(aborted) == 0 || withTok == 0 || finished == 0 {
				t.Fatalf("traffic did not cover aborts after a first token (%d aborted, %d with tokens)", len(aborted), withTok)
			}
		})
	}
}

func sumAborted(a []abortedReq) int {
	n := 0
	for _, x := range a {
		n += x.tokens
	}
	return n
}
