package vllmsim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// source fills the vLLM families whose table entry names it
// (families.Sim.Source): exactly one of value (per engine), byLabel (per
// engine and value of the family's label), a per-engine histogram under
// the source's name (none set), or custom (children of its own).
type source struct {
	value   func(e *engine) float64
	byLabel func(e *engine, v string) float64
	// prio is byLabel's value within one priority label (request_success
	// under the priority policy).
	prio func(ps *prioStats, v string) float64
	// values are the label values when they are decided at render time.
	values func(s *Sim) []string
	custom func(w *expoWriter) []child
}

// stat is a per-engine counter of engineStats.
func stat(get func(st *engineStats) float64) source {
	return source{value: func(e *engine) float64 { return get(e.stats) }}
}

// sources are the simulator's quantities by the table's Source names.
var sources = map[string]source{
	"zero":      {value: func(*engine) float64 { return 0 }},
	"minus_one": {value: func(*engine) float64 { return -1 }},
	"running":   {value: func(e *engine) float64 { return float64(len(e.running)) }},
	// Since #38435 (≈0.20) waiting counts deferred (skipped) requests too.
	"waiting": {value: func(e *engine) float64 {
		if e.sim.version.splitsWaiting {
			return float64(len(e.waiting) + len(e.deferred))
		}
		return float64(len(e.waiting))
	}},
	"waiting_by_reason": {byLabel: func(e *engine, v string) float64 {
		blocked := e.loraBlocked() // skipped by the LoRA budget
		if v == "capacity" {
			return float64(len(e.waiting) - blocked)
		}
		return float64(len(e.deferred) + blocked)
	}},
	"kv_usage":    {value: func(e *engine) float64 { return e.pool.usage() }},
	"sleep_state": {byLabel: func(e *engine, v string) float64 { return e.sim.sleep.legacy(v) }},
	"fully_awake": {value: func(e *engine) float64 { return b2f(e.sim.sleep.FullyAwake()) }},
	"policy":      {byLabel: func(e *engine, v string) float64 { return b2f(e.sim.cfg.SchedulingPolicy == v) }},
	"gpu_prefix_hit_rate": {value: func(e *engine) float64 {
		switch {
		case !e.pool.caching:
			return -1
		case e.stats.prefixQueries == 0:
			return 0
		}
		return e.stats.prefixHits / e.stats.prefixQueries
	}},

	"preemptions":               stat(func(st *engineStats) float64 { return st.preemptions }),
	"prompt_tokens":             stat(func(st *engineStats) float64 { return st.promptTokens }),
	"prompt_cached":             stat(func(st *engineStats) float64 { return st.promptCacheHit }),
	"generation_tokens":         stat(func(st *engineStats) float64 { return st.generationTokens }),
	"prefix_queries":            stat(func(st *engineStats) float64 { return st.prefixQueries }),
	"prefix_hits":               stat(func(st *engineStats) float64 { return st.prefixHits }),
	"flops":                     stat(func(st *engineStats) float64 { return st.flops }),
	"read_bytes":                stat(func(st *engineStats) float64 { return st.readBytes }),
	"write_bytes":               stat(func(st *engineStats) float64 { return st.writeBytes }),
	"spec_drafts":               stat(func(st *engineStats) float64 { return st.specDrafts }),
	"spec_draft_tokens":         stat(func(st *engineStats) float64 { return st.specDraftTokens }),
	"spec_accepted":             stat(func(st *engineStats) float64 { return st.specAccepted }),
	"nixl_failed_transfers":     stat(func(st *engineStats) float64 { return st.nixlFailedTransfers }),
	"nixl_failed_notifications": stat(func(st *engineStats) float64 { return st.nixlFailedNotifications }),
	"nixl_expired":              stat(func(st *engineStats) float64 { return st.nixlExpired }),
	"success": {byLabel: func(e *engine, v string) float64 { return e.stats.success[v] },
		prio: func(ps *prioStats, v string) float64 { return ps.success[v] }},
	"prompt_by_source": {byLabel: func(e *engine, v string) float64 {
		switch v {
		case "local_compute":
			return e.stats.promptCompute
		case "local_cache_hit":
			return e.stats.promptCacheHit
		}
		return 0
	}},
	"admission_rejections": {byLabel: func(e *engine, v string) float64 { return e.stats.admissionRejections[v] }},
	"spec_per_pos": {values: func(s *Sim) []string {
		out := make([]string, s.specMaxK)
		for i := range out {
			out[i] = strconv.Itoa(i)
		}
		return out
	}, byLabel: func(e *engine, v string) float64 {
		i, _ := strconv.Atoi(v)
		if i < len(e.stats.specPerPos) {
			return e.stats.specPerPos[i]
		}
		return 0
	}},

	"external_queries":        offloadShare(func(t offloadTotals, _ float64) float64 { return t.queries }),
	"external_hits":           offloadShare(func(t offloadTotals, _ float64) float64 { return t.hits }),
	"offload_load_bytes":      offloadShare(func(t offloadTotals, _ float64) float64 { return t.loadBytes }),
	"offload_load_seconds":    offloadShare(func(t offloadTotals, bw float64) float64 { return t.loadBytes / bw }),
	"offload_store_bytes":     offloadShare(func(t offloadTotals, _ float64) float64 { return t.storeBytes }),
	"offload_store_seconds":   offloadShare(func(t offloadTotals, bw float64) float64 { return t.storeBytes / bw }),
	"offload_bytes_by_type":   {byLabel: offloadByType(false)},
	"offload_seconds_by_type": {byLabel: offloadByType(true)},

	"mooncake_ops":         mooncakeCounter(func(t *mooncakeTotals) float64 { return t.ops }),
	"mooncake_keys":        mooncakeCounter(func(t *mooncakeTotals) float64 { return t.keys }),
	"mooncake_bytes":       mooncakeCounter(func(t *mooncakeTotals) float64 { return t.bytes }),
	"mooncake_failed_keys": mooncakeCounter(func(t *mooncakeTotals) float64 { return t.failedKeys }),
	"mooncake_time":        {custom: mooncakeTime},

	"cache_config":    {custom: cacheConfig},
	"lora_info":       {custom: loraInfoChildren},
	"sleep_resources": {custom: sleepResources},
	"engine_healthy":  {custom: engineHealthy},
	"http_requests":   {custom: httpRequests},
}

