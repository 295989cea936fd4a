package collector

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// values gathers c on a pedantic registry (which checks each series
// against its description) and reads every family's single value.
func values(t testing.TB, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	m := testutil.Gather(t, reg)
	out := map[string]float64{}
	for name := range m {
		out[name], _ = m.Value(name)
	}
	return out
}

// The exporter's process series read what client_golang's collector
// reads, under the same names and types (the pedantic registry checks
// them against their descriptions).
func TestProcessAgreesWithClientGolang(t *testing.T) {
	c, err := NewProcess()
	if err != nil {
		t.Fatal(err)
	}
	ref := collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})
	before := values(t, ref)
	got := values(t, c)
	after := values(t, ref)
	if len(got) != 4 {
		t.Fatalf("got %d series, want 4: %v", len(got), got)
	}
	for name, v := range got {
		lo, hi := min(before[name], after[name]), max(before[name], after[name])
		switch name {
		case "process_cpu_seconds_total":
			// client_golang reads user and system time in clock ticks
			// (10 ms), each truncated; getrusage in microseconds.
			lo, hi = lo-0.001, hi+0.021
		case "process_resident_memory_bytes":
			// Gathering allocates; allow 10 % movement between the reads.
			lo, hi = lo*0.9, hi*1.1
		case "process_open_fds":
			lo, hi = lo-1, hi+1
		}
		if v < lo || v > hi || v <= 0 {
			t.Errorf("%s = %v, client_golang read %v and %v", name, v, before[name], after[name])
		}
	}
}

// BenchmarkProcessCollect: the exporter's collector against
// client_golang's, which a /metrics scrape ran before (perf: 5 % of the
// exporter's CPU at rest).
func BenchmarkProcessCollect(b *testing.B) {
	own, err := NewProcess()
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		c    prometheus.Collector
	}{{"exporter", own}, {"client_golang", collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}} {
		b.Run(bc.name, func(b *testing.B) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(bc.c)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
