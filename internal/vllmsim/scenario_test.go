package vllmsim

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"testing"
	"time"
)

type recStats struct {
	n                                  int
	ttftMean, ttftP99, tpotMean, prefM float64
	promptMean                         float64
}

func statsOf(recs []RequestRecord) recStats {
	var st recStats
	var ttfts []float64
	for _, r := range recs {
		ttfts = append(ttfts, r.TTFT.Seconds())
		st.ttftMean += r.TTFT.Seconds()
		st.tpotMean += r.TPOT.Seconds()
		st.prefM += r.Prefill.Seconds()
		st.promptMean += float64(r.PromptTokens)
	}
	st.n = len(recs)
	if st.n == 0 {
		return st
	}
	n := float64(st.n)
	st.ttftMean /= n
	st.tpotMean /= n
	st.prefM /= n
	st.promptMean /= n
	sort.Float64s(ttfts)
	st.ttftP99 = ttfts[(len(ttfts)*99)/100]
	return st
}

func runScenario(t *testing.T, name string, d time.Duration) (*Sim, recStats) {
	t.Helper()
	s := newVirtual(t, Config{Seed: 21, LoadGen: true, Scenario: name})
	runFor(s, d)
	return s, statsOf(s.Records())
}

func TestScenarioHealthy(t *testing.T) {
	s, st := runScenario(t, "healthy", 60*time.Second)
	e := s.Engines()[0]
	if e.Preemptions != 0 || e.Waiting > 2 || e.KVUsage > 0.5 || st.n < 80 || st.ttftP99 > 0.5 {
		t.Fatalf("healthy not healthy: %+v %+v", e, st)
	}
}

func TestScenarioKVExhaustedPreemptionStorm(t *testing.T) {
	s := newVirtual(t, Config{Seed: 21, LoadGen: true, Scenario: "kv_exhausted"})
	var maxUsage float64
	var preempt []float64
	for i := 0; i < 9; i++ {
		runFor(s, 10*time.Second)
		fams := parseMetrics(t, s.Metrics())
		if u := sumValue(t, fams, "vllm:kv_cache_usage_perc", nil); u > maxUsage {
			maxUsage = u
		}
		preempt = append(preempt, sumValue(t, fams, "vllm:num_preemptions_total", nil))
	}
	if maxUsage < 0.95 {
		t.Errorf("max KV usage %.3f, want >= 0.95", maxUsage)
	}
	rising := 0
	for i := 1; i < len(preempt); i++ {
		if preempt[i] > preempt[i-1] {
			rising++
		}
	}
	if rising < 5 || preempt[len(preempt)-1] < 20 {
		t.Errorf("preemptions not increasing steadily: %v", preempt)
	}
	if e := s.Engines()[0]; e.Running >= s.Config().MaxNumSeqs {
		t.Errorf("KV exhaustion should limit running below max_num_seqs, running %d", e.Running)
	}
}

func TestScenarioQueueing(t *testing.T) {
	s, st := runScenario(t, "queueing", 40*time.Second)
	e := s.Engines()[0]
	prefill := s.PrefillTime(150, 0).Seconds()
	if e.Waiting == 0 || e.Running != s.Config().MaxNumSeqs || e.Preemptions != 0 {
		t.Errorf("want a saturated batch and a queue without preemptions: %+v", e)
	}
	if st.ttftP99 < 20*prefill {
		t.Errorf("TTFT p99 %.3fs not far above the prefill time %.4fs", st.ttftP99, prefill)
	}
	fams := parseMetrics(t, s.Metrics())
	if w := sumValue(t, fams, "vllm:num_requests_waiting", nil); w != float64(e.Waiting) || w == 0 {
		t.Errorf("num_requests_waiting %v vs engine %d", w, e.Waiting)
	}
}

