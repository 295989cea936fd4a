package testutil

import (
	"bytes"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// GatherAll registers c on a fresh pedantic registry (which checks each
// metric against its description) and returns one Gather; a failed
// registration or Gather fails the test.
func GatherAll(t testing.TB, c prometheus.Collector) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// Gather gathers g once and indexes the families by name, for
// Metrics.Value; a failed Gather fails the test.
func Gather(t testing.TB, g prometheus.Gatherer) Metrics {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	m := Metrics{}
	for _, mf := range fams {
		m[mf.GetName()] = mf
	}
	return m
}

// Encode is fams in the text exposition format, in the order given.
func Encode(t testing.TB, fams []*dto.MetricFamily) string {
	t.Helper()
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range fams {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}

// GatherText is one Gather of g in the text exposition format.
func GatherText(t testing.TB, g prometheus.Gatherer) string {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return Encode(t, fams)
}

// BenchmarkGather is one Gather of a registry holding cs, the path of
// /metrics, with allocations and the series gathered reported.
func BenchmarkGather(b *testing.B, cs ...prometheus.Collector) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(cs...)
	b.ReportAllocs()
	series := 0
	for b.Loop() {
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		series = 0
		for _, mf := range mfs {
			series += len(mf.Metric)
		}
	}
	b.ReportMetric(float64(series), "series")
}
