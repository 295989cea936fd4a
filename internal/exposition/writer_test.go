package exposition

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// A histogram whose bounds are not strictly increasing and finite takes the
// library's map in the writer too; a label value that is not UTF-8, or a
// wrong number of them, costs that series (and says so), not the gather.
func TestWriterEdgeCases(t *testing.T) {
	ds := Descs{}
	hist := ds.New("vllm_test_seconds", "A test histogram.", "model_name", "engine")
	gauge := ds.New("vllm_test_ratio", "A test gauge.", "model_name")
	w := NewWriter(ds, Sizes{})
	dup := snapshot.Histogram{Bounds: []float64{0.1, 0.1, 1}, Counts: []float64{1, 2, 3}, Count: 4, Sum: 2}
	w.Histogram(hist, dup, []string{"m", "1"})
	// vLLM's counts are floats: rounded as the library's integers are.
	frac := snapshot.Histogram{Bounds: []float64{0.5, 2}, Counts: []float64{1.5, 2.4999}, Count: 3.5, Sum: 0.2}
	w.Histogram(hist, frac, []string{"m", "0"})
	w.Value(gauge, prometheus.GaugeValue, 0.5, []string{"b"})
	w.Value(gauge, prometheus.GaugeValue, 0.25, []string{"a"})
	w.Value(gauge, prometheus.GaugeValue, 1, []string{"\xff"})
	w.Value(gauge, prometheus.GaugeValue, 1, []string{"a", "b"})
	w.Value(gauge, prometheus.GaugeValue, 0.75, []string{"a"}) // twice: dropped
	got, err := w.Done()
	if err == nil || !strings.Contains(err.Error(), "3 errors") {
		t.Fatalf("error %v, want the three bad series counted", err)
	}

	// What the library makes of the same good series.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectorFunc(func(ch chan<- prometheus.Metric) {
		m, _ := ConstHistogram(hist, dup, "m", "1")
		ch <- m
		m, _ = ConstHistogram(hist, frac, "m", "0")
		ch <- m
		ch <- prometheus.MustNewConstMetric(gauge, prometheus.GaugeValue, 0.5, "b")
		ch <- prometheus.MustNewConstMetric(gauge, prometheus.GaugeValue, 0.25, "a")
	}))
	want, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if g, w := testutil.Encode(t, got), testutil.Encode(t, want); g != w {
		t.Fatalf("written\n%s\nthe library gathers\n%s", g, w)
	}
}

// collectorFunc is a collector of fixed Descs whose Collect is a function.
type collectorFunc func(chan<- prometheus.Metric)

func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }
func (f collectorFunc) Describe(ch chan<- *prometheus.Desc) {}

// A series whose label value is its family's previous series' value shares
// that pair; every other value gets its own, and what each series reads is
// its own label values.
func TestWriterSharesRepeatedLabelPairs(t *testing.T) {
	ds := Descs{}
	burn := ds.New("test_burn_rate", "A gauge.", "slo", "model", "window")
	w := NewWriter(ds, Sizes{})
	type series struct{ slo, model, window string }
	var all []series
	for _, slo := range []string{"ttft", "itl"} {
		for _, model := range []string{"b", "a"} {
			for _, window := range []string{"5m", "1h", "6h"} {
				all = append(all, series{slo, model, window})
				w.Value(burn, prometheus.GaugeValue, 1, []string{slo, model, window})
			}
		}
	}
	mfs, err := w.Done()
	if err != nil {
		t.Fatal(err)
	}
	pairs := map[*dto.LabelPair]bool{}
	got := map[series]bool{}
	for _, m := range mfs[0].Metric {
		lv := map[string]string{}
		for _, p := range m.Label {
			pairs[p] = true
			lv[p.GetName()] = p.GetValue()
		}
		got[series{lv["slo"], lv["model"], lv["window"]}] = true
	}
	for _, s := range all {
		if !got[s] {
			t.Errorf("series %v not written as itself; written: %v", s, got)
		}
	}
	// 12 series x 3 labels; new pairs: each window (12), a model when it
	// changes (4), an SLO when it changes (2).
	if len(pairs) != 18 || w.Sizes().pairs != 18 || w.Sizes().labels != 36 {
		t.Errorf("%d distinct pairs (sizes %+v), want 18 of 36", len(pairs), w.Sizes())
	}
}
