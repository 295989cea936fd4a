#!/usr/bin/env python3
"""Renders vllm-late-2026-dp2-priority-spec.txt: a constructed vLLM /metrics
body with the families metrics.md §3 and metrics-late-2026.md list for
0.20-0.33 (waiting by reason, sleep states incl. resource state, spec decode,
priority label, custom TTFT buckets, MFU counters, 5xx answers), in
prometheus_client's text layout (labels sorted, floatToGoString numbers,
_created families omitted: the exporter drops them unread). Two
data-parallel engines. Counts are consistent: histogram +Inf = count =
sum over priorities; per-engine values differ so sums/means are visible.
Run: python3 gen/late2026.py > vllm-late-2026-dp2-priority-spec.txt
"""
M = "Qwen/Qwen3-32B"
out = []
def fam(name, typ, help_):
    out.append(f"# HELP {name} {help_}")
    out.append(f"# TYPE {name} {typ}")
def f(v):
    if v == float("inf"): return "+Inf"
    s = repr(float(v))
    return s
def line(name, labels, v):
    ls = ",".join(f'{k}="{labels[k]}"' for k in sorted(labels))
    out.append(f"{name}{{{ls}}} {f(v)}")
def eng(e, **kw):
    d = {"engine": str(e), "model_name": M}; d.update(kw); return d

fam("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.")
for e, v in ((0, 3), (1, 2)): line("vllm:num_requests_running", eng(e), v)
fam("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.")
for e, v in ((0, 240), (1, 252)): line("vllm:num_requests_waiting", eng(e), v)
fam("vllm:num_requests_waiting_by_reason", "gauge", "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.")
for e, c, d in ((0, 9, 231), (1, 10, 242)):
    line("vllm:num_requests_waiting_by_reason", eng(e, reason="capacity"), c)
    line("vllm:num_requests_waiting_by_reason", eng(e, reason="deferred"), d)
fam("vllm:engine_sleep_state", "gauge", "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.")
for e in (0, 1):
    line("vllm:engine_sleep_state", eng(e, sleep_state="awake"), 1)
    line("vllm:engine_sleep_state", eng(e, sleep_state="weights_offloaded"), 0)
    line("vllm:engine_sleep_state", eng(e, sleep_state="discard_all"), 0)
fam("vllm:engine_sleep_resource_state", "gauge", "Engine sleep state per resource.")
for e in (0, 1):
    for res, st in (("scheduler", "running"), ("weights", "resident"), ("kv_cache", "resident")):
        for s2 in ("running", "paused") if res == "scheduler" else ("resident", "offloaded", "discarded"):
            line("vllm:engine_sleep_resource_state", eng(e, resource=res, state=s2), 1 if s2 == st else 0)
fam("vllm:engine_fully_awake", "gauge", "1 when every engine resource is awake.")
for e in (0, 1): line("vllm:engine_fully_awake", eng(e), 1)
fam("vllm:engine_healthy", "gauge", "Engine cached health state (1 = healthy).")
for e in (0, 1): line("vllm:engine_healthy", {"engine": str(e), "model_name": M}, 1)
fam("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.")
for e, v in ((0, 0.2), (1, 0.19)): line("vllm:kv_cache_usage_perc", eng(e), v)
fam("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.")
for e, v in ((0, 500000), (1, 480000)): line("vllm:prefix_cache_queries_total", eng(e), v)
fam("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.")
for e, v in ((0, 200000), (1, 190000)): line("vllm:prefix_cache_hits_total", eng(e), v)
fam("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.")
for e, v in ((0, 4), (1, 1)): line("vllm:num_preemptions_total", eng(e), v)
fam("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.")
for e, v in ((0, 500000), (1, 480000)): line("vllm:prompt_tokens_total", eng(e), v)
fam("vllm:prompt_tokens_by_source_total", "counter", "Number of prompt tokens by source.")
for e, comp, hit, ext in ((0, 290000, 200000, 10000), (1, 285000, 190000, 5000)):
    line("vllm:prompt_tokens_by_source_total", eng(e, source="local_compute"), comp)
    line("vllm:prompt_tokens_by_source_total", eng(e, source="local_cache_hit"), hit)
    line("vllm:prompt_tokens_by_source_total", eng(e, source="external_kv_transfer"), ext)
fam("vllm:prompt_tokens_cached_total", "counter", "Number of cached prompt tokens (local + external).")
for e, v in ((0, 210000), (1, 195000)): line("vllm:prompt_tokens_cached_total", eng(e), v)
fam("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.")
for e, v in ((0, 300000), (1, 290000)): line("vllm:generation_tokens_total", eng(e), v)
# request_success_total with priority (policy priority): finished per (engine, reason, priority)
succ = {0: {"stop": {"-1": 100, "0": 300, "1": 50}, "length": {"-1": 5, "0": 20, "1": 1}, "abort": {"-1": 0, "0": 2, "1": 0}},
        1: {"stop": {"-1": 90, "0": 310, "1": 40}, "length": {"-1": 4, "0": 18, "1": 2}, "abort": {"-1": 1, "0": 1, "1": 0}}}
fam("vllm:request_success_total", "counter", "Count of successfully processed requests.")
for e in (0, 1):
    for r in ("stop", "length", "abort", "error", "repetition"):
        for p in ("-1", "0", "1"):
            line("vllm:request_success_total", eng(e, finished_reason=r, priority=p), succ[e].get(r, {}).get(p, 0))
