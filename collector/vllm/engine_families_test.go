package vllm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

const qwen = "Qwen/Qwen3-32B"

// dp2Series names one series of vllm-late-2026-dp2-priority-spec.txt
// (labels sorted as prometheus_client prints them).
func dp2Series(name string, engine int, extra ...string) string {
	labels := []string{fmt.Sprintf(`engine="%d"`, engine), `model_name="` + qwen + `"`}
	labels = append(labels, extra...)
	// prometheus_client sorts label names.
	for i := range labels {
		for j := i + 1; j < len(labels); j++ {
			if labels[j] < labels[i] {
				labels[i], labels[j] = labels[j], labels[i]
			}
		}
	}
	return name + "{" + strings.Join(labels, ",") + "}"
}

func dp2Model(t *testing.T, body []byte, mod func(*Options)) (*Scraper, *snapshot.Model) {
	t.Helper()
	srv := newFakeVLLM(t, body, "text/plain; version=1.0.0; charset=utf-8")
	s := newTestScraper(t, srv.URL, mod)
	scrapeAt(s, t0)
	l := s.Latest()
	if !l.Up || l.Models[qwen] == nil {
		t.Fatalf("scrape up=%v error=%q models=%v", l.Up, l.Error, l.Models)
	}
	return s, l.Models[qwen]
}

// The families of vLLM 0.20-0.33 are read from a two-engine body and
// combined per model: gauges and counters summed over engines (and over the
// priority label), flags min over engines, per-GPU estimates averaged.
func TestEngineFamiliesRead(t *testing.T) {
	s, m := dp2Model(t, fixture(t, "vllm-late-2026-dp2-priority-spec.txt"), nil)
	if got := m.WaitingByReason; got["capacity"] != 19 || got["deferred"] != 473 {
		t.Errorf("waiting by reason = %v, want capacity 19 deferred 473", got)
	}
	wantValue(t, "waiting for capacity", m.WaitingForCapacity(), 19)
	wantValue(t, "waiting total", m.Waiting, 492)
	if !m.Sleep.Known || !m.Sleep.Awake || m.Asleep() {
		t.Errorf("sleep = %+v, want known and awake", m.Sleep)
	}
	wantValue(t, "sleep level", m.Sleep.Level, 0)
	if m.Sleep.Resources["weights"] != "resident" || m.Sleep.Resources["scheduler"] != "running" || len(m.Sleep.Resources) != 3 {
		t.Errorf("sleep resources = %v", m.Sleep.Resources)
	}
	wantValue(t, "engine healthy", m.EngineHealthy, 1)
	wantValue(t, "spec drafts", m.SpecDrafts, 196000)
	wantValue(t, "spec draft tokens", m.SpecDraftTokens, 588000)
	wantValue(t, "spec accepted", m.SpecAcceptedTokens, 350000)
	if got := m.PromptTokensBySource; got["local_compute"] != 575000 || got["local_cache_hit"] != 390000 || got["external_kv_transfer"] != 15000 {
		t.Errorf("prompt tokens by source = %v", got)
	}
	wantValue(t, "prompt tokens cached", m.PromptTokensCached, 405000)
	wantValue(t, "prefill kv computed sum", m.PrefillKVComputedSum, 565000)
	wantValue(t, "kv cache size tokens", m.KVCacheSizeTokens, 409600)
	wantValue(t, "kv cache max concurrency", m.KVCacheMaxConcurrency, 12.5)
	// Per-GPU estimates: the mean of the two engines' GPUs.
	wantValue(t, "flops per gpu", m.EstimatedFlops, 3.9e17)
	wantValue(t, "read bytes per gpu", m.EstimatedReadBytes, 8.9e15)
	// Priority: every finished-request family sums over it.
	if got := m.FinishedByReason["stop"]; got != 890 {
		t.Errorf("stop finishes = %v, want 890 (summed over priority and engine)", got)
	}
	if got := m.FinishedByReason["abort"]; got != 4 {
		t.Errorf("abort finishes = %v, want 4", got)
	}
	ttft := m.Histograms.Get(snapshot.TTFT)
	if ttft.Count != 944 {
		t.Errorf("TTFT count = %v, want 944 (every finished request, summed over priority)", ttft.Count)
	}
	if _, ok := ttft.CountAtOrBelow(0.35); !ok {
		t.Errorf("TTFT bounds %v lack the custom bucket 0.35", ttft.Bounds)
	}
	if m.ByPriority != nil {
		t.Errorf("per-priority view kept without --vllm.per-priority: %v", m.ByPriority)
	}
	if n, ok := s.Latest().Refused(); !ok || n != 35 {
		t.Errorf("refused = %v %v, want 35 (5xx over handlers)", n, ok)
	}
	compareNoHelp(t, s, `
# TYPE vllm_requests_waiting_by_reason gauge
vllm_requests_waiting_by_reason{model="Qwen/Qwen3-32B",reason="capacity"} 19
vllm_requests_waiting_by_reason{model="Qwen/Qwen3-32B",reason="deferred"} 473
# TYPE vllm_engine_awake gauge
vllm_engine_awake{model="Qwen/Qwen3-32B"} 1
# TYPE vllm_engine_sleep_resource_state gauge
vllm_engine_sleep_resource_state{model="Qwen/Qwen3-32B",resource="kv_cache",state="resident"} 1
vllm_engine_sleep_resource_state{model="Qwen/Qwen3-32B",resource="scheduler",state="running"} 1
vllm_engine_sleep_resource_state{model="Qwen/Qwen3-32B",resource="weights",state="resident"} 1
# TYPE vllm_engine_healthy gauge
vllm_engine_healthy{model="Qwen/Qwen3-32B"} 1
# TYPE vllm_requests_refused_total counter
vllm_requests_refused_total{model="Qwen/Qwen3-32B"} 35
# TYPE vllm_spec_decode_accepted_tokens_total counter
vllm_spec_decode_accepted_tokens_total{model="Qwen/Qwen3-32B"} 350000
`, "vllm_requests_waiting_by_reason", "vllm_engine_awake", "vllm_engine_sleep_resource_state", "vllm_engine_healthy",
		"vllm_requests_refused_total", "vllm_spec_decode_accepted_tokens_total")
}

