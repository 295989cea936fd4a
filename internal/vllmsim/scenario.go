package vllmsim

import (
	"fmt"
	"sort"
)

// Dist is a log-normal length distribution clamped to [Min, Max].
// CV is the coefficient of variation (0 = always Mean).
type Dist struct {
	Mean float64 `json:"mean"`
	CV   float64 `json:"cv"`
	Min  int     `json:"min"`
	Max  int     `json:"max"`
}

// LoadProfile shapes the built-in load generator's traffic.
type LoadProfile struct {
	// Rate is the mean arrival rate per model in requests per second.
	Rate float64 `json:"rate"`
	// Burstiness is the gamma shape of inter-arrival times as in
	// `vllm bench serve --burstiness`: 1 = Poisson, < 1 burstier, > 1 more uniform.
	Burstiness float64 `json:"burstiness"`
	// Prompt and Output are token-length distributions. Output is where EOS
	// falls; a request stops with "length" when it reaches MaxTokens first.
	Prompt    Dist `json:"prompt"`
	Output    Dist `json:"output"`
	MaxTokens int  `json:"max_tokens"`
	IgnoreEOS bool `json:"ignore_eos"`
	// SharedPrefixFraction of requests start with one of PrefixGroups shared
	// prefixes of SharedPrefixTokens tokens (system prompts, few-shot headers).
	SharedPrefixFraction float64 `json:"shared_prefix_fraction"`
	SharedPrefixTokens   int     `json:"shared_prefix_tokens"`
	PrefixGroups         int     `json:"prefix_groups"`
	// Priorities, under --scheduling-policy priority, gives each request a
	// priority drawn uniformly from this list (ignored under FCFS, which
	// refuses non-zero priorities).
	Priorities []int `json:"priorities,omitempty"`
	// BurstSize requests arrive together at each arrival (0 = 1): a client
	// that fans a batch out at once.
	BurstSize int `json:"burst_size,omitempty"`
	// Models, when set, names the model of each request in turn (LoRA
	// adapters); default: the served models in turn.
	Models []string `json:"models,omitempty"`
	// Streams are further request populations mixed into this traffic,
	// each with its own arrivals and lengths (documents from a pipeline
	// among chat, periodic fan-out bursts). Their own Streams are ignored.
	Streams []LoadProfile `json:"streams,omitempty"`
}

// Scenario is a preset regime: a load profile plus engine health.
type Scenario struct {
	Name        string      `json:"name"`
	Description string      `json:"description"`
	Load        LoadProfile `json:"load"`
	// StepFactor multiplies every step's duration (throttled: GPU clocks capped).
	StepFactor float64 `json:"step_factor"`
	// PrefillFactor multiplies only the per-prefill-token part of a step
	// (0 = 1): prefill slower than this hardware should manage (a prefill
	// kernel regression, a misconfigured attention backend) while decode
	// runs at its usual speed.
	PrefillFactor float64 `json:"prefill_factor,omitempty"`
	// Stalled engines accept requests but never finish a step (no tokens,
	// /health still 200).
	Stalled bool `json:"stalled"`
	// AbortFraction of requests are aborted by the engine right after their
	// first token (an engine-side failure, counted by vLLM as
	// finished_reason="abort", unlike a client disconnect).
	AbortFraction float64 `json:"abort_fraction,omitempty"`
}

var healthyLoad = LoadProfile{
	Rate: 2, Burstiness: 1,
	Prompt:    Dist{Mean: 600, CV: 0.6, Min: 16, Max: 4000},
	Output:    Dist{Mean: 200, CV: 0.8, Min: 1, Max: 1024},
	MaxTokens: 512, SharedPrefixFraction: 0.3, SharedPrefixTokens: 512, PrefixGroups: 4,
}

