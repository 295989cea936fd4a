// Package modelset is the one bound on how many vLLM model names the
// exporter keeps state for, shared by every per-model structure: the vLLM
// scraper admits a model_name into its snapshots (and so into its windows,
// the bottleneck classifier and the probes' view) only while it tracks fewer
// than Max names, and the SLO watchdog (and its state file) applies the same
// limits to its own series. A name absent from successful scrapes for
// IdleTimeout is evicted, freeing its slot; one absent for Grace gives its
// slot to a new name when the set is full.
//
// Why: model names come from vLLM's body, so they are input. Without one
// bound, a router that rotates names, or adapters served under their own
// names, would grow series, memory and the SLO state file without end.
package modelset

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of --vllm.max-models, --vllm.model-idle-timeout and
// --vllm.model-grace. vLLM serves one model per process (plus LoRA adapters
// under their own names), so 16 leaves room for adapters; an hour rides out
// a deployment while staying far below the 30-day SLO period; five minutes
// of successful scrapes without a name is long enough to tell a model that
// is gone from one that flaps, and short enough that a new model is not
// refused for long after a burst of rotating names.
const (
	DefaultMax         = 16
	DefaultIdleTimeout = time.Hour
	DefaultGrace       = 5 * time.Minute
)

// Limits are the shared bound. The zero value means the defaults.
type Limits struct {
	Max         int
	IdleTimeout time.Duration
	// Grace is how long a name must have been absent from successful
	// scrapes before a new name may take its place in a full set (at most
	// IdleTimeout).
	Grace time.Duration
	// GraceOverride, when set and positive, replaces Grace (the
	// configuration file's models.grace, which follows reloads).
	GraceOverride func() time.Duration
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
	if l.Grace <= 0 {
		l.Grace = DefaultGrace
	}
	l.Grace = min(l.Grace, l.IdleTimeout)
	return l
}

// entry is what a Set knows of one name: when it was last seen, and since
// which successful scrape it has been missing (zero while present).
type entry struct {
	seen, absentSince time.Time
}

// Set is one component's bounded set of model names. Absence is measured
// only in successful scrapes (Scraped): while vLLM is down or restarting no
// name ages, so an outage never costs a model its slot or its state.
// It is not safe for concurrent use: its owner's lock guards it.
type Set struct {
	lim       Limits
	component string
	names     map[string]*entry
	// lastScrape is the time of the latest successful scrape reported to
	// Scraped: absence is measured up to it, never up to a wall clock that
	// runs on while vLLM is unreachable.
	lastScrape time.Time
	onEvict    func(name string)
}

// NewSet returns an empty set for component (the `component` label of the
// vllm_exporter_models_* series: "vllm", "slo").
func (l Limits) NewSet(component string) *Set {
	s := &Set{lim: l.withDefaults(), component: component, names: map[string]*entry{}}
	s.report()
	return s
}

// OnEvict sets a function called with each name Admit evicts to make room
// for a new one (Expire returns its names instead).
func (s *Set) OnEvict(f func(name string)) { s.onEvict = f }

// Max is the bound in force.
func (s *Set) Max() int { return s.lim.Max }

// IdleTimeout is the eviction age in force.
func (s *Set) IdleTimeout() time.Duration { return s.lim.IdleTimeout }

// Grace is the absence after which a name gives its place to a new one:
// GraceOverride's when positive, else Grace, at most the idle timeout.
func (s *Set) Grace() time.Duration {
	if s.lim.GraceOverride != nil {
		if g := s.lim.GraceOverride(); g > 0 {
			return min(g, s.lim.IdleTimeout)
		}
	}
	return s.lim.Grace
}

// Has reports whether name is tracked.
func (s *Set) Has(name string) bool { _, ok := s.names[name]; return ok }

// Len is the number of tracked names.
func (s *Set) Len() int { return len(s.names) }

// Admit records name as seen at seen. A new name in a full set takes the
// place of the name absent longest, if that one has been absent from
// successful scrapes for at least the grace (its state is dropped through
// OnEvict); otherwise Admit returns false and counts a refusal.
func (s *Set) Admit(name string, seen time.Time) bool {
	if e, ok := s.names[name]; ok {
		if seen.After(e.seen) {
			e.seen = seen
		}
		e.absentSince = time.Time{}
		return true
	}
	if len(s.names) >= s.lim.Max {
		victim := s.longestAbsent()
		if victim == "" {
			if s.lim.Stats != nil {
				s.lim.Stats.add(s.lim.Stats.refused, s.component, 1)
			}
			return false
		}
		delete(s.names, victim)
		if s.lim.Stats != nil {
			s.lim.Stats.add(s.lim.Stats.evicted, s.component, 1)
		}
		if s.onEvict != nil {
			s.onEvict(victim)
		}
	}
	s.names[name] = &entry{seen: seen}
	s.report()
	return true
}

// Restore admits name as last seen at lastSeen (from a checkpoint), unless
// that is already older than the idle timeout at now or the set is full.
// A restored name counts as present until a successful scrape lacks it.
func (s *Set) Restore(name string, lastSeen, now time.Time) bool {
	if now.Sub(lastSeen) > s.lim.IdleTimeout {
		return false
	}
	return s.Admit(name, lastSeen)
}

// longestAbsent is the tracked name absent from successful scrapes the
// longest, if that is at least the grace; "" if none is.
func (s *Set) longestAbsent() string {
	victim, since, grace := "", time.Time{}, s.Grace()
	for name, e := range s.names {
		if e.absentSince.IsZero() || s.lastScrape.Sub(e.absentSince) < grace {
			continue
		}
		if victim == "" || e.absentSince.Before(since) || (e.absentSince.Equal(since) && name < victim) {
			victim, since = name, e.absentSince
		}
	}
	return victim
}

// Scraped records a successful scrape taken at at: every tracked name for
// which present is false starts (or goes on) being absent, every other one
// is present. A scrape no later than the latest one recorded is ignored,
// so a consumer may report the same snapshot twice. Failed scrapes are
// never reported: they are not absence.
func (s *Set) Scraped(at time.Time, present func(name string) bool) {
	if !at.After(s.lastScrape) {
		return
	}
	s.lastScrape = at
	for name, e := range s.names {
		switch {
		case present(name):
			e.absentSince = time.Time{}
			if at.After(e.seen) {
				e.seen = at
			}
		case e.absentSince.IsZero():
			e.absentSince = at
		}
	}
}

// Expire forgets, and returns sorted, the names absent from every
// successful scrape for longer than the idle timeout (measured up to the
// latest successful scrape).
func (s *Set) Expire() []string {
	var gone []string
	for name, e := range s.names {
		if !e.absentSince.IsZero() && s.lastScrape.Sub(e.absentSince) > s.lim.IdleTimeout {
			gone = append(gone, name)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	for _, name := range gone {
		delete(s.names, name)
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
		s.lim.Stats.setTracked(s.component, len(s.names))
	}
}

var (
	descTracked = prometheus.NewDesc("vllm_exporter_models_tracked",
		"Model names the component keeps state for (at most --vllm.max-models).", []string{"component"}, nil)
	descEvicted = prometheus.NewDesc("vllm_exporter_models_evicted_total",
		"Model names whose state the component dropped: absent from successful vLLM scrapes for --vllm.model-idle-timeout, or for --vllm.model-grace when a new name needed the place.", []string{"component"}, nil)
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
