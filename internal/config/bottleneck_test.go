package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// The shipped default.yml and DefaultBottleneck must say the same thing.
func TestBottleneckDefaultsMatchShippedFile(t *testing.T) {
	if got, want := Default().Bottleneck, DefaultBottleneck(); !reflect.DeepEqual(got, want) {
		t.Fatalf("default.yml bottleneck section = %+v\nDefaultBottleneck() = %+v", got, want)
	}
}

func TestBottleneckOverrideAndValidate(t *testing.T) {
	f, err := Parse([]byte("bottleneck:\n  kv_cache_usage_high: 0.9\n  hold_ticks: 5\n  window: 2m\n"), "t")
	if err != nil {
		t.Fatal(err)
	}
	b := f.Bottleneck
	if b.KVCacheUsageHigh != 0.9 || b.HoldTicks != 5 || b.Window != 2*time.Minute || b.PreemptionsPerRequestHigh != 0.01 {
		t.Fatalf("override: %+v", b)
	}
	for doc, field := range map[string]string{
		"bottleneck:\n  kv_cache_usage_high: 1.5\n":      "kv_cache_usage_high",
		"bottleneck:\n  hold_ticks: 0\n":                 "hold_ticks",
		"bottleneck:\n  slo_quantile: 0.42\n":            "slo_quantile",
		"bottleneck:\n  window: 20m\n":                   "baseline_window",
		"bottleneck:\n  roofline_far_ratio: 0.9\n":       "roofline_far_ratio",
		"bottleneck:\n  ttft_target_seconds: .nan\n":     "ttft_target_seconds",
		"bottleneck:\n  headroom: 0.5\n":                 "headroom",
		"bottleneck:\n  kv_cache_usage_hgh: 0.9\n":       "kv_cache_usage_hgh",
		"bottleneck:\n  xid_lookback: -1s\n":             "xid_lookback",
		"bottleneck:\n  dram_bandwidth_low_ratio: 0.7\n": "dram_bandwidth_low_ratio",
	} {
		_, err := Parse([]byte(doc), "t")
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%q: error %v does not name %s", doc, err, field)
		}
	}
}
