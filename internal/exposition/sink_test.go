package exposition

import (
	"runtime"
	"slices"
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

// A transactional gather writes into a Writer lent for the request: given
// back, it is emptied and written into again, so a request in a steady
// state allocates next to nothing; what it gives is still exactly the
// registry's as the series come and go (models added and removed, a family
// absent); families a request still encodes are not written into by
// another; and an emptied Writer holds nothing of what it wrote.
func TestTransactionalGathersReuseTheirWriters(t *testing.T) {
	c := newTestCollector(5)
	g := NewGatherer(c.descs, c.render)
	tg := g.Transactional()
	for i, models := range []int{5, 5, 12, 3, 0, 7, 7} {
		c.models = models
		want := testutil.Encode(t, testutil.GatherAll(t, c))
		got, done, err := tg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if text := testutil.Encode(t, got); text != want {
			t.Fatalf("gather %d (%d models):\n%s\nthe registry gathers\n%s", i, models, text, want)
		}
		done()
	}

	// Held across other gathers: untouched; they take another Writer.
	held, heldDone, _ := tg.Gather()
	heldText := testutil.Encode(t, held)
	c.models = 9
	for range 3 {
		_, done, _ := tg.Gather()
		done()
	}
	if now := testutil.Encode(t, held); now != heldText {
		t.Fatalf("held families changed under their reader:\n%s\nwere\n%s", now, heldText)
	}
	heldDone()

	// Emptied: no pair, string or family points at what was written (the
	// second time, into arenas already the gather's size).
	var w *Writer
	for range 2 {
		w = g.writers.Get()
		g.render(ToWriter(w))
		w.Done()
		g.writers.Put(w)
	}
	if len(w.pairA) != 0 || cap(w.pairA) == 0 {
		t.Fatalf("an emptied Writer's pairs: %d of %d, want an empty arena kept", len(w.pairA), cap(w.pairA))
	}
	for i := range cap(w.pairA) {
		if p := &w.pairA[:cap(w.pairA)][i]; p.Name != nil || p.Value != nil {
			t.Fatalf("an emptied Writer keeps a label pair %v", p.String())
		}
	}
	for _, s := range w.strA[:cap(w.strA)] {
		if s != "" {
			t.Fatalf("an emptied Writer keeps the string %q", s)
		}
	}
	for _, f := range w.spare {
		if m := f.family.Metric[:cap(f.family.Metric)]; slices.ContainsFunc(m, func(m *dto.Metric) bool { return m != nil }) {
			t.Fatalf("an emptied family %s keeps its series", f.family.GetName())
		}
	}
	if len(w.families) != 0 || len(w.out) != 0 {
		t.Fatalf("an emptied Writer keeps %d families, %d in Done's slice", len(w.families), len(w.out))
	}

	// Bytes per request: a plain gather writes into new memory every
	// time; a transactional one into the memory given back.
	c.models = 40
	bytesPer := func(f func()) uint64 {
		f()
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		for range 20 {
			f()
		}
		runtime.ReadMemStats(&b)
		return (b.TotalAlloc - a.TotalAlloc) / 20
	}
	plain := bytesPer(func() { g.Gather() })
	lent := bytesPer(func() {
		_, done, _ := tg.Gather()
		done()
	})
	t.Logf("bytes per gather, 40 models: plain %d, transactional %d", plain, lent)
	if lent > plain/5 {
		t.Fatalf("a transactional gather allocated %d bytes, a plain one %d: the Writer given back was not written into", lent, plain)
	}
}
