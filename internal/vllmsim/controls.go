package vllmsim

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
)

// Engine controls of today's vLLM: sleep/wake, deferred requests,
// speculative decoding, requests refused before the engine, custom histogram
// buckets. Each has a Go method and an /admin route (admin.go); sleep/wake
// also answer on vLLM's own dev-mode routes (/sleep, /wake_up, /is_sleeping).

// Sleep resource states, as vllm:engine_sleep_resource_state names them.
const (
	ResScheduler = "scheduler"
	ResWeights   = "weights"
	ResKVCache   = "kv_cache"

	StateRunning   = "running"
	StatePaused    = "paused"
	StateResident  = "resident"
	StateOffloaded = "offloaded"
	StateDiscarded = "discarded"
	StateReleased  = "released"
)

// sleepStates lists each resource's states in vLLM's order (the children of
// vllm:engine_sleep_resource_state; "unknown" only follows a failed memory
// RPC, which the simulator never has, so it always renders 0).
var sleepStates = []struct {
	resource string
	states   []string
}{
	{ResScheduler, []string{StateRunning, StatePaused}},
	{ResWeights, []string{StateResident, StateOffloaded, StateDiscarded, "unknown"}},
	{ResKVCache, []string{StateResident, StateReleased, "unknown"}},
}

// SleepState is the server's sleep state (vLLM sleeps every engine of the
// process together).
type SleepState struct {
	Scheduler string `json:"scheduler"` // running | paused
	Weights   string `json:"weights"`   // resident | offloaded | discarded
	KVCache   string `json:"kv_cache"`  // resident | released
}

var awakeState = SleepState{Scheduler: StateRunning, Weights: StateResident, KVCache: StateResident}

// FullyAwake is vllm:engine_fully_awake: scheduling runs and both memory
// resources are resident.
func (st SleepState) FullyAwake() bool { return st == awakeState }

// Sleeping is /is_sleeping's answer: anything but fully awake.
func (st SleepState) Sleeping() bool { return !st.FullyAwake() }

func (st SleepState) of(resource string) string {
	switch resource {
	case ResScheduler:
		return st.Scheduler
	case ResWeights:
		return st.Weights
	}
	return st.KVCache
}

