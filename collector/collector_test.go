package collector

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestHealth(t *testing.T) {
	h := NewHealth()
	if n := testutil.CollectAndCount(h); n != 0 {
		t.Fatalf("%d series before any report", n)
	}
	h.Report("vllm", 250*time.Millisecond, nil)
	h.Report("gpu", 2*time.Second, errors.New("nvml: not found"))
	err := testutil.CollectAndCompare(h, strings.NewReader(`
# HELP vllm_exporter_collector_up 1 if the collector's last run succeeded, 0 if it failed.
# TYPE vllm_exporter_collector_up gauge
vllm_exporter_collector_up{collector="gpu"} 0
vllm_exporter_collector_up{collector="vllm"} 1
# HELP vllm_exporter_collector_duration_seconds Duration of the collector's last run in seconds.
# TYPE vllm_exporter_collector_duration_seconds gauge
vllm_exporter_collector_duration_seconds{collector="gpu"} 2
vllm_exporter_collector_duration_seconds{collector="vllm"} 0.25
`))
	if err != nil {
		t.Fatal(err)
	}
	// The latest report wins.
	h.Report("gpu", time.Second, nil)
	if err := testutil.CollectAndCompare(h, strings.NewReader(`
# HELP vllm_exporter_collector_up 1 if the collector's last run succeeded, 0 if it failed.
# TYPE vllm_exporter_collector_up gauge
vllm_exporter_collector_up{collector="gpu"} 1
vllm_exporter_collector_up{collector="vllm"} 1
`), "vllm_exporter_collector_up"); err != nil {
		t.Fatal(err)
	}
	// A collector found absent (auto mode) exports why, and no up series
	// for an alert to fire on; a later report replaces it.
	h.Report("gpu", time.Second, errors.New("nvml init: ERROR_LIBRARY_NOT_FOUND"))
	h.Absent("gpu", "nvml_library_not_found")
	if err := testutil.CollectAndCompare(h, strings.NewReader(`
# HELP vllm_exporter_collector_up 1 if the collector's last run succeeded, 0 if it failed.
# TYPE vllm_exporter_collector_up gauge
vllm_exporter_collector_up{collector="vllm"} 1
# HELP vllm_exporter_collector_absent 1 for a collector that is enabled in auto mode but found nothing to collect on this host (reason: what is missing); it exports no up series, so nothing alerts on it.
# TYPE vllm_exporter_collector_absent gauge
vllm_exporter_collector_absent{collector="gpu",reason="nvml_library_not_found"} 1
`), "vllm_exporter_collector_up", "vllm_exporter_collector_absent"); err != nil {
		t.Fatal(err)
	}
	h.Report("gpu", time.Second, nil)
	if n := testutil.CollectAndCount(h, "vllm_exporter_collector_absent"); n != 0 {
		t.Fatalf("absent kept after a report: %d", n)
	}
	var nilHealth *Health
	nilHealth.Report("x", 0, nil) // must not panic
	nilHealth.Absent("x", "y")
}
