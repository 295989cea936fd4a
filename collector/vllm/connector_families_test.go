package vllm

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	sharedtest "github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// The families of serving features and KV connectors (admission control,
// NIXL KV transfer, LoRA, KV offload, KV block residency, multimodal and
// external caches, the Mooncake store), read from
// bodies shaped as vLLM prints them (testdata/*-fragment.txt, appended to
// the two-engine late-2026 body).

// connectorSeries are the series these families export, window series included.
var connectorSeries = []string{
	"vllm_requests_rejected_total",
	"vllm_kv_transfer_failures_total", "vllm_kv_transfer_notification_failures_total", "vllm_kv_transfer_expired_requests_total",
	"vllm_kv_transfer_time_seconds", "vllm_kv_transfer_post_time_seconds", "vllm_kv_transfer_size_bytes", "vllm_kv_transfer_descriptors",
	"vllm_kv_transfer_time_window_seconds", "vllm_kv_transfer_bytes_per_second",
	"vllm_kv_offload_load_bytes_total", "vllm_kv_offload_store_bytes_total", "vllm_kv_offload_load_seconds_total", "vllm_kv_offload_store_seconds_total",
	"vllm_external_prefix_cache_queries_total", "vllm_external_prefix_cache_hits_total", "vllm_external_prefix_cache_hit_ratio",
	"vllm_mm_cache_queries_total", "vllm_mm_cache_hits_total", "vllm_mm_cache_hit_ratio",
	"vllm_lora_slots", "vllm_lora_slots_used", "vllm_lora_adapter_running", "vllm_lora_adapter_waiting",
	"vllm_kv_block_lifetime_seconds", "vllm_kv_block_idle_before_evict_seconds", "vllm_kv_block_reuse_gap_seconds",
	"vllm_kv_block_reuse_gap_window_seconds",
	"vllm_mooncake_store_operations_total", "vllm_mooncake_store_operation_errors_total", "vllm_mooncake_store_keys_total",
	"vllm_mooncake_store_bytes_total", "vllm_mooncake_store_failed_keys_total", "vllm_mooncake_store_operation_seconds",
}

// vLLM names of the families, none of which may be reported missing.
var connectorVLLMNames = []string{
	"vllm:admission_rejections_total", "vllm:nixl_xfer_time_seconds", "vllm:nixl_post_time_seconds", "vllm:nixl_bytes_transferred",
	"vllm:nixl_num_descriptors", "vllm:nixl_num_failed_transfers_total", "vllm:nixl_num_failed_notifications_total",
	"vllm:nixl_num_kv_expired_reqs_total", "vllm:kv_offload_load_bytes_total", "vllm:kv_offload_total_bytes_total",
	"vllm:lora_requests_info", "vllm:kv_block_lifetime_seconds", "vllm:mm_cache_queries_total", "vllm:external_prefix_cache_queries_total",
	"vllm:mooncake_store_operation_total", "vllm:mooncake_store_operation_time_seconds",
}

func withFragment(t *testing.T, base []byte, fragments ...string) []byte {
	t.Helper()
	out := append([]byte(nil), base...)
	for _, f := range fragments {
		out = append(out, fixture(t, f)...)
	}
	return out
}

// dp2BodyWithout is the late-2026 body without the families that the
// 2026-08 main body registers unconditionally (mm and external caches):
// a server without any of the new families.
func dp2BodyWithout(t *testing.T) []byte {
	base := fixture(t, "vllm-late-2026-dp2-priority-spec.txt")
	for _, n := range []string{"admission", "nixl", "kv_offload", "lora", "kv_block", "mm_cache", "external_prefix", "mooncake"} {
		if bytes.Contains(base, []byte("vllm:"+n)) {
			t.Fatalf("the base fixture already has vllm:%s", n)
		}
	}
	return base
}

func TestAdmissionRejectionsByReason(t *testing.T) {
	body := withFragment(t, dp2BodyWithout(t), "vllm-late-2026-decode-lora-fragment.txt")
	s, m := dp2Model(t, body, nil)
	if got := m.RejectedByReason; got["max_num_queued_reqs"] != 17 || got["max_num_queued_tokens"] != 3 || len(got) != 2 {
		t.Errorf("rejected by reason = %v, want max_num_queued_reqs 17, max_num_queued_tokens 3", got)
	}
	compareNoHelp(t, s, `
# TYPE vllm_requests_rejected_total counter
vllm_requests_rejected_total{model="Qwen/Qwen3-32B",reason="max_num_queued_reqs"} 17
vllm_requests_rejected_total{model="Qwen/Qwen3-32B",reason="max_num_queued_tokens"} 3
`, "vllm_requests_rejected_total")
}

