package vllm

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// FuzzIngest feeds two arbitrary bodies a minute apart through parse,
// normalize, derive and render, and gathers the result through a pedantic
// registry: whatever vLLM (or something pretending to be it) sends, the
// exporter must neither panic nor produce an invalid exposition.
func FuzzIngest(f *testing.F) {
	// Small seeds only: the fuzzer minimizes every new interesting input
	// (up to a minute each), which on multi-KB bodies eats the whole run.
	f.Add([]byte("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\n"),
		[]byte("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"1\",model_name=\"m\"} 4\n"), false)
	f.Add([]byte("# TYPE vllm:request_success_total counter\nvllm:request_success_total{finished_reason=\"stop\",model_name=\"m\"} 9\n"),
		[]byte("# TYPE vllm:request_success_total counter\nvllm:request_success_total{finished_reason=\"stop\",model_name=\"m\"} 2\n"), false)
	f.Add([]byte("# TYPE vllm:num_preemptions counter\nvllm:num_preemptions_total{model_name=\"m\"} 5 # {a=\"b\"} 1\n# EOF\n"), []byte("# EOF\n"), true)
	f.Add([]byte("# TYPE vllm:e2e_request_latency_seconds histogram\nvllm:e2e_request_latency_seconds_bucket{le=\"1\",model_name=\"m\"} 5\nvllm:e2e_request_latency_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 3\n"),
		[]byte("# TYPE vllm:e2e_request_latency_seconds histogram\nvllm:e2e_request_latency_seconds_bucket{le=\"1\",model_name=\"m\"} -1\n"), false)
	f.Fuzz(func(t *testing.T, a, b []byte, openMetrics bool) {
		ct := "text/plain; version=0.0.4"
		if openMetrics {
			ct = "application/openmetrics-text; version=1.0.0"
		}
		s := New(Options{URL: "http://127.0.0.1:1"}, nil)
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(s)
		for i, body := range [][]byte{a, b} {
			s.mu.Lock()
			s.ingest(t0.Add(time.Duration(i)*time.Minute), time.Now(), body, ct, nil, "", nil)
			s.mu.Unlock()
			if _, err := reg.Gather(); err != nil {
				t.Fatalf("invalid exposition after body %d: %v", i, err)
			}
		}
		s.Window(30 * time.Second)
	})
}

// A fetch error goes through the same path.
func TestIngestFetchError(t *testing.T) {
	s := New(Options{URL: "http://127.0.0.1:1"}, nil)
	s.mu.Lock()
	s.ingest(t0, time.Now(), nil, "", nil, ReasonConnect, errors.New("refused"))
	s.mu.Unlock()
	if l := s.Latest(); l.Up || l.Error != ReasonConnect {
		t.Fatalf("%+v", l)
	}
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
