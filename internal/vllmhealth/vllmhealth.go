// Package vllmhealth turns the exporter's latest snapshots (vLLM scrape,
// probes, bottleneck class) into one health verdict for the vLLM server and
// serves it over HTTP for Kubernetes probes and routers. The verdict is
// computed when a new snapshot arrives (Tick); a request only reads it.
//
// vLLM's own /health answers 200 while the engine is wedged (vllm #39863,
// #53130); this verdict is built from what the engine does, not from
// whether its HTTP server answers.
package vllmhealth

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// State is the verdict's one-word answer.
type State string

// The states. Evaluate checks starting, down, unhealthy and asleep first,
// then livelocked before stalled (the livelock is the more specific
// diagnosis of an engine that makes no tokens), and serving last.
const (
	// Starting: no scrape of vLLM attempted yet.
	Starting State = "starting"
	// Down: the latest scrape of vLLM's /metrics failed (not up, loading
	// its model, crashed, hanging).
	Down State = "down"
	// Unhealthy: vLLM's own vllm:engine_healthy says an engine is not
	// (vLLM --enable-fault-tolerance).
	Unhealthy State = "unhealthy"
	// Asleep: the engine was put to sleep on purpose (sleep mode). It
	// serves nothing, but nothing is wrong: a liveness check passes, a
	// readiness check does not.
	Asleep State = "asleep"
	// Stalled: requests are in flight and no tokens come (probe stall
	// detector or the classifier's engine_stalled).
	Stalled State = "stalled"
	// Livelocked: the classifier's deferred_livelock (vllm #53130): the
	// scheduler admits nothing while /health stays 200.
	Livelocked State = "livelocked"
	// Serving: none of the above.
	Serving State = "serving"
)

// States lists every state (the `state` label values).
var States = []State{Starting, Down, Unhealthy, Asleep, Stalled, Livelocked, Serving}

// Live reports whether the process should be left running: everything but
// down, unhealthy, stalled and livelocked (a restart is what helps those).
// Starting is not live either: a startupProbe covers model loading.
func (s State) Live() bool { return s == Serving || s == Asleep }

// Ready reports whether requests should be routed to the server.
func (s State) Ready() bool { return s == Serving }

// Verdict is the health answer at one time.
type Verdict struct {
	State  State
	Reason string
	Time   time.Time // when it was computed
}

// The bottleneck classes the verdict reads (slo/bottleneck's names; kept as
// strings so this package does not depend on the classifier).
const (
	classStalled  = "engine_stalled"
	classLivelock = "deferred_livelock"
)

// Evaluate derives the verdict from the latest snapshots. p and classes
// (model -> current bottleneck class) may be nil.
func Evaluate(v *snapshot.VLLM, p *snapshot.Probes, classes map[string]string, now time.Time) Verdict {
	out := func(s State, format string, a ...any) Verdict {
		return Verdict{State: s, Reason: fmt.Sprintf(format, a...), Time: now}
	}
	if v == nil {
		return out(Starting, "no scrape of vLLM's /metrics yet")
	}
	if !v.Up {
		return out(Down, "the last scrape of vLLM's /metrics failed (%s) at %s", v.Error, v.Time.UTC().Format(time.RFC3339))
	}
	models := slices.Sorted(maps.Keys(v.Models))
	for _, name := range models {
		if h := v.Models[name].EngineHealthy; h.OK && h.V == 0 {
			return out(Unhealthy, "vllm:engine_healthy is 0 for model %q", name)
		}
	}
	for _, name := range models {
		if m := v.Models[name]; m.Asleep() {
			level := "unknown"
			if m.Sleep.Level.OK {
				level = fmt.Sprint(m.Sleep.Level.V)
			}
			return out(Asleep, "the engine of model %q sleeps on purpose (level %s)", name, level)
		}
	}
	// The livelock first: a livelocked engine makes no tokens with requests
	// present, so the probes' stall detector and the generic stall class
	// see it too; the livelock is the specific diagnosis, and checking it
	// after them would flip the verdict between stalled and livelocked.
	for _, name := range slices.Sorted(maps.Keys(classes)) {
		if classes[name] == classLivelock {
			return out(Livelocked, "model %q: deferred requests pile up, generation near 0 (bottleneck deferred_livelock, vllm #53130); restart", name)
		}
	}
	if p != nil && p.EngineStalled {
		return out(Stalled, "probes get no token while requests run and generation does not move")
	}
	for _, name := range slices.Sorted(maps.Keys(classes)) {
		if classes[name] == classStalled {
			return out(Stalled, "model %q: requests present, token counters still (bottleneck engine_stalled)", name)
		}
	}
	if len(models) == 0 {
		return out(Serving, "vLLM answers but exposes no engine metrics (--disable-log-stats?)")
	}
	return out(Serving, "serving %d model(s)", len(models))
}