// legacy is the value of vllm:engine_sleep_state{sleep_state=v}, derived as
// vLLM derives the legacy view from the resource snapshot: awake = fully
// awake; weights_offloaded = weights offloaded; discard_all = weights
// discarded and KV released. A level-0 sleep (scheduler pause only) leaves all
// three at 0.
func (st SleepState) legacy(v string) float64 {
	switch v {
	case "awake":
		return b2f(st.FullyAwake())
	case "weights_offloaded":
		return b2f(st.Weights == StateOffloaded)
	}
	return b2f(st.Weights == StateDiscarded && st.KVCache == StateReleased)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Sleep puts the engine to sleep like POST /sleep?level=N (vLLM's sleep mode):
//
//	level 0: scheduler paused; weights and KV stay resident
//	level 1: paused, weights offloaded to CPU, KV cache released
//	level 2: paused, weights discarded, KV cache released
//
// A sleeping engine schedules nothing: requests already admitted and new ones
// wait (reason capacity) until the engine wakes; /health stays 200, as in
// vLLM, whose health check only asks whether the engine process is alive.
// Releasing the KV cache drops the prefix cache and the KV of requests in
// flight: they are recomputed after wake-up, like a preemption, but are not
// counted as preemptions (vLLM's pause keeps them in its queues; the
// preemption counter only counts scheduler preemptions). Sleeping while asleep
// is rejected unless the new level only goes deeper from a full pause.
func (s *Sim) Sleep(level int) error {
	if level < 0 || level > 2 {
		return fmt.Errorf("sleep level must be 0, 1 or 2, got %d", level)
	}
	s.lockNow()
	defer s.mu.Unlock()
	st := s.sleep
	if (st.Weights == StateResident) != (st.KVCache == StateResident) {
		// vLLM rejects a new sleep while only some resources are awake.
		return errors.New("engine is partially awake: wake it fully before sleeping again")
	}
	st.Scheduler = StatePaused
	if level >= 1 {
		st.KVCache = StateReleased
		st.Weights = StateOffloaded
		if level == 2 || s.sleep.Weights == StateDiscarded {
			st.Weights = StateDiscarded
		}
		for _, e := range s.allEngines() {
			e.releaseKV()
		}
	}
	s.sleep = st
	s.poke()
	return nil
}

// WakeUp wakes the named resources like POST /wake_up?tags=...: "weights",
// "kv_cache", or "scheduling" (resume scheduling only). No tags wakes
// everything. Scheduling resumes only when weights and KV cache are both
// resident, as in vLLM; an unknown tag is a no-op.
func (s *Sim) WakeUp(tags ...string) error {
	s.lockNow()
	defer s.mu.Unlock()
	if len(tags) == 0 {
		tags = []string{ResWeights, ResKVCache, "scheduling"}
	}
	st := s.sleep
	for _, t := range tags {
		switch t {
		case ResWeights, ResKVCache, "scheduling":
		default:
			return fmt.Errorf("unknown wake_up tag %q (want weights, kv_cache or scheduling)", t)
		}
	}
	for _, t := range tags {
		switch t {
		case ResWeights:
			st.Weights = StateResident
		case ResKVCache:
			st.KVCache = StateResident
		}
	}
	if st.Weights == StateResident && st.KVCache == StateResident {
		st.Scheduler = StateRunning
		for _, e := range s.allEngines() {
			e.blocked = false
		}
	}
	s.sleep = st
	s.poke()
	return nil
}

// SleepState returns the current sleep state.
func (s *Sim) SleepState() SleepState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sleep
}

// releaseKV drops every KV block of the engine (sleep level >= 1): requests
// in flight go back to the head of the waiting queue to be recomputed, and
// the prefix cache starts empty.
func (e *engine) releaseKV() {
	for i := len(e.running) - 1; i >= 0; i-- {
		r := e.running[i]
		e.freeBlocks(r)
		r.numComputed = 0
		r.state = stateWaiting
		e.requeue(r)
	}
	e.running = nil
	for _, r := range e.waiting {
		e.freeBlocks(r)
		r.numComputed = 0
	}
	e.resetPool()
}

// resetPool gives the engine an empty KV cache.
func (e *engine) resetPool() {
	c := &e.sim.cfg
	e.pool = newBlockPool(c.NumGPUBlocks, c.BlockSize, !c.DisablePrefixCaching, c.MetricsVersion != MetricsV0)
	e.attachResidency()
}

// DeferSpec makes the engine defer new requests the way vLLM's scheduler
// skips requests blocked by a transient constraint (LoRA budget, KV transfer,
// blocked status): they wait with vllm:num_requests_waiting_by_reason
// reason="deferred" instead of "capacity".
type DeferSpec struct {
	// Fraction of new requests deferred, in [0, 1]; picked deterministically
	// (every 1/Fraction-th request), so runs stay reproducible.
	Fraction float64 `json:"fraction"`
	// Hold is how long a deferred request waits before its constraint clears
	// and it joins the capacity queue; 0 = until ClearDefer.
	Hold time.Duration `json:"-"`
	// Livelock reproduces vllm #53130: deferred requests count against
	// max_num_seqs, so once running + deferred reaches it nothing is admitted
	// any more; running requests drain, KV usage and generation fall to about
	// zero, deferred requests pile up and /health stays 200.
	Livelock bool `json:"livelock"`
}

// SetDefer starts (or changes) deferring new requests. Requests already
// deferred keep their hold.
func (s *Sim) SetDefer(d DeferSpec) error {
	if !fraction(d.Fraction) || d.Hold < 0 {
		return fmt.Errorf("defer fraction must be in [0,1] and hold non-negative, got %v and %v", d.Fraction, d.Hold)
	}
	s.lockNow()
	defer s.mu.Unlock()
	s.deferCfg = d
	s.deferAcc = 0
	for _, e := range s.allEngines() {
		e.blocked = false
	}
	s.poke()
	return nil
}

// ClearDefer stops deferring and releases every deferred request into the
// capacity queue (the constraint cleared, e.g. the livelocked server restarted
// its scheduler).
func (s *Sim) ClearDefer() {
	s.lockNow()
	defer s.mu.Unlock()
	s.deferCfg = DeferSpec{}
	for _, e := range s.allEngines() {
		for _, r := range e.deferred {
			r.deferUntil = s.now
		}
		e.releaseDeferred(s.now)
	}
	s.poke()
}

// Defer returns the active defer setting.
func (s *Sim) Defer() DeferSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deferCfg
}

