// Package snapshot holds the timestamped, immutable records that the
// exporter's sources (vLLM scrape, NVML sampler, probes) publish and that the
// SLO watchdog and the /metrics renderer read. Data flows one way: a source
// builds a new value, publishes it atomically, and never mutates it again, so
// readers need no locks beyond the pointer swap.
package snapshot

import (
	"time"
)

// Value is a float that may be absent. Absent is not zero: a series we cannot
// compute is not exported rather than exported as 0 or NaN.
type Value struct {
	V  float64
	OK bool
}

// Some returns a present Value.
func Some(v float64) Value { return Value{V: v, OK: true} }

// Histogram is a cumulative histogram as Prometheus exposes it.
// Bounds are the finite upper bounds in ascending order; Counts[i] is the
// cumulative count of observations <= Bounds[i]. Count is the +Inf bucket.
type Histogram struct {
	Bounds []float64
	Counts []float64
	Count  float64
	Sum    float64
}

// HistogramName is a stable, version-independent latency histogram name.
type HistogramName string

// The latency histograms the exporter re-exports and derives quantiles from.
// The string is the suffix of the stable exported name
// (vllm_<name>_seconds) and the `metric` a config file refers to.
const (
	TTFT              HistogramName = "time_to_first_token"           // vllm:time_to_first_token_seconds
	InterTokenLatency HistogramName = "inter_token_latency"           // vllm:inter_token_latency_seconds, V0/old V1 vllm:time_per_output_token_seconds
	RequestTPOT       HistogramName = "request_time_per_output_token" // vllm:request_time_per_output_token_seconds (>=0.11)
	E2E               HistogramName = "e2e_request_latency"           // vllm:e2e_request_latency_seconds
	QueueTime         HistogramName = "request_queue_time"            // vllm:request_queue_time_seconds
	PrefillTime       HistogramName = "request_prefill_time"          // vllm:request_prefill_time_seconds
	DecodeTime        HistogramName = "request_decode_time"           // vllm:request_decode_time_seconds
	InferenceTime     HistogramName = "request_inference_time"        // vllm:request_inference_time_seconds

	// Families of optional features (not in LatencyHistograms): NIXL KV
	// transfers (disaggregated prefill/decode) and KV block residency
	// (--kv-cache-metrics).
	KVTransferTime         HistogramName = "kv_transfer_time"           // vllm:nixl_xfer_time_seconds
	KVTransferPostTime     HistogramName = "kv_transfer_post_time"      // vllm:nixl_post_time_seconds
	KVTransferSize         HistogramName = "kv_transfer_size"           // vllm:nixl_bytes_transferred (bytes)
	KVTransferDescriptors  HistogramName = "kv_transfer_descriptors"    // vllm:nixl_num_descriptors (a count)
	KVBlockLifetime        HistogramName = "kv_block_lifetime"          // vllm:kv_block_lifetime_seconds
	KVBlockIdleBeforeEvict HistogramName = "kv_block_idle_before_evict" // vllm:kv_block_idle_before_evict_seconds
	KVBlockReuseGap        HistogramName = "kv_block_reuse_gap"         // vllm:kv_block_reuse_gap_seconds
	MooncakeStoreOperation HistogramName = "mooncake_store_operation"   // vllm:mooncake_store_operation_time_seconds
)

// LatencyHistograms lists every HistogramName in export order.
var LatencyHistograms = []HistogramName{TTFT, InterTokenLatency, RequestTPOT, E2E, QueueTime, PrefillTime, DecodeTime, InferenceTime}

// VLLM is one normalized scrape of a vLLM server's /metrics.
type VLLM struct {
	Time   time.Time // when the scrape finished
	Up     bool      // the body was fetched and parsed
	Error  string    // reason when !Up (timeout, connect, http_5xx, parse, oversize, ...)
	Schema string    // detected metric schema, e.g. "v0", "v1-legacy", "v1"
	// Models is keyed by vLLM's model_name label value.
	Models map[string]*Model
	// Missing lists vLLM metrics the exporter expected for Schema but did not find.
	Missing []string
	// HTTPRequests is http_requests_total (prometheus-fastapi-instrumentator,
	// 0.8.3+) summed over handlers and methods by its status label ("2xx",
	// "4xx", "5xx", or exact codes when ungrouped). It has no model_name:
	// it covers the whole server, including requests refused before the
	// engine. Nil when the server does not expose it.
	HTTPRequests map[string]float64
}