// A reason label of unbounded values (not vLLM's) is cut at the map bound.
func TestAdmissionReasonsAreBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("# TYPE vllm:admission_rejections_total counter\n")
	for i := range families.MaxMapLabels + 10 {
		fmt.Fprintf(&b, "vllm:admission_rejections_total{engine=\"0\",model_name=%q,reason=\"r%d\"} 1.0\n", qwen, i)
	}
	s, m := dp2Model(t, append(dp2BodyWithout(t), b.String()...), nil)
	if len(m.RejectedByReason) != families.MaxMapLabels {
		t.Errorf("%d reasons kept, want the bound %d", len(m.RejectedByReason), families.MaxMapLabels)
	}
	if n := testutil.CollectAndCount(s, "vllm_requests_rejected_total"); n != families.MaxMapLabels {
		t.Errorf("%d vllm_requests_rejected_total series, want %d", n, families.MaxMapLabels)
	}
}

// decodeAfterMinute is a scraper that saw the base body, then a minute later
// the decode pod's families (all their observations inside the window).
func decodeAfterMinute(t *testing.T) *Scraper {
	base := dp2BodyWithout(t)
	srv := newFakeVLLM(t, base, "text/plain; version=0.0.4")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	srv.set(withFragment(t, base, "vllm-late-2026-decode-lora-fragment.txt"), nil)
	scrapeAt(s, t0.Add(60*time.Second))
	return s
}

func TestKVTransferFamilies(t *testing.T) {
	s := decodeAfterMinute(t)

	m := s.Latest().Models[qwen]
	wantValue(t, "failed transfers", m.KVTransferFailures, 3)
	wantValue(t, "failed notifications", m.KVTransferNotificationFailures, 1)
	wantValue(t, "expired requests", m.KVTransferExpiredRequests, 4)
	h := m.Histograms.Get("kv_transfer_time")
	if h.Count != 8 || !approx(h.Sum, 0.59) || len(h.Bounds) != 12 {
		t.Errorf("transfer time histogram count %v sum %v bounds %v, want 8, 0.59, 12 bounds (0.005..5)", h.Count, h.Sum, h.Bounds)
	}
	if d := m.Histograms.Get("kv_transfer_descriptors"); d.Count != 8 || d.Sum != 6880 {
		t.Errorf("descriptors histogram count %v sum %v, want 8 and 6880", d.Count, d.Sum)
	}
	// Throughput: all 8 transfers (541065216 bytes) arrived within the minute.
	dv := s.Window(time.Minute)[qwen]
	if dv == nil {
		t.Fatal("no 1m window")
	}
	wantValue(t, "transfer bytes per second", dv.KVTransferBytesPerSecond, 541065216.0/60)
	if q := dv.Quantiles["kv_transfer_time"][0.5]; !q.OK || q.V < 0.025 || q.V > 0.05 {
		t.Errorf("transfer time p50 = %v, want within the 0.025..0.05 bucket (4th of 8 at 0.04)", q)
	}
	compareNoHelp(t, s, `
# TYPE vllm_kv_transfer_failures_total counter
vllm_kv_transfer_failures_total{model="Qwen/Qwen3-32B"} 3
# TYPE vllm_kv_transfer_notification_failures_total counter
vllm_kv_transfer_notification_failures_total{model="Qwen/Qwen3-32B"} 1
# TYPE vllm_kv_transfer_expired_requests_total counter
vllm_kv_transfer_expired_requests_total{model="Qwen/Qwen3-32B"} 4
# TYPE vllm_kv_transfer_bytes_per_second gauge
vllm_kv_transfer_bytes_per_second{model="Qwen/Qwen3-32B",window="1m"} 9.0177536e+06
`, "vllm_kv_transfer_failures_total", "vllm_kv_transfer_notification_failures_total", "vllm_kv_transfer_expired_requests_total", "vllm_kv_transfer_bytes_per_second")
	for _, n := range []string{"vllm_kv_transfer_time_seconds", "vllm_kv_transfer_size_bytes", "vllm_kv_transfer_descriptors", "vllm_kv_transfer_post_time_seconds"} {
		if c := testutil.CollectAndCount(s, n); c != 1 {
			t.Errorf("%d %s series, want 1", c, n)
		}
	}
	// Window quantiles of the transfer time: a summary per window.
	if c := testutil.CollectAndCount(s, "vllm_kv_transfer_time_window_seconds"); c != 1 {
		t.Errorf("%d vllm_kv_transfer_time_window_seconds series, want 1 (window 1m)", c)
	}
}

