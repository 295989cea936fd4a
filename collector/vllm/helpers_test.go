package vllm

import (
	"bytes"
	"compress/gzip"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	sharedtest "github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// t0 is the virtual time of the first scrape in tests.
var t0 = time.Unix(1_786_351_200, 0).UTC()

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeVLLM serves whatever body/status/handler the test sets, switchable
// between scrapes.
type fakeVLLM struct {
	*httptest.Server
	mu          sync.Mutex
	body        []byte
	contentType string
	handler     http.HandlerFunc // overrides body when set
}

func newFakeVLLM(t testing.TB, body []byte, contentType string) *fakeVLLM {
	f := &fakeVLLM{body: body, contentType: contentType}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		body, ct, h := f.body, f.contentType, f.handler
		f.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", ct)
		w.Write(body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeVLLM) set(body []byte, h http.HandlerFunc) {
	f.mu.Lock()
	f.body, f.handler = body, h
	f.mu.Unlock()
}

// newTestScraper turns every opt-in series on, so the tests of what a
// series says see it; TestOptInSeriesAreOffByDefault checks the defaults.
func newTestScraper(t testing.TB, url string, mod func(*Options)) *Scraper {
	opts := Options{URL: url, Interval: 5 * time.Second, Timeout: 2 * time.Second, OptIn: OptInNames()}
	if mod != nil {
		mod(&opts)
	}
	return New(opts, nil)
}

// compareNoHelp compares the collector's output for names with expected
// (text format, any order), ignoring HELP: HELP strings are checked once by
// the histogram goldens, the values are what these tests are about.
func compareNoHelp(t testing.TB, c prometheus.Collector, expected string, names ...string) {
	t.Helper()
	got := sharedtest.GatherAll(t, c)
	p := expfmt.NewTextParser(model.UTF8Validation)
	wantMap, err := p.TextToMetricFamilies(strings.NewReader(expected))
	if err != nil {
		t.Fatalf("bad expected text: %v", err)
	}
	var want []*dto.MetricFamily
	for _, mf := range wantMap {
		want = append(want, mf)
	}
	if g, w := encodeFamilies(t, got, names), encodeFamilies(t, want, names); g != w {
		t.Fatalf("metrics differ\n--- got\n%s\n--- want\n%s", g, w)
	}
}

func encodeFamilies(t testing.TB, fams []*dto.MetricFamily, names []string) string {
	t.Helper()
	slices.SortFunc(fams, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	var kept []*dto.MetricFamily
	for _, mf := range fams {
		if !slices.Contains(names, mf.GetName()) {
			continue
		}
		mf.Help = nil
		// Sort samples the way a registry does, for hand-written input.
		slices.SortFunc(mf.Metric, func(a, b *dto.Metric) int { return strings.Compare(a.String(), b.String()) })
		kept = append(kept, mf)
	}
	return sharedtest.Encode(t, kept)
}

// vllmSeries are every vLLM-derived (not self) series name, for checking
// that a failed scrape shows none of them.
var vllmSeries = []string{
	"vllm_requests_running", "vllm_requests_waiting", "vllm_kv_cache_usage_ratio", "vllm_preemptions_total",
	"vllm_prompt_tokens_total", "vllm_generation_tokens_total", "vllm_requests_finished_total",
	"vllm_cache_config_info", "vllm_time_to_first_token_seconds", "vllm_exporter_vllm_schema_info",
	"vllm_exporter_expected_metric_missing", "vllm_time_to_first_token_window_seconds", "vllm_prompt_tokens_per_second",
}

func scrapeAt(s *Scraper, at time.Time) { s.ScrapeOnce(context.Background(), at) }

const llama = "meta-llama/Llama-3.1-8B-Instruct"

// withValues returns body with the value of each listed series (name and
// labels exactly as vLLM prints them) replaced; it fails if one is absent.
func withValues(t testing.TB, body []byte, values map[string]string) []byte {
	t.Helper()
	return []byte(sharedtest.WithValues(t, string(body), values))
}

// approx: equal within floating-point noise.
func approx(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func wantValue(t *testing.T, what string, got snapshot.Value, want float64) {
	t.Helper()
	if !got.OK || !approx(got.V, want) {
		t.Errorf("%s = %+v, want %v", what, got, want)
	}
}

func wantAbsent(t *testing.T, what string, got snapshot.Value) {
	t.Helper()
	if got.OK {
		t.Errorf("%s = %v, want absent", what, got.V)
	}
}

// gzipped is b gzip-compressed, as vLLM sends it on Accept-Encoding: gzip.
func gzipped(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// gatherText is g's exposition in text format.
func gatherText(t *testing.T, g prometheus.Gatherer) []byte {
	t.Helper()
	return []byte(sharedtest.GatherText(t, g))
}
