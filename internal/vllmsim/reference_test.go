package vllmsim

import (
	"bytes"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// refFamily is one family as reference/metrics.md §3 and
// reference/metrics-late-2026.md describe it: type, labels beyond
// model_name/engine (le excluded), and the exact HELP where the reference
// gives it ("" = not given there).
type refFamily struct {
	typ   dto.MetricType
	extra []string
	help  string
}

var (
	counter = dto.MetricType_COUNTER
	gauge   = dto.MetricType_GAUGE
	hist    = dto.MetricType_HISTOGRAM
)

// newestRef lists what the newest layout must carry, straight from the references.
var newestRef = map[string]refFamily{
	"vllm:estimated_flops_per_gpu_total":       {counter, nil, "Estimated number of floating point operations per GPU (for Model Flops Utilization calculations)."},
	"vllm:estimated_read_bytes_per_gpu_total":  {counter, nil, "Estimated number of bytes read from memory per GPU (for Model Flops Utilization calculations)."},
	"vllm:estimated_write_bytes_per_gpu_total": {counter, nil, "Estimated number of bytes written to memory per GPU (for Model Flops Utilization calculations)."},
	"vllm:num_requests_running":                {gauge, nil, "Number of requests in model execution batches."},
	"vllm:num_requests_waiting":                {gauge, nil, "Number of requests waiting to be processed."},
	"vllm:num_requests_waiting_by_reason": {gauge, []string{"reason"}, "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; " +
		"'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting."},
	"vllm:engine_sleep_state": {gauge, []string{"sleep_state"}, "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; " +
		"weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2."},
	"vllm:engine_sleep_resource_state":                   {gauge, []string{"resource", "state"}, ""},
	"vllm:engine_fully_awake":                            {gauge, nil, ""},
	"vllm:scheduler_policy_info":                         {gauge, []string{"policy"}, ""},
	"vllm:kv_cache_usage_perc":                           {gauge, nil, "KV-cache usage. 1 means 100 percent usage."},
	"vllm:prefix_cache_queries_total":                    {counter, nil, "Prefix cache queries, in terms of number of queried tokens."},
	"vllm:prefix_cache_hits_total":                       {counter, nil, "Prefix cache hits, in terms of number of cached tokens."},
	"vllm:num_preemptions_total":                         {counter, nil, "Cumulative number of preemption from the engine."},
	"vllm:prompt_tokens_total":                           {counter, nil, "Number of prefill tokens processed."},
	"vllm:prompt_tokens_by_source_total":                 {counter, []string{"source"}, "Number of prompt tokens by source."},
	"vllm:prompt_tokens_cached_total":                    {counter, nil, "Number of cached prompt tokens (local + external)."},
	"vllm:generation_tokens_total":                       {counter, nil, "Number of generation tokens processed."},
	"vllm:request_success_total":                         {counter, []string{"finished_reason"}, "Count of successfully processed requests."},
	"vllm:request_prompt_tokens":                         {hist, nil, "Number of prefill tokens processed."},
	"vllm:request_generation_tokens":                     {hist, nil, "Number of generation tokens processed."},
	"vllm:iteration_tokens_total":                        {hist, nil, "Histogram of number of tokens per engine_step."},
	"vllm:request_num_preemptions":                       {hist, nil, ""},
	"vllm:time_to_first_token_seconds":                   {hist, nil, "Histogram of time to first token in seconds."},
	"vllm:inter_token_latency_seconds":                   {hist, nil, "Histogram of inter-token latency in seconds."},
	"vllm:request_time_per_output_token_seconds":         {hist, nil, "Histogram of time_per_output_token_seconds per request."},
	"vllm:e2e_request_latency_seconds":                   {hist, nil, "Histogram of e2e request latency in seconds."},
	"vllm:request_queue_time_seconds":                    {hist, nil, "Histogram of time spent in WAITING phase for request."},
	"vllm:request_prefill_kv_computed_tokens":            {hist, nil, "Histogram of new KV tokens computed during prefill (excluding cached tokens)."},
	"vllm:cache_config_info":                             {gauge, []string{"block_size", "kv_cache_max_concurrency", "kv_cache_size_tokens", "num_gpu_blocks"}, "Information of the LLMEngine CacheConfig"},
	"vllm:spec_decode_num_drafts_total":                  {counter, nil, "Number of spec decoding drafts."},
	"vllm:spec_decode_num_draft_tokens_total":            {counter, nil, "Number of draft tokens."},
	"vllm:spec_decode_num_accepted_tokens_total":         {counter, nil, "Number of accepted tokens."},
	"vllm:spec_decode_num_accepted_tokens_per_pos_total": {counter, []string{"position"}, "Accepted tokens per draft position."},
	"http_requests_total":                                {counter, []string{"handler", "method", "status"}, ""},
}

func labelNames(m *dto.Metric) []string {
	var out []string
	for _, lp := range m.GetLabel() {
		switch lp.GetName() {
		case "model_name", "engine", "le":
			continue
		}
		out = append(out, lp.GetName())
	}
	sort.Strings(out)
	return out
}

// TestV1033FamiliesMatchReference parses the newest layout's fixtures with
// expfmt and checks every family the references name: present, type,
// labels, HELP; model_name and engine on every vllm:* engine family.
func TestV1033FamiliesMatchReference(t *testing.T) {
	fams := map[string]*dto.MetricFamily{}
	for _, name := range []string{"healthy", "spec-decode"} {
		for k, v := range parseMetrics(t, readFixture(t, fixtureName(name))) {
			fams[k] = v
		}
	}
	for name, ref := range newestRef {
		f, ok := fams[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if f.GetType() != ref.typ {
			t.Errorf("%s: type %v, want %v", name, f.GetType(), ref.typ)
		}
		if ref.help != "" && f.GetHelp() != ref.help {
			t.Errorf("%s: HELP %q\nwant %q", name, f.GetHelp(), ref.help)
		}
		for _, m := range f.GetMetric() {
			got := labelNames(m)
			for _, want := range ref.extra {
				if !slices.Contains(got, want) {
					t.Errorf("%s: child %v lacks label %q", name, got, want)
				}
			}
			if name == "vllm:cache_config_info" {
				continue // opaque CacheConfig labels besides those checked
			}
			if sort.Strings(ref.extra); !reflect.DeepEqual(got, append([]string(nil), ref.extra...)) && !(len(got) == 0 && len(ref.extra) == 0) {
				t.Errorf("%s: labels %v, want %v", name, got, ref.extra)
			}
			if strings.HasPrefix(name, "vllm:") && (!hasLabel(m, "model_name") || !hasLabel(m, "engine")) {
				t.Errorf("%s: child without model_name/engine: %v", name, m.GetLabel())
			}
		}
	}
	// Label values the references fix.
	checkValues := func(name, label string, want ...string) {
		t.Helper()
		var got []string
		for _, m := range fams[name].GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && !slices.Contains(got, lp.GetValue()) {
					got = append(got, lp.GetValue())
				}
			}
		}
		sort.Strings(got)
		sort.Strings(want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s{%s}: values %v, want %v", name, label, got, want)
		}
	}
	checkValues("vllm:num_requests_waiting_by_reason", "reason", "capacity", "deferred")
	checkValues("vllm:engine_sleep_state", "sleep_state", "awake", "weights_offloaded", "discard_all")
	checkValues("vllm:engine_sleep_resource_state", "resource", "scheduler", "weights", "kv_cache")
	checkValues("vllm:engine_sleep_resource_state", "state", "running", "paused", "resident", "offloaded", "discarded", "released", "unknown")
	checkValues("vllm:prompt_tokens_by_source_total", "source", "local_compute", "local_cache_hit", "external_kv_transfer")
	checkValues("vllm:request_success_total", "finished_reason", "stop", "length", "abort", "error", "repetition")
	checkValues("vllm:scheduler_policy_info", "policy", "fcfs", "priority")
	checkValues("vllm:spec_decode_num_accepted_tokens_per_pos_total", "position", "0", "1", "2")
	checkValues("http_requests_total", "status", "2xx", "4xx", "5xx")
	// request_num_preemptions: buckets 1, 2, 3, 4, 5, 10, 20.
	if got := bucketBounds(readFixture(t, fixtureName("healthy")), "vllm:request_num_preemptions"); !reflect.DeepEqual(got, []string{"1.0", "2.0", "3.0", "4.0", "5.0", "10.0", "20.0", "+Inf"}) {
		t.Errorf("request_num_preemptions buckets %v", got)
	}
	// engine_healthy (fault tolerance): engine label only.
	for _, m := range fams["vllm:engine_healthy"].GetMetric() {
		if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetName() != "engine" {
			t.Errorf("engine_healthy labels %v, want engine only", m.GetLabel())
		}
	}
}

