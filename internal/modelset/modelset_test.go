package modelset

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// scraped reports a successful scrape at at showing names.
func scraped(s *Set, at time.Time, names ...string) {
	s.Scraped(at, func(n string) bool { return slices.Contains(names, n) })
}

// TestSetBoundAndEviction: a full set refuses new names but keeps
// refreshing the ones it has; a name absent from successful scrapes past
// the idle timeout is evicted and its slot goes to the next new name; the
// collector counts all of it.
func TestSetBoundAndEviction(t *testing.T) {
	st := NewStats()
	s := Limits{Max: 2, IdleTimeout: time.Minute, Grace: time.Minute, Stats: st}.NewSet("vllm")
	if !s.Admit("a", t0) || !s.Admit("b", t0) {
		t.Fatal("room for two names")
	}
	scraped(s, t0, "a", "b")
	if s.Admit("c", t0) {
		t.Fatal("a third name admitted into a set of two")
	}
	if !s.Admit("a", t0.Add(50*time.Second)) {
		t.Fatal("a tracked name refused")
	}
	scraped(s, t0.Add(5*time.Second), "a")
	scraped(s, t0.Add(50*time.Second), "a")
	if gone := s.Expire(); gone != nil {
		t.Fatalf("expired %v after 45s of absence, idle timeout 1m", gone)
	}
	scraped(s, t0.Add(66*time.Second), "a")
	if gone := s.Expire(); len(gone) != 1 || gone[0] != "b" {
		t.Fatalf("expired %v, want [b] (absent since 5s, a is present)", gone)
	}
	if !s.Admit("c", t0.Add(66*time.Second)) || s.Len() != 2 {
		t.Fatal("the freed slot was not reused")
	}
	want := `
# HELP vllm_exporter_models_evicted_total Model names whose state the component dropped: absent from successful vLLM scrapes for --vllm.model-idle-timeout, or for --vllm.model-grace when a new name needed the place.
# TYPE vllm_exporter_models_evicted_total counter
vllm_exporter_models_evicted_total{component="vllm"} 1
# HELP vllm_exporter_models_refused_total Times the component refused to track a new model name because it already tracked --vllm.max-models names.
# TYPE vllm_exporter_models_refused_total counter
vllm_exporter_models_refused_total{component="vllm"} 1
# HELP vllm_exporter_models_tracked Model names the component keeps state for (at most --vllm.max-models).
# TYPE vllm_exporter_models_tracked gauge
vllm_exporter_models_tracked{component="vllm"} 2
`
	if err := testutil.CollectAndCompare(st, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// TestSetGraceGivesSlotToNewName: in a full set, a new name takes the slot
// of the name absent longest once that one has missed successful scrapes
// for the grace, long before the idle timeout; a name absent for less than
// the grace, or present, keeps its slot; the evicted name is reported.
func TestSetGraceGivesSlotToNewName(t *testing.T) {
	s := Limits{Max: 3, IdleTimeout: time.Hour, Grace: 2 * time.Minute}.NewSet("slo")
	var evicted []string
	s.OnEvict(func(n string) { evicted = append(evicted, n) })
	for _, n := range []string{"live", "old", "older"} {
		s.Admit(n, t0)
	}
	scraped(s, t0, "live", "old", "older")
	scraped(s, t0.Add(10*time.Second), "live", "old") // older absent from 10s
	scraped(s, t0.Add(40*time.Second), "live")        // old absent from 40s
	at := t0.Add(2*time.Minute + 5*time.Second)
	scraped(s, at, "live")
	if s.Admit("new1", at) {
		t.Fatal("a slot given away before any name was absent for the grace (older: 1m55s)")
	}
	at = t0.Add(2*time.Minute + 10*time.Second)
	scraped(s, at, "live")
	if !s.Admit("new1", at) || s.Has("older") || !s.Has("old") || !s.Has("live") {
		t.Fatalf("new1 did not take the slot of the name absent longest: evicted %v", evicted)
	}
	if s.Admit("new2", at) {
		t.Fatal("old (absent 1m30s) gave its slot before the grace")
	}
	at = t0.Add(2*time.Minute + 40*time.Second)
	scraped(s, at, "live", "new1")
	if !s.Admit("new2", at) || s.Has("old") {
		t.Fatal("old did not give its slot after the grace")
	}
	if s.Admit("new3", at) {
		t.Fatal("a present name gave its slot away")
	}
	if !slices.Equal(evicted, []string{"older", "old"}) {
		t.Fatalf("evicted %v", evicted)
	}
}

// TestSetFailedScrapesAreNotAbsence: while no successful scrape is
// reported (vLLM down or restarting) no name ages, however long the wall
// clock runs: after hours of outage every name keeps its slot, and a new
// name is refused rather than taking one; absence counts again from the
// first successful scrape that lacks a name. A snapshot reported twice
// counts once.
func TestSetFailedScrapesAreNotAbsence(t *testing.T) {
	s := Limits{Max: 2, IdleTimeout: time.Hour, Grace: time.Minute}.NewSet("slo")
	s.Admit("a", t0)
	s.Admit("b", t0)
	scraped(s, t0, "a", "b")
	back := t0.Add(3 * time.Hour) // no successful scrape in between
	scraped(s, back, "a")
	if gone := s.Expire(); gone != nil {
		t.Fatalf("expired %v after an outage", gone)
	}
	if s.Admit("c", back) {
		t.Fatal("b lost its slot to an outage")
	}
	scraped(s, back, "a") // the same snapshot again
	scraped(s, back.Add(-time.Second), "a")
	if s.Admit("c", back.Add(59*time.Second)) {
		t.Fatal("b lost its slot before a minute of successful scrapes without it")
	}
	scraped(s, back.Add(time.Minute), "a")
	if !s.Admit("c", back.Add(time.Minute)) {
		t.Fatal("b kept its slot after a minute of successful scrapes without it")
	}
}

// TestSetRestore: a checkpointed name is restored unless it was already
// idle when saved or the set is full; the defaults apply to zero limits.
func TestSetRestore(t *testing.T) {
	s := Limits{}.NewSet("slo")
	if s.Max() != DefaultMax || s.IdleTimeout() != DefaultIdleTimeout {
		t.Fatalf("defaults %d %v", s.Max(), s.IdleTimeout())
	}
	saved := t0.Add(3 * time.Hour)
	if s.Restore("old", t0, saved) {
		t.Fatal("a name idle 3h at save time restored")
	}
	if !s.Restore("fresh", saved.Add(-time.Minute), saved) || !s.Has("fresh") {
		t.Fatal("a fresh name not restored")
	}
	small := Limits{Max: 1}.NewSet("slo")
	small.Restore("x", saved, saved)
	if small.Restore("y", saved, saved) {
		t.Fatal("restored beyond the bound")
	}
}

// TestSetGraceOverride: the configuration file's grace (GraceOverride)
// replaces the flag's while positive, follows its changes, and never
// exceeds the idle timeout.
func TestSetGraceOverride(t *testing.T) {
	override := 30 * time.Second
	s := Limits{Max: 1, IdleTimeout: time.Hour, Grace: 5 * time.Minute,
		GraceOverride: func() time.Duration { return override }}.NewSet("vllm")
	if s.Grace() != 30*time.Second {
		t.Fatalf("grace %v, want the override", s.Grace())
	}
	s.Admit("a", t0)
	scraped(s, t0, "a")
	scraped(s, t0.Add(5*time.Second))
	scraped(s, t0.Add(35*time.Second))
	if !s.Admit("b", t0.Add(35*time.Second)) {
		t.Fatal("a kept its slot past the overriding grace")
	}
	override = 0
	if s.Grace() != 5*time.Minute {
		t.Fatalf("grace %v with the override unset, want the flag's", s.Grace())
	}
	override = 2 * time.Hour
	if s.Grace() != time.Hour {
		t.Fatalf("grace %v, want at most the idle timeout", s.Grace())
	}
}
