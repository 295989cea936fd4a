package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/e2e"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// productionFragments are the late-2026 families of a decode pod with LoRA
// (admission, NIXL, block residency, multimodal cache, lora_requests_info)
// and of KV offloading in both name generations and the Mooncake store
// (from collector/vllm/testdata), the request phase histograms the prefill
// side of the pair row reads (from the simulator's v1-0.33 body), and the
// offload tiers, HF3FS, LoRA residency, heartbeat and per-request
// preemptions of the simulator's connectors body (sim-latest-connectors.txt).
var productionFragments = []string{"vllm-late-2026-decode-lora-fragment.txt", "kv-offload-both-fragment.txt", "vllm-request-phases-fragment.txt", "mooncake-store-fragment.txt",
	"sim-connectors-fragment.txt"}

// Every series the production and P/D pair rows query is one the exporter
// really exposes (from a body with the production families), with every
// label the query filters or groups on.
func TestProductionPanelsQueryExportedSeries(t *testing.T) {
	series := exporterSeries(t, productionFragments...)
	checkPanelsQueryExportedSeries(t, append(rowPanels(t, productionRowTitle), rowPanels(t, pdPairRowTitle)...), series)
}

// The production and P/D pair panels say why they can be empty, and
// compute what their titles say, evaluated by promtool on series shaped
// like the exporter's (classic histograms; internal/histq proves the
// native and NHCB forms give the same answers): rejections by reason
// beside the deepest queue, transfer quantiles, throughput and failures,
// LoRA adapters and slots, offload bytes, bandwidth, busy time and hit
// ratio, block residency quantiles; the pair row reads each side from its
// own pod (the Decode pod and Prefill pod variables).
func TestProductionPanelsComputeWhatTheySay(t *testing.T) {
	panels := map[string]dashPanel{}
	for _, p := range append(rowPanels(t, productionRowTitle), rowPanels(t, pdPairRowTitle)...) {
		panels[p.Title] = p
		if nv := p.FieldConfig.Defaults.NoValue; !strings.Contains(nv, "vLLM") || !regexp.MustCompile(`\d+\.\d+\+|--[a-z]`).MatchString(nv) {
			t.Errorf("panel %q: no-data text %q does not name the vLLM version or flag the series needs", p.Title, nv)
		}
	}
	const decode, prefill = "d:9470", "p:9470"
	pair := strings.NewReplacer(`"$decode"`, `"`+decode+`"`, `"$prefill"`, `"`+prefill+`"`)
	expr := func(title string, i int) string {
		return e2e.Substitute(pair.Replace(panelExpr(t, panels, title, i)))
	}
	const (
		step = 30 * time.Second
		n    = int(10*time.Minute/step) + 1
	)
	at := func(inst string) string { return `job="vllm",instance="` + inst + `",model="m"` }
	l := at("a:9470")
	gauge, counter := panelSeries(n, step)
	var in []testutil.InputSeries
	add := func(series, values string) { in = append(in, testutil.InputSeries{Series: series, Values: values}) }
	// hist adds a classic histogram whose perMin observations a minute
	// all fall in (lo, hi]; a quantile q of it is lo + q (hi - lo).
	hist := func(name, labels string, lo, hi, perMin, sumPerMin float64) {
		add(fmt.Sprintf(`%s_bucket{%s,le="%g"}`, name, labels, lo), gauge(0))
		add(fmt.Sprintf(`%s_bucket{%s,le="%g"}`, name, labels, hi), counter(perMin))
		add(fmt.Sprintf(`%s_bucket{%s,le="+Inf"}`, name, labels), counter(perMin))
		add(fmt.Sprintf(`%s_count{%s}`, name, labels), counter(perMin))
		add(fmt.Sprintf(`%s_sum{%s}`, name, labels), counter(sumPerMin))
	}
	quant := func(q, lo, hi float64) float64 { return lo + q*(hi-lo) }

	const (
		rejReqsPerMin, rejTokensPerMin              = 30.0, 6.0
		xferPerMin, bytesPerMin                     = 120.0, 120 * 4e6
		failPerMin, notifPerMin, expiredPerMin      = 12.0, 3.0, 6.0
		loadBytesPerMin, loadSecsPerMin             = 60e9, 3.0
		storeBytesPerMin, storeSecsPerMin           = 120e9, 12.0
		extQueriesPerMin, extHitsPerMin             = 6000.0, 1500.0
		decodeTTFTLo, decodeTTFTHi                  = 0.1, 0.25
		prefillTTFTLo, prefillTTFTHi                = 1, 2.5
		prefillLo, prefillHi, queueLo, queueHi      = 0.05, 0.1, 0.01, 0.025
		decodeRunning, prefillRunning, deferredWait = 40.0, 8.0, 25.0
	)
	add(`vllm_requests_rejected_total{`+l+`,reason="max_num_queued_reqs"}`, counter(rejReqsPerMin))
	add(`vllm_requests_rejected_total{`+l+`,reason="max_num_queued_tokens"}`, counter(rejTokensPerMin))
	add(`vllm_engine_requests_waiting{`+l+`,engine="0"}`, gauge(64))
	add(`vllm_engine_requests_waiting{`+l+`,engine="1"}`, gauge(17))
	add(`vllm_requests_waiting{`+l+`}`, gauge(81))
	hist("vllm_kv_transfer_time_seconds", l, 0.025, 0.05, xferPerMin, xferPerMin*0.04)
	hist("vllm_kv_transfer_post_time_seconds", l, 0.001, 0.005, xferPerMin, xferPerMin*0.002)
	hist("vllm_kv_transfer_size_bytes", l, 2097152, 8388608, xferPerMin, bytesPerMin)
	add(`vllm_kv_transfer_failures_total{`+l+`}`, counter(failPerMin))
	add(`vllm_kv_transfer_notification_failures_total{`+l+`}`, counter(notifPerMin))
	add(`vllm_kv_transfer_expired_requests_total{`+l+`}`, counter(expiredPerMin))
	add(`vllm_lora_adapter_running{`+l+`,adapter="sql-lora"}`, gauge(1))
	add(`vllm_lora_adapter_running{`+l+`,adapter="chat-lora"}`, gauge(1))
	add(`vllm_lora_adapter_waiting{`+l+`,adapter="summarize-lora"}`, gauge(1))
	add(`vllm_lora_slots_used{`+l+`}`, gauge(2))
	add(`vllm_lora_slots{`+l+`}`, gauge(2))
	add(`vllm_kv_offload_load_bytes_total{`+l+`,tier="cpu"}`, counter(loadBytesPerMin))
	add(`vllm_kv_offload_load_seconds_total{`+l+`,tier="cpu"}`, counter(loadSecsPerMin))
	add(`vllm_kv_offload_store_bytes_total{`+l+`,tier="cpu"}`, counter(storeBytesPerMin))
	add(`vllm_kv_offload_store_seconds_total{`+l+`,tier="cpu"}`, counter(storeSecsPerMin))
	add(`vllm_external_prefix_cache_queries_total{`+l+`}`, counter(extQueriesPerMin))
	add(`vllm_external_prefix_cache_hits_total{`+l+`}`, counter(extHitsPerMin))
	const (
		mcGetPerMin, mcPutPerMin, mcErrPerMin = 600.0, 300.0, 30.0
		mcFailedKeysPerMin, mcKeysPerOp       = 480.0, 16.0
		mcBytesPerKey                         = 1 << 20
	)
	for op, perMin := range map[string]float64{"load_get": mcGetPerMin, "save_put": mcPutPerMin} {
		add(`vllm_mooncake_store_operations_total{`+l+`,operation="`+op+`"}`, counter(perMin))
		add(`vllm_mooncake_store_keys_total{`+l+`,operation="`+op+`"}`, counter(perMin*mcKeysPerOp))
		add(`vllm_mooncake_store_bytes_total{`+l+`,operation="`+op+`"}`, counter(perMin*mcKeysPerOp*mcBytesPerKey))
	}
	add(`vllm_mooncake_store_operation_errors_total{`+l+`,operation="save_put"}`, counter(mcErrPerMin))
	add(`vllm_mooncake_store_failed_keys_total{`+l+`,operation="save_put"}`, counter(mcFailedKeysPerMin))
	hist("vllm_mooncake_store_operation_seconds", l, 0.001, 0.005, mcGetPerMin+mcPutPerMin, (mcGetPerMin+mcPutPerMin)*0.003)
	hist("vllm_kv_block_lifetime_seconds", l, 10, 20, 600, 600*15)
	hist("vllm_kv_block_idle_before_evict_seconds", l, 1, 2, 600, 600*1.5)
	hist("vllm_kv_block_reuse_gap_seconds", l, 5, 10, 300, 300*7)
	const (
		cpuUsage, cpuWriting, diskWriting, cpuReading = 0.62, 0.08, 0.3, 0.05
		allocFailPerMin, promoAllocPerMin             = 12.0, 6.0
		hf3fsSavePerMin, hf3fsLoadPerMin              = 6.0, 12.0
		promoFailPerMin, cascadeFailPerMin            = 3.0, 6.0
		gpuAdapters, cpuAdapters                      = 2.0, 3.0
		finishedPerMin, preemptedAtMostOncePerMin     = 120.0, 90.0
		preemptionsPerMin                             = 240.0
		stepsPerMin, runningA                         = 6000.0, 5.0
	)
	add(`vllm_kv_offload_usage_ratio{`+l+`,tier="cpu"}`, gauge(cpuUsage))
	add(`vllm_kv_offload_write_usage_ratio{`+l+`,tier="cpu"}`, gauge(cpuWriting))
	add(`vllm_kv_offload_write_usage_ratio{`+l+`,tier="disk"}`, gauge(diskWriting))
	add(`vllm_kv_offload_read_usage_ratio{`+l+`,tier="cpu"}`, gauge(cpuReading))
	add(`vllm_kv_offload_allocation_failures_total{`+l+`}`, counter(allocFailPerMin))
	add(`vllm_kv_offload_promotion_allocation_failures_total{`+l+`}`, counter(promoAllocPerMin))
	add(`vllm_hf3fs_save_failures_total{`+l+`}`, counter(hf3fsSavePerMin))
	add(`vllm_hf3fs_load_failures_total{`+l+`}`, counter(hf3fsLoadPerMin))
	add(`vllm_kv_offload_promotion_failures_total{`+l+`,tier="disk"}`, counter(promoFailPerMin))
	add(`vllm_kv_offload_cascade_failures_total{`+l+`,tier="disk"}`, counter(cascadeFailPerMin))
	add(`vllm_lora_gpu_loaded_adapters{`+l+`}`, gauge(gpuAdapters))
	add(`vllm_lora_cpu_loaded_adapters{`+l+`}`, gauge(cpuAdapters))
	for adapter, level := range map[string]string{"sql-lora": "cpu", "chat-lora": "gpu", "summarize-lora": "gpu"} {
		add(`vllm_lora_adapter_loaded{`+l+`,adapter_name="`+adapter+`",level="`+level+`"}`, gauge(1))
	}
	// Every finished request is observed: 90 of 120 a minute at most once.
	add(`vllm_request_preemptions_bucket{`+l+`,le="1"}`, counter(preemptedAtMostOncePerMin))
	add(`vllm_request_preemptions_bucket{`+l+`,le="2"}`, counter(finishedPerMin))
	add(`vllm_request_preemptions_bucket{`+l+`,le="+Inf"}`, counter(finishedPerMin))
	add(`vllm_request_preemptions_count{`+l+`}`, counter(finishedPerMin))
	add(`vllm_request_preemptions_sum{`+l+`}`, counter(preemptionsPerMin))
	add(`vllm_engine_steps_total{`+l+`}`, counter(stepsPerMin))
	add(`vllm_requests_running{`+l+`}`, gauge(runningA))
	// The pair: the decode pod's TTFT includes its transfers, the
	// prefill pod's TTFT (its own prompts) is slower; each panel must
	// read only its side.
	d, p := at(decode), at(prefill)
	hist("vllm_time_to_first_token_seconds", d, decodeTTFTLo, decodeTTFTHi, 60, 60*0.2)
	hist("vllm_time_to_first_token_seconds", p, prefillTTFTLo, prefillTTFTHi, 60, 60*2)
	hist("vllm_kv_transfer_time_seconds", d, 0.05, 0.075, xferPerMin, xferPerMin*0.06)
	hist("vllm_kv_transfer_time_seconds", p, 0.5, 0.75, 1, 0.6)
	hist("vllm_request_prefill_time_seconds", p, prefillLo, prefillHi, 60, 60*0.08)
	hist("vllm_request_prefill_time_seconds", d, 0.5, 1, 60, 60*0.8)
	hist("vllm_request_queue_time_seconds", p, queueLo, queueHi, 60, 60*0.02)
	add(`vllm_requests_running{`+d+`}`, gauge(decodeRunning))
	add(`vllm_requests_running{`+p+`}`, gauge(prefillRunning))
	add(`vllm_requests_waiting_by_reason{`+d+`,reason="deferred"}`, gauge(deferredWait))
	add(`vllm_requests_waiting_by_reason{`+d+`,reason="capacity"}`, gauge(0))
	add(`vllm_requests_waiting_by_reason{`+p+`,reason="capacity"}`, gauge(3))
	add(`vllm_kv_transfer_failures_total{`+d+`}`, counter(failPerMin))
	add(`vllm_kv_transfer_failures_total{`+p+`}`, counter(0))
	add(`vllm_kv_transfer_expired_requests_total{`+p+`}`, counter(expiredPerMin))
	add(`vllm_kv_transfer_expired_requests_total{`+d+`}`, counter(1))
	// Roles: d decodes, p prefills, a serves both; o's exporter reports
	// no role (older than the role series).
	for inst, role := range map[string]string{decode: "decode", prefill: "prefill", "a:9470": "both"} {
		add(`vllm_pod_role_info{`+at(inst)+`,role="`+role+`",source="detected"}`, gauge(1))
	}
	for _, inst := range []string{decode, prefill, "a:9470", "o:9470"} {
		add(`vllm_exporter_build_info{job="vllm",instance="`+inst+`",version="v"}`, gauge(1))
	}

	m := modelSample
	check := func(title string, i int, want ...testutil.ExpSample) testutil.ExprTest {
		return testutil.ExprTest{Expr: expr(title, i), EvalTime: testutil.Duration(5 * time.Minute), ExpSamples: want}
	}
	const (
		rejected  = "Admission rejections by reason (queue vs cap)"
		latency   = "KV transfer latency p50 / p99 (NIXL)"
		thru      = "KV transfer throughput (NIXL)"
		failures  = "KV transfer failures and expired requests (NIXL)"
		adapters  = "LoRA adapters running and waiting"
		slots     = "LoRA slots used vs max_lora"
		offBytes  = "KV offload throughput and bandwidth by direction and tier"
		offTime   = "KV offload transfer time by direction and tier"
		hit       = "KV offload hit ratio (external prefix cache)"
		residency = "KV block residency p50 / p99"
		decTTFT   = "Decode pod: TTFT and KV transfer p99"
		preTime   = "Prefill pod: prefill and queue time p99"
		pairLoad  = "Pair: running and waiting (decode waits on transfers)"
		pairFail  = "Pair: transfer failures (decode) and expired KV (prefill)"
		roles     = "Pod roles (prefill, decode, both)"
		mcOps     = "Mooncake store operations, errors and failed keys"
		mcBytes   = "Mooncake store throughput"
		mcTime    = "Mooncake store operation time p50 / p99"
		tierUse   = "KV offload tier usage (CPU tier and the tiers behind it)"
		offFail   = "KV offload and HF3FS failures"
		loraRes   = "LoRA adapters loaded (GPU and CPU)"
		preempted = "Requests preempted more than once, and preemptions per request"
		heartbeat = "Engine steps per second (heartbeat)"
	)
	on := func(inst string, v float64, kv ...string) testutil.ExpSample {
		return m(v, append([]string{"instance", inst}, kv...)...)
	}
	checks := []testutil.ExprTest{
		check(rejected, 0, m(rejReqsPerMin/60, "reason", "max_num_queued_reqs"), m(rejTokensPerMin/60, "reason", "max_num_queued_tokens")),
		check(rejected, 1, m(64)),
		check(thru, 0, m(bytesPerMin/60)),
		check(thru, 1, m(quant(0.5, 2097152, 8388608))),
		check(failures, 1, m(notifPerMin/60)),
		check(adapters, 0, m(1, "adapter", "sql-lora"), m(1, "adapter", "chat-lora")),
		check(adapters, 1, m(1, "adapter", "summarize-lora")),
		check(slots, 0, m(2)),
		check(slots, 1, m(2)),
		check(offBytes, 0, m(loadBytesPerMin/60, "tier", "cpu")),
		check(offBytes, 1, m(storeBytesPerMin/60, "tier", "cpu")),
		check(offBytes, 2, m(loadBytesPerMin/loadSecsPerMin, "tier", "cpu")),
		check(offBytes, 3, m(storeBytesPerMin/storeSecsPerMin, "tier", "cpu")),
		check(offTime, 0, m(loadSecsPerMin/60, "tier", "cpu")),
		check(offTime, 1, m(storeSecsPerMin/60, "tier", "cpu")),
		check(hit, 0, m(extHitsPerMin/extQueriesPerMin)),
		check(residency, 0, m(quant(0.5, 10, 20))),
		check(residency, 1, m(quant(0.99, 10, 20))),
		check(residency, 2, m(quant(0.5, 1, 2))),
		check(residency, 3, m(quant(0.99, 1, 2))),
		check(residency, 4, m(quant(0.5, 5, 10))),
		check(residency, 5, m(quant(0.99, 5, 10))),
		check(decTTFT, 0, on(decode, quant(0.99, decodeTTFTLo, decodeTTFTHi))),
		check(decTTFT, 1, on(decode, quant(0.5, decodeTTFTLo, decodeTTFTHi))),
		check(decTTFT, 2, on(decode, quant(0.99, 0.05, 0.075))),
		check(preTime, 0, on(prefill, quant(0.99, prefillLo, prefillHi))),
		check(preTime, 1, on(prefill, quant(0.5, prefillLo, prefillHi))),
		check(preTime, 2, on(prefill, quant(0.99, queueLo, queueHi))),
		check(pairLoad, 0, on(prefill, prefillRunning)),
		check(pairLoad, 1, on(decode, decodeRunning)),
		check(pairLoad, 2, on(decode, deferredWait, "reason", "deferred"), on(decode, 0, "reason", "capacity")),
		check(pairFail, 0, on(decode, failPerMin/60)),
		check(pairFail, 1, on(prefill, expiredPerMin/60)),
		check(mcOps, 0, m(mcGetPerMin/60, "operation", "load_get"), m(mcPutPerMin/60, "operation", "save_put")),
		check(mcOps, 1, m(mcErrPerMin/60, "operation", "save_put")),
		check(mcOps, 2, m(mcFailedKeysPerMin/60, "operation", "save_put")),
		check(mcBytes, 0, m(mcGetPerMin*mcKeysPerOp*mcBytesPerKey/60, "operation", "load_get"), m(mcPutPerMin*mcKeysPerOp*mcBytesPerKey/60, "operation", "save_put")),
		check(mcBytes, 1, m(mcBytesPerKey, "operation", "load_get"), m(mcBytesPerKey, "operation", "save_put")),
		check(mcTime, 0, m(quant(0.99, 0.001, 0.005))),
		check(mcTime, 1, m(quant(0.5, 0.001, 0.005))),
		check(tierUse, 0, m(cpuUsage, "tier", "cpu")),
		check(tierUse, 1, m(cpuWriting, "tier", "cpu"), m(diskWriting, "tier", "disk")),
		check(tierUse, 2, m(cpuReading, "tier", "cpu")),
		check(offFail, 0, m(allocFailPerMin/60)),
		check(offFail, 1, m(promoAllocPerMin/60)),
		check(offFail, 2, m(hf3fsSavePerMin/60)),
		check(offFail, 3, m(hf3fsLoadPerMin/60)),
		check(offFail, 4, m(promoFailPerMin/60, "tier", "disk")),
		check(offFail, 5, m(cascadeFailPerMin/60, "tier", "disk")),
		check(loraRes, 0, m(gpuAdapters)),
		check(loraRes, 1, m(cpuAdapters)),
		check(loraRes, 2, m(2, "level", "gpu"), m(1, "level", "cpu")),
		check(preempted, 0, m(1-preemptedAtMostOncePerMin/finishedPerMin)),
		check(preempted, 1, m(preemptionsPerMin/finishedPerMin)),
		check(roles, 0, on(decode, 1, "role", "decode", "source", "detected"), on(prefill, 1, "role", "prefill", "source", "detected"), on("a:9470", 1, "role", "both", "source", "detected")),
	}
	// The pair's variables list the pods of their role, the aggregated
	// one and the one without role information.
	vars := overviewVariables(t)
	for name, want := range map[string][]string{"prefill": {prefill, "a:9470", "o:9470"}, "decode": {decode, "a:9470", "o:9470"}} {
		e, err := e2e.VariableExpr(vars[name])
		if err != nil {
			t.Fatalf("variable %s: %v", name, err)
		}
		var exp []testutil.ExpSample
		for _, inst := range want {
			exp = append(exp, testutil.ExpSample{Labels: `{instance="` + inst + `"}`, Value: 1})
		}
		checks = append(checks, testutil.ExprTest{Expr: e2e.Substitute(e), EvalTime: testutil.Duration(5 * time.Minute), ExpSamples: exp})
		// Grafana takes each value out of a result line with the regex.
		if got := instanceValue(t, vars, name, `{instance="`+want[0]+`"} 1 1700000000000`); got != want[0] {
			t.Errorf("variable %s: the regex takes %q from a result line, want %q", name, got, want[0])
		}
	}
	// The transfer panels sum over every pod of the model (here the a, d
	// and p pods' series): checked on pod a alone.
	only := func(e string) string { return strings.ReplaceAll(e, `instance=~".*"`, `instance=~"a:9470"`) }
	for i, q := range []float64{0.99, 0.5} {
		checks = append(checks, testutil.ExprTest{Expr: only(expr(latency, i)), EvalTime: testutil.Duration(5 * time.Minute), ExpSamples: []testutil.ExpSample{m(quant(q, 0.025, 0.05))}})
	}
	for i, v := range []float64{failPerMin / 60, expiredPerMin / 60} {
		checks = append(checks, testutil.ExprTest{Expr: only(expr(failures, 2*i)), EvalTime: testutil.Duration(5 * time.Minute), ExpSamples: []testutil.ExpSample{m(v)}})
	}
	checks = append(checks, testutil.ExprTest{Expr: only(expr(latency, 2)), EvalTime: testutil.Duration(5 * time.Minute), ExpSamples: []testutil.ExpSample{m(quant(0.99, 0.001, 0.005))}})
	for i, v := range []float64{stepsPerMin / 60, runningA} {
		checks = append(checks, testutil.ExprTest{Expr: only(expr(heartbeat, i)), EvalTime: testutil.Duration(5 * time.Minute), ExpSamples: []testutil.ExpSample{m(v)}})
	}
	testutil.RunRuleTests(t, testutil.WriteRuleTest(t, t.TempDir(), "production_panels_test.yml", testutil.RuleTestFile{
		EvaluationInterval: testutil.Duration(time.Minute),
		Tests:              []testutil.RuleTest{{Interval: testutil.Duration(step), InputSeries: in, ExprTests: checks}},
	}))
	// Every target of every panel of the two rows is evaluated above.
	seen := map[string]bool{}
	for _, c := range checks {
		seen[c.Expr] = true
	}
	for title, p := range panels {
		for i := range p.Targets {
			if e := expr(title, i); !seen[e] && !seen[only(e)] {
				t.Errorf("panel %q target %d is not evaluated by this test", title, i)
			}
		}
	}
}

// overviewVariables: the overview dashboard's variable queries by name,
// with each variable's regex under name+".regex".
func overviewVariables(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("vllm-overview.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
				Regex      string `json:"regex"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, v := range d.Templating.List {
		out[v.Name], out[v.Name+".regex"] = v.Definition, v.Regex
	}
	return out
}

// instanceValue applies a variable's regex (Grafana's /re/ form) to one
// query_result line and returns the captured value.
func instanceValue(t *testing.T, vars map[string]string, name, line string) string {
	t.Helper()
	re := vars[name+".regex"]
	if len(re) < 2 || re[0] != '/' || re[len(re)-1] != '/' {
		t.Fatalf("variable %s: regex %q is not /.../", name, re)
	}
	m := regexp.MustCompile(re[1 : len(re)-1]).FindStringSubmatch(line)
	if len(m) != 2 {
		return ""
	}
	return m[1]
}