// scenarios are the presets, by name.
var scenarios = map[string]Scenario{
	"healthy": {Name: "healthy", Description: "moderate Poisson load well under capacity", Load: healthyLoad, StepFactor: 1},
	"kv_exhausted": {Name: "kv_exhausted", Description: "long prompts and long outputs overfill the KV cache: usage near 1, preemption storm",
		StepFactor: 1, Load: LoadProfile{Rate: 3, Burstiness: 1,
			Prompt: Dist{Mean: 2500, CV: 0.3, Min: 512, Max: 5000}, Output: Dist{Mean: 1500, CV: 0.3, Min: 200, Max: 2500},
			MaxTokens: 2500, IgnoreEOS: false}},
	"queueing": {Name: "queueing", Description: "short requests arriving above capacity: max_num_seqs saturated, waiting queue grows",
		StepFactor: 1, Load: LoadProfile{Rate: 45, Burstiness: 1,
			Prompt: Dist{Mean: 150, CV: 0.5, Min: 16, Max: 600}, Output: Dist{Mean: 100, CV: 0.5, Min: 1, Max: 300}, MaxTokens: 512}},
	"prefill_heavy": {Name: "prefill_heavy", Description: "very long prompts, short answers: TTFT dominated by prefill",
		StepFactor: 1, Load: LoadProfile{Rate: 1.5, Burstiness: 1,
			Prompt: Dist{Mean: 5000, CV: 0.2, Min: 2000, Max: 7000}, Output: Dist{Mean: 30, CV: 0.5, Min: 1, Max: 64}, MaxTokens: 64}},
	"decode_heavy": {Name: "decode_heavy", Description: "short prompts, long outputs with ignore_eos: large decode batches, ITL grows",
		StepFactor: 1, Load: LoadProfile{Rate: 1.5, Burstiness: 1,
			Prompt: Dist{Mean: 200, CV: 0.3, Min: 16, Max: 600}, Output: Dist{Mean: 1500, CV: 0.2, Min: 500, Max: 2000}, MaxTokens: 2000, IgnoreEOS: true}},
	"prefix_warm": {Name: "prefix_warm", Description: "every prompt = one shared 2048-token prefix + a short unique suffix: prefix cache hits",
		StepFactor: 1, Load: LoadProfile{Rate: 2, Burstiness: 1,
			Prompt: Dist{Mean: 2112}, Output: Dist{Mean: 100, CV: 0.3, Min: 1, Max: 256}, MaxTokens: 256,
			SharedPrefixFraction: 1, SharedPrefixTokens: 2048, PrefixGroups: 1}},
	"prefix_cold": {Name: "prefix_cold", Description: "same prompt lengths as prefix_warm but every prompt unique: no prefix hits",
		StepFactor: 1, Load: LoadProfile{Rate: 2, Burstiness: 1,
			Prompt: Dist{Mean: 2112}, Output: Dist{Mean: 100, CV: 0.3, Min: 1, Max: 256}, MaxTokens: 256}},
	"throttled": {Name: "throttled", Description: "healthy load but every step 2.5x slower (power cap / thermal throttling)",
		StepFactor: 2.5, Load: healthyLoad},
	"stalled": {Name: "stalled", Description: "engine hung: requests are accepted and queue up, no token is ever produced, /health stays 200",
		StepFactor: 1, Stalled: true, Load: healthyLoad},
}

// Scenarios lists the preset names, sorted.
func Scenarios() []string {
	out := make([]string, 0, len(scenarios))
	for k := range scenarios {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ScenarioPreset returns a preset by name.
func ScenarioPreset(name string) (Scenario, bool) {
	s, ok := scenarios[name]
	return s, ok
}

// SetScenario switches to a preset at the current clock. Requests in flight
// keep running under the new engine behaviour; the load generator switches
// to the new profile.
func (s *Sim) SetScenario(name string) error {
	sc, ok := scenarios[name]
	if !ok {
		return fmt.Errorf("unknown scenario %q (known: %v)", name, Scenarios())
	}
	return s.ApplyScenario(sc)
}

// ApplyScenario switches to a custom scenario.
func (s *Sim) ApplyScenario(sc Scenario) error {
	bad := sc.StepFactor < 0 || sc.PrefillFactor < 0 || sc.AbortFraction < 0 || sc.AbortFraction > 1
	for _, l := range append([]LoadProfile{sc.Load}, sc.Load.Streams...) {
		bad = bad || l.Rate < 0 || l.BurstSize < 0 || l.SharedPrefixFraction < 0 || l.SharedPrefixFraction > 1
	}
	if bad {
		return fmt.Errorf("invalid scenario %q: negative factor/rate/burst size or prefix/abort fraction outside [0,1]", sc.Name)
	}
	s.lockNow()
	defer s.mu.Unlock()
	wasStalled := s.scen.Stalled
	s.scen = sc
	for _, e := range s.allEngines() {
		e.blocked = false
		if wasStalled && !sc.Stalled && e.busy && e.stepEnd.Before(s.now) {
			e.stepEnd = s.now // the hung step completes when the stall ends
		}
	}
	s.load.reset(s.now)
	s.poke()
	return nil
}

// Scenario returns the active scenario.
func (s *Sim) Scenario() Scenario {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scen
}

// SetLoadGen turns the built-in load generator on or off.
func (s *Sim) SetLoadGen(on bool) {
	s.lockNow()
	defer s.mu.Unlock()
	s.load.enabled = on
	s.load.reset(s.now)
	s.poke()
}
