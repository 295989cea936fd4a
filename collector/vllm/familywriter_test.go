package vllm

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// sameAsRegistry fails unless Gather (familyWriter) gives what a registry
// gathering the scraper's Collect (const metrics) gives: the same families,
// series and values in the same order, and no error from either.
func sameAsRegistry(t *testing.T, s *Scraper, what string) {
	t.Helper()
	s.forgetGathered(nil)
	got, err := s.Gather()
	if err != nil {
		t.Fatalf("%s: Gather: %v", what, err)
	}
	want := testutil.GatherAll(t, s)
	if len(got) != len(want) {
		t.Fatalf("%s: %d families written, the registry gathers %d:\n--- written\n%s\n--- registry\n%s", what, len(got), len(want), testutil.Encode(t, got), testutil.Encode(t, want))
	}
	for i := range got {
		if proto.Equal(got[i], want[i]) {
			continue
		}
		// NaN is not equal to itself: then the text must still agree.
		if g, w := testutil.Encode(t, got[i:i+1]), testutil.Encode(t, want[i:i+1]); g != w {
			t.Fatalf("%s: family %s differs from the registry's:\n--- written\n%s\n--- registry\n%s", what, want[i].GetName(), g, w)
		}
	}
}

// TestFamilyWriterIsTheRegistrys writes every fixture's families, with
// every opt-in and with none, before a scrape, after scrapes whose
// counters move (windows, quantiles, rates) and after a failed one.
func TestFamilyWriterIsTheRegistrys(t *testing.T) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".txt") {
			continue
		}
		body := fixture(t, e.Name())
		for _, optIn := range []bool{true, false} {
			name := e.Name() + map[bool]string{true: " all opt-ins", false: " defaults"}[optIn]
			t.Run(name, func(t *testing.T) {
				srv := newFakeVLLM(t, body, "text/plain; version=0.0.4")
				s := newTestScraper(t, srv.URL, func(o *Options) {
					if !optIn {
						o.OptIn = nil
					}
				})
				sameAsRegistry(t, s, "before a scrape")
				at := t0
				for i := range 8 {
					// Counters and bucket counts move by i per scrape.
					srv.set(withValueTokens(body, func(_ int, old string) string {
						if n, ok := strings.CutSuffix(old, ".0"); ok {
							if v, err := strconv.Atoi(n); err == nil {
								return strconv.Itoa(v+i*(1+v%3)) + ".0"
							}
						}
						return old
					}), nil)
					scrapeAt(s, at)
					at = at.Add(15 * time.Second)
				}
				if !s.Latest().Up {
					t.Fatalf("scrape failed: %s", s.Latest().Error)
				}
				sameAsRegistry(t, s, "after 8 scrapes")
				srv.set(nil, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
				scrapeAt(s, at)
				sameAsRegistry(t, s, "after a failed scrape")
			})
		}
	}
}

// A histogram whose bounds are not strictly increasing and finite takes the
// library's map in the writer too; a label value that is not UTF-8, or a
// wrong number of them, costs that series (and says so), not the gather.
func TestFamilyWriterEdgeCases(t *testing.T) {
	ms := metas{}
	hist := ms.desc("vllm_test_seconds", "A test histogram.", "model_name", "engine")
	gauge := ms.desc("vllm_test_ratio", "A test gauge.", "model_name")
	w := newFamilyWriter(ms, familyWriterSizes{})
	dup := snapshot.Histogram{Bounds: []float64{0.1, 0.1, 1}, Counts: []float64{1, 2, 3}, Count: 4, Sum: 2}
	w.histogram(hist, dup, []string{"m", "1"})
	// vLLM's counts are floats: rounded as the library's integers are.
	frac := snapshot.Histogram{Bounds: []float64{0.5, 2}, Counts: []float64{1.5, 2.4999}, Count: 3.5, Sum: 0.2}
	w.histogram(hist, frac, []string{"m", "0"})
	w.value(gauge, prometheus.GaugeValue, 0.5, []string{"b"})
	w.value(gauge, prometheus.GaugeValue, 0.25, []string{"a"})
	w.value(gauge, prometheus.GaugeValue, 1, []string{"\xff"})
	w.value(gauge, prometheus.GaugeValue, 1, []string{"a", "b"})
	w.value(gauge, prometheus.GaugeValue, 0.75, []string{"a"}) // twice: dropped
	got, err := w.done()
	if err == nil || !strings.Contains(err.Error(), "3 errors") {
		t.Fatalf("error %v, want the three bad series counted", err)
	}

	// What the library makes of the same good series.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectorFunc(func(ch chan<- prometheus.Metric) {
		m, _ := constHistogram(hist, dup, "m", "1")
		ch <- m
		m, _ = constHistogram(hist, frac, "m", "0")
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