// One minute later: the windowed spec-decode, prompt-source and MFU rates.
func TestEngineFamiliesWindow(t *testing.T) {
	base := fixture(t, "vllm-late-2026-dp2-priority-spec.txt")
	later := withValues(t, base, map[string]string{
		// 1200 drafts of 3 tokens, 2400 accepted: acceptance 2/3, length 3.
		dp2Series("vllm:spec_decode_num_drafts_total", 0):          "100600.0",
		dp2Series("vllm:spec_decode_num_drafts_total", 1):          "96600.0",
		dp2Series("vllm:spec_decode_num_draft_tokens_total", 0):    "301800.0",
		dp2Series("vllm:spec_decode_num_draft_tokens_total", 1):    "289800.0",
		dp2Series("vllm:spec_decode_num_accepted_tokens_total", 0): "181200.0",
		dp2Series("vllm:spec_decode_num_accepted_tokens_total", 1): "171200.0",
		// 6000 computed, 3000 cache hits, 600 from KV transfer.
		dp2Series("vllm:prompt_tokens_by_source_total", 0, `source="local_compute"`):        "296000.0",
		dp2Series("vllm:prompt_tokens_by_source_total", 0, `source="local_cache_hit"`):      "203000.0",
		dp2Series("vllm:prompt_tokens_by_source_total", 0, `source="external_kv_transfer"`): "10600.0",
		dp2Series("vllm:prompt_tokens_cached_total", 0):                                     "213600.0",
		// 1.2e16 FLOPs per GPU on each engine: 2e14 FLOP/s per GPU.
		dp2Series("vllm:estimated_flops_per_gpu_total", 0): "4.12e+17",
		dp2Series("vllm:estimated_flops_per_gpu_total", 1): "3.92e+17",
		// 6e13 bytes read and written per GPU: 1e12 B/s.
		dp2Series("vllm:estimated_read_bytes_per_gpu_total", 0):  "9.05e+15",
		dp2Series("vllm:estimated_read_bytes_per_gpu_total", 1):  "8.85e+15",
		dp2Series("vllm:estimated_write_bytes_per_gpu_total", 0): "1.1e+14",
		dp2Series("vllm:estimated_write_bytes_per_gpu_total", 1): "1.0e+14",
	})
	srv := newFakeVLLM(t, base, "text/plain")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	srv.set(later, nil)
	scrapeAt(s, t0.Add(time.Minute))
	d := s.Window(time.Minute)[qwen]
	if d == nil {
		t.Fatal("no 1m window")
	}
	wantValue(t, "spec acceptance ratio", d.Series["vllm_spec_decode_acceptance_ratio"], 2.0/3)
	wantValue(t, "spec mean acceptance length", d.SpecMeanAcceptanceLength, 3)
	wantValue(t, "computed prompt tokens/s", d.PromptTokensComputedPerSecond, 100)
	wantValue(t, "cached prompt tokens/s", d.PromptTokensCachedPerSecond, 60)
	wantValue(t, "estimated FLOP/s per GPU", d.EstimatedFlopsPerSecond, 2e14)
	wantValue(t, "estimated bytes/s per GPU", d.EstimatedBytesPerSecond, 1e12)

	// Counters that stay at 0 (no --enable-mfu-metrics) give no rate.
	v1 := fixture(t, "vllm-main-2026-08-v1.txt")
	srv.set(v1, nil)
	s2 := newTestScraper(t, srv.URL, nil)
	scrapeAt(s2, t0)
	scrapeAt(s2, t0.Add(time.Minute))
	d2 := s2.Window(time.Minute)[llama]
	wantAbsent(t, "FLOP/s with zero counters", d2.EstimatedFlopsPerSecond)
	wantAbsent(t, "bytes/s with zero counters", d2.EstimatedBytesPerSecond)
	wantAbsent(t, "spec acceptance without spec decode", d2.SpecMeanAcceptanceLength)
}

