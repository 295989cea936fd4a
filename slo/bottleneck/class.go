// Package bottleneck turns the exporter's live inputs (vLLM scrape windows,
// NVML samples, probe results) into one falsifiable diagnosis per model: a
// bottleneck class with the evidence that decided it and the first knob to
// turn. It also holds the pure decode-roofline, capacity and cost arithmetic
// and the `diagnose` report.
package bottleneck

// Class is one bottleneck regime.
type Class string

// The classes, in priority order: when several rules hold on one tick the
// earliest wins. Why this order:
//
//   - gpu_fault: when the hardware is broken every other signal is a
//     symptom (or stale), and no knob helps.
//   - deferred_livelock before engine_stalled: the engine still steps, but
//     the scheduler admits nothing (vllm #53130), so tokens stop with
//     requests present, which the generic stall check also sees; the
//     livelock is the specific cause (a pile of deferred requests, nothing
//     running, a free KV cache) and has its own advice. Only a restart
//     helps, and the queueing and batch signals it produces are symptoms.
//   - engine_stalled: requests present, no tokens, no more specific cause.
//   - throttled: a power/thermal clock cap is outside vLLM; it slows every
//     step, so the queueing and KV pressure it causes downstream must not be
//     blamed on scheduler knobs. It needs an active reason AND degraded TPOT,
//     so the routine power cap of a busy, healthy GPU does not trigger it.
//   - unavailable: vLLM cannot be scraped (connection refused, timeouts,
//     errors); no other rule can be evaluated, and the derived series are
//     withdrawn rather than left at their last values.
//   - kv_cache_exhausted before too_many_sequences (the seeds'
//     identify_bottleneck order): a cache pinned full is the cause, and the
//     preemptions that follow are its symptom. Reporting them as "too many
//     sequences" sends the operator to --max-num-seqs alone, while the
//     capacity knobs (fp8 KV, more memory, shorter --max-model-len) fix
//     both. too_many_sequences is what remains when preemptions run at a
//     rate while the cache is not pinned full (bursts of long outputs).
//   - admission_limited before the other queue classes: requests are being
//     refused (HTTP 503, a bad event of the availability SLO), the
//     strongest symptom a queue can have; its knob is the cap itself or
//     more replicas. A cache pinned full or a preemption storm comes first:
//     it is why the queue filled.
//   - kv_transfer_bound: a decode pod whose TTFT is mostly the wait for its
//     prompts' KV from the prefill pod; those requests wait deferred, not
//     for capacity, so the queueing knobs do not help.
//   - lora_queueing before queueing: requests wait for an adapter slot
//     (every max_lora slot busy with other adapters) while the KV cache has
//     room; --max-loras, not --max-num-seqs, is the knob.
//   - too_many_sequences and kv_cache_exhausted before queueing: a full
//     cache is the reason requests wait; queueing is what is left when the
//     cache has room.
//   - probes_failing after the capacity and queue classes (which explain
//     probes that time out) and before every tuning class: requests fail
//     for a reason the scrape does not show (credentials, a proxy, 5xx,
//     context length), and no tuning advice, least of all "send more
//     load", applies until they succeed.
//   - prefix_cache_miss before prefill_bound: a cache that stopped hitting is
//     the specific cause of extra prefill work.
//   - then the decode-side classes (TPOT over target): communication first
//     (NVLink traffic explains both low efficiency and low DRAM use), then
//     memory_bound_decode (at the roofline) and decode_overhead (far below).
//   - batch_too_small: nothing is wrong but the GPU is underused.
//   - near_optimal: no rule holds.
const (
	GPUFault           Class = "gpu_fault"
	ServerUnavailable  Class = "unavailable"
	EngineStalled      Class = "engine_stalled"
	DeferredLivelock   Class = "deferred_livelock"
	Throttled          Class = "throttled"
	TooManySequences   Class = "too_many_sequences"
	KVCacheExhausted   Class = "kv_cache_exhausted"
	Queueing           Class = "queueing"
	AdmissionLimited   Class = "admission_limited"
	KVTransferBound    Class = "kv_transfer_bound"
	LoRAQueueing       Class = "lora_queueing"
	ProbesFailing      Class = "probes_failing"
	PrefixCacheMiss    Class = "prefix_cache_miss"
	PrefillBound       Class = "prefill_bound"
	CommunicationBound Class = "communication_bound"
	MemoryBoundDecode  Class = "memory_bound_decode"
	DecodeOverhead     Class = "decode_overhead"
	BatchTooSmall      Class = "batch_too_small"
	NearOptimal        Class = "near_optimal"
)

