package vllmsim

import (
	"fmt"
	"math"
)

// Mooncake simulates the MooncakeStoreConnector's traffic against the
// Mooncake pool (vllm:mooncake_store_operation_*): OpsPerSecond of each
// operation (load_get and save_put), ErrorFraction of them ending with
// status "error" (their keys all failed), KeysPerOp KV blocks of
// BytesPerKey each per operation, every operation taking OpSeconds. The
// traffic splits evenly over engines; a family appears with the control.
type Mooncake struct {
	OpsPerSecond  float64 `json:"ops_per_second"`
	ErrorFraction float64 `json:"error_fraction"`
	KeysPerOp     float64 `json:"keys_per_op"`
	BytesPerKey   float64 `json:"bytes_per_key"`
	OpSeconds     float64 `json:"op_seconds"`
}

// mooncakeOps are vLLM's operation label values, mooncakeStatuses its
// statuses.
var (
	mooncakeOps      = []string{"load_get", "save_put"}
	mooncakeStatuses = []string{"ok", "error"}
)

type mooncakeKey struct{ op, status string }

// mooncakeTotals are one (operation, status)'s counters, server-wide.
type mooncakeTotals struct {
	ops, keys, bytes, failedKeys float64
	time                         *histogram
}

// SetMooncake starts (or, ops_per_second 0, stops adding to) Mooncake
// store traffic.
func (s *Sim) SetMooncake(m Mooncake) error {
	if m.OpsPerSecond < 0 || m.KeysPerOp < 0 || m.BytesPerKey < 0 || !fraction(m.ErrorFraction) ||
		m.OpSeconds < 0 || math.IsNaN(m.OpsPerSecond+m.KeysPerOp+m.BytesPerKey+m.OpSeconds) || math.IsInf(m.OpsPerSecond+m.KeysPerOp+m.BytesPerKey+m.OpSeconds, 0) {
		return fmt.Errorf("mooncake: rates, keys_per_op, bytes_per_key and op_seconds must be finite and >= 0, error_fraction in [0,1]")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mooncakeAcc = s.mooncakeNow()
	s.mooncake, s.mooncakeOn, s.mooncakeSince = m, true, s.now
	return nil
}

// mooncakeNow is the Mooncake counters at s.now (a fresh copy). Called
// with s.mu held.
func (s *Sim) mooncakeNow() map[mooncakeKey]*mooncakeTotals {
	out := map[mooncakeKey]*mooncakeTotals{}
	for _, op := range mooncakeOps {
		for _, st := range mooncakeStatuses {
			k := mooncakeKey{op, st}
			t := &mooncakeTotals{time: newHistogram(s.buckets["mooncake_time"])}
			if a := s.mooncakeAcc[k]; a != nil {
				*t = *a
				h := *a.time
				h.counts = append([]float64(nil), a.time.counts...)
				t.time = &h
			}
			out[k] = t
		}
	}
	if !s.mooncakeOn {
		return out
	}
	m := s.mooncake
	dt := s.now.Sub(s.mooncakeSince).Seconds()
	for k, t := range out {
		n := m.OpsPerSecond * dt * (1 - m.ErrorFraction)
		if k.status == "error" {
			n = m.OpsPerSecond * dt * m.ErrorFraction
			t.failedKeys += n * m.KeysPerOp
		}
		t.ops += n
		t.keys += n * m.KeysPerOp
		t.bytes += n * m.KeysPerOp * m.BytesPerKey
		t.time.observeN(m.OpSeconds, n)
	}
	return out
}

// observeN records n observations of v.
func (h *histogram) observeN(v, n float64) {
	for i, b := range h.bounds {
		if v <= b {
			h.counts[i] += n
			h.sum += v * n
			h.count += n
			return
		}
	}
	h.counts[len(h.bounds)] += n
	h.sum += v * n
	h.count += n
}

// mooncakeCounter is a Mooncake store counter: per engine, operation and
// status seen (the children vLLM has created: a status appears with its
// first operation), an engine's share of the server-wide totals.
func mooncakeCounter(get func(t *mooncakeTotals) float64) source {
	return source{custom: func(w *expoWriter) []child {
		return w.mooncakeChildren(func(t *mooncakeTotals, share float64) child { return child{v: get(t) * share} })
	}}
}

// mooncakeTime is vllm:mooncake_store_operation_time_seconds, as the counters.
func mooncakeTime(w *expoWriter) []child {
	return w.mooncakeChildren(func(t *mooncakeTotals, share float64) child {
		h := newHistogram(t.time.bounds)
		for i := range h.counts {
			h.counts[i] = t.time.counts[i] * share
		}
		h.sum, h.count = t.time.sum*share, t.time.count*share
		return child{h: h}
	})
}

// mooncakeChildren are one child per engine, operation and status seen
// (an engine's share of the server-wide totals), labelled as vLLM does.
func (w *expoWriter) mooncakeChildren(of func(t *mooncakeTotals, share float64) child) []child {
	totals := w.s.mooncakeNow()
	engines := w.s.allEngines()
	var out []child
	for _, e := range engines {
		for _, op := range mooncakeOps {
			for _, st := range mooncakeStatuses {
				t := totals[mooncakeKey{op, st}]
				if t.ops == 0 {
					continue
				}
				c := of(t, 1/float64(len(engines)))
				c.ls = append(w.engineLabels(e), label{"operation", op}, label{"status", st})
				out = append(out, c)
			}
		}
	}
	return out
}
