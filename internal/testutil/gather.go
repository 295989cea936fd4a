package testutil

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