// features say whether the feature that registers a family (the table's
// When) is on.
var features = map[string]func(s *Sim) bool{
	"spec_decode":      func(s *Sim) bool { return s.specMaxK > 0 },
	"priority":         func(s *Sim) bool { return s.cfg.SchedulingPolicy == PolicyPriority },
	"fault_tolerance":  func(s *Sim) bool { return s.cfg.EnableFaultTolerance },
	"admission":        func(s *Sim) bool { return s.admission != (AdmissionLimit{}) },
	"nixl":             func(s *Sim) bool { return s.pd.Role != RoleNone },
	"kv_cache_metrics": func(s *Sim) bool { return s.kvCacheMetrics },
	"lora":             func(s *Sim) bool { return s.lora.MaxLoRA > 0 },
	"offload":          func(s *Sim) bool { return s.offloadOn && s.offload.Layout != "older" },
	"offload_older":    func(s *Sim) bool { return s.offloadOn && s.offload.Layout != "newer" },
	"mooncake":         func(s *Sim) bool { return s.mooncakeOn },
}

func boolPy(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// cacheConfig is vllm:cache_config_info: one child per engine (V0: one,
// without an engine label), the labels every version has and the
// version's own.
func cacheConfig(w *expoWriter) []child {
	var out []child
	c := w.s.cfg
	for _, e := range w.s.allEngines() {
		ls := []label{{"block_size", fmt.Sprint(c.BlockSize)}, {"cache_dtype", "auto"},
			{"enable_prefix_caching", boolPy(!c.DisablePrefixCaching)}, {"gpu_memory_utilization", "0.9"},
			{"is_attention_free", "False"}, {"num_gpu_blocks", fmt.Sprint(c.NumGPUBlocks)},
			{"num_gpu_blocks_override", "None"}, {"sliding_window", "None"}}
		if !w.v.engineLabel {
			return []child{{ls: append(ls, w.v.cacheConfig(&c)...), v: 1}}
		}
		ls = append(ls, label{"engine", fmt.Sprint(e.index)})
		out = append(out, child{ls: append(ls, w.v.cacheConfig(&c)...), v: 1})
	}
	return out
}

// loraInfoChildren is vllm:lora_requests_info: the adapters of running and of
// waiting requests, comma-joined, value the current time (V0 without LoRA:
// max_lora "0" and empty lists).
func loraInfoChildren(w *expoWriter) []child {
	var running, waiting []string
	add := func(list *[]string, r *req) {
		if r.lora != "" && !slices.Contains(*list, r.lora) {
			*list = append(*list, r.lora)
		}
	}
	for _, e := range w.s.allEngines() {
		for _, r := range e.running {
			add(&running, r)
		}
		for _, r := range slices.Concat(e.waiting, e.deferred) {
			add(&waiting, r)
		}
	}
	return []child{{ls: []label{{"max_lora", fmt.Sprint(w.s.lora.MaxLoRA)},
		{"running_lora_adapters", strings.Join(running, ",")}, {"waiting_lora_adapters", strings.Join(waiting, ",")}},
		v: unixSeconds(w.s.now)}}
}

// sleepResources is vllm:engine_sleep_resource_state{resource, state}: per
// engine, one child per (resource, state), 1 for the current state. vLLM
// creates them once the engine's first sleep snapshot arrives; the
// simulated engine publishes one at start-up, so they are present from the
// first scrape (a scraper must still accept their absence: older engines
// send no snapshot).
func sleepResources(w *expoWriter) []child {
	var out []child
	st := w.s.sleep
	for _, e := range w.s.allEngines() {
		for _, rs := range sleepStates {
			for _, state := range rs.states {
				out = append(out, child{ls: append(w.engineLabels(e), label{"resource", rs.resource}, label{"state", state}),
					v: b2f(st.of(rs.resource) == state)})
			}
		}
	}
	return out
}

// engineHealthy is vllm:engine_healthy{engine} (no model_name: vLLM's
// collector labels it by engine only). An engine is unhealthy while the
// 5xx fault simulates a dead engine core; a stalled (wedged) engine still
// reports healthy, as vLLM's cached fault-tolerance state does.
func engineHealthy(w *expoWriter) []child {
	_, dead := w.s.faults.active[Fault5xx]
	var out []child
	seen := map[int]bool{}
	for _, e := range w.s.allEngines() {
		if !seen[e.index] { // one child per engine rank, whatever the model
			seen[e.index] = true
			out = append(out, child{ls: []label{{"engine", strconv.Itoa(e.index)}}, v: b2f(!dead)})
		}
	}
	return out
}