// Refused is the number of requests the server answered with an overload or
// server error before (or instead of) the engine: 5xx and 429 answers.
// The instrumentator groups codes by default ("5xx"); 429 is only visible
// when grouping is off (it is then inside "4xx" otherwise, with the
// client's own errors, and not counted).
func (v *VLLM) Refused() (float64, bool) {
	if v == nil || v.HTTPRequests == nil {
		return 0, false
	}
	n := 0.0
	for status, c := range v.HTTPRequests {
		if status == "429" || (len(status) == 3 && status[0] == '5') {
			n += c
		}
	}
	return n, true
}

// Model is everything the exporter keeps about one served model, summed over
// data-parallel engines (the `engine` label) unless a field says otherwise.
type Model struct {
	Name string

	// Role is the pod's part in disaggregated serving: RolePrefill,
	// RoleDecode or RoleBoth (aggregated serving, or a kv_both pod);
	// RoleSource says where it came from (RoleSourceFlag,
	// RoleSourceDetected, RoleSourceDefault). Set by the scraper.
	Role, RoleSource string

	Running    Value // vllm:num_requests_running
	Waiting    Value // vllm:num_requests_waiting
	Swapped    Value // V0 only: vllm:num_requests_swapped
	KVUsage    Value // ratio 0..1: kv_cache_usage_perc / gpu_cache_usage_perc (max over engines)
	CPUKVUsage Value // V0 only

	Preemptions      Value // counter
	PromptTokens     Value // counter
	GenerationTokens Value // counter
	PrefixQueries    Value // counter, tokens (blocks before 0.9.0)
	PrefixHits       Value // counter
	// TokensAtCompletion: the server counts prompt and generated tokens
	// when a request finishes (SGLang before realtime_tokens_total,
	// trtllm-serve), so the counters stand still while requests run.
	TokensAtCompletion bool
	// FinishedByReason: vllm:request_success_total by finished_reason.
	FinishedByReason map[string]float64

	// Histograms holds the cumulative latency histograms, summed over engines.
	Histograms HistogramSet

	// PerEngine keeps the gauges that matter per data-parallel rank
	// (running, waiting, KV usage); nil when there is a single engine.
	PerEngine map[string]*EngineGauges

	// CacheConfig is vllm:cache_config_info's labels (an open set).
	CacheConfig map[string]string

	// Fields below come from families of vLLM >= 0.12 (see
	// docs/vllm-versions.md); each is absent (nil or !OK) on servers that do
	// not emit it.

	// WaitingByReason is vllm:num_requests_waiting_by_reason (≈0.20+) by
	// reason: "capacity" waits for scheduling capacity, "deferred" for a
	// transient constraint (LoRA budget, KV transfer, blocked status).
	WaitingByReason map[string]float64

	// Sleep is the engine's sleep state (vllm:engine_sleep_state and
	// friends); Sleep.Known is false on servers that do not report it.
	Sleep Sleep
	// EngineHealthy is vllm:engine_healthy (--enable-fault-tolerance), min
	// over engines: 1 = every engine's cached state is healthy.
	EngineHealthy Value
	// CorruptedRequests is vllm:corrupted_requests_total (≈0.12+, only with
	// VLLM_COMPUTE_NANS_IN_LOGITS): requests with NaNs in their logits.
	CorruptedRequests Value
	// RejectedByReason is vllm:admission_rejections_total (0.32+) by
	// reason (max_num_queued_reqs, max_num_queued_tokens): requests refused
	// at admission because the waiting queue was at its cap.
	RejectedByReason map[string]float64

	// KV transfer counters of the NIXL connector (disaggregated
	// prefill/decode): failed transfers, failed notifications, requests
	// whose KV expired before the decode side read it.
	KVTransferFailures, KVTransferNotificationFailures, KVTransferExpiredRequests Value
	// KV offloading (offloading connector) by tier ("cpu"), per direction:
	// load is offload tier to GPU, store GPU to offload tier. Bytes and
	// seconds spent, from either generation of vLLM's names.
	KVOffloadLoadBytes, KVOffloadStoreBytes     map[string]float64
	KVOffloadLoadSeconds, KVOffloadStoreSeconds map[string]float64
	// External (KV-connector) and multimodal cache counters: external in
	// tokens, multimodal in items.
	ExternalPrefixQueries, ExternalPrefixHits Value
	MMCacheQueries, MMCacheHits               Value
	// Mooncake store connector (vllm:mooncake_store_operation_*), by
	// operation (load_get, save_put, ...), summed over status and engines:
	// operations, their keys, bytes and failed keys; errors are the
	// operations with status "error".
	MooncakeOps, MooncakeOpErrors, MooncakeKeys, MooncakeBytes, MooncakeFailedKeys map[string]float64
	// LoRA is vllm:lora_requests_info: the adapters with running and
	// waiting requests and max_lora; LoRA.Known is false without it.
	LoRA LoRA

	// Speculative decoding counters (vllm:spec_decode_*), present only
	// with speculative decoding.
	SpecDrafts, SpecDraftTokens, SpecAcceptedTokens Value

	// PromptTokensBySource is vllm:prompt_tokens_by_source_total (≈0.16+):
	// local_compute, local_cache_hit, external_kv_transfer.
	PromptTokensBySource map[string]float64
	// PromptTokensCached is vllm:prompt_tokens_cached_total (local + external hits).
	PromptTokensCached Value
	// PrefillKVComputedTokens is the sum and count of
	// vllm:request_prefill_kv_computed_tokens (≈0.13+): new KV tokens computed
	// in prefill per finished request, cached tokens excluded.
	PrefillKVComputedSum, PrefillKVComputedCount Value

	// KVCacheSizeTokens and KVCacheMaxConcurrency are vLLM's own statement
	// of its KV pool (vllm:cache_config_info labels, ≈0.24+ #42206).
	KVCacheSizeTokens, KVCacheMaxConcurrency Value

	// vLLM's model-FLOPs/bandwidth estimates per GPU (counters, ≈0.17+,
	// non-zero only with --enable-mfu-metrics).
	EstimatedFlops, EstimatedReadBytes, EstimatedWriteBytes Value

	// ByPriority keeps the TTFT and e2e histograms per `priority` label
	// value, only when the scraper's per-priority view is enabled (bounded).
	ByPriority map[string]map[HistogramName]Histogram
}