// A sleeping engine is reported as such (level from the legacy state set,
// resources from the per-resource one); an unknown state is ignored and
// counted, never guessed and never fatal.
func TestSleepStates(t *testing.T) {
	base := fixture(t, "vllm-late-2026-dp2-priority-spec.txt")
	asleep := withValues(t, base, map[string]string{
		dp2Series("vllm:engine_sleep_state", 1, `sleep_state="awake"`):             "0.0",
		dp2Series("vllm:engine_sleep_state", 1, `sleep_state="weights_offloaded"`): "1.0",
		dp2Series("vllm:engine_fully_awake", 1):                                    "0.0",
	})
	_, m := dp2Model(t, asleep, nil)
	if !m.Asleep() {
		t.Fatalf("engine 1 asleep, model not reported asleep: %+v", m.Sleep)
	}
	wantValue(t, "sleep level", m.Sleep.Level, 1)

	// Only the per-resource view says so: weights offloaded on engine 0.
	res := withValues(t, base, map[string]string{
		dp2Series("vllm:engine_sleep_resource_state", 0, `resource="weights"`, `state="resident"`):  "0.0",
		dp2Series("vllm:engine_sleep_resource_state", 0, `resource="weights"`, `state="offloaded"`): "1.0",
	})
	_, m = dp2Model(t, res, nil)
	if !m.Asleep() || m.Sleep.Resources["weights"] != "offloaded" {
		t.Errorf("weights offloaded: sleep = %+v, want asleep with weights offloaded", m.Sleep)
	}

	// A state this exporter does not know: ignored, counted, logged.
	unknown := append(append([]byte(nil), base...), []byte("\n"+
		dp2Series("vllm:engine_sleep_state", 0, `sleep_state="weights_hibernated"`)+" 1.0\n")...)
	s, m := dp2Model(t, unknown, nil)
	if !m.Sleep.Awake {
		t.Errorf("an unknown state with awake=1 must not make the engine asleep: %+v", m.Sleep)
	}
	compareNoHelp(t, s, `
# TYPE vllm_exporter_vllm_unexpected_label_values gauge
vllm_exporter_vllm_unexpected_label_values{label="sleep_state",metric="vllm:engine_sleep_state"} 1
# TYPE vllm_engine_awake gauge
vllm_engine_awake{model="Qwen/Qwen3-32B"} 1
# TYPE vllm_requests_running gauge
vllm_requests_running{model="Qwen/Qwen3-32B"} 5
`, "vllm_exporter_vllm_unexpected_label_values", "vllm_engine_awake", "vllm_requests_running")
}

// The per-priority view is opt-in and bounded; priorities past the bound
// still count in the per-model sums.
func TestPerPriorityViewIsBounded(t *testing.T) {
	s, m := dp2Model(t, fixture(t, "vllm-late-2026-dp2-priority-spec.txt"), func(o *Options) { o.PerPriority = true })
	if len(m.ByPriority) != 3 || m.ByPriority["1"][snapshot.TTFT].Count != 93 {
		t.Fatalf("per-priority TTFT = %v, want priorities -1, 0, 1 with 93 observations at 1", m.ByPriority)
	}
	if n := testutil.CollectAndCount(s, "vllm_time_to_first_token_by_priority_seconds"); n != 3 {
		t.Errorf("per-priority TTFT series = %d, want 3", n)
	}

	// A hostile server: 12 distinct priority values.
	var b strings.Builder
	b.WriteString("# TYPE vllm:time_to_first_token_seconds histogram\n")
	for p := 0; p < 12; p++ {
		l := fmt.Sprintf(`model_name="m",priority="%d"`, p)
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{%s,le=\"0.5\"} 1\nvllm:time_to_first_token_seconds_bucket{%s,le=\"+Inf\"} 2\n", l, l)
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_count{%s} 2\nvllm:time_to_first_token_seconds_sum{%s} 1\n", l, l)
	}
	srv := newFakeVLLM(t, []byte(b.String()), "text/plain")
	s = newTestScraper(t, srv.URL, func(o *Options) { o.PerPriority = true })
	scrapeAt(s, t0)
	m = s.Latest().Models["m"]
	if len(m.ByPriority) != MaxPriorities {
		t.Errorf("kept %d priorities, want the bound %d", len(m.ByPriority), MaxPriorities)
	}
	if c := m.Histograms.Get(snapshot.TTFT).Count; c != 24 {
		t.Errorf("model TTFT count = %v, want 24 (every priority summed)", c)
	}
	compareNoHelp(t, s, fmt.Sprintf(`
# TYPE vllm_exporter_vllm_unexpected_label_values gauge
vllm_exporter_vllm_unexpected_label_values{label="priority",metric="vllm:time_to_first_token_seconds"} %d
`, 12-MaxPriorities), "vllm_exporter_vllm_unexpected_label_values")
}

