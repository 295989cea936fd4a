package vllmsim

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// prompt is a request prompt of n tokens.
func prompt(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = 100 + i%50
	}
	return p
}

// productionSim is a v1-0.33 simulator without background load.
func productionSim(t *testing.T) *Sim {
	return newVirtual(t, Config{MetricsVersion: MetricsLatest, Seed: 7})
}

func TestProductionFamiliesOnlyWithTheirControl(t *testing.T) {
	s := productionSim(t)
	body := string(s.Metrics())
	for _, name := range []string{"vllm:admission_rejections", "vllm:nixl_", "vllm:lora_requests_info", "vllm:kv_offload_"} {
		if strings.Contains(body, name) {
			t.Errorf("%s rendered with its feature off", name)
		}
	}
}

func TestAdmissionRejectsAtTheQueueCap(t *testing.T) {
	s := productionSim(t)
	if err := s.SetAdmission(AdmissionLimit{MaxQueuedRequests: 2}); err != nil {
		t.Fatal(err)
	}
	// Nothing is scheduled before the clock moves: the queue fills.
	var rejected int
	for range 5 {
		if _, err := s.Submit(Request{Prompt: prompt(16), MaxTokens: 4}); errors.Is(err, ErrAdmission) {
			rejected++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if rejected != 3 {
		t.Errorf("%d rejected of 5 with a cap of 2 queued, want 3", rejected)
	}
	// Over HTTP: 503, counted by the instrumentator as 5xx.
	rec := serveSync(t, s, "POST", "/v1/completions", `{"prompt":"hello there","max_tokens":2}`)
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), reasonQueuedReqs) {
		t.Errorf("HTTP answer %d %s, want 503 naming the reason", rec.Code, rec.Body)
	}
	f := scrape(t, s)
	// The 503 is an HTTP answer: the availability SLO counts it through
	// http_requests_total (vllm_requests_refused_total), once.
	if got := val(t, f, "http_requests_total", "status", "5xx"); got != 1 {
		t.Errorf("http 5xx = %v, want the one rejection answered over HTTP", got)
	}
	if got := val(t, f, "vllm:admission_rejections_total", "reason", reasonQueuedReqs); got != 4 {
		t.Errorf("rejections max_num_queued_reqs = %v, want 4", got)
	}
	if got := val(t, f, "vllm:admission_rejections_total", "reason", reasonQueuedTokens); got != 0 {
		t.Errorf("rejections max_num_queued_tokens = %v, want 0 (pre-created)", got)
	}

	// The token cap: 2 queued × 16 tokens + 16 > 40.
	if err := s.SetAdmission(AdmissionLimit{MaxQueuedTokens: 40}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(Request{Prompt: prompt(16), MaxTokens: 4}); !errors.Is(err, ErrAdmission) {
		t.Errorf("submit over the token cap: %v, want ErrAdmission", err)
	}
	if got := val(t, scrape(t, s), "vllm:admission_rejections_total", "reason", reasonQueuedTokens); got != 1 {
		t.Errorf("rejections max_num_queued_tokens = %v, want 1", got)
	}
	// Once the queue drains, requests are admitted again.
	runFor(s, 5*time.Second)
	if _, err := s.Submit(Request{Prompt: prompt(16), MaxTokens: 4}); err != nil {
		t.Errorf("submit after the queue drained: %v", err)
	}
}

func TestDecodeRoleWaitsForKVTransfers(t *testing.T) {
	s := productionSim(t)
	if err := s.SetPD(PD{Role: RoleDecode, TransferSeconds: 0.2, FailFraction: 0.25}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := s.Submit(Request{Prompt: prompt(64), MaxTokens: 4, IgnoreEOS: true}); err != nil {
			t.Fatal(err)
		}
	}
	f := scrape(t, s)
	// Three wait, deferred, for their transfer; the failed one is recomputed.
	if got := val(t, f, "vllm:num_requests_waiting_by_reason", "reason", "deferred"); got != 3 {
		t.Errorf("deferred while transferring = %v, want 3", got)
	}
	if got := val(t, f, "vllm:nixl_num_failed_transfers_total"); got != 1 {
		t.Errorf("failed transfers = %v, want 1 (fraction 0.25 of 4)", got)
	}
	if got := val(t, f, "vllm:nixl_xfer_time_seconds"); got != 3 {
		t.Errorf("transfers observed = %v, want 3", got)
	}
	if got, want := histSum(t, f, "vllm:nixl_bytes_transferred"), 3*64*131072.0; got != want {
		t.Errorf("bytes transferred = %v, want %v", got, want)
	}
	if got := histSum(t, f, "vllm:nixl_num_descriptors"); got != 3*2*4 {
		t.Errorf("descriptors = %v, want 24 (K and V of 4 blocks, 3 transfers)", got)
	}
	if got := bucketBounds(s.Metrics(), "vllm:nixl_xfer_time_seconds"); !slices.Equal(got, []string{"0.005", "0.01", "0.025", "0.05", "0.075", "0.1", "0.2", "0.3", "0.5", "0.75", "1.0", "5.0", "+Inf"}) {
		t.Errorf("transfer time bounds %v, want vLLM's", got)
	}
	runFor(s, 10*time.Second)
	var late int
	for _, r := range s.Records() {
		if r.FirstToken.Sub(r.Arrival) >= 200*time.Millisecond {
			late++
		}
	}
	if late != 3 {
		t.Errorf("%d of %d finished requests had a TTFT of at least the 0.2 s transfer, want 3", late, len(s.Records()))
	}
}

func TestPrefillRoleCountsExpiredKV(t *testing.T) {
	s := productionSim(t)
	if err := s.SetPD(PD{Role: RolePrefill, ExpireFraction: 0.5}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := s.Submit(Request{Prompt: prompt(32), MaxTokens: 2}); err != nil {
			t.Fatal(err)
		}
	}
	f := scrape(t, s)
	if got := val(t, f, "vllm:nixl_num_kv_expired_reqs_total"); got != 2 {
		t.Errorf("expired = %v, want 2", got)
	}
	if got := val(t, f, "vllm:nixl_xfer_time_seconds"); got != 0 {
		t.Errorf("a prefill pod observed %v transfers, want 0", got)
	}
	if err := s.SetPD(PD{Role: "router"}); err == nil {
		t.Error("unknown role accepted")
	}
}

func TestLoRAAdaptersAreListed(t *testing.T) {
	s := productionSim(t)
	if err := s.SetLoRA(LoRAConfig{MaxLoRA: 2, Adapters: []string{"sql-lora", "chat-lora"}}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"sql-lora", "chat-lora", "sql-lora"} {
		if _, err := s.Submit(Request{Model: m, Prompt: prompt(16), MaxTokens: 200, IgnoreEOS: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Submit(Request{Model: "other-lora", Prompt: prompt(16), MaxTokens: 2}); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("an adapter not served: %v, want ErrUnknownModel", err)
	}
	lora := func() map[string]string {
		m := family(t, scrape(t, s), "vllm:lora_requests_info").GetMetric()
		if len(m) != 1 {
			t.Fatalf("%d lora_requests_info samples, want 1", len(m))
		}
		out := map[string]string{}
		for _, lp := range m[0].GetLabel() {
			out[lp.GetName()] = lp.GetValue()
		}
		return out
	}
	if got := lora(); got["waiting_lora_adapters"] != "sql-lora,chat-lora" || got["running_lora_adapters"] != "" || got["max_lora"] != "2" {
		t.Errorf("before scheduling: %v, want both adapters waiting", got)
	}
	s.Advance(100 * time.Millisecond)
	if got := lora(); got["running_lora_adapters"] != "sql-lora,chat-lora" || got["waiting_lora_adapters"] != "" {
		t.Errorf("running: %v, want both adapters running", got)
	}
	for _, bad := range []LoRAConfig{{MaxLoRA: 0, Adapters: []string{"a"}}, {MaxLoRA: 1, Adapters: []string{"a,b"}}, {MaxLoRA: 1, Adapters: []string{s.cfg.Models[0]}}} {
		if err := s.SetLoRA(bad); err == nil {
			t.Errorf("LoRA config %+v accepted", bad)
		}
	}
}

// The LoRA budget: with max_lora 1, a request for a second adapter waits
// deferred (not for capacity) while the first adapter's requests run, and
// runs once they finish; base-model requests take no slot.
func TestLoRABudgetDefersOtherAdapters(t *testing.T) {
	s := productionSim(t)
	if err := s.SetLoRA(LoRAConfig{MaxLoRA: 1, Adapters: []string{"sql", "chat"}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Request{{Model: "sql", MaxTokens: 40}, {Model: "chat", MaxTokens: 5}, {MaxTokens: 5}} {
		r.Prompt, r.IgnoreEOS = prompt(16), true
		if _, err := s.Submit(r); err != nil {
			t.Fatal(err)
		}
	}
	s.Advance(20 * time.Millisecond)
	e := s.Engines()[0]
	if e.Running != 2 || e.Deferred != 1 || e.Waiting != 0 {
		t.Fatalf("sql and the base request run, chat waits for the slot: running %d, deferred %d, waiting %d", e.Running, e.Deferred, e.Waiting)
	}
	s.Advance(10 * time.Second)
	if e := s.Engines()[0]; e.Running+e.Deferred+e.Waiting != 0 {
		t.Fatalf("chat never got the slot after sql finished: %+v", e)
	}
}

// Both generations of kv_offload names count the same traffic.
func TestOffloadLayoutsCountTheSameTraffic(t *testing.T) {
	for _, layout := range []string{"newer", "older", "both"} {
		s := productionSim(t)
		if err := s.SetOffload(Offload{LoadBytesPerSecond: 1e9, StoreBytesPerSecond: 2e9, Layout: layout,
			ExternalQueryTokensPerSecond: 1000, HitRatio: 0.25}); err != nil {
			t.Fatal(err)
		}
		runFor(s, 10*time.Second)
		f := scrape(t, s)
		var load, store, loadSecs float64
		if layout != "older" {
			load, store = val(t, f, "vllm:kv_offload_load_bytes_total"), val(t, f, "vllm:kv_offload_store_bytes_total")
			loadSecs = val(t, f, "vllm:kv_offload_load_time_total")
		} else {
			load, store = val(t, f, "vllm:kv_offload_total_bytes_total", "transfer_type", "CPU_to_GPU"), val(t, f, "vllm:kv_offload_total_bytes_total", "transfer_type", "GPU_to_CPU")
			loadSecs = val(t, f, "vllm:kv_offload_total_time_total", "transfer_type", "CPU_to_GPU")
		}
		if load != 1e10 || store != 2e10 || loadSecs != 0.4 {
			t.Errorf("%s: load %v store %v load seconds %v, want 1e10, 2e10, 0.4 (25 GB/s)", layout, load, store, loadSecs)
		}
		if q, h := val(t, f, "vllm:external_prefix_cache_queries_total"), val(t, f, "vllm:external_prefix_cache_hits_total"); q != 10000 || h != 2500 {
			t.Errorf("%s: external cache queries %v hits %v, want 10000 and 2500", layout, q, h)
		}
		if _, older := f["vllm:kv_offload_total_bytes_total"]; older != (layout != "newer") {
			t.Errorf("%s: older names rendered = %v", layout, older)
		}
	}
}

func TestProductionControlsOverHTTP(t *testing.T) {
	s := productionSim(t)
	for _, c := range []struct {
		path, body string
		code       int
	}{
		{"/admin/admission", `{"max_queued_requests":8}`, 200},
		{"/admin/admission", `{"max_queued_requests":-1}`, 400},
		{"/admin/pd", `{"role":"decode","transfer_seconds":0.05,"fail_fraction":0.1}`, 200},
		{"/admin/pd", `{"role":"decode","fail_fraction":2}`, 400},
		{"/admin/lora", `{"max_lora":4,"adapters":["a"]}`, 200},
		{"/admin/offload", `{"load_bytes_per_second":1e9,"layout":"older"}`, 200},
		{"/admin/offload", `{"layout":"sideways"}`, 400},
		{"/admin/offload", `{"unknown":1}`, 400},
	} {
		if rec := serveSync(t, s, "POST", c.path, c.body); rec.Code != c.code {
			t.Errorf("POST %s %s: %d, want %d (%s)", c.path, c.body, rec.Code, c.code, rec.Body)
		}
	}
}

// --kv-cache-metrics: a small KV cache under repeated prompts records block
// lifetimes and idle times at eviction and reuse gaps at prefix-cache hits.
func TestKVBlockResidency(t *testing.T) {
	s := newVirtual(t, Config{MetricsVersion: MetricsLatest, Seed: 7, NumGPUBlocks: 64, MaxModelLen: 512})
	if strings.Contains(string(s.Metrics()), "vllm:kv_block_") {
		t.Fatal("residency families rendered without --kv-cache-metrics")
	}
	s.SetKVCacheMetrics(true)
	// The same 48-token prompt twice (a reuse), then distinct prompts that
	// need more blocks than are free (evictions).
	submit := func(p []int) {
		t.Helper()
		if _, err := s.Submit(Request{Prompt: p, MaxTokens: 8, IgnoreEOS: true}); err != nil {
			t.Fatal(err)
		}
		runFor(s, 2*time.Second)
	}
	shared := prompt(48)
	submit(shared)
	submit(shared)
	for i := range 8 {
		p := prompt(200)
		for j := range p {
			p[j] += 1000 * (i + 1)
		}
		submit(p)
	}
	f := scrape(t, s)
	// 48 tokens are 3 full blocks; the cache serves 2 (the last token is
	// always recomputed, so its block is not looked up).
	if got := val(t, f, "vllm:kv_block_reuse_gap_seconds"); got != 2 {
		t.Errorf("%v reuse gaps, want 2", got)
	}
	if gap := histSum(t, f, "vllm:kv_block_reuse_gap_seconds") / val(t, f, "vllm:kv_block_reuse_gap_seconds"); gap < 1 || gap > 2.5 {
		t.Errorf("mean reuse gap %v s, want about the 2 s between the shared prompts", gap)
	}
	lifetimes, idles := val(t, f, "vllm:kv_block_lifetime_seconds"), val(t, f, "vllm:kv_block_idle_before_evict_seconds")
	if lifetimes == 0 || lifetimes != idles {
		t.Errorf("%v lifetimes and %v idle times observed, want the same non-zero number of evictions", lifetimes, idles)
	}
	if histSum(t, f, "vllm:kv_block_lifetime_seconds") < histSum(t, f, "vllm:kv_block_idle_before_evict_seconds") {
		t.Error("blocks idled longer than they lived")
	}
	if got := bucketBounds(s.Metrics(), "vllm:kv_block_lifetime_seconds"); len(got) != 22 || got[0] != "0.001" || got[20] != "1800.0" {
		t.Errorf("lifetime bounds %v, want vLLM's 21 (0.001..1800) and +Inf", got)
	}
}
