package config

import (
	"fmt"
	"time"
)

// Bottleneck is the `bottleneck:` section: the classifier's thresholds, the
// decode-roofline assumptions and the capacity-planning inputs. Every default
// comes from the seed articles (see docs/bottleneck.md).
type Bottleneck struct {
	// Window is the look-back for rates and quantiles the rules read (1m).
	Window time.Duration `yaml:"window"`
	// BaselineWindow is how long the best prefix-cache hit ratio seen is
	// remembered as the reference a collapse is judged against (15m); the
	// reference exists from the first window on, so a collapse in the
	// exporter's first minutes is caught.
	BaselineWindow time.Duration `yaml:"baseline_window"`
	// HoldTicks is how many consecutive ticks a new class must win before it
	// replaces the current one (2: with a tick per 5 s scrape, a verdict
	// trails the first scrape that shows its regime by at most two
	// intervals, and one noisy scrape never changes it).
	HoldTicks int `yaml:"hold_ticks"`

	// SLOQuantile is the quantile TTFT and TPOT are compared with their
	// targets at (0.95); one of 0.5, 0.9, 0.95, 0.99.
	SLOQuantile float64 `yaml:"slo_quantile"`
	// TTFTTargetSeconds and TPOTTargetSeconds are the latency contract the
	// latency-driven classes test (seed: p95 TTFT < 1 s, p95 TPOT < 40 ms).
	TTFTTargetSeconds float64 `yaml:"ttft_target_seconds"`
	TPOTTargetSeconds float64 `yaml:"tpot_target_seconds"`

	// KVCacheUsageHigh: KV usage above this is "exhausted" (0.95).
	KVCacheUsageHigh float64 `yaml:"kv_cache_usage_high"`
	// PreemptionsPerRequestHigh: preemptions per finished request above this
	// is "too many sequences" (0.01, i.e. 1%).
	PreemptionsPerRequestHigh float64 `yaml:"preemptions_per_request_high"`
	// QueueingMinWaiting: at least this many waiting requests (1).
	QueueingMinWaiting float64 `yaml:"queueing_min_waiting"`
	// QueueingTTFTOverPrefill: p99 TTFT at least this many times p99 prefill
	// time means the wait is queueing, not prefill work (3).
	QueueingTTFTOverPrefill float64 `yaml:"queueing_ttft_over_prefill"`
	// PrefillShareMin: p99 prefill time / p99 TTFT at least this means the
	// wait is prefill work rather than queueing (0.33: with
	// QueueingTTFTOverPrefill 3 the two rules leave no gap).
	PrefillShareMin float64 `yaml:"prefill_share_min"`
	// PrefillSlowRatio: prefill speed (prompt tokens computed per second of
	// prefill) below this fraction of the best the same server showed over
	// capacity_horizon is "slower than this server should manage" (0.5).
	PrefillSlowRatio float64 `yaml:"prefill_slow_ratio"`
	// PrefillTailRatio and PrefillTailOverTarget define the prefill tail,
	// the other way prefill bounds TTFT: a few long prompts (documents
	// among short chat) whose prefill makes p99 TTFT miss its target while
	// the median stays fast. p99 TTFT at least PrefillTailRatio times the
	// median (6: one population's spread of prompt lengths, RAG passages or
	// summaries, reaches 4-5x), with p99 prefill at least
	// PrefillTailOverTarget times the TTFT target (2: a chat workload's
	// long tail of prompt lengths misses the target where two long prompts
	// meet; prompts whose own prefill takes a multiple of it are what a
	// separate pool or smaller prefill chunks fix).
	PrefillTailRatio      float64 `yaml:"prefill_tail_ratio"`
	PrefillTailOverTarget float64 `yaml:"prefill_tail_over_target"`

	// RooflineNearRatio: decode efficiency (measured / predicted) at least
	// this is "at the roofline" (0.7); RooflineFarRatio: below this is "far
	// below the roofline" (0.5).
	RooflineNearRatio float64 `yaml:"roofline_near_ratio"`
	RooflineFarRatio  float64 `yaml:"roofline_far_ratio"`
	// DRAMBandwidthHighRatio / LowRatio bound the GPM DRAM-bandwidth
	// utilisation that confirms (high) or refutes (low) memory-bound decode.
	DRAMBandwidthHighRatio float64 `yaml:"dram_bandwidth_high_ratio"`
	DRAMBandwidthLowRatio  float64 `yaml:"dram_bandwidth_low_ratio"`
	// BandwidthEfficiency scales the GPU's theoretical peak memory bandwidth
	// to the effective bandwidth decode achieves (0.8).
	BandwidthEfficiency float64 `yaml:"bandwidth_efficiency"`

	// NVLinkHighBytesPerSecond: mean NVLink tx+rx per GPU at least this,
	// with two or more GPUs, is "communication bound" (100e9, about 15% of
	// an NVLink 4 link's 900 GB/s, the seed's NCCL-fraction line).
	NVLinkHighBytesPerSecond float64 `yaml:"nvlink_high_bytes_per_second"`

	// WarmColdTTFTRatioMax: a warm-prefix probe whose median TTFT is at
	// least this fraction of the cold one got no benefit from the cache (0.8;
	// a cached 1,000-token prefix is several times faster, while two
	// uncached probes differ by noise of 10-15%).
	WarmColdTTFTRatioMax float64 `yaml:"warm_cold_ttft_ratio_max"`
	// PrefixHitRatioCollapse: the window's hit ratio below this fraction of
	// the baseline window's is a collapse (0.5) ...
	PrefixHitRatioCollapse float64 `yaml:"prefix_hit_ratio_collapse"`
	// ... provided the baseline was at least PrefixHitRatioBaselineMin (0.5:
	// the cache served at least half the prompt tokens, so losing it matters
	// and a mere change of workload mix does not count).
	PrefixHitRatioBaselineMin float64 `yaml:"prefix_hit_ratio_baseline_min"`

	// GPUUtilizationLow: GPU utilisation below this with nothing waiting is
	// "batch too small" (0.5, the seed's 50%).
	GPUUtilizationLow float64 `yaml:"gpu_utilization_low"`
	// BatchSmallMaxRunning is the no-GPU stand-in: at most this many
	// requests in flight on average over the window (else the running
	// gauge) with nothing waiting (1: the engine decodes about one stream
	// at a time, leaving nearly all of its batch unused; a moderately
	// loaded chat server has a few in flight).
	BatchSmallMaxRunning float64 `yaml:"batch_small_max_running"`
	// PowerCapSMClockRatioMax: an active software power cap counts as
	// throttling only with SM clocks below this fraction of their maximum
	// (0.75): a busy GPU sits at its power cap routinely with clocks a
	// little below maximum; thermal and hardware slowdowns always count.
	PowerCapSMClockRatioMax float64 `yaml:"power_cap_sm_clock_ratio_max"`
	// XidLookback: a fatal Xid within this long is a GPU fault (10m).
	XidLookback time.Duration `yaml:"xid_lookback"`
	// StallAfter: requests present and the prompt+generation token counters
	// unchanged for this long (scrape time) is a stalled engine (10s).
	StallAfter time.Duration `yaml:"stall_after"`

	// The deferred livelock (vllm #53130): the scheduler stops admitting
	// once running + deferred requests reach max_num_seqs, so deferred
	// requests pile up while few wait for capacity, the KV cache is mostly
	// free and generation all but stops (/health stays 200). It holds with
	// at least DeferredLivelockMinDeferred deferred requests (50), at least
	// DeferredLivelockDeferredOverCapacity times as many deferred as
	// capacity-waiting ones (4), KV usage below DeferredLivelockKVMax (0.5)
	// and generation at most DeferredLivelockMaxGenerationTokensPerSecond
	// (5 tokens/s for the whole model).
	DeferredLivelockMinDeferred                  float64 `yaml:"deferred_livelock_min_deferred"`
	DeferredLivelockDeferredOverCapacity         float64 `yaml:"deferred_livelock_deferred_over_capacity"`
	DeferredLivelockKVMax                        float64 `yaml:"deferred_livelock_kv_max"`
	DeferredLivelockMaxGenerationTokensPerSecond float64 `yaml:"deferred_livelock_max_generation_tokens_per_second"`

	// AdmissionRejectedRatioMin: requests refused at admission (the waiting
	// queue at --max-num-queued-requests / -tokens) at least this share of
	// the requests that arrived over the window (rejected + finished) is
	// admission_limited (0.01).
	AdmissionRejectedRatioMin float64 `yaml:"admission_rejected_ratio_min"`
	// KVTransferShareMin: on a pod that reads its prompts' KV from a
	// prefill pod, a mean KV transfer time at least this share of the mean
	// TTFT, with TTFT over its target, is kv_transfer_bound (0.5).
	KVTransferShareMin float64 `yaml:"kv_transfer_share_min"`
	// PrefixThrashReuseGapOverEvict: the p90 gap at which KV blocks are
	// reused at least this fraction of the median idle time of evicted
	// blocks, with the prefix-cache hit ratio below
	// prefix_hit_ratio_baseline_min, is a thrashing prefix cache (0.65):
	// reuses happen right up to the eviction horizon, so the cache evicts
	// blocks that would have been reused (a healthy cache reuses its blocks
	// far sooner than it evicts the dead ones, though the residency
	// histograms' wide buckets can put its p90 gap at half the horizon);
	// needs --kv-cache-metrics.
	PrefixThrashReuseGapOverEvict float64 `yaml:"prefix_thrash_reuse_gap_over_evict"`
	// ProbeFailureRatioMin: at least this share of the latest probes
	// (four or more, over at least window) failing is probes_failing
	// (0.5): requests fail for a cause the scrape does not show, and no
	// tuning advice applies until they succeed.
	ProbeFailureRatioMin float64 `yaml:"probe_failure_ratio_min"`

	// CapacityHorizon is how far back the sustained-throughput-while-SLOs-
	// hold maximum looks (24h).
	CapacityHorizon time.Duration `yaml:"capacity_horizon"`
	// Headroom multiplies the GPUs-needed count for traffic spikes (2).
	Headroom float64 `yaml:"headroom"`
	// DailyRequests, when > 0, exports vllm_capacity_gpus_needed for that
	// daily request volume.
	DailyRequests float64 `yaml:"daily_requests"`
}

