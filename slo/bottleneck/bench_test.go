package bottleneck

import (
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// BenchmarkTick is one classifier tick for one model with every input
// present (the work done on each watchdog tick).
func BenchmarkTick(b *testing.B) {
	f := &fakeSources{}
	c := newTestClassifier(f, testSpec)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	healthy().apply(f, now, newRand(1), defaultTh())
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(10 * time.Second)
		c.Tick(now)
	}
}

// BenchmarkCollect is one /metrics render of the classifier's series: a
// registry gathering its const metrics.
func BenchmarkCollect(b *testing.B) {
	f := &fakeSources{}
	c := newTestClassifier(f, testSpec)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	healthy().apply(f, now, newRand(1), defaultTh())
	c.Tick(now)
	testutil.BenchmarkGather(b, c)
}