// releaseDeferred moves deferred requests whose hold expired by now to the
// front of the waiting queue (vLLM re-queues skipped requests ahead of the
// rest), keeping their arrival order.
func (e *engine) releaseDeferred(now time.Time) {
	var keep, out []*req
	for _, r := range e.deferred {
		if !r.deferUntil.IsZero() && !r.deferUntil.After(now) {
			out = append(out, r)
		} else {
			keep = append(keep, r)
		}
	}
	if len(out) == 0 {
		return
	}
	e.deferred = keep
	for i := len(out) - 1; i >= 0; i-- {
		out[i].deferUntil = time.Time{}
		e.requeue(out[i])
	}
	e.blocked = false
}

// nextDeferExpiry is the earliest hold expiry of the engine's deferred requests.
func (e *engine) nextDeferExpiry() time.Time {
	var t time.Time
	for _, r := range e.deferred {
		if !r.deferUntil.IsZero() && (t.IsZero() || r.deferUntil.Before(t)) {
			t = r.deferUntil
		}
	}
	return t
}

// SpecDecode configures speculative decoding (vLLM --speculative-config):
// every decode step of a request proposes NumSpeculativeTokens draft tokens;
// draft position i is accepted with probability AcceptanceRate given that
// positions 0..i-1 were (so acceptance falls with position, as in vLLM's
// per-position counters); the step emits the accepted drafts plus one token
// from the target model. One step, one ITL observation, several tokens.
type SpecDecode struct {
	NumSpeculativeTokens int     `json:"num_speculative_tokens"`
	AcceptanceRate       float64 `json:"acceptance_rate"`
	// DraftCost is the drafter's time per proposed position per step, in
	// seconds (default 10% of the cost model's StepBase: a small draft head
	// run NumSpeculativeTokens times). Verification costs the target model
	// the draft tokens as computed tokens (PerPrefillToken each).
	DraftCost float64 `json:"draft_cost,omitempty"`
}

// On reports whether speculative decoding is enabled.
func (sd SpecDecode) On() bool { return sd.NumSpeculativeTokens > 0 }

func (sd SpecDecode) validate() error {
	if sd.NumSpeculativeTokens < 0 || sd.NumSpeculativeTokens > 16 {
		return fmt.Errorf("num_speculative_tokens must be in [0,16], got %d", sd.NumSpeculativeTokens)
	}
	if !fraction(sd.AcceptanceRate) || sd.DraftCost < 0 {
		return fmt.Errorf("acceptance_rate must be in [0,1] and draft_cost non-negative, got %v and %v", sd.AcceptanceRate, sd.DraftCost)
	}
	return nil
}

// SetSpecDecode turns speculative decoding on (NumSpeculativeTokens > 0) or
// off. The vllm:spec_decode_* families appear once it was ever on (vLLM
// registers them when started with a speculative config) and keep their
// counts when it is turned off.
func (s *Sim) SetSpecDecode(sd SpecDecode) error {
	if err := sd.validate(); err != nil {
		return err
	}
	s.lockNow()
	defer s.mu.Unlock()
	s.setSpecLocked(sd)
	s.poke()
	return nil
}

func (s *Sim) setSpecLocked(sd SpecDecode) {
	if sd.On() && sd.DraftCost == 0 {
		sd.DraftCost = 0.1 * s.cfg.Cost.StepBase
	}
	s.spec = sd
	if sd.NumSpeculativeTokens > s.specMaxK {
		s.specMaxK = sd.NumSpeculativeTokens
		for _, e := range s.allEngines() {
			e.stats.growSpec(s.specMaxK)
		}
	}
}

// Spec returns the speculative decoding setting.
func (s *Sim) Spec() SpecDecode {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spec
}

// acceptDrafts draws how many of d drafts the target model accepts.
func acceptDrafts(rng *uint64, d int, rate float64) int {
	a := 0
	for a < d {
		u := float64(splitmix(rng)>>11) / (1 << 53)
		if u >= rate {
			break
		}
		a++
	}
	return a
}

// Refusal makes the API server refuse a fraction of generation requests
// before they reach the engine, with Status: 429 (a rate limiter or
// admission gate in front of the engine), 503 (overloaded / engine not
// ready) or 500. vLLM's instrumentator counts them in
// http_requests_total{status="4xx"|"5xx"} (grouped by class, so 429 shows as
// 4xx and 503 as 5xx) and they never reach vllm:request_success_total.
type Refusal struct {
	Status   int     `json:"status"`
	Fraction float64 `json:"fraction"`
}

