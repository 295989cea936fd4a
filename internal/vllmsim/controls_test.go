package vllmsim

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// scrape parses the simulator's /metrics now.
func scrape(t *testing.T, s *Sim) map[string]*dto.MetricFamily {
	t.Helper()
	return parseMetrics(t, s.Metrics())
}

func val(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	return sumValue(t, fams, name, want)
}

func TestSleepStopsGenerationAndWakeResumesIt(t *testing.T) {
	s := latestSim(t, Config{})
	// One long request guarantees KV in use when the engine goes to sleep.
	long, err := s.Submit(Request{Prompt: Tokenize(strings.Repeat("a long story ", 200)), MaxTokens: 3000, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	runFor(s, 20*time.Second)
	before := scrape(t, s)
	if val(t, before, "vllm:kv_cache_usage_perc") == 0 || val(t, before, "vllm:engine_fully_awake") != 1 {
		t.Fatal("healthy engine should hold KV and be fully awake")
	}
	if err := s.Sleep(1); err != nil {
		t.Fatal(err)
	}
	asleep := scrape(t, s)
	runFor(s, 20*time.Second)
	later := scrape(t, s)
	gen := func(f map[string]*dto.MetricFamily) float64 { return val(t, f, "vllm:generation_tokens_total") }
	if gen(later) != gen(asleep) {
		t.Errorf("a sleeping engine generated %v tokens", gen(later)-gen(asleep))
	}
	if w := val(t, later, "vllm:num_requests_waiting_by_reason", "reason", "capacity"); w < 20 {
		t.Errorf("arrivals while asleep should queue (capacity), got %v waiting", w)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"vllm:kv_cache_usage_perc", nil, 0},
		{"vllm:num_requests_running", nil, 0},
		{"vllm:engine_fully_awake", nil, 0},
		{"vllm:engine_sleep_state", []string{"sleep_state", "awake"}, 0},
		{"vllm:engine_sleep_state", []string{"sleep_state", "weights_offloaded"}, 1},
		{"vllm:engine_sleep_resource_state", []string{"resource", "scheduler", "state", "paused"}, 1},
		{"vllm:engine_sleep_resource_state", []string{"resource", "weights", "state", "offloaded"}, 1},
		{"vllm:engine_sleep_resource_state", []string{"resource", "kv_cache", "state", "released"}, 1},
	} {
		if got := val(t, later, c.name, c.labels...); got != c.want {
			t.Errorf("asleep: %s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// /health stays 200 (vLLM only checks the engine process); /is_sleeping says so.
	if rec := serveSync(t, s, "GET", "/health", ""); rec.Code != 200 {
		t.Errorf("/health while asleep: %d", rec.Code)
	}
	if rec := serveSync(t, s, "GET", "/is_sleeping", ""); !strings.Contains(rec.Body.String(), `"is_sleeping":true`) {
		t.Errorf("/is_sleeping: %s", rec.Body)
	}
	// Partial wake: weights only keeps the scheduler paused.
	if err := s.WakeUp(ResWeights); err != nil {
		t.Fatal(err)
	}
	runFor(s, 5*time.Second)
	partial := scrape(t, s)
	if gen(partial) != gen(later) || val(t, partial, "vllm:engine_sleep_resource_state", "resource", "weights", "state", "resident") != 1 ||
		val(t, partial, "vllm:engine_sleep_state", "sleep_state", "weights_offloaded") != 0 {
		t.Error("after waking weights only: nothing generated, weights resident, legacy weights_offloaded cleared")
	}
	if err := s.WakeUp(ResKVCache); err != nil {
		t.Fatal(err)
	}
	runFor(s, 10*time.Second)
	awake := scrape(t, s)
	if val(t, awake, "vllm:engine_fully_awake") != 1 || gen(awake) <= gen(partial) {
		t.Errorf("after full wake: fully_awake %v, generated %v", val(t, awake, "vllm:engine_fully_awake"), gen(awake)-gen(partial))
	}
	if val(t, awake, "vllm:num_requests_waiting") > 5 {
		t.Errorf("the backlog should drain after wake-up, %v still waiting", val(t, awake, "vllm:num_requests_waiting"))
	}
	if rec := serveSync(t, s, "GET", "/is_sleeping", ""); !strings.Contains(rec.Body.String(), `"is_sleeping":false`) {
		t.Errorf("/is_sleeping after wake: %s", rec.Body)
	}
	// The long request survived the sleep (its KV was recomputed) and was not counted as preempted.
	runFor(s, 60*time.Second)
	var outs int
	for _, o := range long.Poll() {
		outs += len(o.TokenIDs)
	}
	if outs != 3000 {
		t.Errorf("the request in flight across the sleep produced %d tokens, want 3000", outs)
	}
	if p := val(t, scrape(t, s), "vllm:num_preemptions_total"); p != 0 {
		t.Errorf("sleep counted %v preemptions", p)
	}
}

func TestSleepLevels(t *testing.T) {
	s := latestSim(t, Config{})
	runFor(s, 10*time.Second)
	if err := s.Sleep(0); err != nil {
		t.Fatal(err)
	}
	f := scrape(t, s)
	// Level 0 pauses scheduling only: KV stays, every legacy flag is 0.
	if val(t, f, "vllm:engine_sleep_resource_state", "resource", "kv_cache", "state", "resident") != 1 ||
		val(t, f, "vllm:engine_sleep_state") != 0 || val(t, f, "vllm:engine_fully_awake") != 0 {
		t.Error("level 0: KV resident, legacy flags all 0, not fully awake")
	}
	if err := s.Sleep(2); err != nil { // deeper from a full pause is allowed
		t.Fatal(err)
	}
	f = scrape(t, s)
	if val(t, f, "vllm:engine_sleep_state", "sleep_state", "discard_all") != 1 ||
		val(t, f, "vllm:engine_sleep_resource_state", "resource", "weights", "state", "discarded") != 1 {
		t.Error("level 2: discard_all and weights discarded")
	}
	if err := s.WakeUp(ResKVCache); err != nil {
		t.Fatal(err)
	}
	if err := s.Sleep(1); err == nil {
		t.Error("sleeping while partially awake should be rejected, as vLLM does")
	}
	if err := s.Sleep(3); err == nil {
		t.Error("level 3 accepted")
	}
	if err := s.WakeUp("bogus"); err == nil {
		t.Error("unknown wake tag accepted")
	}
}

// TestDeferredLivelock reproduces vllm #53130 from the livelock fixture's
// recipe and checks its signature, then that clearing the constraint recovers.
func TestDeferredLivelock(t *testing.T) {
	s := latestFixtures["livelock"](t)
	a := scrape(t, s)
	runFor(s, 20*time.Second)
	b := scrape(t, s)
	es := s.Engines()[0] // before any HTTP call moves the clock
	deferred := val(t, b, "vllm:num_requests_waiting_by_reason", "reason", "deferred")
	capacity := val(t, b, "vllm:num_requests_waiting_by_reason", "reason", "capacity")
	if deferred < 10*capacity || deferred < 100 {
		t.Errorf("deferred %v should pile up far above capacity %v", deferred, capacity)
	}
	if es.Deferred != int(deferred) || es.Waiting != int(capacity) {
		t.Errorf("Engines(): deferred %d waiting %d, metrics %v %v", es.Deferred, es.Waiting, deferred, capacity)
	}
	if total := val(t, b, "vllm:num_requests_waiting"); total != deferred+capacity {
		t.Errorf("waiting %v != sum over reasons %v", total, deferred+capacity)
	}
	if kv := val(t, b, "vllm:kv_cache_usage_perc"); kv > 0.2 {
		t.Errorf("KV usage %v should be low", kv)
	}
	if g := val(t, b, "vllm:generation_tokens_total") - val(t, a, "vllm:generation_tokens_total"); g > 20 {
		t.Errorf("generated %v tokens in 20s of livelock, want about 0", g)
	}
	if rec := serveSync(t, s, "GET", "/health", ""); rec.Code != 200 {
		t.Errorf("/health during the livelock: %d, want 200 (the bug's point)", rec.Code)
	}
	s.ClearDefer()
	runFor(s, 30*time.Second)
	c := scrape(t, s)
	if val(t, c, "vllm:num_requests_waiting_by_reason", "reason", "deferred") != 0 {
		t.Error("ClearDefer left deferred requests")
	}
	if g := val(t, c, "vllm:generation_tokens_total") - val(t, b, "vllm:generation_tokens_total"); g < 1000 {
		t.Errorf("after clearing the constraint generation should recover, got %v tokens in 30s", g)
	}
}

// TestDeferWithHold: deferred requests join the capacity queue when their
// hold expires and finish; without the livelock they never block admission.
func TestDeferWithHold(t *testing.T) {
	s := latestSim(t, Config{})
	if err := s.SetDefer(DeferSpec{Fraction: 0.5, Hold: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	runFor(s, 60*time.Second)
	recs := s.Records()
	var slow, fast int
	for _, r := range recs {
		if r.Queue >= 3*time.Second {
			slow++
		} else if r.Queue < time.Second {
			fast++
		}
	}
	if slow == 0 || fast == 0 || math.Abs(float64(slow-fast)) > float64(len(recs))/4 {
		t.Errorf("half the requests should wait >= 3s (deferred), half not: slow %d fast %d of %d", slow, fast, len(recs))
	}
	for _, bad := range []DeferSpec{{Fraction: 1.5}, {Fraction: -0.1}, {Fraction: 0.5, Hold: -time.Second}} {
		if err := s.SetDefer(bad); err == nil {
			t.Errorf("SetDefer(%+v) accepted", bad)
		}
	}
}

// specRun decodes 16 long requests (ignore_eos) for 30 s: a saturated
// decode batch, so throughput is the engine's, not the arrival rate's.
func specRun(t *testing.T, sd SpecDecode) (*Sim, map[string]*dto.MetricFamily) {
	t.Helper()
	s := newVirtual(t, Config{MetricsVersion: MetricsLatest, SpecDecode: sd, Seed: 5})
	for i := 0; i < 16; i++ {
		if _, err := s.Submit(Request{Prompt: Tokenize(strings.Repeat("decode ", 50+i)), MaxTokens: 6000, IgnoreEOS: true}); err != nil {
			t.Fatal(err)
		}
	}
	runFor(s, 30*time.Second)
	return s, scrape(t, s)
}

func TestSpecDecodeEmitsSeveralTokensPerStep(t *testing.T) {
	_, off := specRun(t, SpecDecode{})
	s, on := specRun(t, SpecDecode{NumSpeculativeTokens: 3, AcceptanceRate: 0.7})
	if _, ok := off["vllm:spec_decode_num_drafts_total"]; ok {
		t.Error("spec_decode families without speculative decoding")
	}
	drafts := val(t, on, "vllm:spec_decode_num_drafts_total")
	draftTok := val(t, on, "vllm:spec_decode_num_draft_tokens_total")
	accepted := val(t, on, "vllm:spec_decode_num_accepted_tokens_total")
	if drafts == 0 || draftTok > 3*drafts || draftTok < 2.9*drafts {
		t.Fatalf("drafts %v draft tokens %v: want 3 per draft", drafts, draftTok)
	}
	// Per-position acceptance: conditional rate 0.7, so 0.7, 0.49, 0.343 of drafts.
	for i, want := range []float64{0.7, 0.49, 0.343} {
		got := val(t, on, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "position", []string{"0", "1", "2"}[i]) / drafts
		if math.Abs(got-want) > 0.03 {
			t.Errorf("position %d acceptance %.3f, want %.3f", i, got, want)
		}
	}
	if sum := val(t, on, "vllm:spec_decode_num_accepted_tokens_per_pos_total"); sum != accepted {
		t.Errorf("per-position sum %v != accepted %v", sum, accepted)
	}
	// One ITL observation per step: tokens per ITL observation ≈ mean acceptance length.
	gen := val(t, on, "vllm:generation_tokens_total")
	itlN := val(t, on, "vllm:inter_token_latency_seconds")
	ttftN := val(t, on, "vllm:time_to_first_token_seconds")
	perStep := (gen - ttftN) / itlN
	meanLen := 1 + accepted/drafts
	if math.Abs(perStep-meanLen) > 0.05*meanLen {
		t.Errorf("tokens per decode output %.3f, want the mean acceptance length %.3f", perStep, meanLen)
	}
	// Throughput and per-token latency really change.
	genOff := val(t, off, "vllm:generation_tokens_total")
	t.Logf("16 long decodes, 30 s: %.0f tokens with spec decode (k=3, rate 0.7, mean acceptance length %.3f, %.3f tokens per ITL observation) vs %.0f without",
		gen, meanLen, perStep, genOff)
	if gen < 1.5*genOff {
		t.Errorf("spec decode should raise decode throughput: %v vs %v tokens", gen, genOff)
	}
	// Per-token latency: ITL per step grows a little (verification, drafter),
	// time per token falls by about the acceptance length.
	itl := func(f map[string]*dto.MetricFamily) float64 {
		return histSum(t, f, "vllm:inter_token_latency_seconds") / val(t, f, "vllm:inter_token_latency_seconds")
	}
	t.Logf("mean ITL per step %.2f ms with spec decode (%.2f ms per token) vs %.2f ms", 1e3*itl(on), 1e3*itl(on)/perStep, 1e3*itl(off))
	if perTok, offTok := itl(on)/perStep, itl(off); perTok > 0.7*offTok || itl(on) <= offTok {
		t.Errorf("ITL %.4f per step (%.4f per token) with spec decode vs %.4f: want a longer step, a much shorter time per token", itl(on), perTok, offTok)
	}
	// Turning it off stops the counters; the families stay.
	if err := s.SetSpecDecode(SpecDecode{}); err != nil {
		t.Fatal(err)
	}
	runFor(s, 10*time.Second)
	after := scrape(t, s)
	if val(t, after, "vllm:spec_decode_num_drafts_total") > drafts+16 { // at most the step in flight
		t.Error("drafts kept growing after spec decode was turned off")
	}
	if val(t, after, "vllm:generation_tokens_total") <= gen {
		t.Error("generation stopped after turning spec decode off")
	}
	for _, bad := range []SpecDecode{{NumSpeculativeTokens: -1}, {NumSpeculativeTokens: 3, AcceptanceRate: 1.2}, {NumSpeculativeTokens: 40}} {
		if err := s.SetSpecDecode(bad); err == nil {
			t.Errorf("SetSpecDecode(%+v) accepted", bad)
		}
	}
}

func TestPriorityScheduling(t *testing.T) {
	s := latestSim(t, Config{SchedulingPolicy: PolicyPriority, Scenario: "queueing"})
	for i := 0; i < 60; i++ {
		for _, p := range []int{-1, 1} {
			if _, err := s.Submit(Request{Prompt: Tokenize("hello world"), MaxTokens: 50, IgnoreEOS: true, Priority: p}); err != nil {
				t.Fatal(err)
			}
		}
		s.Advance(500 * time.Millisecond)
	}
	runFor(s, 30*time.Second)
	var q [2]time.Duration
	var n [2]int
	for _, r := range s.Records() {
		if r.Priority == -1 || r.Priority == 1 {
			i := (r.Priority + 1) / 2
			q[i] += r.Queue
			n[i]++
		}
	}
	if n[0] == 0 || n[1] == 0 {
		t.Fatalf("finished: %v", n)
	}
	high, low := q[0]/time.Duration(n[0]), q[1]/time.Duration(n[1])
	if high*2 > low {
		t.Errorf("under saturation priority -1 should queue much less than 1: %v vs %v", high, low)
	}
	f := scrape(t, s)
	// Every finished-request family is split by priority; the sum over it is the total.
	if total, hi := val(t, f, "vllm:e2e_request_latency_seconds"), val(t, f, "vllm:e2e_request_latency_seconds", "priority", "-1"); hi != float64(n[0]) || total != float64(len(s.Records())) {
		t.Errorf("e2e count: priority -1 %v (want %d), total %v (want %d)", hi, n[0], total, len(s.Records()))
	}
	for _, m := range family(t, f, "vllm:request_success_total").GetMetric() {
		if !hasLabel(m, "priority") {
			t.Errorf("request_success child without priority: %v", m.GetLabel())
		}
	}
	for _, m := range family(t, f, "vllm:inter_token_latency_seconds").GetMetric() {
		if hasLabel(m, "priority") {
			t.Error("ITL is not a finished-request family and has no priority label")
		}
	}
	if val(t, f, "vllm:request_priority") != float64(len(s.Records())) || val(t, f, "vllm:scheduler_policy_info", "policy", "priority") != 1 {
		t.Error("request_priority counts finished requests; scheduler_policy_info marks priority")
	}
	// The API takes "priority" under the priority policy and refuses it under FCFS, as vLLM.
	body := `{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"hi","max_tokens":2,"priority":-5}`
	if rec := doVirtual(t, s, "POST", "/v1/completions", body, nil); rec.Code != 200 {
		t.Errorf("priority request under the priority policy: %d %s", rec.Code, rec.Body)
	}
	fcfs := latestSim(t, Config{})
	if rec := doVirtual(t, fcfs, "POST", "/v1/completions", body, nil); rec.Code != 400 || !strings.Contains(rec.Body.String(), "Priority scheduling is not enabled") {
		t.Errorf("priority request under FCFS: %d %s", rec.Code, rec.Body)
	}
	if _, ok := scrape(t, fcfs)["vllm:request_priority"]; ok {
		t.Error("request_priority is registered only under the priority policy")
	}
}

func TestCustomHistogramBuckets(t *testing.T) {
	body := readFixture(t, fixtureName("custom-buckets"))
	for fam, want := range map[string][]string{
		"vllm:time_to_first_token_seconds":           {"0.02", "0.05", "0.1", "0.2", "0.3", "0.5", "1.0", "2.0", "5.0", "+Inf"},
		"vllm:inter_token_latency_seconds":           {"0.005", "0.01", "0.015", "0.02", "0.03", "0.05", "0.1", "+Inf"},
		"vllm:request_time_per_output_token_seconds": {"0.005", "0.01", "0.015", "0.02", "0.03", "0.05", "0.1", "+Inf"},
		"vllm:e2e_request_latency_seconds":           {"0.5", "1.0", "2.0", "3.0", "4.0", "6.0", "8.0", "12.0", "16.0", "32.0", "+Inf"},
		"vllm:request_queue_time_seconds":            {"0.5", "1.0", "2.0", "3.0", "4.0", "6.0", "8.0", "12.0", "16.0", "32.0", "+Inf"},
		"vllm:request_num_preemptions":               {"1.0", "2.0", "3.0", "4.0", "5.0", "10.0", "20.0", "+Inf"}, // untouched family keeps its default
	} {
		if got := bucketBounds(body, fam); !reflect.DeepEqual(got, want) {
			t.Errorf("%s le %v, want %v", fam, got, want)
		}
	}
	s := latestSim(t, Config{})
	runFor(s, 5*time.Second)
	if err := s.SetHistogramBuckets(map[string][]float64{"time_to_first_token": {0.25, 2.5}}); err != nil {
		t.Fatal(err)
	}
	if got := bucketBounds(s.Metrics(), "vllm:time_to_first_token_seconds"); !reflect.DeepEqual(got, []string{"0.25", "2.5", "+Inf"}) {
		t.Errorf("after SetHistogramBuckets: %v", got)
	}
	if n := val(t, scrape(t, s), "vllm:time_to_first_token_seconds"); n != 0 {
		t.Errorf("changing buckets restarts the server (counts reset), got %v observations", n)
	}
	for _, bad := range []map[string][]float64{{"ttft": {1}}, {"time_to_first_token": {2, 1}}, {"request_latency": {}},
		{"inter_token_latency": {math.Inf(1)}}} {
		if err := s.SetHistogramBuckets(bad); err == nil {
			t.Errorf("buckets %v accepted", bad)
		}
	}
	if _, err := New(Config{MetricsVersion: MetricsV1, CustomHistogramBuckets: fixtureBuckets}); err == nil {
		t.Error("custom buckets accepted on the 2026-08 layout, which has no such flag")
	}
}

func TestRefusalsAreCountedBeforeTheEngine(t *testing.T) {
	s := latestSim(t, Config{})
	runFor(s, 5*time.Second)
	before := val(t, scrape(t, s), "vllm:request_success_total")
	if err := s.SetRefusal(Refusal{Status: 429, Fraction: 0.5}); err != nil {
		t.Fatal(err)
	}
	body := `{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"hi","max_tokens":2}`
	codes := map[int]int{}
	for i := 0; i < 4; i++ {
		codes[doVirtual(t, s, "POST", "/v1/completions", body, nil).Code]++
	}
	if err := s.SetRefusal(Refusal{Status: 503, Fraction: 1}); err != nil {
		t.Fatal(err)
	}
	rec := doVirtual(t, s, "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, nil)
	codes[rec.Code]++
	if !reflect.DeepEqual(codes, map[int]int{200: 2, 429: 2, 503: 1}) {
		t.Errorf("answers %v, want 2×200, 2×429, 1×503", codes)
	}
	var e struct {
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code != 503 {
		t.Errorf("503 body %s", rec.Body)
	}
	f := scrape(t, s)
	if got := val(t, f, "http_requests_total", "status", "4xx"); got != 2 {
		t.Errorf("4xx %v, want 2", got)
	}
	if got := val(t, f, "http_requests_total", "status", "5xx"); got != 1 {
		t.Errorf("5xx %v, want 1", got)
	}
	if got := val(t, f, "vllm:request_success_total") - before; got < 2 || got > 2+float64(len(s.Records())) {
		t.Errorf("refused requests must not reach request_success")
	}
	if err := s.SetRefusal(Refusal{Status: 404, Fraction: 1}); err == nil {
		t.Error("status 404 accepted")
	}
}

func TestMFUCounters(t *testing.T) {
	s := latestSim(t, Config{EnableMFUMetrics: true})
	runFor(s, 60*time.Second)
	f := scrape(t, s)
	c := s.Config()
	flops := val(t, f, "vllm:estimated_flops_per_gpu_total")
	computed := val(t, f, "vllm:prompt_tokens_by_source_total", "source", "local_compute") + val(t, f, "vllm:generation_tokens_total")
	if tok := flops / (2 * c.ModelParams); math.Abs(tok-computed) > 0.02*computed {
		t.Errorf("FLOPs / 2N = %.0f tokens, want about the computed tokens %.0f", tok, computed)
	}
	steps := float64(s.Engines()[0].Steps)
	if read := val(t, f, "vllm:estimated_read_bytes_per_gpu_total"); read < steps*c.ModelParams*c.WeightBytesPerParam {
		t.Errorf("read bytes %v below one weight read per step", read)
	}
	if w := val(t, f, "vllm:estimated_write_bytes_per_gpu_total"); math.Abs(w/c.KVBytesPerToken-flops/(2*c.ModelParams)) > 1 {
		t.Errorf("write bytes %v: want KV bytes × computed tokens", w)
	}
	off := latestSim(t, Config{})
	runFor(off, 10*time.Second)
	if v := val(t, scrape(t, off), "vllm:estimated_flops_per_gpu_total"); v != 0 {
		t.Errorf("without --enable-mfu-metrics the counters stay 0, got %v", v)
	}
}

func TestEngineHealthyFollowsDeadEngine(t *testing.T) {
	s := latestSim(t, Config{EnableFaultTolerance: true, DataParallelSize: 2})
	if v := val(t, scrape(t, s), "vllm:engine_healthy"); v != 2 {
		t.Errorf("two healthy engines, got %v", v)
	}
	if err := s.InjectFault(FaultSpec{Kind: Fault5xx}); err != nil {
		t.Fatal(err)
	}
	body := s.Metrics() // /metrics itself answers 500 under the fault; the body shows the state
	if v := val(t, parseMetrics(t, body), "vllm:engine_healthy"); v != 0 {
		t.Errorf("dead engine core: engine_healthy %v, want 0", v)
	}
	if _, ok := scrape(t, latestSim(t, Config{}))["vllm:engine_healthy"]; ok {
		t.Error("engine_healthy without --enable-fault-tolerance")
	}
}

// TestOlderVersionsIgnoreNewControls: the existing layouts render none of
// the late-2026 families, and count only capacity-waiting requests as
// waiting (before #38435 vLLM left skipped requests out).
func TestOlderVersionsIgnoreNewControls(t *testing.T) {
	for _, v := range []string{MetricsV1_0_10, MetricsV0} {
		s := newVirtual(t, Config{MetricsVersion: v, LoadGen: true, Seed: 2})
		if err := s.SetDefer(DeferSpec{Fraction: 0.5}); err != nil {
			t.Fatal(err)
		}
		runFor(s, 20*time.Second)
		body := string(s.Metrics())
		for _, name := range []string{"vllm:engine_sleep_resource_state", "vllm:request_num_preemptions", "vllm:scheduler_policy_info", "waiting_by_reason"} {
			if strings.Contains(body, name) {
				t.Errorf("%s renders %s", v, name)
			}
		}
		if got, want := val(t, scrape(t, s), "vllm:num_requests_waiting"), float64(s.Engines()[0].Waiting); got != want {
			t.Errorf("%s: num_requests_waiting %v, want the capacity queue %v", v, got, want)
		}
	}
	if _, err := New(Config{SchedulingPolicy: "lifo"}); err == nil {
		t.Error("unknown scheduling policy accepted")
	}
}

// TestAdminControls drives every control over HTTP, as the exporter's
// end-to-end tests and operators do.
func TestAdminControls(t *testing.T) {
	s := latestSim(t, Config{})
	runFor(s, 5*time.Second)
	state := func() map[string]any {
		t.Helper()
		rec := doVirtual(t, s, "GET", "/admin/state", "", nil)
		var m map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, c := range []struct {
		method, path, body string
		code               int
		check              func() bool
	}{
		{"POST", "/admin/sleep", `{"level":2}`, 200, func() bool { return s.SleepState().Weights == StateDiscarded }},
		{"POST", "/admin/wake", `{"tags":["weights"]}`, 200, func() bool { return s.SleepState().Weights == StateResident && s.SleepState().Sleeping() }},
		{"POST", "/admin/wake", `{}`, 200, func() bool { return s.SleepState().FullyAwake() }},
		{"POST", "/sleep?level=1", "", 200, func() bool { return s.SleepState().Weights == StateOffloaded }},
		{"POST", "/wake_up?tags=weights&tags=kv_cache", "", 200, func() bool { return s.SleepState().FullyAwake() }},
		{"POST", "/sleep?level=x", "", 400, nil},
		{"POST", "/admin/sleep", `{"level":7}`, 400, nil},
		{"POST", "/admin/defer", `{"fraction":0.9,"hold":"10s","livelock":true}`, 200, func() bool {
			d := s.Defer()
			return d.Fraction == 0.9 && d.Hold == 10*time.Second && d.Livelock
		}},
		{"POST", "/admin/defer", `{"fraction":0.9,"hold":"soon"}`, 400, nil},
		{"DELETE", "/admin/defer", "", 200, func() bool { return s.Defer() == DeferSpec{} }},
		{"POST", "/admin/spec_decode", `{"num_speculative_tokens":4,"acceptance_rate":0.6}`, 200, func() bool { return s.Spec().NumSpeculativeTokens == 4 }},
		{"POST", "/admin/spec_decode", `{"num_speculative_tokens":4,"acceptance_rate":2}`, 400, nil},
		{"POST", "/admin/spec_decode", `{"num_speculative_tokens":0}`, 200, func() bool { return !s.Spec().On() }},
		{"POST", "/admin/refuse", `{"status":503,"fraction":0.25}`, 200, nil},
		{"POST", "/admin/refuse", `{"status":418,"fraction":0.25}`, 400, nil},
		{"POST", "/admin/refuse", `{"fraction":0}`, 200, nil},
		{"POST", "/admin/buckets", `{"time_to_first_token":[0.1,1]}`, 200, func() bool {
			return reflect.DeepEqual(bucketBounds(s.Metrics(), "vllm:time_to_first_token_seconds"), []string{"0.1", "1.0", "+Inf"})
		}},
		{"POST", "/admin/buckets", `{"nope":[1]}`, 400, nil},
		{"POST", "/admin/buckets", `{"time_to_first_token":[0.1,1],}`, 400, nil},
	} {
		rec := doVirtual(t, s, c.method, c.path, c.body, nil)
		if rec.Code != c.code {
			t.Errorf("%s %s %s: %d %s, want %d", c.method, c.path, c.body, rec.Code, rec.Body, c.code)
			continue
		}
		if c.check != nil && !c.check() {
			t.Errorf("%s %s %s: state not applied: %v", c.method, c.path, c.body, state())
		}
	}
	st := state()
	for _, k := range []string{"sleep", "fully_awake", "defer", "spec_decode", "refusal", "scheduling_policy", "custom_histogram_buckets"} {
		if _, ok := st[k]; !ok {
			t.Errorf("/admin/state lacks %q", k)
		}
	}
}

// TestLoadGenPriorities: the load generator mixes priorities under the
// priority policy (so vllm-sim alone feeds per-priority views) and ignores
// them under FCFS instead of having every request refused.
func TestLoadGenPriorities(t *testing.T) {
	for _, policy := range []string{PolicyPriority, PolicyFCFS} {
		s := latestSim(t, Config{SchedulingPolicy: policy})
		sc, _ := ScenarioPreset("healthy")
		sc.Load.Priorities = []int{-1, 0, 1}
		if err := s.ApplyScenario(sc); err != nil {
			t.Fatal(err)
		}
		runFor(s, 60*time.Second)
		seen := map[int]int{}
		for _, r := range s.Records() {
			seen[r.Priority]++
		}
		switch {
		case policy == PolicyPriority && (seen[-1] == 0 || seen[0] == 0 || seen[1] == 0):
			t.Errorf("priority policy: finished per priority %v, want all of -1, 0, 1", seen)
		case policy == PolicyFCFS && (len(seen) != 1 || seen[0] < 50):
			t.Errorf("FCFS: finished per priority %v, want only 0 and normal traffic", seen)
		}
	}
}

// TestStatsBasedHealthCheck: with the stall timeout, a hung engine with
// pending requests fails /health after the timeout; the livelock and a
// sleeping engine keep 200; without it /health stays 200 while wedged.
func TestStatsBasedHealthCheck(t *testing.T) {
	health := func(s *Sim) int { return serveSync(t, s, "GET", "/health", "").Code }
	s := latestSim(t, Config{HealthStallTimeout: 60 * time.Second})
	runFor(s, 10*time.Second)
	if err := s.SetScenario("stalled"); err != nil {
		t.Fatal(err)
	}
	runFor(s, 30*time.Second)
	if c := health(s); c != 200 {
		t.Errorf("30s into the stall: %d, want 200", c)
	}
	runFor(s, 40*time.Second)
	if c := health(s); c != 503 {
		t.Errorf("70s into the stall with requests pending: %d, want 503", c)
	}
	if err := s.SetScenario("healthy"); err != nil {
		t.Fatal(err)
	}
	runFor(s, time.Second)
	if c := health(s); c != 200 {
		t.Errorf("after recovery: %d", c)
	}
	// Sleeping for longer than the timeout with requests queued: deliberate, 200.
	if err := s.Sleep(1); err != nil {
		t.Fatal(err)
	}
	runFor(s, 120*time.Second)
	if c := health(s); c != 200 {
		t.Errorf("asleep: %d, want 200", c)
	}
	// The #53130 livelock keeps stepping (nothing schedulable): 200 with the tracker too.
	ll := latestSim(t, Config{HealthStallTimeout: 60 * time.Second, MaxNumSeqs: 16})
	if err := ll.SetDefer(DeferSpec{Fraction: 0.95, Livelock: true}); err != nil {
		t.Fatal(err)
	}
	runFor(ll, 150*time.Second)
	if c := health(ll); c != 200 || ll.Engines()[0].Deferred < 100 {
		t.Errorf("livelock with the tracker: /health %d, %d deferred", c, ll.Engines()[0].Deferred)
	}
	// Without the tracker (older servers, or the default here) a wedged engine answers 200.
	old := latestSim(t, Config{Scenario: "stalled"})
	runFor(old, 120*time.Second)
	if c := health(old); c != 200 {
		t.Errorf("no stall timeout: %d, want 200", c)
	}
	if _, err := New(Config{MetricsVersion: MetricsV1, HealthStallTimeout: time.Minute}); err == nil {
		t.Error("stall timeout accepted on the 2026-08 layout")
	}
}
