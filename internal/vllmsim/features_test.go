package vllmsim

import (
	"encoding/json"
	"errors"
	"math"
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

// featureSim is a v1-0.33 simulator without background load.
func featureSim(t *testing.T) *Sim {
	return newVirtual(t, Config{MetricsVersion: MetricsLatest, Seed: 7})
}

func TestFeatureFamiliesOnlyWithTheirControl(t *testing.T) {
	s := featureSim(t)
	body := string(s.Metrics())
	for _, name := range []string{"vllm:admission_rejections", "vllm:nixl_", "vllm:lora_requests_info", "vllm:kv_offload_", "vllm:mooncake_store_"} {
		if strings.Contains(body, name) {
			t.Errorf("%s rendered with its feature off", name)
		}
	}
}

func TestAdmissionRejectsAtTheQueueCap(t *testing.T) {
	s := featureSim(t)
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
	s := featureSim(t)
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
	s := featureSim(t)
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
	s := featureSim(t)
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
	lora := func() map[string]string { return loraInfo(t, s) }
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

// loraInfo is the label set of the one vllm:lora_requests_info sample.
func loraInfo(t *testing.T, s *Sim) map[string]string {
	t.Helper()
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

// A request for an adapter beyond max_lora adapters in the batch waits
// (listed in waiting_lora_adapters, counted as deferred) while requests
// for the base model and for adapters already in the batch run; it runs
// once an adapter's requests finish.
func TestLoRABudgetHoldsAdaptersBeyondMaxLoRA(t *testing.T) {
	s := featureSim(t)
	if err := s.SetLoRA(LoRAConfig{MaxLoRA: 1, Adapters: []string{"sql-lora", "chat-lora"}}); err != nil {
		t.Fatal(err)
	}
	submit := func(model string, maxTokens int) {
		t.Helper()
		if _, err := s.Submit(Request{Model: model, Prompt: prompt(16), MaxTokens: maxTokens, IgnoreEOS: true}); err != nil {
			t.Fatal(err)
		}
	}
	submit("sql-lora", 20)
	submit("chat-lora", 20)
	submit(s.cfg.Models[0], 2000)
	submit("sql-lora", 2000)
	s.Advance(100 * time.Millisecond)
	if got := loraInfo(t, s); got["running_lora_adapters"] != "sql-lora" || got["waiting_lora_adapters"] != "chat-lora" || got["max_lora"] != "1" {
		t.Errorf("max_lora 1: %v, want sql-lora running and chat-lora waiting", got)
	}
	f := scrape(t, s)
	if run, def, capa := val(t, f, "vllm:num_requests_running"), val(t, f, "vllm:num_requests_waiting_by_reason", "reason", "deferred"),
		val(t, f, "vllm:num_requests_waiting_by_reason", "reason", "capacity"); run != 3 || def != 1 || capa != 0 {
		t.Errorf("running %v, deferred %v, capacity %v; want 3 (both sql-lora and the base model), 1 (chat-lora on the LoRA budget), 0", run, def, capa)
	}
	// The short sql-lora request finishes; the long one keeps sql-lora
	// in the batch, so chat-lora still waits.
	runFor(s, 2*time.Second)
	if run := val(t, scrape(t, s), "vllm:num_requests_running"); run != 2 {
		t.Errorf("after 2s: %v running, want 2 (the short sql-lora request finished)", run)
	}
	if got := loraInfo(t, s); got["running_lora_adapters"] != "sql-lora" || got["waiting_lora_adapters"] != "chat-lora" {
		t.Errorf("while sql-lora still runs: %v, want chat-lora waiting", got)
	}
	// A larger budget admits it at the next step.
	if err := s.SetLoRA(LoRAConfig{MaxLoRA: 2, Adapters: []string{"sql-lora", "chat-lora"}}); err != nil {
		t.Fatal(err)
	}
	s.Advance(100 * time.Millisecond)
	if got := loraInfo(t, s); got["running_lora_adapters"] != "sql-lora,chat-lora" || got["waiting_lora_adapters"] != "" {
		t.Errorf("max_lora 2: %v, want both running", got)
	}
}

// /v1/models lists the adapters after the base model, as vLLM does with
// --lora-modules: parent the base model, no max_model_len.
func TestModelsListAdapters(t *testing.T) {
	s := featureSim(t)
	if err := s.SetLoRA(LoRAConfig{MaxLoRA: 2, Adapters: []string{"sql-lora", "chat-lora"}}); err != nil {
		t.Fatal(err)
	}
	rec := serveSync(t, s, "GET", "/v1/models", "")
	var got struct {
		Data []struct {
			ID          string  `json:"id"`
			Parent      *string `json:"parent"`
			MaxModelLen *int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	base := s.cfg.Models[0]
	if len(got.Data) != 3 || got.Data[0].ID != base || got.Data[0].MaxModelLen == nil || got.Data[0].Parent != nil {
		t.Fatalf("models %s: want the base model first with max_model_len", rec.Body)
	}
	for i, a := range []string{"sql-lora", "chat-lora"} {
		d := got.Data[i+1]
		if d.ID != a || d.Parent == nil || *d.Parent != base || d.MaxModelLen != nil {
			t.Errorf("card %d: %+v, want adapter %s with parent %s and no max_model_len", i+1, d, a, base)
		}
	}
	if err := s.SetLoRA(LoRAConfig{}); err != nil {
		t.Fatal(err)
	}
	if body := serveSync(t, s, "GET", "/v1/models", "").Body.String(); strings.Contains(body, "sql-lora") {
		t.Errorf("LoRA off, /v1/models still lists an adapter: %s", body)
	}
}

// With load_fraction the built-in load names the adapters in turn.
func TestLoRALoadFractionNamesAdaptersInTurn(t *testing.T) {
	s := featureSim(t)
	if err := s.SetLoRA(LoRAConfig{MaxLoRA: 2, Adapters: []string{"a", "b"}, LoadFraction: 0.5}); err != nil {
		t.Fatal(err)
	}
	base := s.cfg.Models[0]
	var got []string
	s.mu.Lock()
	for range 6 {
		got = append(got, s.loraTarget(base))
	}
	other := s.loraTarget("another-model")
	s.mu.Unlock()
	if want := []string{base, "a", base, "b", base, "a"}; !slices.Equal(got, want) {
		t.Errorf("targets %v, want %v", got, want)
	}
	if other != "another-model" {
		t.Errorf("a request for another model was sent to %s", other)
	}
	if err := s.SetLoRA(LoRAConfig{MaxLoRA: 1, Adapters: []string{"a"}, LoadFraction: 1.5}); err == nil {
		t.Error("load_fraction 1.5 accepted")
	}
}

// Both generations of kv_offload names count the same traffic.
func TestOffloadLayoutsCountTheSameTraffic(t *testing.T) {
	for _, layout := range []string{"newer", "older", "both"} {
		s := featureSim(t)
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

// Mooncake store traffic: each operation's count split by status, its keys
// and bytes, the failed keys of the failed operations and their duration,
// summed over both engines as vLLM's children are.
func TestMooncakeStoreTraffic(t *testing.T) {
	s := newVirtual(t, Config{MetricsVersion: MetricsLatest, Seed: 7, DataParallelSize: 2})
	if err := s.SetMooncake(Mooncake{OpsPerSecond: 10, ErrorFraction: 0.1, KeysPerOp: 16, BytesPerKey: 1 << 20, OpSeconds: 0.004}); err != nil {
		t.Fatal(err)
	}
	runFor(s, 10*time.Second)
	f := scrape(t, s)
	for _, op := range mooncakeOps {
		for st, ops := range map[string]float64{"ok": 90, "error": 10} {
			l := []string{"operation", op, "status", st}
			failed := 0.0
			if st == "error" {
				failed = ops * 16
			}
			got := []float64{val(t, f, "vllm:mooncake_store_operation_total", l...), val(t, f, "vllm:mooncake_store_operation_keys_total", l...),
				val(t, f, "vllm:mooncake_store_operation_bytes_total", l...), val(t, f, "vllm:mooncake_store_operation_failed_keys_total", l...),
				val(t, f, "vllm:mooncake_store_operation_time_seconds", l...)}
			want := []float64{ops, ops * 16, ops * 16 * (1 << 20), failed, ops}
			for i := range want {
				if math.Abs(got[i]-want[i]) > 1e-6*want[i] {
					t.Errorf("%s %s: ops, keys, bytes, failed keys, timed ops %v, want %v", op, st, got, want)
					break
				}
			}
		}
	}
	if n := len(f["vllm:mooncake_store_operation_total"].GetMetric()); n != 2*2*2 {
		t.Errorf("%d operation children, want one per engine, operation and status (8)", n)
	}
	// Stopped (0 operations a second): the counters keep their totals.
	if err := s.SetMooncake(Mooncake{}); err != nil {
		t.Fatal(err)
	}
	runFor(s, 10*time.Second)
	if got := val(t, scrape(t, s), "vllm:mooncake_store_operation_total"); got != 200 {
		t.Errorf("after stopping: %v operations, want the 200 so far", got)
	}
}

func TestFeatureControlsOverHTTP(t *testing.T) {
	s := featureSim(t)
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
		{"/admin/mooncake", `{"ops_per_second":10,"error_fraction":0.1,"keys_per_op":16,"bytes_per_key":1048576,"op_seconds":0.004}`, 200},
		{"/admin/mooncake", `{"ops_per_second":-1}`, 400},
		{"/admin/mooncake", `{"error_fraction":1.5}`, 400},
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
