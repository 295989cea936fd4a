package vllmsim

import (
	"fmt"
	"strconv"
)

// The newest /metrics layout (MetricsLatest, vLLM 0.30-0.33, late 2026):
// main 2026-08 (familiesV1, exact against reference/metrics.md §3) plus what
// reference/metrics-late-2026.md lists. Where neither reference nor vLLM's
// public code (searched: vllm/v1/metrics/buckets.py, tests/v1/metrics
// test_priority_metrics, docs/design/engine_sleep_state.md, docs/usage/
// metrics.md, vllm/entrypoints/serve/instrumentator/metrics.py) gives a
// detail, the choice is written next to it. Registration order of the new
// families inside PrometheusStatLogger.__init__ could not be read; they are
// placed next to their relatives (parsers must not depend on order anyway).

// Help texts of late-2026 families. engine_healthy's is vLLM's
// (_EngineHealthCollector); the others were not readable in public code and
// are written in vLLM's style: a scraper must match names, not HELP.
const (
	helpSleepResource  = "Engine sleep state per resource; 1 for the resource's current state, 0 for its other states."
	helpFullyAwake     = "Whether the engine is fully awake: 1 when scheduling is running and weights and KV cache are resident."
	helpPolicyInfo     = "Scheduler policy in use; 1 for the active policy, 0 for the others."
	helpNumPreemptions = "Histogram of the number of preemptions per finished request."
	helpPriority       = "Histogram of the priority of finished requests."
	helpEngineHealthy  = "Whether the engine reports healthy under fault tolerance."
)

func familiesLatest(c *Config) []famSpec {
	var out []famSpec
	for _, f := range familiesV1(c) {
		if o, ok := externalCacheFamilies[f.name]; ok {
			f = o
		}
		out = append(out, f)
		switch f.name {
		case "vllm:engine_sleep_state":
			out = append(out,
				famSpec{name: "vllm:engine_sleep_resource_state", typ: kGauge, help: helpSleepResource, custom: sleepResourceFamily},
				famSpec{name: "vllm:engine_fully_awake", typ: kGauge, help: helpFullyAwake,
					gauge: func(e *engine) float64 { return b2f(e.sim.sleep.FullyAwake()) }},
				famSpec{name: "vllm:scheduler_policy_info", typ: kGauge, help: helpPolicyInfo,
					extra: "policy", extraVal: []string{PolicyFCFS, PolicyPriority},
					byExtra: func(e *engine, v string) float64 { return b2f(e.sim.cfg.SchedulingPolicy == v) }},
			)
		case "vllm:request_params_max_tokens":
			// Observed for every finished request (0 preemptions lands in le="1").
			out = append(out,
				famSpec{name: "vllm:request_num_preemptions", typ: kHist, help: helpNumPreemptions, hist: hNumPreempt},
				// Only registered under the priority policy; raw priority values, no priority label.
				famSpec{name: "vllm:request_priority", typ: kHist, help: helpPriority, hist: hPriority,
					cond: func(s *Sim) bool { return s.cfg.SchedulingPolicy == PolicyPriority }},
			)
		case "vllm:cache_config_info":
			out = append(out, famSpec{name: "vllm:engine_healthy", typ: kGauge, help: helpEngineHealthy,
				cond: func(s *Sim) bool { return s.cfg.EnableFaultTolerance }, custom: engineHealthyFamily})
		}
	}
	return append(append(out, productionFamilies()...), mooncakeFamilies()...)
}

// sleepResourceFamily renders vllm:engine_sleep_resource_state{resource,
// state}: per engine, one child per (resource, state), 1 for the current
// state. vLLM creates these children once the engine's first sleep snapshot
// arrives; the simulated engine publishes one at start-up, so they are
// present from the first scrape (a scraper must still accept their absence:
// older engines send no snapshot).
func sleepResourceFamily(w *expoWriter) {
	const name = "vllm:engine_sleep_resource_state"
	w.header(name, kGauge, helpSleepResource)
	st := w.s.sleep
	for _, e := range w.s.allEngines() {
		for _, rs := range sleepStates {
			for _, state := range rs.states {
				ls := append(w.engineLabels(e), label{"resource", rs.resource}, label{"state", state})
				w.sample(name, ls, b2f(st.of(rs.resource) == state))
			}
		}
	}
}

// engineHealthyFamily renders vllm:engine_healthy{engine} (no model_name:
// vLLM's collector labels it by engine only). An engine is unhealthy while
// the 5xx fault simulates a dead engine core; a stalled (wedged) engine still
// reports healthy, as vLLM's cached fault-tolerance state does.
func engineHealthyFamily(w *expoWriter) {
	const name = "vllm:engine_healthy"
	w.header(name, kGauge, helpEngineHealthy)
	_, dead := w.s.faults.active[Fault5xx]
	seen := map[int]bool{}
	for _, e := range w.s.allEngines() {
		if seen[e.index] {
			continue // one child per engine rank, whatever the model
		}
		seen[e.index] = true
		w.sample(name, []label{{"engine", strconv.Itoa(e.index)}}, b2f(!dead))
	}
}

// specDecodeFamilies are vLLM's speculative-decoding counters
// (vllm/v1/spec_decode/metrics.py), registered only with a speculative
// config: here, once spec decode was ever enabled.
func specDecodeFamilies() []famSpec {
	on := func(s *Sim) bool { return s.specMaxK > 0 }
	return []famSpec{
		{name: "vllm:spec_decode_num_drafts_total", typ: kCounter, help: "Number of spec decoding drafts.", cond: on,
			counter: func(st *engineStats) float64 { return st.specDrafts }},
		{name: "vllm:spec_decode_num_draft_tokens_total", typ: kCounter, help: "Number of draft tokens.", cond: on,
			counter: func(st *engineStats) float64 { return st.specDraftTokens }},
		{name: "vllm:spec_decode_num_accepted_tokens_total", typ: kCounter, help: "Number of accepted tokens.", cond: on,
			counter: func(st *engineStats) float64 { return st.specAccepted }},
		{name: "vllm:spec_decode_num_accepted_tokens_per_pos_total", typ: kCounter, help: "Accepted tokens per draft position.", cond: on,
			extra: "position", extraVals: func(s *Sim) []string {
				out := make([]string, s.specMaxK)
				for i := range out {
					out[i] = fmt.Sprint(i)
				}
				return out
			},
			byExtra: func(e *engine, v string) float64 {
				i, _ := strconv.Atoi(v)
				if i < len(e.stats.specPerPos) {
					return e.stats.specPerPos[i]
				}
				return 0
			}},
	}
}