func hasLabel(m *dto.Metric, name string) bool {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return true
		}
	}
	return false
}

// TestV1033IsMainPlusLaterFamilies: the newest layout keeps every main
// (2026-08) family with the same type and HELP, in the same relative order,
// and adds only families main does not have.
func TestV1033IsMainPlusLaterFamilies(t *testing.T) {
	v1 := headers(trafficSim(t, Config{MetricsVersion: MetricsV1}).Metrics())
	latest := headers(trafficSim(t, Config{MetricsVersion: MetricsLatest}).Metrics())
	added := map[string]bool{}
	for _, h := range latest {
		added[h.name] = !slices.ContainsFunc(v1, func(x famHeader) bool { return x.name == h.name })
	}
	if !added["vllm:request_num_preemptions"] || !added["vllm:scheduler_queue_pressure"] {
		t.Errorf("the newest layout adds nothing main lacks: %v", added)
	}
	i := 0
	for _, h := range latest {
		if added[h.name] {
			continue
		}
		if i >= len(v1) || v1[i] != h {
			t.Fatalf("family %+v of the newest layout is not main's next family %+v", h, v1[min(i, len(v1)-1)])
		}
		i++
	}
	if i != len(v1) {
		t.Errorf("main families missing from the newest layout from %+v on", v1[i])
	}
}

