package vllmsim

import "sort"

// histogram is a cumulative-bucket histogram with the bounds of one vLLM version.
type histogram struct {
	bounds []float64 // upper bounds without +Inf
	counts []float64 // non-cumulative, len(bounds)+1
	sum    float64
	count  float64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]float64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v) // first bound >= v (le semantics)
	h.counts[i]++
	h.sum += v
	h.count++
}

// cumulative returns the cumulative count per bound, +Inf last.
func (h *histogram) cumulative() []float64 {
	out := make([]float64, len(h.counts))
	var c float64
	for i, n := range h.counts {
		c += n
		out[i] = c
	}
	return out
}

// Histogram keys (internal names of the per-engine histograms).
const (
	hTTFT            = "ttft"
	hITL             = "itl"
	hReqTPOT         = "request_tpot"
	hE2E             = "e2e"
	hQueue           = "queue"
	hInference       = "inference"
	hPrefill         = "prefill"
	hDecode          = "decode"
	hReqPrompt       = "request_prompt_tokens"
	hReqGen          = "request_generation_tokens"
	hParamsN         = "params_n"
	hMaxGen          = "max_num_generation_tokens"
	hParamsMaxTokens = "params_max_tokens"
	hPrefillKV       = "prefill_kv_computed"
	hIteration       = "iteration_tokens"
)

// engineStats are the counters and histograms of one engine, the sources of
// every vllm:* value rendered on /metrics.
type engineStats struct {
	preemptions      float64
	promptTokens     float64
	promptCompute    float64
	promptCacheHit   float64
	generationTokens float64
	prefixQueries    float64
	prefixHits       float64
	success          map[string]float64
	hist             map[string]*histogram
	iterationTokens  *histogram
	steps            float64
	stepSeconds      float64
}

func newEngineStats(b *bucketSet) *engineStats {
	st := &engineStats{success: map[string]float64{}, hist: map[string]*histogram{}}
	for key, bounds := range map[string][]float64{
		hTTFT: b.ttft, hITL: b.itl, hReqTPOT: b.itl, hE2E: b.latency, hQueue: b.latency,
		hInference: b.latency, hPrefill: b.latency, hDecode: b.latency,
		hReqPrompt: b.tokens, hReqGen: b.tokens, hParamsN: b.n, hMaxGen: b.tokens,
		hParamsMaxTokens: b.tokens, hPrefillKV: b.tokens,
	} {
		st.hist[key] = newHistogram(bounds)
	}
	st.iterationTokens = newHistogram(b.iteration)
	st.hist[hIteration] = st.iterationTokens
	return st
}

// bucketSet holds the bucket bounds of one vLLM version.
type bucketSet struct {
	ttft, itl, latency, tokens, n, iteration []float64
}

// build125 is vLLM's build_1_2_5_buckets(max): 1,2,5,10,20,50,... <= max.
func build125(max int) []float64 {
	var out []float64
	for m := 1; ; m *= 10 {
		for _, k := range []int{1, 2, 5} {
			if k*m > max {
				return out
			}
			out = append(out, float64(k*m))
		}
	}
}
