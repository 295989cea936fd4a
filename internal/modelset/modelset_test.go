package modelset

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// TestSetBoundAndEviction: a full set refuses new names but keeps
// refreshing the ones it has; a name idle past the timeout is evicted and
// its slot goes to the next new name; the collector counts all of it.
func TestSetBoundAndEviction(t *testing.T) {
	st := NewStats()
	s := Limits{Max: 2, IdleTimeout: time.Minute, Stats: st}.NewSet("vllm")
	if !s.Admit("a", t0) || !s.Admit("b", t0) {
		t.Fatal("room for two names")
	}
	if s.Admit("c", t0) {
		t.Fatal("a third name admitted into a set of two")
	}
	if !s.Admit("a", t0.Add(50*time.Second)) {
		t.Fatal("a tracked name refused")
	}
	if gone := s.Expire(t0.Add(61 * time.Second)); len(gone) != 1 || gone[0] != "b" {
		t.Fatalf("expired %v, want [b] (a was seen 11s ago)", gone)
	}
	if !s.Admit("c", t0.Add(61*time.Second)) || s.Len() != 2 {
		t.Fatal("the freed slot was not reused")
	}
	want := `
# HELP vllm_exporter_models_evicted_total Model names whose state the component dropped after --vllm.model-idle-timeout without being seen.
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
