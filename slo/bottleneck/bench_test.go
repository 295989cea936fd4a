package bottleneck

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// BenchmarkCollect is one /metrics render of the classifier's series:
// "gather" as /metrics takes them (Gather, written straight into metric
// families), "registry" a registry gathering the classifier as a plain
// collector (const metrics).
func BenchmarkCollect(b *testing.B) {
	f := &fakeSources{}
	c := newTestClassifier(f, testSpec)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	healthy().apply(f, now, newRand(1), defaultTh())
	c.Tick(now)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	for _, g := range []struct {
		name string
		prometheus.Gatherer
	}{{"gather", c}, {"registry", reg}} {
		b.Run(g.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
