package slo

import (
	"os"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// fullRings is a watchdog over the five shipped SLOs whose rings hold 3
// days of traffic ticked every 30s (the steady state of a long-running
// exporter), with its source, traffic and clock.
func fullRings(b *testing.B, opts Options) (*Watchdog, *fakeVLLM, *traffic, time.Time) {
	b.Helper()
	src := &fakeVLLM{}
	tr := &traffic{}
	w := New(opts, holderFor(b, string(config.DefaultYAML)), Sources{VLLM: src}, nil)
	now := t0
	for i := 0; i < 3*24*120; i++ {
		now = tick(w, src, tr, now.Add(30*time.Second))
	}
	return w, src, tr, now
}

// tick adds 100 events (1 bad) and ticks w at now.
func tick(w *Watchdog, src *fakeVLLM, tr *traffic, now time.Time) time.Time {
	tr.add(100, 1)
	tickAt(w, src, tr, now)
	return now
}

// BenchmarkTick: one watchdog tick over the five shipped SLOs with full
// 3-day rings. Target: well under a millisecond, against a 10s tick.
func BenchmarkTick(b *testing.B) {
	w, src, tr, now := fullRings(b, Options{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = tick(w, src, tr, now.Add(10*time.Second))
	}
}

// BenchmarkCheckpoint: encoding and atomically writing the state of the
// five shipped SLOs with full rings.
func BenchmarkCheckpoint(b *testing.B) {
	path := b.TempDir() + "/slo.state"
	w, _, _, _ := fullRings(b, Options{StateFile: path, SaveEvery: 1 << 30})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := w.SaveState(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if fi, err := os.Stat(path); err == nil {
		b.ReportMetric(float64(fi.Size()), "file-bytes")
	}
}

// BenchmarkCollect is one /metrics render of the watchdog's series for the
// five shipped SLOs: a registry gathering its const metrics.
func BenchmarkCollect(b *testing.B) {
	w, _, _, _ := fullRings(b, Options{})
	testutil.BenchmarkGather(b, w)
}
