//go:build cgo && !nonvml

package gpu

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkCollect renders 8 GPUs from the latest snapshot (what a scrape
// costs; no NVML call).
func BenchmarkCollect(b *testing.B) {
	s := benchSampler(b)
	defer s.Close()
	s.SampleOnce(t0)
	s.SampleOnce(t0.Add(5 * time.Second))
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSampleOnce measures the sampler's own overhead per tick for 8
// GPUs over the mock (NVML's own latency excluded).
func BenchmarkSampleOnce(b *testing.B) {
	s := benchSampler(b)
	defer s.Close()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s.SampleOnce(t0.Add(time.Duration(i) * time.Second))
	}
}

// benchSampler is a Sampler over 8 fixed-value H100-like mock GPUs.
func benchSampler(b *testing.B) *Sampler {
	var devs []*fakeDev
	for i := 0; i < 8; i++ {
		devs = append(devs, newFakeDev(i, fmt.Sprintf("GPU-%036d", i)))
	}
	return New(newFakeLib(b, devs...), Options{}, nil)
}
