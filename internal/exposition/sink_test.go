package exposition

import (
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// testCollector renders a few series of every kind a Sink takes, n models
// of them, through one render function: its Collect and its Gatherer.
type testCollector struct {
	descs                  Descs
	gauge, counter, ignore *prometheus.Desc
	hist, summary          *prometheus.Desc
	models                 int
}

func newTestCollector(models int) *testCollector {
	ds := Descs{}
	return &testCollector{
		descs:   ds,
		gauge:   ds.New("test_ratio", "A gauge.", "model", "window"),
		counter: ds.New("test_total", "A counter.", "reason"),
		ignore:  ds.New("test_unknown_ratio", "Only when known.", "model"),
		hist:    ds.New("test_seconds", "A histogram.", "model", "engine"),
		summary: ds.New("test_window_seconds", "A summary.", "model", "window"),
		models:  models,
	}
}

func (c *testCollector) render(e Sink) {
	h := snapshot.Histogram{Bounds: []float64{0.1, 1, 10}, Counts: []float64{1, 4, 6}, Count: 7, Sum: 12}
	for m := range c.models {
		model := string(rune('z' - m)) // rendered out of order: the writer sorts
		for _, w := range []string{"5m", "1m"} {
			e.Gauge(c.gauge, float64(m)/10, model, w)
			e.Summary(c.summary, map[float64]snapshot.Value{0.5: {V: 0.2, OK: true}, 0.99: {V: 3, OK: true}, 0.9: {}}, h, model, w)
		}
		e.Value(c.ignore, prometheus.GaugeValue, snapshot.Value{V: 1, OK: m%2 == 0}, model)
		e.Histogram(c.hist, h, model, "1")
		e.Histogram(c.hist, h, model, "0")
	}
	e.Emit(c.counter, prometheus.CounterValue, 3, "timeout")
	e.Emit(c.counter, prometheus.CounterValue, 1, "connect")
}

func (c *testCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs.All() {
		ch <- d
	}
}
func (c *testCollector) Collect(ch chan<- prometheus.Metric) { c.render(ToChannel(ch)) }

// A Gatherer serves what a pedantic registry gathers from the same render
// as const metrics (Collect), and a slice Sink holds the same metrics.
func TestGathererIsTheRegistrys(t *testing.T) {
	c := newTestCollector(5)
	g := NewGatherer(c.descs, c.render)
	want := testutil.Encode(t, testutil.GatherAll(t, c))
	for i := range 2 { // unsized, then sized from the first
		got, err := g.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if text := testutil.Encode(t, got); text != want {
			t.Fatalf("gather %d:\n%s\nthe registry gathers\n%s", i, text, want)
		}
	}
	var out []prometheus.Metric
	c.render(ToSlice(&out))
	var n int
	for _, mf := range testutil.GatherAll(t, c) {
		n += len(mf.Metric)
	}
	if len(out) != n {
		t.Fatalf("slice sink: %d metrics, the registry gathers %d", len(out), n)
	}
}

// Sized from the gather before, a gather takes its structs and values in
// blocks, where a registry allocates several objects per series; what is
// left per series (a summary's quantile order) is a small part of the
// registry's. Concurrent gathers each get their own families.
func TestGathererAllocations(t *testing.T) {
	allocs := func(models int) float64 {
		c := newTestCollector(models)
		g := NewGatherer(c.descs, c.render)
		if _, err := g.Gather(); err != nil {
			t.Fatal(err)
		}
		return testing.AllocsPerRun(20, func() { g.Gather() })
	}
	few, many := allocs(10), allocs(40)
	c := newTestCollector(40)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	lib := testing.AllocsPerRun(20, func() { reg.Gather() })
	if perModel, libPerModel := (many-few)/30, lib/40; perModel > libPerModel/10 {
		t.Errorf("%.1f allocations per model written, %.1f through a registry", perModel, libPerModel)
	}
	if many > lib/4 {
		t.Errorf("40 models: %.0f allocations written, %.0f through a registry", many, lib)
	}
	t.Logf("allocations per gather: %.0f for 10 models, %.0f for 40 (registry %.0f)", few, many, lib)

	g := NewGatherer(c.descs, c.render)
	var wg sync.WaitGroup
	got := make([][]*dto.MetricFamily, 4)
	for i := range got {
		wg.Go(func() { got[i], _ = g.Gather() })
	}
	wg.Wait()
	for i := 1; i < len(got); i++ {
		if got[i][0] == got[0][0] {
			t.Fatal("two gathers share a family")
		}
	}
}
