package vllmsim

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Controls and families of vLLM's optional features: admission control,
// the NIXL connector of disaggregated prefill/decode, LoRA adapters, KV
// block residency (the KV connectors' traffic is in connectors.go). Each
// family is registered (rendered) only while its control is on, as vLLM
// registers it only with the feature, and only under --metrics-version
// v1-0.33.

// ErrAdmission is a request refused at admission: waiting plus running
// requests are at --max-num-queued-reqs, or the queued prompt tokens at
// --max-num-queued-tokens (HTTP 503).
var ErrAdmission = errors.New("admission rejected")

// Admission reasons (vllm:admission_rejections_total{reason}).
const (
	reasonQueuedReqs   = "max_num_queued_reqs"
	reasonQueuedTokens = "max_num_queued_tokens"
)

// AdmissionLimit is vLLM's --max-num-queued-reqs (vllm#49445: caps an
// engine's waiting plus running requests) and --max-num-queued-tokens (the
// prompt tokens waiting; 0: no limit): a request arriving at either cap is
// refused with 503.
type AdmissionLimit struct {
	MaxQueuedRequests int `json:"max_queued_requests"`
	MaxQueuedTokens   int `json:"max_queued_tokens"`
}

// SetAdmission sets the admission limits (both 0: off).
func (s *Sim) SetAdmission(a AdmissionLimit) error {
	if a.MaxQueuedRequests < 0 || a.MaxQueuedTokens < 0 {
		return fmt.Errorf("admission limits must be >= 0, got %+v", a)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.admission = a
	return nil
}

// admit checks e's queue against the admission limits for a request of
// promptLen tokens, counting a rejection by reason. Called with s.mu held.
func (s *Sim) admit(e *engine, promptLen int) error {
	a := s.admission
	queued := slices.Concat(e.waiting, e.deferred)
	reason := ""
	if a.MaxQueuedRequests > 0 && len(queued)+len(e.running) >= a.MaxQueuedRequests {
		reason = reasonQueuedReqs
	} else if a.MaxQueuedTokens > 0 {
		tokens := promptLen
		for _, r := range queued {
			tokens += r.promptLen
		}
		if tokens > a.MaxQueuedTokens {
			reason = reasonQueuedTokens
		}
	}
	if reason == "" {
		return nil
	}
	e.stats.admissionRejections[reason]++
	return fmt.Errorf("%w: the waiting queue is full (%s); retry later", ErrAdmission, reason)
}

// Roles of a disaggregated pod (vLLM's kv_role).
const (
	RoleNone    = ""
	RolePrefill = "prefill" // kv_producer: computes prompts, its KV is read by a decode pod
	RoleDecode  = "decode"  // kv_consumer: reads the KV of each request before decoding
	RoleBoth    = "both"    // kv_both
)

// PD makes the simulator one side of a disaggregated prefill/decode pair
// with the NIXL connector. On a decode (or both) pod every request first
// waits, deferred, for its KV transfer of TransferSeconds plus its bytes
// (prompt tokens × BytesPerToken) at BytesPerSecond; FailFraction of the
// transfers fail (the request is then prefilled locally) and
// ExpireFraction of the requests find their KV expired on the prefill
// side. A prefill pod only records expiries of KV nobody read.
type PD struct {
	Role            string  `json:"role"`
	TransferSeconds float64 `json:"transfer_seconds"`
	BytesPerToken   float64 `json:"bytes_per_token"`
	BytesPerSecond  float64 `json:"bytes_per_second"`
	FailFraction    float64 `json:"fail_fraction"`
	ExpireFraction  float64 `json:"expire_fraction"`
}

// SetPD sets the pod's P/D role (Role "" turns the NIXL connector off).
func (s *Sim) SetPD(p PD) error {
	switch {
	case !slices.Contains([]string{RoleNone, RolePrefill, RoleDecode, RoleBoth}, p.Role):
		return fmt.Errorf("role must be prefill, decode or both, got %q", p.Role)
	case !fraction(p.FailFraction) || !fraction(p.ExpireFraction):
		return fmt.Errorf("fail_fraction and expire_fraction must be in [0,1]")
	case p.TransferSeconds < 0 || p.BytesPerToken < 0 || p.BytesPerSecond < 0 || math.IsNaN(p.TransferSeconds+p.BytesPerToken+p.BytesPerSecond):
		return fmt.Errorf("transfer_seconds, bytes_per_token and bytes_per_second must be >= 0")
	}
	p.BytesPerToken = cmp.Or(p.BytesPerToken, 131072) // 128 KiB: a 32B-class model's KV per token
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pd, s.pdFailAcc, s.pdExpireAcc = p, 0, 0
	return nil
}

func fraction(f float64) bool { return f >= 0 && f <= 1 && !math.IsNaN(f) }

// every advances an accumulator by f and reports whether a whole event is
// due (f = 0.25: every fourth call).
func every(acc *float64, f float64) bool {
	if f <= 0 {
		return false
	}
	*acc += f
	if *acc < 1-1e-9 {
		return false
	}
	*acc--
	return true
}

// transferKV records the NIXL transfer of a new request q on engine e and
// returns how long q waits for it (0: no transfer on this pod). Called
// with s.mu held.
func (s *Sim) transferKV(e *engine, q *req) time.Duration {
	p := s.pd
	if p.Role == RoleNone {
		return 0
	}
	st := e.stats
	if every(&s.pdExpireAcc, p.ExpireFraction) {
		st.nixlExpired++
	}
	if p.Role == RolePrefill {
		return 0
	}
	bytes := float64(q.promptLen) * p.BytesPerToken
	secs := p.TransferSeconds
	if p.BytesPerSecond > 0 {
		secs += bytes / p.BytesPerSecond
	}
	if every(&s.pdFailAcc, p.FailFraction) {
		st.nixlFailedTransfers++
		return 0 // recomputed locally
	}
	st.hist[hNixlXfer].observe(secs)
	st.hist[hNixlPost].observe(secs / 20)
	st.hist[hNixlBytes].observe(bytes)
	blocks := (q.promptLen + s.cfg.BlockSize - 1) / s.cfg.BlockSize
	st.hist[hNixlDescs].observe(float64(2 * blocks)) // one K and one V descriptor per block
	return time.Duration(secs * float64(time.Second))
}

// LoRAConfig enables LoRA: requests naming one of Adapters as their model
// run on the base model with that adapter; MaxLoRA adapters fit one batch
// (a waiting request whose adapter would be one more waits, as vLLM's
// scheduler skips it). /v1/models lists the adapters after the base models
// (vLLM --lora-modules). LoadFraction of the built-in load's requests to
// the base model name the adapters instead, in turn.
type LoRAConfig struct {
	MaxLoRA      int      `json:"max_lora"`
	Adapters     []string `json:"adapters"`
	LoadFraction float64  `json:"load_fraction"`
}

// SetLoRA sets the served adapters (MaxLoRA 0: LoRA off).
func (s *Sim) SetLoRA(l LoRAConfig) error {
	if l.MaxLoRA < 0 || (l.MaxLoRA == 0 && len(l.Adapters) > 0) {
		return fmt.Errorf("max_lora must be > 0 with adapters, got %d", l.MaxLoRA)
	}
	if !fraction(l.LoadFraction) {
		return fmt.Errorf("load_fraction must be in [0,1], got %v", l.LoadFraction)
	}
	for _, a := range l.Adapters {
		if a == "" || strings.Contains(a, ",") {
			return fmt.Errorf("bad adapter name %q", a)
		}
		if _, base := s.models[a]; base {
			return fmt.Errorf("adapter %q has a base model's name", a)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lora, s.loraAcc, s.loraNext = l, 0, 0
	s.poke() // a larger budget may admit waiting requests
	return nil
}

// loraTarget is the model name a built-in load request for model names:
// with LoadFraction, every 1/LoadFraction-th request to the base model
// names the next adapter in turn. Called with s.mu held.
func (s *Sim) loraTarget(model string) string {
	l := s.lora
	if l.MaxLoRA == 0 || len(l.Adapters) == 0 || model != s.cfg.Models[0] || !every(&s.loraAcc, l.LoadFraction) {
		return model
	}
	a := l.Adapters[s.loraNext%len(l.Adapters)]
	s.loraNext++
	return a
}

// loraAdapters is the served adapters (none while LoRA is off).
func (s *Sim) loraAdapters() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lora.MaxLoRA == 0 {
		return nil
	}
	return append([]string(nil), s.lora.Adapters...)
}

// loraBase maps an adapter name to the base model it runs on ("" if name
// is not an adapter). Called with s.mu held.
func (s *Sim) loraBase(name string) string {
	if s.lora.MaxLoRA > 0 && slices.Contains(s.lora.Adapters, name) {
		return s.cfg.Models[0]
	}
	return ""
}

// Histogram keys of the NIXL families.
const (
	hNixlXfer  = "nixl_xfer_time"
	hNixlPost  = "nixl_post_time"
	hNixlBytes = "nixl_bytes"
	hNixlDescs = "nixl_descriptors"
)

// KV block residency histograms (--kv-cache-metrics).
const (
	hKVBlockLifetime = "kv_block_lifetime"
	hKVBlockIdle     = "kv_block_idle_before_evict"
	hKVBlockReuseGap = "kv_block_reuse_gap"
)

// SetKVCacheMetrics turns vLLM's --kv-cache-metrics on or off: KV block
// lifetime, idle time before eviction and reuse gaps, every block sampled.
func (s *Sim) SetKVCacheMetrics(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kvCacheMetrics = on
	for _, e := range s.allEngines() {
		e.attachResidency()
	}
}

// attachResidency gives the engine's block pool a residency tracker while
// --kv-cache-metrics is on (again after the pool is rebuilt).
func (e *engine) attachResidency() {
	if !e.sim.kvCacheMetrics {
		e.pool.track = nil
		return
	}
	if e.pool.track == nil {
		s := e.sim
		e.pool.track = newBlockTrack(e.pool.numBlocks, func() time.Time { return s.now },
			func(h string, v float64) { e.stats.hist[h].observe(v) })
	}
}