// DefaultBottleneck returns the seeds' thresholds.
func DefaultBottleneck() Bottleneck {
	return Bottleneck{
		Window:                    time.Minute,
		BaselineWindow:            15 * time.Minute,
		HoldTicks:                 2,
		SLOQuantile:               0.95,
		TTFTTargetSeconds:         1.0,
		TPOTTargetSeconds:         0.040,
		KVCacheUsageHigh:          0.95,
		PreemptionsPerRequestHigh: 0.01,
		QueueingMinWaiting:        1,
		QueueingTTFTOverPrefill:   3,
		PrefillShareMin:           0.33,
		PrefillSlowRatio:          0.5,
		PrefillTailRatio:          6,
		PrefillTailOverTarget:     2,
		RooflineNearRatio:         0.7,
		RooflineFarRatio:          0.5,
		DRAMBandwidthHighRatio:    0.6,
		DRAMBandwidthLowRatio:     0.4,
		BandwidthEfficiency:       0.8,
		NVLinkHighBytesPerSecond:  100e9,
		WarmColdTTFTRatioMax:      0.8,
		PrefixHitRatioCollapse:    0.5,
		PrefixHitRatioBaselineMin: 0.5,
		GPUUtilizationLow:         0.5,
		BatchSmallMaxRunning:      1,
		PowerCapSMClockRatioMax:   0.75,
		XidLookback:               10 * time.Minute,
		StallAfter:                10 * time.Second,
		CapacityHorizon:           24 * time.Hour,

		DeferredLivelockMinDeferred:                  50,
		DeferredLivelockDeferredOverCapacity:         4,
		DeferredLivelockKVMax:                        0.5,
		DeferredLivelockMaxGenerationTokensPerSecond: 5,
		AdmissionRejectedRatioMin:                    0.01,
		KVTransferShareMin:                           0.5,
		PrefixThrashReuseGapOverEvict:                0.65,
		ProbeFailureRatioMin:                         0.5,
		Headroom:                                     2,
	}
}