// Sources are what the tracker reads; Probes and Classes may be nil.
type Sources struct {
	VLLM    interface{ Latest() *snapshot.VLLM }
	Probes  interface{ Latest() *snapshot.Probes }
	Classes func() map[string]string
}

// Tracker keeps the latest verdict. Tick computes it (run it after each new
// snapshot: as an SLO-watchdog hook after the classifier, or on each
// scrape); the HTTP handlers and Collect only read it.
type Tracker struct {
	src    Sources
	latest atomic.Pointer[Verdict]
	desc   *prometheus.Desc
}

// New returns a Tracker whose verdict is Starting until the first Tick.
func New(src Sources) *Tracker {
	t := &Tracker{src: src, desc: prometheus.NewDesc("vllm_health_verdict",
		"The exporter's health verdict for the vLLM server as a state set (exactly one state is 1), from the latest scrape, probes and bottleneck class; also served at /-/vllm/healthy and /-/vllm/ready.",
		[]string{"state"}, nil)}
	v := Verdict{State: Starting, Reason: "no scrape of vLLM's /metrics yet"}
	t.latest.Store(&v)
	return t
}

// Tick recomputes the verdict from the sources' latest snapshots.
func (t *Tracker) Tick(now time.Time) {
	v, p := snapshot.LatestOf(t.src.VLLM), snapshot.LatestOf(t.src.Probes)
	var classes map[string]string
	if t.src.Classes != nil {
		classes = t.src.Classes()
	}
	verdict := Evaluate(v, p, classes, now)
	t.latest.Store(&verdict)
}

// Latest is the current verdict.
func (t *Tracker) Latest() Verdict { return *t.latest.Load() }

// LiveHandler serves /-/vllm/healthy: 200 while serving or asleep, 503
// while starting, down, unhealthy, stalled or livelocked; the state and the
// reason in the body and the state in the X-VLLM-Health header.
func (t *Tracker) LiveHandler() http.Handler {
	return t.handler(State.Live)
}

// ReadyHandler serves /-/vllm/ready: 200 only while serving (a router
// sends no request to a sleeping, stalled or down server).
func (t *Tracker) ReadyHandler() http.Handler {
	return t.handler(State.Ready)
}

func (t *Tracker) handler(ok func(State) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		v := t.Latest()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-VLLM-Health", string(v.State))
		code := http.StatusOK
		if !ok(v.State) {
			code = http.StatusServiceUnavailable
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "%s: %s\n", v.State, v.Reason)
	})
}

// Describe implements prometheus.Collector.
func (t *Tracker) Describe(ch chan<- *prometheus.Desc) { ch <- t.desc }

// Collect implements prometheus.Collector from the latest verdict.
func (t *Tracker) Collect(ch chan<- prometheus.Metric) {
	cur := t.Latest().State
	for _, s := range States {
		v := 0.0
		if s == cur {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(t.desc, prometheus.GaugeValue, v, string(s))
	}
}