func TestScenarioPrefillAndDecodeHeavy(t *testing.T) {
	_, healthy := runScenario(t, "healthy", 40*time.Second)
	_, pre := runScenario(t, "prefill_heavy", 40*time.Second)
	_, dec := runScenario(t, "decode_heavy", 40*time.Second)
	if pre.promptMean < 4000 || pre.prefM < 0.15 || pre.ttftMean < 5*healthy.ttftMean {
		t.Errorf("prefill_heavy: %+v vs healthy %+v", pre, healthy)
	}
	if dec.n == 0 || dec.tpotMean < 1.3*healthy.tpotMean {
		t.Errorf("decode_heavy TPOT %.4f not above healthy %.4f", dec.tpotMean, healthy.tpotMean)
	}
}

func TestScenarioPrefixWarmBeatsCold(t *testing.T) {
	sw, warm := runScenario(t, "prefix_warm", 30*time.Second)
	sc, cold := runScenario(t, "prefix_cold", 30*time.Second)
	if warm.promptMean != cold.promptMean {
		t.Fatalf("prompt lengths differ: %.0f vs %.0f", warm.promptMean, cold.promptMean)
	}
	if warm.ttftMean > 0.5*cold.ttftMean {
		t.Errorf("warm TTFT %.4f not clearly below cold %.4f", warm.ttftMean, cold.ttftMean)
	}
	ew, ec := sw.Engines()[0], sc.Engines()[0]
	if float64(ew.PrefixHits)/float64(ew.PrefixQueries) < 0.9 || ec.PrefixHits != 0 {
		t.Errorf("hit ratios: warm %d/%d cold %d/%d", ew.PrefixHits, ew.PrefixQueries, ec.PrefixHits, ec.PrefixQueries)
	}
}

func TestScenarioThrottledSlowsSteps(t *testing.T) {
	sh, _ := runScenario(t, "healthy", 30*time.Second)
	st, _ := runScenario(t, "throttled", 30*time.Second)
	h, th := sh.Engines()[0].MeanStepTime, st.Engines()[0].MeanStepTime
	if th < 2*h {
		t.Errorf("throttled step %v not >= 2x healthy %v", th, h)
	}
	// Busy time never exceeds elapsed time (steps never overlap on an engine).
	if hb, tb := sh.Engines()[0].BusyTime, st.Engines()[0].BusyTime; hb <= 0 || tb > 30*time.Second || hb > 30*time.Second {
		t.Errorf("busy time healthy %v throttled %v over 30s", hb, tb)
	}
}

func TestScenarioStalled(t *testing.T) {
	s := newVirtual(t, Config{Seed: 2})
	h0, _ := s.Submit(Request{Prompt: []int{1, 2, 3}, MaxTokens: 100, IgnoreEOS: true})
	s.Advance(100 * time.Millisecond)
	before := s.Engines()[0].GenerationTokens
	if before == 0 {
		t.Fatal("request should be decoding before the stall")
	}
	if err := s.SetScenario("stalled"); err != nil {
		t.Fatal(err)
	}
	h0.Poll()
	h1, _ := s.Submit(Request{Prompt: []int{4, 5, 6}, MaxTokens: 5})
	runFor(s, 30*time.Second)
	e := s.Engines()[0]
	if e.GenerationTokens != before || len(h0.Poll())+len(h1.Poll()) != 0 {
		t.Errorf("stalled engine produced tokens: %d -> %d", before, e.GenerationTokens)
	}
	if e.Waiting != 1 || e.Running != 1 {
		t.Errorf("want 1 running (hung) and 1 waiting, got %+v", e)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("/health = %d during a stall, want 200", rec.Code)
	}
	// Recovery: the hung step completes and both requests finish.
	_ = s.SetScenario("healthy")
	runFor(s, 5*time.Second)
	if len(s.Records()) != 2 {
		t.Errorf("after recovery %d requests finished, want 2", len(s.Records()))
	}
}