// Pod roles of disaggregated prefill/decode serving (vLLM's kv_role:
// kv_producer, kv_consumer, kv_both) and where the exporter learnt them.
const (
	RolePrefill = "prefill" // computes prompts; a decode pod reads its KV
	RoleDecode  = "decode"  // reads each request's KV from a prefill pod, then decodes
	RoleBoth    = "both"    // aggregated serving (or kv_both): prefill and decode

	RoleSourceFlag     = "flag"     // --vllm.role
	RoleSourceDetected = "detected" // from the families the server exports
	RoleSourceDefault  = "default"  // nothing said otherwise: both
)

// Prefill reports whether the model's pod only prefills (no decode, so no
// TPOT or inter-token latency of its own).
func (m *Model) Prefill() bool { return m != nil && m.Role == RolePrefill }

// LoRA is what vllm:lora_requests_info says, from its most recent sample
// (the value is vLLM's timestamp; label sets of earlier moments may linger).
type LoRA struct {
	Known bool    // the server reports LoRA with max_lora > 0
	At    float64 // the sample's value (unix time) the reading comes from
	Max   Value   // max_lora: adapters one batch can hold
	// Running and Waiting count each adapter's occurrences in
	// running_lora_adapters / waiting_lora_adapters (vLLM lists an adapter
	// once while it has requests in that state), bounded.
	Running, Waiting map[string]float64
}

