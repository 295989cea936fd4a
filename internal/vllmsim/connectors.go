package vllmsim

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"
)

// The KV connectors' traffic (the offloading connector with its CPU tier
// and tiers behind it, the Mooncake store, HF3FS): each control sets rates
// at which its counters grow, split evenly over engines. What the counters
// held when a control changed is kept (rates), so a new setting adds to
// them.

// Offload simulates the offloading connector: KV loaded from the CPU tier
// into GPU memory and stored to it, in bytes per second, at
// BandwidthBytesPerSecond (default 25 GB/s, PCIe 5 x16 in practice); Layout
// picks vLLM's names: "newer" (kv_offload_load_* / store_*), "older"
// (kv_offload_total_bytes{transfer_type}), "both" (the deprecation period).
// HitRatio of ExternalQueryTokensPerSecond hit the CPU tier. The CPU
// spec's gauges (usage, write and read usage 0..1) and failure rates are
// as given; Tiers are tiered offloading's tiers behind the CPU one.
type Offload struct {
	LoadBytesPerSecond           float64       `json:"load_bytes_per_second"`
	StoreBytesPerSecond          float64       `json:"store_bytes_per_second"`
	BandwidthBytesPerSecond      float64       `json:"bandwidth_bytes_per_second"`
	Layout                       string        `json:"layout"`
	ExternalQueryTokensPerSecond float64       `json:"external_query_tokens_per_second"`
	HitRatio                     float64       `json:"hit_ratio"`
	CPUUsage                     float64       `json:"cpu_usage"`
	CPUWriteUsage                float64       `json:"cpu_write_usage"`
	CPUReadUsage                 float64       `json:"cpu_read_usage"`
	AllocationFailuresPerSecond  float64       `json:"allocation_failures_per_second"`
	StoresSkippedPerSecond       float64       `json:"stores_skipped_per_second"`
	Tiers                        []OffloadTier `json:"tiers"`
	// PromotionAllocationFailuresPerSecond are promotions that found no
	// room in the primary (CPU) tier (tiering only).
	PromotionAllocationFailuresPerSecond float64 `json:"promotion_allocation_failures_per_second"`
}

// OffloadTier is a tier of tiered offloading (vLLM's TieringOffloadingSpec,
// #48798): reads promote KV towards GPU memory, writes cascade it from the
// primary tier, at BandwidthBytesPerSecond (default 2 GB/s); HitRatio of
// BlockQueriesPerSecond find their block; the primary tier's write and read
// usage (0..1) are labelled with the tier.
type OffloadTier struct {
	Name                       string  `json:"name"`
	ReadBytesPerSecond         float64 `json:"read_bytes_per_second"`
	WriteBytesPerSecond        float64 `json:"write_bytes_per_second"`
	BandwidthBytesPerSecond    float64 `json:"bandwidth_bytes_per_second"`
	BlockQueriesPerSecond      float64 `json:"block_queries_per_second"`
	HitRatio                   float64 `json:"hit_ratio"`
	PromotionFailuresPerSecond float64 `json:"promotion_failures_per_second"`
	CascadeFailuresPerSecond   float64 `json:"cascade_failures_per_second"`
	WriteUsage                 float64 `json:"write_usage"`
	ReadUsage                  float64 `json:"read_usage"`
}

// Mooncake simulates the MooncakeStoreConnector's traffic against the
// Mooncake pool (vllm:mooncake_store_operation_*): OpsPerSecond of each
// operation (load_get and save_put), ErrorFraction of them ending with
// status "error" (their keys all failed), KeysPerOp KV blocks of
// BytesPerKey each per operation, every operation taking OpSeconds. A
// family appears with the control.
type Mooncake struct {
	OpsPerSecond  float64 `json:"ops_per_second"`
	ErrorFraction float64 `json:"error_fraction"`
	KeysPerOp     float64 `json:"keys_per_op"`
	BytesPerKey   float64 `json:"bytes_per_key"`
	OpSeconds     float64 `json:"op_seconds"`
}