func TestKVBlockResidencyQuantiles(t *testing.T) {
	s := decodeAfterMinute(t)
	m := s.Latest().Models[qwen]
	for hn, count := range map[string]float64{"kv_block_lifetime": 8, "kv_block_idle_before_evict": 8, "kv_block_reuse_gap": 6} {
		h, ok := m.Histograms.Lookup(snapshot.HistogramName(hn))
		if !ok || h.Count != count || len(h.Bounds) != 21 {
			t.Errorf("%s: present %v count %v bounds %d, want %v observations over 21 bounds", hn, ok, h.Count, len(h.Bounds), count)
		}
	}
	// Reuse gaps 0.5, 0.8, 2, 3, 4, 7 s: the third of six ends bucket
	// (1, 2], the 0.9 quantile (5.4th) lies in (5, 10].
	qs := s.Window(time.Minute)[qwen].Quantiles["kv_block_reuse_gap"]
	if q := qs[0.5]; !q.OK || q.V != 2 {
		t.Errorf("reuse gap p50 = %v, want 2", q)
	}
	if q := qs[0.9]; !q.OK || q.V <= 5 || q.V > 10 {
		t.Errorf("reuse gap p90 = %v, want in (5, 10]", q)
	}
	// Exported: one histogram per model each, and its window quantiles.
	for _, n := range []string{"vllm_kv_block_lifetime_seconds", "vllm_kv_block_idle_before_evict_seconds", "vllm_kv_block_reuse_gap_seconds"} {
		if c := testutil.CollectAndCount(s, n); c != 1 {
			t.Errorf("%d %s series, want 1", c, n)
		}
		if w := strings.TrimSuffix(n, "_seconds") + "_window_seconds"; testutil.CollectAndCount(s, w) != 1 {
			t.Errorf("no %s series (window 1m)", w)
		}
	}
}

// The older (transfer_type) and newer (load/store) kv_offload names, and
// a body with both (vLLM's deprecation period), give identical series.
func TestKVOffloadGenerationsLandOnSameSeries(t *testing.T) {
	offload := []string{"vllm_kv_offload_load_bytes_total", "vllm_kv_offload_store_bytes_total", "vllm_kv_offload_load_seconds_total",
		"vllm_kv_offload_store_seconds_total", "vllm_external_prefix_cache_queries_total", "vllm_external_prefix_cache_hits_total"}
	const want = `
# TYPE vllm_kv_offload_load_bytes_total counter
vllm_kv_offload_load_bytes_total{model="Qwen/Qwen3-32B",tier="cpu"} 4.8e+09
# TYPE vllm_kv_offload_store_bytes_total counter
vllm_kv_offload_store_bytes_total{model="Qwen/Qwen3-32B",tier="cpu"} 1.2e+10
# TYPE vllm_kv_offload_load_seconds_total counter
vllm_kv_offload_load_seconds_total{model="Qwen/Qwen3-32B",tier="cpu"} 0.375
# TYPE vllm_kv_offload_store_seconds_total counter
vllm_kv_offload_store_seconds_total{model="Qwen/Qwen3-32B",tier="cpu"} 0.75
# TYPE vllm_external_prefix_cache_queries_total counter
vllm_external_prefix_cache_queries_total{model="Qwen/Qwen3-32B"} 80000
# TYPE vllm_external_prefix_cache_hits_total counter
vllm_external_prefix_cache_hits_total{model="Qwen/Qwen3-32B"} 40000
`
	outputs := map[string]string{}
	for _, layout := range []string{"older", "newer", "both"} {
		s, _ := dp2Model(t, withFragment(t, dp2BodyWithout(t), "kv-offload-"+layout+"-fragment.txt"), nil)
		compareNoHelp(t, s, want, offload...)
		outputs[layout] = gatherNamed(t, s, offload)
	}
	if outputs["older"] != outputs["newer"] || outputs["both"] != outputs["newer"] {
		t.Errorf("layouts differ:\nolder:\n%s\nnewer:\n%s\nboth:\n%s", outputs["older"], outputs["newer"], outputs["both"])
	}
}

