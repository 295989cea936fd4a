package slo

import (
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
)

// BenchmarkTick: one watchdog tick over the five shipped SLOs with full
// 3-day rings (the steady state of a long-running exporter). Target: well
// under a millisecond, against a 10s tick.
func BenchmarkTick(b *testing.B) {
	src := &fakeVLLM{}
	tr := &traffic{}
	w := New(Options{}, holderFor(b, string(config.DefaultYAML)), Sources{VLLM: src}, nil)
	now := t0
	for i := 0; i < 3*24*120; i++ { // fill 3 days at 30s
		tr.add(100, 1)
		now = now.Add(30 * time.Second)
		src.set(tr.snap(now))
		w.Tick(now)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr.add(100, 1)
		now = now.Add(10 * time.Second)
		src.set(tr.snap(now))
		w.Tick(now)
	}
}

// BenchmarkCheckpoint: encoding and atomically writing the state of the
// five shipped SLOs with full rings.
func BenchmarkCheckpoint(b *testing.B) {
	src := &fakeVLLM{}
	tr := &traffic{}
	w := New(Options{StateFile: b.TempDir() + "/slo.state", SaveEvery: 1 << 30}, holderFor(b, string(config.DefaultYAML)), Sources{VLLM: src}, nil)
	now := t0
	for i := 0; i < 3*24*120; i++ {
		tr.add(100, 1)
		now = now.Add(30 * time.Second)
		src.set(tr.snap(now))
		w.Tick(now)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := w.SaveState(); err != nil {
			b.Fatal(err)
		}
	}
}