# custom TTFT buckets (--custom-histogram-buckets '{"time_to_first_token":[0.05,0.1,0.2,0.35,0.5,1,2,5]}')
ttft_b = [0.05, 0.1, 0.2, 0.35, 0.5, 1.0, 2.0, 5.0]
def hist(name, help_, bounds, per):  # per: {(engine, priority): (cumulative counts incl +Inf, sum)}
    fam(name, "histogram", help_)
    for (e, p), (cum, sm) in per.items():
        labels = eng(e) if p is None else eng(e, priority=p)
        for b, c in zip(bounds + [float("inf")], cum):
            l = dict(labels); l["le"] = f(b) if b != float("inf") else "+Inf"
            line(name + "_bucket", l, c)
        line(name + "_count", labels, cum[-1])
        line(name + "_sum", labels, sm)
def fin(e, p): return sum(succ[e][r][p] for r in succ[e])
ttft = {}
for e in (0, 1):
    for p in ("-1", "0", "1"):
        n = fin(e, p)
        # priority 1 is served first: fast; -1 waits
        frac = {"1": [0.5, 0.8, 0.95, 1, 1, 1, 1, 1], "0": [0.2, 0.5, 0.7, 0.8, 0.9, 0.97, 1, 1], "-1": [0.05, 0.1, 0.2, 0.3, 0.4, 0.6, 0.8, 0.95]}[p]
        cum = [int(round(x * n)) for x in frac] + [n]
        ttft[(e, p)] = (cum, round(0.3 * n, 3))
hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft_b, ttft)
itl_b = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
itl = {}
for e, n in ((0, 120000), (1, 115000)):
    cum = [0, 0, int(n * 0.3), int(n * 0.7), int(n * 0.9)] + [n] * 14 + [n]
    itl[(e, None)] = (cum, round(n * 0.06, 3))
hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itl_b, itl)
lat_b = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
e2e = {}
for e in (0, 1):
    for p in ("-1", "0", "1"):
        n = fin(e, p)
        cum = [0, 0, 0, 0, 0, 0, 0, int(n * 0.2), int(n * 0.6), int(n * 0.9)] + [n] * 11 + [n]
        e2e[(e, p)] = (cum, round(n * 9.5, 3))
hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", lat_b, e2e)
kvc = {}
for e in (0, 1):
    n = sum(fin(e, p) for p in ("-1", "0", "1"))
    b125 = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000]
    cum = [0, 0, 0, 0, int(n * .05), int(n * .1), int(n * .2), int(n * .4), int(n * .7), int(n * .9), n, n, n, n, n]
    kvc[(e, None)] = (cum, 285000 if e == 0 else 280000)
hist("vllm:request_prefill_kv_computed_tokens", "Histogram of new KV tokens computed during prefill (excluding cached tokens).", b125, kvc)
fam("vllm:spec_decode_num_drafts_total", "counter", "Number of spec decoding drafts.")
for e, v in ((0, 100000), (1, 96000)): line("vllm:spec_decode_num_drafts_total", eng(e), v)
fam("vllm:spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.")
for e, v in ((0, 300000), (1, 288000)): line("vllm:spec_decode_num_draft_tokens_total", eng(e), v)
fam("vllm:spec_decode_num_accepted_tokens_total", "counter", "Number of accepted tokens.")
for e, v in ((0, 180000), (1, 170000)): line("vllm:spec_decode_num_accepted_tokens_total", eng(e), v)
fam("vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter", "Accepted tokens per draft position.")
for e in (0, 1):
    for pos, v in enumerate((80000, 60000, 40000) if e == 0 else (76000, 56000, 38000)):
        line("vllm:spec_decode_num_accepted_tokens_per_pos_total", eng(e, position=str(pos)), v)
fam("vllm:estimated_flops_per_gpu_total", "counter", "Estimated number of floating point operations per GPU (for Model Flops Utilization calculations).")
for e, v in ((0, 4.0e17), (1, 3.8e17)): line("vllm:estimated_flops_per_gpu_total", eng(e), v)
fam("vllm:estimated_read_bytes_per_gpu_total", "counter", "Estimated number of bytes read from memory per GPU (for Model Flops Utilization calculations).")
for e, v in ((0, 9.0e15), (1, 8.8e15)): line("vllm:estimated_read_bytes_per_gpu_total", eng(e), v)
fam("vllm:estimated_write_bytes_per_gpu_total", "counter", "Estimated number of bytes written to memory per GPU (for Model Flops Utilization calculations).")
for e, v in ((0, 1.0e14), (1, 0.9e14)): line("vllm:estimated_write_bytes_per_gpu_total", eng(e), v)
fam("vllm:scheduler_policy_info", "gauge", "Scheduler policy.")
line("vllm:scheduler_policy_info", {"engine": "0", "model_name": M, "policy": "priority"}, 1)
fam("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig")
for e in (0, 1):
    line("vllm:cache_config_info", {"block_size": "16", "cache_dtype": "fp8", "enable_prefix_caching": "True", "engine": str(e),
        "gpu_memory_utilization": "0.9", "kv_cache_max_concurrency": "12.5", "kv_cache_memory_bytes": "None",
        "kv_cache_size_tokens": "409600", "num_gpu_blocks": "25600", "num_cpu_blocks": "0"}, 1)
fam("http_requests_total", "counter", "Total number of requests by method, status and handler.")
for h, m, s, v in (("/v1/chat/completions", "POST", "2xx", 1440), ("/v1/chat/completions", "POST", "4xx", 12),
                   ("/v1/chat/completions", "POST", "5xx", 30), ("/v1/completions", "POST", "5xx", 5),
                   ("/v1/models", "GET", "2xx", 40)):
    line("http_requests_total", {"handler": h, "method": m, "status": s}, v)
print("\n".join(out))