func TestSeedReproducibility(t *testing.T) {
	run := func(seed int64) ([]byte, []RequestRecord) {
		s := newVirtual(t, Config{Seed: seed, LoadGen: true, DataParallelSize: 2})
		runFor(s, 20*time.Second)
		_ = s.SetScenario("kv_exhausted")
		runFor(s, 10*time.Second)
		return s.Metrics(), s.Records()
	}
	m1, r1 := run(99)
	m2, r2 := run(99)
	if string(m1) != string(m2) || !reflect.DeepEqual(r1, r2) {
		t.Fatal("same seed, different run")
	}
	m3, _ := run(100)
	if string(m1) == string(m3) {
		t.Fatal("different seeds gave identical runs")
	}
}

func TestGroundTruthPrefillModel(t *testing.T) {
	s := newVirtual(t, Config{Seed: 1, MaxNumBatchedTokens: 2048})
	prompt := make([]int, 5000)
	for i := range prompt {
		prompt[i] = firstWordID + i
	}
	if _, err := s.Submit(Request{Prompt: prompt, MaxTokens: 1}); err != nil {
		t.Fatal(err)
	}
	runFor(s, 5*time.Second)
	r := s.Records()[0]
	if want := s.PrefillTime(5000, 0); r.TTFT != want || r.Queue != 0 {
		t.Fatalf("idle-engine TTFT %v, model says %v (queue %v)", r.TTFT, want, r.Queue)
	}
	// Same prompt again: every full block but the last token's is cached.
	cached := s.PrefixCachedTokens("", 0, prompt)
	if cached != 4992 {
		t.Fatalf("cached tokens %d, want 4992", cached)
	}
	if _, err := s.Submit(Request{Prompt: prompt, MaxTokens: 1}); err != nil {
		t.Fatal(err)
	}
	runFor(s, 5*time.Second)
	r2 := s.Records()[1]
	if want := s.PrefillTime(5000, cached); r2.TTFT != want || r2.CachedTokens != cached || r2.TTFT >= r.TTFT/5 {
		t.Fatalf("warm TTFT %v, model says %v; cold was %v", r2.TTFT, want, r.TTFT)
	}
}

// A scraper can run against a virtual-clock simulator over real HTTP: scrape,
// advance, scrape, deterministically.
func TestVirtualClockScrapedOverHTTP(t *testing.T) {
	s := startReal(t, Config{VirtualClock: true, Seed: 4, LoadGen: true, Scenario: "queueing"})
	var waiting, finished []float64
	for i := 0; i < 4; i++ {
		s.Advance(15 * time.Second)
		code, body, err := get(s.URL()+"/metrics", 5*time.Second)
		if err != nil || code != 200 {
			t.Fatalf("scrape: %d %v", code, err)
		}
		fams := parseMetrics(t, []byte(body))
		waiting = append(waiting, sumValue(t, fams, "vllm:num_requests_waiting", nil))
		finished = append(finished, sumValue(t, fams, "vllm:e2e_request_latency_seconds", nil))
	}
	for i := 1; i < len(waiting); i++ {
		if waiting[i] <= waiting[i-1] || finished[i] <= finished[i-1] {
			t.Fatalf("queue should grow while requests keep finishing: waiting %v finished %v", waiting, finished)
		}
	}
}

// abort_fraction aborts that share of requests in the engine after their
// first token; vLLM counts them as finished with finished_reason="abort".
func TestScenarioAbortFraction(t *testing.T) {
	s := newVirtual(t, Config{Seed: 3, LoadGen: true, Scenario: "healthy"})
	sc, _ := ScenarioPreset("healthy")
	sc.AbortFraction = 0.6
	if err := s.ApplyScenario(sc); err != nil {
		t.Fatal(err)
	}
	runFor(s, 120*time.Second)
	fams := parseMetrics(t, s.Metrics())
	abort := sumValue(t, fams, "vllm:request_success_total", map[string]string{"finished_reason": "abort"})
	all := sumValue(t, fams, "vllm:request_success_total", nil)
	if all < 100 || abort/all < 0.45 || abort/all > 0.75 {
		t.Fatalf("aborted %v of %v finished requests, want about 60%%", abort, all)
	}
	sc.AbortFraction = 1.5
	if err := s.ApplyScenario(sc); err == nil {
		t.Fatal("abort_fraction 1.5 accepted")
	}
}
