// Package modelset is the one bound on how many vLLM model names the
// exporter keeps state for, shared by every per-model structure: the vLLM
// scraper admits a model_name into its snapshots (and so into its windows,
// the bottleneck classifier and the probes' view) only while it tracks fewer
// than Max names, and the SLO watchdog (and its state file) applies the same
// limits to its own series. A name not seen for IdleTimeout is evicted,
// freeing its slot.
//
// Why: model names come from vLLM's body, so they are input. A router that
// rotates names, or adapters served under their own names, used to make the
// SLO watchdog keep every name for the whole 30-day period: series, memory
// and the state file grew without bound.
package modelset

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of --vllm.max-models and --vllm.model-idle-timeout. vLLM serves
// one model per process (plus LoRA adapters under their own names), so 16
// leaves room for adapters; an hour rides out a restart or a deployment
// while staying far below the 30-day SLO period.
const (
	DefaultMax         = 16
	DefaultIdleTimeout = time.Hour
)

// Limits are the shared bound. The zero value means the defaults.
type Limits struct {
	Max         int
	IdleTimeout time.Duration
	// Stats, when set, receives every set's size, evictions and refusals.
	Stats *Stats
}

func (l Limits) withDefaults() Limits {
	if l.Max <= 0 {
		l.Max = DefaultMax
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	return l
}

// Set is one component's bounded set of model names with the time each was
// last seen. It is not safe for concurrent use: its owner's lock guards it.
type Set struct {
	lim       Limits
	component string
	seen      map[string]time.Time
}

// NewSet returns an empty set for component (the `component` label of the
// vllm_exporter_models_* series: "vllm", "slo").
func (l Limits) NewSet(component string) *Set {
	s := &Set{lim: l.withDefaults(), component: component, seen: map[string]time.Time{}}
	s.report()
	return s
}

// Max is the bound in force.
func (s *Set) Max() int { return s.lim.Max }

// IdleTimeout is the eviction age in force.
func (s *Set) IdleTimeout() time.Duration { return s.lim.IdleTimeout }

// Has reports whether name is tracked.
func (s *Set) Has(name string) bool { _, ok := s.seen[name]; return ok }

// Len is the number of tracked names.
func (s *Set) Len() int { return len(s.seen) }

// Admit records name as seen at now. It returns false, and counts a
// refusal, when name is not tracked and the set is full.
func (s *Set) Admit(name string, now time.Time) bool {
	return s.admitAt(name, now, now)
}

// Restore admits name as last seen at lastSeen (from a checkpoint), unless
// that is already older than the idle timeout at now or the set is full.
func (s *Set) Restore(name string, lastSeen, now time.Time) bool {
	if now.Sub(lastSeen) > s.lim.IdleTimeout {
		return false
	}
	return s.admitAt(name, lastSeen, now)
}

func (s *Set) admitAt(name string, seen, now time.Time) bool {
	if old, ok := s.seen[name]; ok {
		if seen.After(old) {
			s.seen[name] = seen
		}
		return true
	}
	if len(s.seen) >= s.lim.Max {
		if s.lim.Stats != nil {
			s.lim.Stats.add(s.lim.Stats.refused, s.component, 1)
		}
		return false
	}
	s.seen[name] = seen
	s.report()
	return true
}

// Expire forgets, and returns sorted, the names last seen more than the
// idle timeout before now.
func (s *Set) Expire(now time.Time) []string {
	var gone []string
	for name, t := range s.seen {
		if now.Sub(t) > s.lim.IdleTimeout {
			gone = append(gone, name)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	for _, name := range gone {
		delete(s.seen, name)
	}
	slices.Sort(gone)
	if s.lim.Stats != nil {
		s.lim.Stats.add(s.lim.Stats.evicted, s.component, float64(len(gone)))
	}
	s.report()
	return gone
}

func (s *Set) report() {
	if s.lim.Stats != nil {
		s.lim.Stats.setTracked(s.component, len(s.seen))
	}
}

var (
	descTracked = prometheus.NewDesc("vllm_exporter_models_tracked",
		"Model names the component keeps state for (at most --vllm.max-models).", []string{"component"}, nil)
	descEvicted = prometheus.NewDesc("vllm_exporter_models_evicted_total",
		"Model names whose state the component dropped after --vllm.model-idle-timeout without being seen.", []string{"component"}, nil)
	descRefused = prometheus.NewDesc("vllm_exporter_models_refused_total",
		"Times the component refused to track a new model name because it already tracked --vllm.max-models names.", []string{"component"}, nil)
)

// Stats is the Prometheus collector of every Set sharing the limits.
type Stats struct {
	mu      sync.Mutex
	tracked map[string]float64
	evicted map[string]float64
	refused map[string]float64
}

// NewStats returns the collector; components are listed from their first
// report on.
func NewStats() *Stats {
	return &Stats{tracked: map[string]float64{}, evicted: map[string]float64{}, refused: map[string]float64{}}
}

func (st *Stats) add(m map[string]float64, component string, n float64) {
	st.mu.Lock()
	m[component] += n
	st.mu.Unlock()
}

func (st *Stats) setTracked(component string, n int) {
	st.mu.Lock()
	st.tracked[component] = float64(n)
	if _, ok := st.evicted[component]; !ok {
		st.evicted[component], st.refused[component] = 0, 0
	}
	st.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (st *Stats) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTracked
	ch <- descEvicted
	ch <- descRefused
}

// Collect implements prometheus.Collector.
func (st *Stats) Collect(ch chan<- prometheus.Metric) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, c := range slices.Sorted(maps.Keys(st.tracked)) {
		ch <- prometheus.MustNewConstMetric(descTracked, prometheus.GaugeValue, st.tracked[c], c)
		ch <- prometheus.MustNewConstMetric(descEvicted, prometheus.CounterValue, st.evicted[c], c)
		ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, st.refused[c], c)
	}
}