// vllm:engine_healthy as vLLM documents it, labelled by engine only: the
// least healthy engine applies to every model of the server. With
// model_name (the fixture's form) it stays per model.
func TestEngineHealthyWithoutModelName(t *testing.T) {
	base := string(fixture(t, "vllm-late-2026-dp2-priority-spec.txt"))
	for e, v := range []string{"1.0", "0.0"} {
		old := dp2Series("vllm:engine_healthy", e) + " 1.0"
		if !strings.Contains(base, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		base = strings.Replace(base, old, fmt.Sprintf(`vllm:engine_healthy{engine="%d"} %s`, e, v), 1)
	}
	s, m := dp2Model(t, []byte(base), nil)
	wantValue(t, "engine healthy (engine 1 unhealthy, no model_name)", m.EngineHealthy, 0)
	compareNoHelp(t, s, `
# TYPE vllm_engine_healthy gauge
vllm_engine_healthy{model="Qwen/Qwen3-32B"} 0
`, "vllm_engine_healthy")

	healthy := strings.Replace(base, `vllm:engine_healthy{engine="1"} 0.0`, `vllm:engine_healthy{engine="1"} 1.0`, 1)
	_, m = dp2Model(t, []byte(healthy), nil)
	wantValue(t, "engine healthy (both engines healthy, no model_name)", m.EngineHealthy, 1)
}

// corruptedRequests is vllm:corrupted_requests_total as a two-engine vLLM
// with VLLM_COMPUTE_NANS_IN_LOGITS prints it (HELP from vLLM's loggers.py;
// prometheus_client sorts labels; multiprocess mode, so no _created).
const corruptedRequests = `# HELP vllm:corrupted_requests_total Corrupted requests, in terms of total number of requests with NaNs in logits.
# TYPE vllm:corrupted_requests_total counter
vllm:corrupted_requests_total{engine="0",model_name="Qwen/Qwen3-32B"} 3.0
vllm:corrupted_requests_total{engine="1",model_name="Qwen/Qwen3-32B"} 1.0
`

// A family added as one row: requests with NaN logits are read when vLLM
// exports them (summed over engines, also in OpenMetrics form) and are
// never required.
func TestCorruptedRequests(t *testing.T) {
	base := fixture(t, "vllm-late-2026-dp2-priority-spec.txt")
	if strings.Contains(string(base), "vllm:corrupted_requests") {
		t.Fatal("the base fixture already has the family")
	}
	s, m := dp2Model(t, append(append([]byte(nil), base...), corruptedRequests...), nil)
	wantValue(t, "corrupted requests", m.CorruptedRequests, 4)
	compareNoHelp(t, s, `
# TYPE vllm_requests_corrupted_total counter
vllm_requests_corrupted_total{model="Qwen/Qwen3-32B"} 4
`, "vllm_requests_corrupted_total")

	// vLLM's Rust front-end: OpenMetrics declares the counter without _total.
	om := strings.NewReplacer("# TYPE vllm:corrupted_requests_total counter", "# TYPE vllm:corrupted_requests counter",
		"# HELP vllm:corrupted_requests_total", "# HELP vllm:corrupted_requests").Replace(corruptedRequests)
	srv := newFakeVLLM(t, []byte(om+"# EOF\n"), "application/openmetrics-text; version=1.0.0; charset=utf-8")
	s2 := newTestScraper(t, srv.URL, nil)
	scrapeAt(s2, t0)
	wantValue(t, "corrupted requests (OpenMetrics)", s2.Latest().Models[qwen].CorruptedRequests, 4)

	// Absent (the default): no series, and not reported missing.
	s3, m3 := dp2Model(t, base, nil)
	wantAbsent(t, "corrupted requests without the family", m3.CorruptedRequests)
	if n := testutil.CollectAndCount(s3, "vllm_requests_corrupted_total"); n != 0 {
		t.Errorf("%d vllm_requests_corrupted_total series without the family, want 0", n)
	}
	if slices.Contains(s3.Latest().Missing, "vllm:corrupted_requests_total") {
		t.Error("vllm:corrupted_requests_total reported missing; it is opt-in")
	}
}