// Validate checks the section; errors name the field.
func (b *Bottleneck) Validate() error {
	pos := func(name string, v float64) error {
		if !(v > 0) {
			return fmt.Errorf("%s: must be > 0, got %v", name, v)
		}
		return nil
	}
	ratio := func(name string, v float64) error {
		if !(v > 0 && v <= 1) {
			return fmt.Errorf("%s: must be in (0, 1], got %v", name, v)
		}
		return nil
	}
	dur := func(name string, d time.Duration) error {
		if d <= 0 {
			return fmt.Errorf("%s: must be a positive duration, got %v", name, d)
		}
		return nil
	}
	checks := []error{
		dur("window", b.Window),
		dur("baseline_window", b.BaselineWindow),
		dur("xid_lookback", b.XidLookback),
		dur("stall_after", b.StallAfter),
		dur("capacity_horizon", b.CapacityHorizon),
		pos("ttft_target_seconds", b.TTFTTargetSeconds),
		pos("tpot_target_seconds", b.TPOTTargetSeconds),
		ratio("kv_cache_usage_high", b.KVCacheUsageHigh),
		ratio("preemptions_per_request_high", b.PreemptionsPerRequestHigh),
		pos("queueing_min_waiting", b.QueueingMinWaiting),
		pos("queueing_ttft_over_prefill", b.QueueingTTFTOverPrefill),
		ratio("prefill_share_min", b.PrefillShareMin),
		ratio("prefill_slow_ratio", b.PrefillSlowRatio),
		pos("prefill_tail_ratio", b.PrefillTailRatio),
		ratio("roofline_near_ratio", b.RooflineNearRatio),
		ratio("roofline_far_ratio", b.RooflineFarRatio),
		ratio("dram_bandwidth_high_ratio", b.DRAMBandwidthHighRatio),
		ratio("dram_bandwidth_low_ratio", b.DRAMBandwidthLowRatio),
		ratio("bandwidth_efficiency", b.BandwidthEfficiency),
		pos("nvlink_high_bytes_per_second", b.NVLinkHighBytesPerSecond),
		ratio("warm_cold_ttft_ratio_max", b.WarmColdTTFTRatioMax),
		ratio("prefix_hit_ratio_collapse", b.PrefixHitRatioCollapse),
		ratio("prefix_hit_ratio_baseline_min", b.PrefixHitRatioBaselineMin),
		ratio("gpu_utilization_low", b.GPUUtilizationLow),
		pos("batch_small_max_running", b.BatchSmallMaxRunning),
		ratio("power_cap_sm_clock_ratio_max", b.PowerCapSMClockRatioMax),
		pos("deferred_livelock_min_deferred", b.DeferredLivelockMinDeferred),
		pos("deferred_livelock_deferred_over_capacity", b.DeferredLivelockDeferredOverCapacity),
		ratio("deferred_livelock_kv_max", b.DeferredLivelockKVMax),
		pos("deferred_livelock_max_generation_tokens_per_second", b.DeferredLivelockMaxGenerationTokensPerSecond),
		ratio("admission_rejected_ratio_min", b.AdmissionRejectedRatioMin),
		ratio("kv_transfer_share_min", b.KVTransferShareMin),
		ratio("prefix_thrash_reuse_gap_over_evict", b.PrefixThrashReuseGapOverEvict),
		ratio("probe_failure_ratio_min", b.ProbeFailureRatioMin),
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	switch {
	case b.HoldTicks < 1:
		return fmt.Errorf("hold_ticks: must be >= 1, got %d", b.HoldTicks)
	case b.SLOQuantile != 0.5 && b.SLOQuantile != 0.9 && b.SLOQuantile != 0.95 && b.SLOQuantile != 0.99:
		return fmt.Errorf("slo_quantile: must be one of 0.5, 0.9, 0.95, 0.99, got %v", b.SLOQuantile)
	case b.BaselineWindow <= b.Window:
		return fmt.Errorf("baseline_window: must be longer than window (%v), got %v", b.Window, b.BaselineWindow)
	case b.RooflineFarRatio > b.RooflineNearRatio:
		return fmt.Errorf("roofline_far_ratio: must not exceed roofline_near_ratio (%v), got %v", b.RooflineNearRatio, b.RooflineFarRatio)
	case b.DRAMBandwidthLowRatio > b.DRAMBandwidthHighRatio:
		return fmt.Errorf("dram_bandwidth_low_ratio: must not exceed dram_bandwidth_high_ratio (%v), got %v", b.DRAMBandwidthHighRatio, b.DRAMBandwidthLowRatio)
	case !(b.PrefillTailOverTarget >= 1):
		return fmt.Errorf("prefill_tail_over_target: must be >= 1, got %v", b.PrefillTailOverTarget)
	case !(b.Headroom >= 1):
		return fmt.Errorf("headroom: must be >= 1, got %v", b.Headroom)
	case !(b.DailyRequests >= 0):
		return fmt.Errorf("daily_requests: must be >= 0, got %v", b.DailyRequests)
	}
	return nil
}
