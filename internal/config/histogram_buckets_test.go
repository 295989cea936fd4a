package config

import (
	"strings"
	"testing"
)

// Latency thresholds are validated against histogram_buckets (vLLM's
// --custom-histogram-buckets) when the file lists the metric, else against
// vLLM's default bounds; bad bucket lists are refused with the field named.
func TestHistogramBucketsValidateThresholds(t *testing.T) {
	slo := "slos:\n  - {name: ttft, kind: latency, metric: ttft, threshold: 0.35, objective: 0.99}\n"
	if _, err := Parse([]byte(slo), "t"); err == nil || !strings.Contains(err.Error(), "histogram_buckets") {
		t.Errorf("0.35 is no default TTFT bound: got %v, want an error pointing at histogram_buckets", err)
	}
	f, err := Parse([]byte("histogram_buckets:\n  ttft: [0.05, 0.1, 0.2, 0.35, 0.5, 1]\n"+slo), "t")
	if err != nil {
		t.Fatalf("0.35 listed in histogram_buckets: %v", err)
	}
	if b := f.Buckets("ttft"); len(b) != 6 || b[3] != 0.35 {
		t.Errorf("Buckets(ttft) = %v", b)
	}
	if b := f.Buckets("e2e"); len(b) != len(RequestLatencyBuckets) {
		t.Errorf("Buckets(e2e) without a custom list = %v, want vLLM's defaults", b)
	}
	// A default bound left out of the custom list is no longer valid.
	if _, err := Parse([]byte("histogram_buckets:\n  ttft: [0.05, 0.35]\nslos:\n  - {name: x, kind: latency, metric: ttft, threshold: 1.0, objective: 0.99}\n"), "t"); err == nil {
		t.Error("threshold 1.0 accepted although histogram_buckets.ttft lacks it")
	}
	for _, bad := range []string{
		"histogram_buckets:\n  ttfb: [1]\n",
		"histogram_buckets:\n  ttft: [1, 0.5]\n",
		"histogram_buckets:\n  ttft: [0, 1]\n",
		"histogram_buckets:\n  ttft: []\n",
		"histogram_buckets:\n  ttft: [.inf]\n",
	} {
		if _, err := Parse([]byte(bad), "t"); err == nil || !strings.Contains(err.Error(), "histogram_buckets") {
			t.Errorf("%q: got %v, want a histogram_buckets error", bad, err)
		}
	}
}
