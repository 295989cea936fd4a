package testutil

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestGatherAndText(t *testing.T) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x."}, []string{"k"})
	c.WithLabelValues("a").Add(2)
	c.WithLabelValues("b").Add(5)
	fams := GatherAll(t, c)
	if len(fams) != 1 || fams[0].GetName() != "x_total" {
		t.Fatalf("GatherAll: %v", fams)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	if v, ok := Gather(t, reg).Value("x_total", "k", "b"); !ok || v != 5 {
		t.Fatalf("Gather.Value: %v %v", v, ok)
	}
	want := "# HELP x_total x.\n# TYPE x_total counter\nx_total{k=\"a\"} 2\nx_total{k=\"b\"} 5\n"
	if got := GatherText(t, reg); got != want {
		t.Fatalf("GatherText:\n%s\nwant:\n%s", got, want)
	}
	if got := Encode(t, fams); got != want {
		t.Fatalf("Encode:\n%s", got)
	}
}