// SetRefusal starts refusing (Fraction 0 stops).
func (s *Sim) SetRefusal(r Refusal) error {
	if !fraction(r.Fraction) {
		return fmt.Errorf("refusal fraction must be in [0,1], got %v", r.Fraction)
	}
	if r.Fraction > 0 && r.Status != http.StatusTooManyRequests && r.Status != http.StatusServiceUnavailable && r.Status != http.StatusInternalServerError {
		return fmt.Errorf("refusal status must be 429, 503 or 500, got %d", r.Status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse, s.refuseAcc = r, 0
	return nil
}

// refusal reports the error to answer the next generation request with, if any.
func (s *Sim) refusal() *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !every(&s.refuseAcc, s.refuse.Fraction) {
		return nil
	}
	switch s.refuse.Status {
	case http.StatusTooManyRequests:
		return &apiError{status: 429, typ: "TooManyRequestsError", message: "Too many requests: the server is at its admission limit, retry later."}
	case http.StatusServiceUnavailable:
		return &apiError{status: 503, typ: "ServiceUnavailableError", message: "The server is overloaded or not ready, retry later."}
	}
	return &apiError{status: 500, typ: "InternalServerError", message: "EngineCore encountered an issue. See stack trace (above) for the root cause."}
}

// BucketFamilies lists the keys CustomHistogramBuckets accepts (vLLM's
// BucketFamilyKey in vllm/v1/metrics/buckets.py), sorted.
func BucketFamilies() []string {
	var out []string
	for _, sp := range families.Specs() {
		if sp.Sim.Custom != "" && !slices.Contains(out, sp.Sim.Custom) {
			out = append(out, sp.Sim.Custom)
		}
	}
	slices.Sort(out)
	return out
}

func validateBuckets(m map[string][]float64) error {
	for k, b := range m {
		if !slices.Contains(BucketFamilies(), k) {
			return fmt.Errorf("unknown histogram bucket family %q (known: %v)", k, BucketFamilies())
		}
		if len(b) == 0 {
			return fmt.Errorf("bucket family %q: empty bucket list", k)
		}
		for i, v := range b {
			if math.IsNaN(v) || math.IsInf(v, 0) || (i > 0 && v <= b[i-1]) {
				return fmt.Errorf("bucket family %q: bounds must be finite and strictly increasing, got %v", k, b)
			}
		}
	}
	return nil
}

// SetHistogramBuckets changes the bucket bounds like restarting vLLM with
// --custom-histogram-buckets: bounds can only change with a new process, so
// this is a Restart (requests in flight dropped, counters reset) with the new
// bounds. nil restores the defaults. Newest metrics layout only.
func (s *Sim) SetHistogramBuckets(m map[string][]float64) error {
	if s.cfg.MetricsVersion != MetricsLatest {
		return fmt.Errorf("custom histogram buckets need metrics version %s (vLLM added --custom-histogram-buckets after 2026-08)", MetricsLatest)
	}
	if err := validateBuckets(m); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.CustomHistogramBuckets = m
	s.buckets = bucketsFor(s.version, &s.cfg)
	s.restartLocked()
	return nil
}

// stalledTooLong is vLLM's HealthStateTracker.is_healthy, negated: requests
// pending (waiting or running) and no engine progress for HealthStallTimeout.
// Progress is any engine completing a step (DP: the tracker follows the
// coordinator's aggregate). Engines that are not hung keep stepping in vLLM
// even with nothing schedulable (the #53130 livelock) and a paused scheduler
// is deliberate, so only the stalled scenario stops progress here.
func (s *Sim) stalledTooLong() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.HealthStallTimeout <= 0 || !s.scen.Stalled {
		return false
	}
	if !s.cfg.VirtualClock {
		s.advanceLocked(time.Now())
	}
	pending := false
	var last time.Time
	for _, e := range s.allEngines() {
		pending = pending || len(e.waiting)+len(e.running) > 0
		if e.lastStepAt.After(last) {
			last = e.lastStepAt
		}
	}
	return pending && s.now.Sub(last) >= s.cfg.HealthStallTimeout
}
