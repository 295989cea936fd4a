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
// statuses; mooncakeBuckets the operation time histogram's bounds.
var (
	mooncakeOps      = []string{"load_get", "save_put"}
	mooncakeStatuses = []string{"ok", "error"}
	mooncakeBuckets  = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2}
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
			t := &mooncakeTotals{time: newHistogram(mooncakeBuckets)}
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

// mooncakeFamilies are the MooncakeStoreConnector's families, by engine,
// operation and status (the children vLLM has created: a status appears
// with its first operation), rendered while the control is on.
func mooncakeFamilies() []famSpec {
	on := func(s *Sim) bool { return s.mooncakeOn }
	counter := func(name, help string, v func(t *mooncakeTotals) float64) famSpec {
		f := famSpec{name: name, typ: kCounter, help: help, cond: on}
		f.custom = func(w *expoWriter) {
			w.render(f, w.mooncakeChildren(func(t *mooncakeTotals, share float64) child { return child{v: v(t) * share} }))
		}
		return f
	}
	hist := famSpec{name: "vllm:mooncake_store_operation_time_seconds", typ: kHist, help: "Histogram of Mooncake store communication time.", cond: on}
	hist.custom = func(w *expoWriter) {
		w.render(hist, w.mooncakeChildren(func(t *mooncakeTotals, share float64) child {
			h := newHistogram(mooncakeBuckets)
			for i := range h.counts {
				h.counts[i] = t.time.counts[i] * share
			}
			h.sum, h.count = t.time.sum*share, t.time.count*share
			return child{h: h}
		}))
	}
	return []famSpec{
		counter("vllm:mooncake_store_operation_total", "Number of Mooncake store communication operations.", func(t *mooncakeTotals) float64 { return t.ops }),
		counter("vllm:mooncake_store_operation_keys_total", "Number of Mooncake store keys touched by operations.", func(t *mooncakeTotals) float64 { return t.keys }),
		counter("vllm:mooncake_store_operation_bytes_total", "Number of bytes transferred by Mooncake store operations.", func(t *mooncakeTotals) float64 { return t.bytes }),
		counter("vllm:mooncake_store_operation_failed_keys_total", "Number of Mooncake store keys that failed in operations.", func(t *mooncakeTotals) float64 { return t.failedKeys }),
		hist,
	}
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