// Classes lists every class in priority order (the state set's label values).
var Classes = []Class{
	GPUFault, ServerUnavailable, DeferredLivelock, EngineStalled, Throttled, KVCacheExhausted, TooManySequences,
	AdmissionLimited, KVTransferBound, LoRAQueueing, Queueing, ProbesFailing, PrefixCacheMiss, PrefillBound, CommunicationBound,
	MemoryBoundDecode, DecodeOverhead, BatchTooSmall, NearOptimal,
}

// Advice is a class's meaning and the seeds' first response.
type Advice struct {
	Summary        string // what the class means, one line
	Recommendation string // the first knob to turn, and which way
}

var advice = map[Class]Advice{
	GPUFault: {
		"a GPU reported a fatal Xid error or fell off the bus",
		"drain the node and check the Xid with the GPU vendor's guide; no vLLM knob fixes hardware",
	},
	ServerUnavailable: {
		"vLLM's /metrics cannot be scraped (refused, timing out or failing): the server is down or restarting",
		"check that the vLLM process is running and its port reachable (process, container, OOM kill, crash loop); no tuning knob applies until it answers",
	},
	EngineStalled: {
		"requests are in flight but the engine produces no tokens",
		"check the vLLM engine log for a hang or crash loop and restart the engine; no tuning knob applies",
	},
	DeferredLivelock: {
		"deferred requests pile up while few wait for capacity, the KV cache is mostly free and generation has all but stopped: the scheduler no longer admits (vllm #53130); /health still answers 200",
		"restart the vLLM engine (only a restart recovers) and upgrade to a vLLM with the fix for #53130; until then keep --max-num-seqs well above the expected deferred backlog (LoRA: raise --max-loras so requests are not deferred on the LoRA budget)",
	},
	Throttled: {
		"power or thermal clock limits are active while TPOT degrades",
		"fix cooling or raise the power limit (nvidia-smi -pl); clocks, not vLLM, bound decode",
	},
	TooManySequences: {
		"preemptions exceed the threshold share of finished requests: more sequences admitted than the KV cache holds",
		"lower --max-num-seqs (or add KV capacity: raise --gpu-memory-utilization, --kv-cache-dtype fp8, quantize weights, or add GPUs)",
	},
	KVCacheExhausted: {
		"the KV cache is full for a sustained period; admission waits on free blocks",
		"add KV capacity: --kv-cache-dtype fp8, quantized weights, more GPUs, or a higher --gpu-memory-utilization if memory headroom allows; or admit less: lower --max-num-seqs, and --max-model-len to what the workload needs",
	},
	Queueing: {
		"requests wait in the queue: p99 TTFT is many times the prefill time with requests waiting",
		"shape the request rate or add replicas; raise --max-num-seqs only if KV cache and TPOT leave room",
	},
	AdmissionLimited: {
		"requests are refused at admission (HTTP 503) because the waiting queue is at its --max-num-queued-requests / --max-num-queued-tokens cap",
		"scale out (add replicas) when the queue is full because the server is saturated; raise --max-num-queued-requests / --max-num-queued-tokens only if the TTFT of queued requests leaves room (a longer queue trades refusals for waiting); clients should retry with backoff",
	},
	KVTransferBound: {
		"a decode pod waits on KV transfers from its prefill pod: the NIXL transfer is a large share of TTFT (deferred requests wait for it; failed or expired transfers add local recomputation)",
		"speed up the KV path: check the NIXL transport (RDMA/UCX rather than TCP, NIC and GPUDirect placement, kv_buffer_device), co-locate prefill and decode pods on the fast network, and rebalance the P:D ratio; with expired transfers raise the prefill side's VLLM_NIXL_ABORT_REQUEST_TIMEOUT",
	},
	LoRAQueueing: {
		"requests wait on the LoRA budget: every one of the max_lora adapter slots is busy with other adapters while the KV cache has room",
		"raise --max-loras (each slot costs --max-lora-rank memory) or place adapters so each pod serves fewer of them at once (route by adapter); --max-num-seqs does not help while requests wait for an adapter slot",
	},
	ProbesFailing: {
		"most of the latest synthetic probes failed (the evidence gives the reasons): requests fail for a cause the /metrics scrape does not show",
		"fix what the failure reasons name before tuning anything: http_4xx or unknown_model: the probes' model name, API key or credentials (a proxy or gateway in front of vLLM); context_length: a profile longer than the model's max_model_len; http_5xx or stream_error: server errors (the vLLM log); connect: the network path; timeout: the server is slower than the probe timeout (TTFT, queue)",
	},
	PrefixCacheMiss: {
		"the prefix cache gives no benefit: warm-prefix probes are no faster than cold, the hit ratio collapsed, or the cache thrashes (KV blocks are reused right up to when they are evicted, so blocks that would be reused are evicted; --kv-cache-metrics)",
		"enable prefix caching (--enable-prefix-caching), keep shared prefixes byte-identical, and give the cache room (lower --max-num-seqs or raise --gpu-memory-utilization); a thrashing cache needs more KV capacity, a CPU offload tier (--kv-transfer-config with the offloading connector or LMCache) or cache-aware routing so each pod sees fewer distinct prefixes",
	},
	PrefillBound: {
		"TTFT is over its target and spent in prefill, not in the queue: prefill runs at under half the speed this server has shown (not merely long prompts), or a few long prompts (documents among chat) make a p99 TTFT tail while the median stays fast",
		"slow prefill: enable chunked prefill and raise --max-num-batched-tokens for prefill throughput, enable prefix caching when prompts share a prefix, check the attention backend; a long-prompt tail (ttft_p99_over_p50_ratio in the evidence): route long prompts to a separate pool, or let each long prompt prefill in fewer steps by raising --max-num-batched-tokens and --long-prefill-token-threshold (short requests then share longer steps: watch p50 TTFT and TPOT), and bound concurrent long prefills with --max-num-partial-prefills / --max-long-partial-prefills",
	},
	CommunicationBound: {
		"NVLink traffic is high under tensor parallelism while TPOT is over target",
		"reduce the TP degree (--tensor-parallel-size) and run more replicas, or use a faster interconnect",
	},
	MemoryBoundDecode: {
		"TPOT is over target and decode runs at the memory-bandwidth roofline",
		"decode is at the memory-bandwidth limit: quantize weights (FP8/INT4) and KV (--kv-cache-dtype fp8) or use faster memory; raise --max-num-seqs to share each weight read among more streams when throughput matters, lower it when per-stream TPOT does",
	},
	DecodeOverhead: {
		"TPOT is over target and far below the bandwidth roofline while DRAM bandwidth is low (CPU, sampling, scheduling)",
		"look beyond bandwidth: keep CUDA graphs on (no --enforce-eager), try --async-scheduling, cut sampling and detokenisation CPU work, check kernels and the engine version; reduce host-side work before buying hardware",
	},
	BatchTooSmall: {
		"the GPU is underused and nothing is waiting",
		"send more load (request rate/concurrency) or consolidate onto fewer GPUs; --max-num-seqs is not the limit while nothing waits (raise it once requests queue)",
	},
	NearOptimal: {
		"no bottleneck rule holds; if the SLO lines show a missed target, its cause is outside what these inputs tell apart",
		"keep the configuration and record it as the accepted baseline",
	},
}