// HF3FS simulates the HF3FS KV connector: SavesPerSecond and
// LoadsPerSecond taking SaveSeconds and LoadSeconds each, FailFraction of
// them failing.
type HF3FS struct {
	SavesPerSecond float64 `json:"saves_per_second"`
	LoadsPerSecond float64 `json:"loads_per_second"`
	SaveSeconds    float64 `json:"save_seconds"`
	LoadSeconds    float64 `json:"load_seconds"`
	FailFraction   float64 `json:"fail_fraction"`
}

// mooncakeOps are vLLM's operation label values, mooncakeStatuses its
// statuses.
var (
	mooncakeOps      = []string{"load_get", "save_put"}
	mooncakeStatuses = []string{"ok", "error"}
)

// rates are counters that grow at the rates the connector controls set.
type rates struct {
	held, rate map[string]float64
	since      time.Time
}

func (r *rates) get(now time.Time, k string) float64 {
	return r.held[k] + r.rate[k]*now.Sub(r.since).Seconds()
}

// set keeps what every counter holds at now and grows them at rate from
// then on.
func (r *rates) set(now time.Time, rate map[string]float64) {
	held := map[string]float64{}
	for _, m := range []map[string]float64{r.held, r.rate} {
		for k := range m {
			held[k] = r.get(now, k)
		}
	}
	r.held, r.rate, r.since = held, rate, now
}

// observeAt adds a histogram under key of perSecond observations of v a
// second to rate.
func observeAt(rate map[string]float64, key string, bounds []float64, perSecond, v float64) {
	rate[key+"/"+strconv.Itoa(sort.SearchFloat64s(bounds, v))] += perSecond
	rate[key+"/sum"] += perSecond * v
	rate[key+"/count"] += perSecond
}

// histogramAt is the histogram under key at now, times share.
func (r *rates) histogramAt(now time.Time, key string, bounds []float64, share float64) *histogram {
	h := newHistogram(bounds)
	for i := range h.counts {
		h.counts[i] = r.get(now, key+"/"+strconv.Itoa(i)) * share
	}
	h.sum, h.count = r.get(now, key+"/sum")*share, r.get(now, key+"/count")*share
	return h
}

func finite(fs ...float64) bool {
	for _, f := range fs {
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
	}
	return true
}