// The external (offload) and multimodal cache hit ratios over a window.
func TestCacheHitRatios(t *testing.T) {
	base := dp2BodyWithout(t)
	srv := newFakeVLLM(t, base, "text/plain; version=0.0.4")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	// Both counters appear from 0: a window needs them at both ends.
	zero := strings.NewReplacer(" 60000.0", " 0.0", " 20000.0", " 0.0", " 30000.0", " 0.0", " 10000.0", " 0.0",
		" 40.0", " 0.0", " 20.0", " 0.0", " 5.0", " 0.0").Replace(string(fixture(t, "kv-offload-newer-fragment.txt")))
	mm := mmCacheLines(t)
	srv.set(append(append(append([]byte(nil), base...), zero...), strings.NewReplacer(" 40.0", " 0.0", " 30.0", " 0.0", " 20.0", " 0.0", " 5.0", " 0.0").Replace(mm)...), nil)
	scrapeAt(s, t0.Add(30*time.Second))
	srv.set(append(withFragment(t, base, "kv-offload-newer-fragment.txt"), mm...), nil)
	scrapeAt(s, t0.Add(90*time.Second))
	dv := s.Window(time.Minute)[qwen]
	if dv == nil {
		t.Fatal("no 1m window")
	}
	wantValue(t, "external hit ratio", dv.Series["vllm_external_prefix_cache_hit_ratio"], 0.5)
	wantValue(t, "mm hit ratio", dv.Series["vllm_mm_cache_hit_ratio"], 35.0/60)
	m := s.Latest().Models[qwen]
	wantValue(t, "mm queries", m.MMCacheQueries, 60)
	wantValue(t, "mm hits", m.MMCacheHits, 35)
}

