package vllmsim

import (
	"sort"
	"strconv"
)

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
	if h == nil { // a histogram only another server's layout keeps
		return
	}
	i := sort.SearchFloat64s(h.bounds, v) // first bound >= v (le semantics)
	h.counts[i]++
	h.sum += v
	h.count++
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
	hNumPreempt      = "num_preemptions"
	hPriority        = "priority"
)

// finishedHists are the histograms of finished requests that carry the
// priority label under --scheduling-policy priority (vLLM's test
// test_priority_all_finished_metrics_have_label): not ITL, iteration tokens,
// n or max_num_generation_tokens.
var finishedHists = []string{hTTFT, hE2E, hQueue, hInference, hPrefill, hDecode, hReqTPOT, hReqPrompt,
	hReqGen, hPrefillKV, hParamsMaxTokens, hNumPreempt}

// priorityLabels are vLLM's bucketed priority label values (bucket_priority),
// most urgent first.
var priorityLabels = []string{"<-1", "-1", "0", "1", ">1"}

// priorityLabel is vLLM's bucket_priority: -1, 0 and 1 exact, the rest
// folded into "<-1" and ">1" so the label has at most five values.
func priorityLabel(p int) string {
	switch {
	case p < -1:
		return "<-1"
	case p > 1:
		return ">1"
	}
	return strconv.Itoa(p)
}

// prioStats are the finished-request statistics of one priority label.
type prioStats struct {
	success map[string]float64
	hist    map[string]*histogram
}

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
	steps            float64
	stepSeconds      float64
	// speculative decoding counters; specPerPos[i] counts accepted drafts at position i
	specDrafts, specDraftTokens, specAccepted float64
	specPerPos                                []float64
	// --enable-mfu-metrics estimates
	flops, readBytes, writeBytes float64
	// admission rejections by reason; NIXL connector counters (late2026.go)
	admissionRejections                                       map[string]float64
	nixlFailedTransfers, nixlFailedNotifications, nixlExpired float64
	// prio holds per-priority-label finished stats (priority policy only)
	prio   map[string]*prioStats
	bounds map[string][]float64
}

func (st *engineStats) prioStats(label string) *prioStats {
	if p := st.prio[label]; p != nil {
		return p
	}
	p := &prioStats{success: map[string]float64{}, hist: map[string]*histogram{}}
	for _, k := range finishedHists {
		p.hist[k] = newHistogram(st.bounds[k])
	}
	st.prio[label] = p
	return p
}

// growSpec makes room for k draft positions.
func (st *engineStats) growSpec(k int) {
	for len(st.specPerPos) < k {
		st.specPerPos = append(st.specPerPos, 0)
	}
}

// observeSpec records one verified draft of d tokens of which a were accepted.
func (st *engineStats) observeSpec(d, a int) {
	st.growSpec(d)
	st.specDrafts++
	st.specDraftTokens += float64(d)
	st.specAccepted += float64(a)
	for i := 0; i < a; i++ {
		st.specPerPos[i]++
	}
}

// newEngineStats makes an engine's statistics, a histogram for each
// bounds' source.
func newEngineStats(bounds map[string][]float64) *engineStats {
	st := &engineStats{success: map[string]float64{}, hist: map[string]*histogram{}, prio: map[string]*prioStats{},
		admissionRejections: map[string]float64{}, bounds: bounds}
	for key, b := range bounds {
		st.hist[key] = newHistogram(b)
	}
	return st
}
