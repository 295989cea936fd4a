package vllmsim

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// TestExistingVersionsUnchanged renders the pre-existing layouts (v1,
// v1-0.10, v0) under scenarios that exercise queueing and preemption and
// compares them byte for byte with goldens rendered by the simulator before
// the newest layout and its controls were added: new features leave the old
// bodies (and the engine timings behind them) exactly as they were.
func TestExistingVersionsUnchanged(t *testing.T) {
	for _, v := range []string{"v1", "v1-0.10", "v0"} {
		for _, sc := range []string{"healthy", "kv_exhausted", "queueing"} {
			s := newVirtual(t, Config{MetricsVersion: v, Scenario: sc, LoadGen: true, Seed: 11, MaxNumSeqs: 64, NumGPUBlocks: 2048})
			for i := 0; i < 90; i++ {
				s.Advance(time.Second)
			}
			body := s.Metrics()
			p := filepath.Join("testdata", "unchanged-"+v+"-"+sc+".txt")
			want := testutil.Golden(t, p, body, *update, "run go test ./internal/vllmsim -run TestExistingVersionsUnchanged -update")
			if !bytes.Equal(body, want) {
				t.Errorf("%s/%s differs from the golden rendered before the newest layout\n%s", v, sc, firstDiff(body, want))
			}
		}
	}
}