// mmCacheLines are the multimodal cache families of the decode fragment.
func mmCacheLines(t *testing.T) string {
	var out []string
	for _, l := range strings.Split(string(fixture(t, "vllm-late-2026-decode-lora-fragment.txt")), "\n") {
		if strings.Contains(l, "mm_cache") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// LoRA: the latest label set of vllm:lora_requests_info wins (an earlier
// one lingers beside it), adapters are counted from the comma-joined lists
// and the server-wide reading applies to every model.
func TestLoRAAdaptersFromLabelLists(t *testing.T) {
	s, m := dp2Model(t, withFragment(t, dp2BodyWithout(t), "vllm-late-2026-decode-lora-fragment.txt"), nil)
	if !m.LoRA.Known {
		t.Fatal("LoRA not known")
	}
	compareNoHelp(t, s, `
# TYPE vllm_lora_slots gauge
vllm_lora_slots{model="Qwen/Qwen3-32B"} 4
# TYPE vllm_lora_slots_used gauge
vllm_lora_slots_used{model="Qwen/Qwen3-32B"} 2
# TYPE vllm_lora_adapter_running gauge
vllm_lora_adapter_running{adapter="chat-lora",model="Qwen/Qwen3-32B"} 1
vllm_lora_adapter_running{adapter="sql-lora",model="Qwen/Qwen3-32B"} 2
# TYPE vllm_lora_adapter_waiting gauge
vllm_lora_adapter_waiting{adapter="summarize-lora",model="Qwen/Qwen3-32B"} 1
`, "vllm_lora_slots", "vllm_lora_slots_used", "vllm_lora_adapter_running", "vllm_lora_adapter_waiting")

	// The same samples in the other order: the later timestamp still wins.
	frag := string(fixture(t, "vllm-late-2026-decode-lora-fragment.txt"))
	lines := strings.Split(strings.TrimSuffix(frag, "\n"), "\n")
	n := len(lines)
	lines[n-2], lines[n-1] = lines[n-1], lines[n-2]
	_, m2 := dp2Model(t, append(dp2BodyWithout(t), strings.Join(lines, "\n")+"\n"...), nil)
	if m2.LoRA.Running["chat-lora"] != 1 || m2.LoRA.Waiting["summarize-lora"] != 1 {
		t.Errorf("reversed sample order: running %v waiting %v, want the later label set", m2.LoRA.Running, m2.LoRA.Waiting)
	}
}

// At most MaxLoRAAdapters per list are kept; the rest are counted as dropped.
func TestLoRAAdaptersAreBounded(t *testing.T) {
	names := make([]string, MaxLoRAAdapters+8)
	for i := range names {
		names[i] = fmt.Sprintf("a%d", i)
	}
	body := fmt.Sprintf("# TYPE vllm:lora_requests_info gauge\nvllm:lora_requests_info{max_lora=\"64\",running_lora_adapters=%q,waiting_lora_adapters=\"\"} 1.7e+09\n", strings.Join(names, ","))
	s, m := dp2Model(t, append(dp2BodyWithout(t), body...), nil)
	if len(m.LoRA.Running) != MaxLoRAAdapters {
		t.Errorf("%d adapters kept, want %d", len(m.LoRA.Running), MaxLoRAAdapters)
	}
	if n := testutil.CollectAndCount(s, "vllm_lora_adapter_running"); n != MaxLoRAAdapters {
		t.Errorf("%d vllm_lora_adapter_running series, want %d", n, MaxLoRAAdapters)
	}
	if got := s.dropped[DropLoRAAdapterLimit]; got != 8 {
		t.Errorf("lora_adapter_limit drops = %v, want 8", got)
	}
}

// Without the families (the default): no series, nothing reported missing.
// V0's max_lora="0" (LoRA off) exports nothing either.
func TestConnectorFamiliesAbsentWithoutTheFeature(t *testing.T) {
	v0 := "# TYPE vllm:lora_requests_info gauge\nvllm:lora_requests_info{max_lora=\"0\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"} 1.7e+09\n"
	for name, body := range map[string][]byte{"none": dp2BodyWithout(t), "lora off": append(dp2BodyWithout(t), v0...)} {
		srv := newFakeVLLM(t, body, "text/plain; version=0.0.4")
		s := newTestScraper(t, srv.URL, nil)
		scrapeAt(s, t0)
		scrapeAt(s, t0.Add(60*time.Second))
		for _, n := range connectorSeries {
			if c := testutil.CollectAndCount(s, n); c != 0 {
				t.Errorf("%s: %d %s series without the family, want 0", name, c, n)
			}
		}
		for _, n := range connectorVLLMNames {
			if slices.Contains(s.Latest().Missing, n) {
				t.Errorf("%s: %s reported missing; it is optional", name, n)
			}
		}
	}
}

// gatherNamed is the text exposition of the named families of c.
func gatherNamed(t *testing.T, c prometheus.Collector, names []string) string {
	t.Helper()
	return encodeFamilies(t, sharedtest.GatherAll(t, c), names)
}

// The Mooncake store connector's families (vLLM's MooncakeStorePromMetrics:
// labels operation and status besides model_name and engine) land by
// operation, summed over status and engines; errors are the status="error"
// operations; the operation-time histogram sums every child.
func TestMooncakeStoreFamiliesByOperation(t *testing.T) {
	s, m := dp2Model(t, withFragment(t, dp2BodyWithout(t), "mooncake-store-fragment.txt"), nil)
	compareNoHelp(t, s, `
# TYPE vllm_mooncake_store_operations_total counter
vllm_mooncake_store_operations_total{model="Qwen/Qwen3-32B",operation="load_get"} 203
vllm_mooncake_store_operations_total{model="Qwen/Qwen3-32B",operation="save_put"} 205
# TYPE vllm_mooncake_store_operation_errors_total counter
vllm_mooncake_store_operation_errors_total{model="Qwen/Qwen3-32B",operation="load_get"} 3
vllm_mooncake_store_operation_errors_total{model="Qwen/Qwen3-32B",operation="save_put"} 5
# TYPE vllm_mooncake_store_keys_total counter
vllm_mooncake_store_keys_total{model="Qwen/Qwen3-32B",operation="load_get"} 3248
vllm_mooncake_store_keys_total{model="Qwen/Qwen3-32B",operation="save_put"} 3280
# TYPE vllm_mooncake_store_bytes_total counter
vllm_mooncake_store_bytes_total{model="Qwen/Qwen3-32B",operation="load_get"} 6.811549696e+09
vllm_mooncake_store_bytes_total{model="Qwen/Qwen3-32B",operation="save_put"} 6.87865856e+09
# TYPE vllm_mooncake_store_failed_keys_total counter
vllm_mooncake_store_failed_keys_total{model="Qwen/Qwen3-32B",operation="load_get"} 48
vllm_mooncake_store_failed_keys_total{model="Qwen/Qwen3-32B",operation="save_put"} 80
`, "vllm_mooncake_store_operations_total", "vllm_mooncake_store_operation_errors_total", "vllm_mooncake_store_keys_total",
		"vllm_mooncake_store_bytes_total", "vllm_mooncake_store_failed_keys_total")
	if h := m.Histograms.Get(snapshot.MooncakeStoreOperation); h.Count != 408 || !approx(h.Sum, 408*0.0075) {
		t.Errorf("operation time histogram count %v sum %v, want 408 and 3.06", h.Count, h.Sum)
	}
	if c := testutil.CollectAndCount(s, "vllm_mooncake_store_operation_seconds"); c != 1 {
		t.Errorf("%d vllm_mooncake_store_operation_seconds series, want 1 (every operation and status summed)", c)
	}
}