// SetOffload starts (or, all rates 0, stops adding to) offload traffic.
func (s *Sim) SetOffload(o Offload) error {
	if !slices.Contains([]string{"", "newer", "older", "both"}, o.Layout) {
		return fmt.Errorf("layout must be newer, older or both, got %q", o.Layout)
	}
	if !finite(o.LoadBytesPerSecond, o.StoreBytesPerSecond, o.BandwidthBytesPerSecond, o.ExternalQueryTokensPerSecond,
		o.AllocationFailuresPerSecond, o.StoresSkippedPerSecond, o.PromotionAllocationFailuresPerSecond) ||
		!fraction(o.HitRatio) || !fraction(o.CPUUsage) || !fraction(o.CPUWriteUsage) || !fraction(o.CPUReadUsage) {
		return errors.New("offload rates must be >= 0, hit_ratio and usages in [0,1]")
	}
	for _, t := range o.Tiers {
		if t.Name == "" || t.Name == "cpu" || !finite(t.ReadBytesPerSecond, t.WriteBytesPerSecond, t.BandwidthBytesPerSecond,
			t.BlockQueriesPerSecond, t.PromotionFailuresPerSecond, t.CascadeFailuresPerSecond) ||
			!fraction(t.HitRatio) || !fraction(t.WriteUsage) || !fraction(t.ReadUsage) {
			return fmt.Errorf("offload tier %q: a name other than cpu, rates >= 0, hit_ratio and usages in [0,1]", t.Name)
		}
	}
	o.Layout = cmp.Or(o.Layout, "newer")
	o.BandwidthBytesPerSecond = cmp.Or(o.BandwidthBytesPerSecond, 25e9)
	for i := range o.Tiers {
		o.Tiers[i].BandwidthBytesPerSecond = cmp.Or(o.Tiers[i].BandwidthBytesPerSecond, 2e9)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offload, s.offloadOn = o, true
	s.setTrafficLocked()
	return nil
}

// SetMooncake starts (or, ops_per_second 0, stops adding to) Mooncake
// store traffic.
func (s *Sim) SetMooncake(m Mooncake) error {
	if !finite(m.OpsPerSecond, m.KeysPerOp, m.BytesPerKey, m.OpSeconds) || !fraction(m.ErrorFraction) {
		return errors.New("mooncake: rates, keys_per_op, bytes_per_key and op_seconds must be finite and >= 0, error_fraction in [0,1]")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mooncake, s.mooncakeOn = m, true
	s.setTrafficLocked()
	return nil
}

// SetHF3FS starts (or, rates 0, stops adding to) HF3FS saves and loads.
func (s *Sim) SetHF3FS(h HF3FS) error {
	if !finite(h.SavesPerSecond, h.LoadsPerSecond, h.SaveSeconds, h.LoadSeconds) || !fraction(h.FailFraction) {
		return errors.New("hf3fs: rates and durations must be finite and >= 0, fail_fraction in [0,1]")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hf3fs, s.hf3fsOn = h, true
	s.setTrafficLocked()
	return nil
}

// setTrafficLocked sets the counters' rates from every connector control.
func (s *Sim) setTrafficLocked() {
	rate := map[string]float64{}
	if o := s.offload; s.offloadOn {
		rate["load_bytes"], rate["store_bytes"] = o.LoadBytesPerSecond, o.StoreBytesPerSecond
		rate["load_seconds"], rate["store_seconds"] = o.LoadBytesPerSecond/o.BandwidthBytesPerSecond, o.StoreBytesPerSecond/o.BandwidthBytesPerSecond
		rate["external_queries"], rate["external_hits"] = o.ExternalQueryTokensPerSecond, o.ExternalQueryTokensPerSecond*o.HitRatio
		rate["allocation_failures"], rate["stores_skipped"] = o.AllocationFailuresPerSecond, o.StoresSkippedPerSecond
		rate["promotion_allocation_failures"] = o.PromotionAllocationFailuresPerSecond
		for _, t := range o.Tiers {
			for k, v := range map[string]float64{"read_bytes": t.ReadBytesPerSecond, "write_bytes": t.WriteBytesPerSecond,
				"read_seconds": t.ReadBytesPerSecond / t.BandwidthBytesPerSecond, "write_seconds": t.WriteBytesPerSecond / t.BandwidthBytesPerSecond,
				"block_queries": t.BlockQueriesPerSecond, "block_hits": t.BlockQueriesPerSecond * t.HitRatio,
				"promotion_failures": t.PromotionFailuresPerSecond, "cascade_failures": t.CascadeFailuresPerSecond} {
				rate["tier/"+t.Name+"/"+k] = v
			}
		}
	}
	if m := s.mooncake; s.mooncakeOn {
		for _, op := range mooncakeOps {
			for _, st := range mooncakeStatuses {
				k := "mooncake/" + op + "/" + st + "/"
				n := m.OpsPerSecond * (1 - m.ErrorFraction)
				if st == "error" {
					n = m.OpsPerSecond * m.ErrorFraction
					rate[k+"failed_keys"] = n * m.KeysPerOp
				}
				rate[k+"ops"], rate[k+"keys"], rate[k+"bytes"] = n, n*m.KeysPerOp, n*m.KeysPerOp*m.BytesPerKey
				observeAt(rate, k+"time", s.buckets["mooncake_time"], n, m.OpSeconds)
			}
		}
	}
	if h := s.hf3fs; s.hf3fsOn {
		rate["hf3fs/save_failures"], rate["hf3fs/load_failures"] = h.SavesPerSecond*h.FailFraction, h.LoadsPerSecond*h.FailFraction
		observeAt(rate, "hf3fs/save", s.buckets["hf3fs_save"], h.SavesPerSecond, h.SaveSeconds)
		observeAt(rate, "hf3fs/load", s.buckets["hf3fs_load"], h.LoadsPerSecond, h.LoadSeconds)
	}
	s.traffic.set(s.now, rate)
}

// share is an engine's share of a connector counter.
func share(key string) source {
	return source{value: func(e *engine) float64 {
		return e.sim.traffic.get(e.sim.now, key) / float64(len(e.sim.allEngines()))
	}}
}

// tierShare is an engine's share of a tier's counter, by tier.
func tierShare(key string) source {
	return source{values: func(s *Sim) []string {
		var out []string
		for _, t := range s.offload.Tiers {
			out = append(out, t.Name)
		}
		return out
	}, byLabel: func(e *engine, tier string) float64 {
		return e.sim.traffic.get(e.sim.now, "tier/"+tier+"/"+key) / float64(len(e.sim.allEngines()))
	}}
}

// tierUsage is a usage gauge of the primary tier labelled by the tier
// behind it.
func tierUsage(get func(t OffloadTier) float64) source {
	src := tierShare("")
	src.byLabel = func(e *engine, tier string) float64 {
		for _, t := range e.sim.offload.Tiers {
			if t.Name == tier {
				return get(t)
			}
		}
		return 0
	}
	return src
}

// offloadByType is the older layout's bytes (or seconds) of one
// transfer_type: CPU_to_GPU is a load from the CPU tier, GPU_to_CPU a store.
func offloadByType(seconds bool) source {
	return source{byLabel: func(e *engine, tt string) float64 {
		k := "load_"
		if tt == "GPU_to_CPU" {
			k = "store_"
		}
		if seconds {
			return share(k + "seconds").value(e)
		}
		return share(k + "bytes").value(e)
	}}
}

// mooncakeCounter is a Mooncake store counter: per engine, operation and
// status seen (the children vLLM has created: a status appears with its
// first operation), an engine's share of the server-wide totals.
func mooncakeCounter(key string) source {
	return source{custom: func(w *expoWriter) []child {
		return w.mooncakeChildren(func(k string, share float64) child { return child{v: w.s.traffic.get(w.s.now, k+key) * share} })
	}}
}

// mooncakeTime is vllm:mooncake_store_operation_time_seconds, as the counters.
func mooncakeTime(w *expoWriter) []child {
	return w.mooncakeChildren(func(k string, share float64) child {
		return child{h: w.s.traffic.histogramAt(w.s.now, k+"time", w.s.buckets["mooncake_time"], share)}
	})
}

// mooncakeChildren are one child per engine, operation and status seen,
// labelled as vLLM does.
func (w *expoWriter) mooncakeChildren(of func(key string, share float64) child) []child {
	engines := w.s.allEngines()
	var out []child
	for _, e := range engines {
		for _, op := range mooncakeOps {
			for _, st := range mooncakeStatuses {
				k := "mooncake/" + op + "/" + st + "/"
				if w.s.traffic.get(w.s.now, k+"ops") == 0 {
					continue
				}
				c := of(k, 1/float64(len(engines)))
				c.ls = append(w.engineLabels(e), label{"operation", op}, label{"status", st})
				out = append(out, c)
			}
		}
	}
	return out
}

// hf3fsTime is an HF3FS duration histogram, an engine's share.
func hf3fsTime(key string) source {
	return source{custom: func(w *expoWriter) []child {
		engines := w.s.allEngines()
		var out []child
		for _, e := range engines {
			out = append(out, child{ls: w.engineLabels(e), h: w.s.traffic.histogramAt(w.s.now, "hf3fs/"+key, w.s.buckets["hf3fs_"+key], 1/float64(len(engines)))})
		}
		return out
	}}
}