// TestRustFrontEndSubset: the Rust front-end's layout is main's without
// the families its registry lacks, in OpenMetrics (counters named without
// _total, no _created, # EOF last), with LoRA info when LoRA is on.
func TestRustFrontEndSubset(t *testing.T) {
	s := trafficSim(t, Config{MetricsVersion: MetricsRust})
	if err := s.SetLoRA(LoRAConfig{MaxLoRA: 1, Adapters: []string{"sql-lora"}}); err != nil {
		t.Fatal(err)
	}
	body := s.Metrics()
	types := map[string]string{}
	for _, h := range headers(body) {
		types[h.name] = h.typ
	}
	for _, absent := range []string{"vllm:cache_config_info", "vllm:engine_sleep_state", "vllm:mm_cache_queries", "vllm:iteration_tokens_total",
		"vllm:corrupted_requests", "process_cpu_seconds", "python_info", "vllm:num_preemptions_total"} {
		if _, ok := types[absent]; ok {
			t.Errorf("%s in the Rust front-end's body", absent)
		}
	}
	for name, typ := range map[string]string{"vllm:num_preemptions": "counter", "vllm:request_success": "counter", "vllm:kv_cache_usage_perc": "gauge",
		"vllm:time_to_first_token_seconds": "histogram", "vllm:lora_requests_info": "gauge", "http_request_duration_seconds": "histogram"} {
		if types[name] != typ {
			t.Errorf("%s: type %q, want %s", name, types[name], typ)
		}
	}
	if !bytes.HasSuffix(body, []byte("\n# EOF\n")) || bytes.Contains(body, []byte("_created")) || !bytes.Contains(body, []byte("\nvllm:num_preemptions_total{")) {
		t.Errorf("not an OpenMetrics body of counters without _created:\n%s", body[max(0, len(body)-300):])
	}
	if _, err := New(Config{MetricsVersion: MetricsRust, APIServerCount: 2}); err == nil {
		t.Error("the Rust front-end accepted two API servers")
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text; version=1.0.0") {
		t.Errorf("Content-Type %q", ct)
	}
}
