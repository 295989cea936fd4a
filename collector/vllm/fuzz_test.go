package vllm

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
)

// FuzzScan reads three bodies in turn through one scanner, whose series
// cache then holds the earlier ones', and each through a fresh scanner: the
// cache must not change what a body reads or drops, or whether it is
// refused. What it reads must be what a registry accepts again (UTF-8
// label values within the bound), and a text body that prometheus/common's
// parser accepts must be accepted. (The seeds under testdata/fuzz/FuzzScan
// are bodies whose families move between scrapes.)
func FuzzScan(f *testing.F) {
	h := "# HELP vllm:e2e_request_latency_seconds e2e\n# TYPE vllm:e2e_request_latency_seconds histogram\n"
	hist := h + "vllm:e2e_request_latency_seconds_bucket{le=\"1\",model_name=\"m\"} 5\nvllm:e2e_request_latency_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 6\n"
	gauge := "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\n"
	f.Add([]byte(gauge+hist), []byte(hist+gauge), []byte(gauge+hist+hist), false)
	f.Add([]byte(hist+"vllm:e2e_request_latency_seconds_sum{model_name=\"m\"} 2\n"), []byte(gauge+"vllm:e2e_request_latency_seconds_count{model_name=\"m\"} x\n"), []byte(gauge), false)
	f.Add([]byte("# TYPE vllm:num_preemptions counter\nvllm:num_preemptions_total{model_name=\"m\"} 5 # {a=\"b\"} 1\n# EOF\n"),
		[]byte("{\"vllm:num_requests_running\",\"model_name\"=\"m\"} NaN\n"), []byte("vllm:num_preemptions_total{model_name=\"m\"} -1\n"), true)
	f.Fuzz(func(t *testing.T, a, b, c []byte, openMetrics bool) {
		cached := newScanner()
		for i, body := range [][]byte{a, b, c} {
			var withCache, fresh result
			err := cached.scan(bytes.NewReader(body), 1<<20, 64, &withCache)
			once := newScanner()
			ferr := once.scan(bytes.NewReader(body), 1<<20, 64, &fresh)
			if (err == nil) != (ferr == nil) {
				t.Fatalf("body %d: with the cache %v, fresh %v", i, err, ferr)
			}
			if err != nil {
				if !openMetrics && bytes.Count(body, []byte("\n")) == bytes.Count(bytes.TrimRight(body, "\n"), []byte("\n"))+1 {
					p := expfmt.NewTextParser(model.UTF8Validation)
					if _, perr := p.TextToMetricFamilies(bytes.NewReader(body)); perr == nil && !errors.Is(err, errTooManySeries) && !hasLongLine(body) {
						t.Fatalf("body %d: the text parser accepts it, the scanner says %v", i, err)
					}
				}
				continue
			}
			if got, want := scanned(cached), scanned(once); got != want {
				t.Fatalf("body %d reads differently with the cache:\n%s\nfresh:\n%s", i, got, want)
			}
			if !maps.Equal(withCache.dropped, fresh.dropped) {
				t.Fatalf("body %d drops %v with the cache, %v fresh", i, withCache.dropped, fresh.dropped)
			}
			for _, vs := range cached.values {
				for _, e := range vs {
					for _, v := range e.labels.All() {
						if !utf8.ValidString(v) || len(v) > MaxLabelValueBytes {
							t.Fatalf("body %d: read label value %q", i, v)
						}
					}
				}
			}
		}
	})
}

// scanned is what a scan read, as text.
func scanned(s *scanner) string {
	var b strings.Builder
	for fam := range famNames {
		for _, e := range s.values[fam] {
			fmt.Fprintf(&b, "%s{%s} %v\n", famNames[fam], pairsOf(e.labels), e.v)
		}
		for _, e := range s.bad[fam] {
			fmt.Fprintf(&b, "bad %s{%s} %v\n", famNames[fam], pairsOf(e.labels), e.v)
		}
		for _, c := range s.kids[fam] {
			fmt.Fprintf(&b, "%s{%s} %v sum %v count %v has %d dup %v\n", famNames[fam], pairsOf(c.labels), c.buckets, c.sum, c.count, c.has, c.dup)
		}
	}
	fmt.Fprintf(&b, "vllm %v helps %v\n", s.anyVLLM, s.helps)
	return b.String()
}

func pairsOf(l families.Labels) string {
	var b strings.Builder
	for n, v := range l.All() {
		fmt.Fprintf(&b, "%s=%q,", n, v)
	}
	return b.String()
}

func hasLongLine(body []byte) bool {
	for _, l := range bytes.Split(body, []byte("\n")) {
		if len(l) >= maxLineBytes {
			return true
		}
	}
	return false
}

// bodyTransport answers every request with one canned /metrics response, so
// the fuzzer drives the whole fetch -> gunzip -> parse -> normalize -> derive
// -> render path without a socket.
type bodyTransport struct {
	body        []byte
	contentType string
	gzip        bool
}

