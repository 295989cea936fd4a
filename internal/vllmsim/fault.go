package vllmsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
)

// FaultKind names an injectable fault.
type FaultKind string

// Faults. Each can be injected on its own; several may be active together.
const (
	// FaultDown closes the listener: connections are refused (needs Start).
	FaultDown FaultKind = "down"
	// FaultHang accepts connections and reads requests but never answers
	// (every route except /admin), until cleared.
	FaultHang FaultKind = "hang"
	// FaultSlowMetrics delays /metrics by Delay (default 5s, wall time).
	FaultSlowMetrics FaultKind = "slow_metrics"
	// Fault5xx: /metrics and the API answer 500, /health answers the
	// version's dead-engine status (503 on v1, 500 before).
	Fault5xx FaultKind = "5xx"
	// FaultGarbageMetrics: /metrics answers 200 with a body that is not the
	// Prometheus text format.
	FaultGarbageMetrics FaultKind = "garbage_metrics"
	// FaultStreamCut: streaming responses are cut (connection closed, no
	// [DONE]) after AfterChunks data events (default 2).
	FaultStreamCut FaultKind = "stream_cut"
	// FaultStreamError: streaming responses send vLLM's in-stream error
	// object after AfterChunks events, then [DONE] (HTTP status stays 200).
	FaultStreamError FaultKind = "stream_error"
	// FaultRestart restarts the server: in-flight requests are dropped and
	// every counter resets. With Duration > 0 the port is closed that long first.
	FaultRestart FaultKind = "restart"
)

// FaultSpec is one fault to inject.
type FaultSpec struct {
	Kind        FaultKind
	Delay       time.Duration
	AfterChunks int
	// Duration > 0 clears the fault automatically after that much wall time.
	Duration time.Duration
}

// MarshalJSON writes the admin API's form: {"fault":"slow_metrics","delay":"5s",...}.
func (f FaultSpec) MarshalJSON() ([]byte, error) {
	v := map[string]any{"fault": f.Kind}
	if f.Delay > 0 {
		v["delay"] = f.Delay.String()
	}
	if f.AfterChunks > 0 {
		v["after_chunks"] = f.AfterChunks
	}
	if f.Duration > 0 {
		v["duration"] = f.Duration.String()
	}
	return json.Marshal(v)
}

type faultState struct {
	active  map[FaultKind]FaultSpec
	release chan struct{} // closed when FaultHang is cleared
	timers  map[FaultKind]*time.Timer
}

// ErrNotStarted is returned for faults that need a listener (down, restart with Duration).
var ErrNotStarted = errors.New("vllmsim: fault needs a server started with Start")

// InjectFault activates a fault. FaultRestart acts at once and stays inactive.
func (s *Sim) InjectFault(f FaultSpec) error {
	switch f.Kind {
	case FaultHang, FaultSlowMetrics, Fault5xx, FaultGarbageMetrics, FaultStreamCut, FaultStreamError:
	case FaultDown:
		if s.srv == nil {
			return ErrNotStarted
		}
	case FaultRestart:
		if f.Duration > 0 {
			if s.srv == nil {
				return ErrNotStarted
			}
			s.srv.setDown(true)
			time.AfterFunc(f.Duration, func() {
				s.Restart()
				s.srv.setDown(false)
			})
			return nil
		}
		s.Restart()
		return nil
	default:
		return fmt.Errorf("unknown fault %q (known: down, hang, slow_metrics, 5xx, garbage_metrics, stream_cut, stream_error, restart)", f.Kind)
	}
	if f.Kind == FaultSlowMetrics && f.Delay <= 0 {
		f.Delay = 5 * time.Second
	}
	if (f.Kind == FaultStreamCut || f.Kind == FaultStreamError) && f.AfterChunks <= 0 {
		f.AfterChunks = 2
	}
	s.mu.Lock()
	if s.faults.active == nil {
		s.faults.active = map[FaultKind]FaultSpec{}
		s.faults.timers = map[FaultKind]*time.Timer{}
	}
	if f.Kind == FaultHang && s.faults.release == nil {
		s.faults.release = make(chan struct{})
	}
	s.faults.active[f.Kind] = f
	if t := s.faults.timers[f.Kind]; t != nil {
		t.Stop()
		delete(s.faults.timers, f.Kind)
	}
	if f.Duration > 0 {
		kind := f.Kind
		s.faults.timers[kind] = time.AfterFunc(f.Duration, func() { s.ClearFault(kind) })
	}
	s.mu.Unlock()
	if f.Kind == FaultDown {
		s.srv.setDown(true)
	}
	return nil
}

// ClearFault deactivates one fault (no-op if inactive).
func (s *Sim) ClearFault(kind FaultKind) {
	s.mu.Lock()
	_, was := s.faults.active[kind]
	delete(s.faults.active, kind)
	if t := s.faults.timers[kind]; t != nil {
		t.Stop()
		delete(s.faults.timers, kind)
	}
	if kind == FaultHang && s.faults.release != nil {
		close(s.faults.release)
		s.faults.release = nil
	}
	s.mu.Unlock()
	if was && kind == FaultDown && s.srv != nil {
		s.srv.setDown(false)
	}
}

// ClearFaults deactivates every fault.
func (s *Sim) ClearFaults() {
	for _, f := range s.Faults() {
		s.ClearFault(f.Kind)
	}
}

// Faults lists the active faults, sorted by kind.
func (s *Sim) Faults() []FaultSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]FaultSpec, 0, len(s.faults.active))
	for _, f := range s.faults.active {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

func (s *Sim) fault(kind FaultKind) (FaultSpec, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.faults.active[kind]
	return f, ok
}

// hangChan returns a channel closed when FaultHang is cleared, or nil if not hanging.
// Hanging is how many requests FaultHang is holding now: a test waits for
// one instead of sleeping until a client is "surely" stuck.
func (s *Sim) Hanging() int { return int(s.hanging.Load()) }

func (s *Sim) hangChan() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.faults.active[FaultHang]; !ok {
		return nil
	}
	return s.faults.release
}