// AdviceFor returns a class's meaning and recommendation.
func AdviceFor(c Class) Advice { return advice[c] }

// Reasons a class cannot be reached, the `reason` label of
// vllm_bottleneck_class_unavailable.
const (
	ReasonNoGPU             = "no_gpu"
	ReasonNoDecodeReference = "no_roofline_or_dram"
)

// Unavailable lists, for the inputs present, the classes the rules cannot
// reach, with why. It is exported as vllm_bottleneck_class_unavailable and
// printed by diagnose so a reader knows which diagnoses were impossible.
//
// Without a GPU: fatal Xids, clock-event reasons and NVLink traffic come only
// from NVML, so gpu_fault, throttled and communication_bound cannot be told
// from the class that wins instead; batch_too_small falls back to a
// running-request proxy. memory_bound_decode and decode_overhead need a
// reference to say "near" or "far": the roofline (weight bytes and a
// bandwidth) or GPM DRAM-bandwidth utilisation; with neither, they are
// indistinguishable and neither is reported.
func Unavailable(haveGPU, haveRoofline, haveDRAM bool) map[Class]string {
	out := map[Class]string{}
	if !haveGPU {
		for _, c := range []Class{GPUFault, Throttled, CommunicationBound} {
			out[c] = ReasonNoGPU
		}
	}
	if !haveRoofline && !haveDRAM {
		out[MemoryBoundDecode] = ReasonNoDecodeReference
		out[DecodeOverhead] = ReasonNoDecodeReference
	}
	return out
}
