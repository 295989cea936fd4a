package vllm

import (
	"errors"
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
