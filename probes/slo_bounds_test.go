package probes

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
)

// The probe histograms' bounds follow the configuration: every probe
// latency SLO's threshold is a bound (so the SLO is measurable on the fine
// default bounds too), and nothing else changes.
func TestProbeBoundsIncludeProbeSLOThresholds(t *testing.T) {
	if b := BoundsFor(nil); !slices.Equal(b.TTFT, DefaultBounds.TTFT) {
		t.Error("no configuration: bounds differ from DefaultBounds")
	}
	p := filepath.Join(t.TempDir(), "c.yml")
	yml := "slos:\n  - {name: p, source: probe, kind: latency, metric: ttft, threshold: 0.25, objective: 0.99}\n" +
		"  - {name: q, source: probe, kind: latency, metric: e2e, threshold: 15, objective: 0.99}\n"
	if err := os.WriteFile(p, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := config.NewHolder(p)
	if err != nil {
		t.Fatal(err)
	}
	b := BoundsFor(h.Get())
	// 0.25 replaces the fine bound 0.25000000000000017 (exported exactly);
	// 15 is added between two fine bounds.
	if !slices.Contains(b.TTFT, 0.25) || !slices.Contains(b.E2E, 15) || slices.Contains(DefaultBounds.TTFT, 0.25) || slices.Contains(DefaultBounds.E2E, 15) {
		t.Fatalf("thresholds 0.25 (ttft) and 15 (e2e) not bounds: %v / %v", b.TTFT, b.E2E)
	}
	if !slices.IsSorted(b.TTFT) || !slices.IsSorted(b.E2E) || len(b.TTFT) != len(DefaultBounds.TTFT) || len(b.E2E) != len(DefaultBounds.E2E)+1 || !slices.Equal(b.TPOT, DefaultBounds.TPOT) {
		t.Errorf("merged bounds unsorted or changed elsewhere: %d ttft, %d e2e bounds", len(b.TTFT), len(b.E2E))
	}
	s := New(Options{URL: "http://127.0.0.1:1"}, h, nil)
	if got := s.bounds.TTFT; !slices.Contains(got, 0.25) {
		t.Errorf("scheduler's TTFT bounds lack the SLO threshold: %v", got)
	}
}