func (b *bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	h := http.Header{}
	h.Set("Content-Type", b.contentType)
	if b.gzip {
		h.Set("Content-Encoding", "gzip")
	}
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Header: h,
		Body: io.NopCloser(bytes.NewReader(b.body)), ContentLength: -1, Request: r,
	}, nil
}

// fuzzSeeds are the fixtures as seed corpus. Large fixtures are cut to
// their first complete lines up to 4 KiB: the fuzzer minimizes every new
// interesting input by re-running it, which on 60 KB inputs takes minutes
// and would eat a bounded CI fuzz run.
func fuzzSeeds(f *testing.F) [][]byte {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no seed fixtures in testdata: %v", err)
	}
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) > 4096 {
			b = b[:bytes.LastIndexByte(b[:4096], '\n')+1]
		}
		out = append(out, b)
	}
	return out
}

// fuzzContentTypes are the Content-Types vLLM has sent (text 0.0.4, text
// 1.0.0 from prometheus_client >= 0.23, OpenMetrics from the Rust front-end)
// plus an empty one.
var fuzzContentTypes = []string{
	"text/plain; version=0.0.4; charset=utf-8",
	"text/plain; version=1.0.0; charset=utf-8",
	"application/openmetrics-text; version=1.0.0; charset=utf-8",
	"",
}

// FuzzScrape feeds arbitrary /metrics bodies through the scraper, from the
// HTTP response on (FuzzIngest starts after the fetch): gzip or not, any
// Content-Type. Whatever
// vLLM (or something pretending to be it) sends, the exporter must not
// panic, must render only series a Prometheus registry accepts (valid label
// values, no duplicates, consistent label sets), and must never export a
// ratio outside 0..1 or a negative rate derived from its own windows.
func FuzzScrape(f *testing.F) {
	for i, b := range fuzzSeeds(f) {
		f.Add(b, b, fuzzContentTypes[i%len(fuzzContentTypes)], i%3 == 1)
	}
	f.Add([]byte("vllm:num_requests_running{model_name=\"m\"} 1\n# EOF\n"), []byte("vllm:num_requests_running{model_name=\"n\"} 1\n# EOF\n"), fuzzContentTypes[2], false)
	f.Add([]byte("# TYPE vllm:time_to_first_token_seconds histogram\n"+
		"vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.1\"} 3\n"+
		"vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 2\n"+
		"vllm:time_to_first_token_seconds_sum{model_name=\"m\"} -1\n"+
		"vllm:time_to_first_token_seconds_count{model_name=\"m\"} 2\n"), []byte("vllm:prompt_tokens_total{model_name=\"m\"} 5\n"), fuzzContentTypes[0], false)
	f.Add([]byte("vllm:kv_cache_usage_perc{model_name=\"\\xff\",engine=\"0\"} 7\n"), []byte{}, fuzzContentTypes[1], true)

	f.Fuzz(func(t *testing.T, first, second []byte, contentType string, gz bool) {
		if len(first)+len(second) > 1<<20 {
			return
		}
		tr := &bodyTransport{contentType: contentType, gzip: gz}
		set := func(body []byte) {
			tr.body = body
			if gz {
				var buf bytes.Buffer
				zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
				zw.Write(body)
				zw.Close()
				tr.body = buf.Bytes()
			}
		}
		s := New(Options{
			URL:          "http://vllm.invalid:8000",
			Interval:     5 * time.Second,
			MaxBodyBytes: 1 << 20,
			Windows:      []time.Duration{10 * time.Second},
			Client:       &http.Client{Transport: tr},
		}, nil)
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(s)
		// Scrapes of first, second, first: windows are derived over
		// arbitrary changes between them (resets, new or vanished models,
		// changed bucket layouts).
		for i, body := range [][]byte{first, second, first} {
			set(body)
			scrapeAt(s, t0.Add(time.Duration(i)*5*time.Second))
			fams, err := reg.Gather()
			if err != nil {
				t.Fatalf("scrape %d: exporter output rejected by the registry: %v", i, err)
			}
			for _, mf := range fams {
				// Windowed values are derived by us (all gauges): they must
				// be sane whatever the input. Re-exported values are vLLM's.
				name := mf.GetName()
				rate, ratio := strings.HasSuffix(name, "_per_second"), name == "vllm_prefix_cache_hit_ratio"
				for _, m := range mf.GetMetric() {
					v := m.GetGauge().GetValue()
					if rate && (v < 0 || math.IsNaN(v)) {
						t.Fatalf("%s = %v: a derived rate must be >= 0", name, v)
					}
					if ratio && !(v >= 0 && v <= 1) {
						t.Fatalf("%s = %v: outside 0..1", name, v)
					}
				}
			}
		}
		if l := s.Latest(); l == nil || (l.Up && l.Error != "") || (!l.Up && l.Error == "") {
			t.Fatalf("inconsistent latest snapshot: %+v", l)
		}
	})
}