// Sleep is a model's engine sleep state, combined over data-parallel engines.
type Sleep struct {
	Known bool // the server reports vllm:engine_sleep_state or engine_fully_awake
	// Awake is true only when every engine reports awake (and, where
	// vllm:engine_fully_awake exists, every resource is awake).
	Awake bool
	// Level is the deepest sleep level of any engine: 0 awake, 1 weights
	// offloaded, 2 weights discarded; absent when only an unknown state is set.
	Level Value
	// Resources is vllm:engine_sleep_resource_state: resource -> state
	// (scheduler, weights, kv_cache -> running, paused, resident, offloaded,
	// discarded, released, unknown).
	Resources map[string]string
	// State is the least awake current vllm:engine_sleep_state over engines
	// (awake, weights_offloaded, discard_all); "" when not reported.
	State string
	// FullyAwake is vllm:engine_fully_awake, min over engines.
	FullyAwake Value
}

// Asleep reports whether the model's engine says it is deliberately asleep.
func (m *Model) Asleep() bool { return m != nil && m.Sleep.Known && !m.Sleep.Awake }

// WaitingForCapacity is the number of requests waiting for scheduling
// capacity: vllm:num_requests_waiting_by_reason{reason="capacity"} where the
// server splits the queue (≈0.20+, whose num_requests_waiting also counts
// deferred requests), else vllm:num_requests_waiting.
func (m *Model) WaitingForCapacity() Value {
	if m == nil {
		return Value{}
	}
	if v, ok := m.WaitingByReason["capacity"]; ok {
		return Some(v)
	}
	return m.Waiting
}

// WaitingDeferred is the deferred part of the queue (absent before ≈0.20).
func (m *Model) WaitingDeferred() Value {
	if m == nil {
		return Value{}
	}
	if v, ok := m.WaitingByReason["deferred"]; ok {
		return Some(v)
	}
	return Value{}
}

// EngineGauges are the per-engine gauges kept for data-parallel servers.
type EngineGauges struct {
	Running, Waiting, KVUsage Value
}

// Derived are values computed from the difference between two scrapes that
// are Window apart. A field that could not be computed (no requests in the
// window, counter missing) is absent.
type Derived struct {
	Window     time.Duration
	Start, End time.Time // the two snapshots actually used

	PreemptionsPerSecond  Value
	PreemptionsPerRequest Value // preemptions / finished requests
	PrefixCacheHitRatio   Value
	// KVTransferBytesPerSecond is the NIXL KV transfer throughput (the
	// increase of vllm:nixl_bytes_transferred_sum over the window).
	KVTransferBytesPerSecond Value
	// Admission rejections (all reasons) and failed or expired NIXL KV
	// transfers per second over the window; absent without the family.
	RejectedPerSecond, KVTransferFailuresPerSecond, KVTransferExpiredPerSecond Value
	PromptTokensPerSecond                                                      Value
	GenerationTokensPerSecond                                                  Value
	RequestsPerSecond                                                          Value
	FinishedPerSecondByReason                                                  map[string]float64

	// SpecMeanAcceptanceLength is the mean tokens a stream gains per
	// decode step over the window (1 + accepted / drafts), absent without
	// speculative decoding or without drafts in the window.
	SpecMeanAcceptanceLength Value
	// Prompt tokens per second actually computed (prefix-cache and
	// KV-transfer hits excluded) and served from a cache.
	PromptTokensComputedPerSecond, PromptTokensCachedPerSecond Value
	// vLLM's estimated FLOPs and bytes (read + written) per GPU per second
	// (--enable-mfu-metrics); absent while the counters stay 0.
	EstimatedFlopsPerSecond, EstimatedBytesPerSecond Value

	// Series are the other windowed values by the name of the series they
	// are exported as (vllm_mm_cache_hit_ratio, ...).
	Series map[string]Value

	// Quantiles[name][q] in seconds, q in {0.5, 0.9, 0.95, 0.99}.
	Quantiles map[HistogramName]map[float64]Value
	// Deltas are the histogram increments over the window.
	Deltas map[HistogramName]Histogram
}

// GPU is one NVML sample of every visible GPU.
type GPU struct {
	Time    time.Time
	Up      bool   // NVML initialised
	Error   string // why not
	Devices []GPUDevice

	DriverVersion string // NVML system driver version, "" if unknown
	CUDAVersion   string // CUDA driver API version as "major.minor", "" if unknown
	// SampleDuration is how long the NVML sample that produced this took.
	SampleDuration time.Duration
}

// GPUDevice is one GPU's reading. Absent fields were not supported.
type GPUDevice struct {
	Index int
	UUID  string
	Name  string
	Up    bool // false while the GPU is lost

	UtilGPU, UtilMemory         Value // ratios
	MemoryUsedBytes             Value
	MemoryTotalBytes            Value
	PowerWatts, PowerLimitWatts Value
	SMClockHz, MemClockHz       Value
	MaxSMClockHz, MaxMemClockHz Value
	// PeakMemBandwidthBytesPerSecond is the theoretical peak from memory
	// clock and bus width (the decode roofline's denominator).
	PeakMemBandwidthBytesPerSecond Value
	// ThrottleReasons maps a reason (power_cap, sw_thermal, hw_slowdown, ...)
	// to whether it is active now.
	ThrottleReasons map[string]bool

	// GPM (Hopper+), ratios 0..1 over the sampler window; absent if unsupported.
	DRAMBandwidthUtil, SMUtil, SMOccupancy, TensorActivity Value
	NVLinkTxBytesPerSecond, NVLinkRxBytesPerSecond         Value
	PCIeTxBytesPerSecond, PCIeRxBytesPerSecond             Value

	// XidTotal counts Xid events by xid; LastFatalXidTime is zero if none.
	// XidTotal is nil when Xid events are not monitored on this GPU and an
	// empty (non-nil) map when they are but none was seen.
	XidTotal         map[uint64]float64
	LastFatalXidTime time.Time

	// Fields below were added by the gpu collector. Absent Values were not
	// supported by the device or driver.
	PCIBusID            string // e.g. "00000000:65:00.0"
	MemoryBusWidthBits  Value
	MemoryFreeBytes     Value
	EnergyJoules        Value // counter since driver load (from millijoules)
	TemperatureCelsius  Value
	ThrottleSeconds     map[string]float64 // violation time counters by policy reason
	ECCErrors           map[string]float64 // volatile ECC error counters by type (corrected, uncorrected)
	RemappedRows        map[string]float64 // remapped rows by type (correctable, uncorrectable)
	RowRemapPending     Value              // 1 if a row remap is pending (GPU reset needed)
	RowRemapFailure     Value              // 1 if a row remap has failed
	ProcessMemoryBytes  map[uint32]float64 // GPU memory used by each running compute process, by pid
	GPMSupported        bool               // GPM metrics are available on this device
	GPMUnsupportedCause string             // why GPM is not available ("" when supported)
}

// Probes is the probe scheduler's published state.
type Probes struct {
	Time     time.Time
	Profiles map[string]*ProbeProfile
	// EngineStalled is the stall detector's verdict.
	EngineStalled bool
}

// ProbeProfile is one probe profile's cumulative results.
type ProbeProfile struct {
	Name                      string
	Endpoint                  string // "completions" or "chat"
	Prefix                    string // "cold" or "warm"
	InputTokens, OutputTokens int

	Requests float64            // probes sent
	Failures map[string]float64 // by reason
	// Cumulative histograms in seconds.
	TTFT, TPOT, ITL, E2E Histogram

	LastSuccess bool
	LastTTFT    Value
	LastTime    time.Time

	// Added by the probes work:
	OutputTokensReceived float64 // usage.completion_tokens summed over probes
	Chunks               float64 // stream chunks that carry generated text
	BudgetSkips          float64 // scheduled probes skipped for the budget
	// TTFTGap is median probe TTFT minus median server TTFT over the gap
	// window (absent without server data or probe successes in the window).
	TTFTGap Value
	// LastError is the latest failure's reason and what failed (the
	// server's error text, truncated and scrubbed), or why the profile was
	// not sent; empty if none since start.
	LastError string
	// FitNote says how the profile was fitted to the served model's
	// max_model_len (shrunk or refused); empty when it fits as configured.
	FitNote string
}
