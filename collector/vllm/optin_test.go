package vllm

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// metricsWith scrapes the production fixture twice a minute apart (so
// every window has data) with opt-in and returns the exporter's /metrics.
func metricsWith(t *testing.T, optIn []string) string {
	t.Helper()
	body := fixture(t, "vllm-main-2026-08-v1.txt")
	srv := newFakeVLLM(t, body, "text/plain")
	s := newTestScraper(t, srv.URL, func(o *Options) { o.OptIn = optIn })
	scrapeAt(s, t0)
	srv.set(v1After60s(t, body), nil)
	scrapeAt(s, t0.Add(time.Minute))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	return string(gatherText(t, reg))
}

// Off by default is what no shipped alert, panel or verdict reads; each
// comes back with its --vllm.opt-in name, and nothing else changes.
func TestOptInSeriesAreOffByDefault(t *testing.T) {
	def := metricsWith(t, nil)
	for _, off := range []string{
		`window="1m"`,
		"vllm_request_inference_time_seconds_bucket",
		"vllm_exporter_expected_metric_missing{",
	} {
		if strings.Contains(def, off) {
			t.Errorf("defaults export %s; it is opt-in", off)
		}
	}
	for _, on := range []string{"vllm_time_to_first_token_seconds_bucket", "vllm_request_prefill_time_seconds_bucket", "vllm_requests_finished_total"} {
		if !strings.Contains(def, on) {
			t.Errorf("defaults lost %s, which shipped rules read", on)
		}
	}

	for name, want := range map[string]string{
		OptInWindowSeries:                     `vllm_prefix_cache_hit_ratio{model="meta-llama/Llama-3.1-8B-Instruct",window="1m"}`,
		OptInExpectedPresent:                  `vllm_exporter_expected_metric_missing{metric="vllm:time_to_first_token_seconds"} 0`,
		"vllm_request_inference_time_seconds": "vllm_request_inference_time_seconds_bucket",
	} {
		got := metricsWith(t, []string{name})
		if !strings.Contains(got, want) {
			t.Errorf("--vllm.opt-in=%s: no %s", name, want)
		}
		// An opt-in adds lines; it never removes one of the defaults.
		for _, line := range strings.Split(def, "\n") {
			if strings.HasPrefix(line, "vllm_") && !strings.HasPrefix(line, "vllm_exporter_scrape_duration") && !strings.Contains(got, line) {
				t.Errorf("--vllm.opt-in=%s lost %q", name, line)
				break
			}
		}
	}
	// Every opt-in family of the table: off by default, on with its name
	// where the fixture has it.
	body := string(fixture(t, "vllm-main-2026-08-v1.txt"))
	for i := range families.Rows {
		f := &families.Rows[i]
		if !f.OptIn || f.WindowOnly {
			continue
		}
		if strings.Contains(def, "\n"+f.Exported+"{") || strings.Contains(def, "\n"+f.Exported+"_bucket{") {
			t.Errorf("defaults export the opt-in family %s", f.Exported)
		}
		if !strings.Contains(body, f.Names[0].Name+"{") {
			continue
		}
		if got := metricsWith(t, []string{f.Exported}); !strings.Contains(got, "\n"+f.Exported) {
			t.Errorf("--vllm.opt-in=%s: the family is not exported", f.Exported)
		}
	}
	// The inference histogram's window summary needs both opt-ins.
	both := metricsWith(t, []string{OptInWindowSeries})
	if strings.Contains(both, "vllm_request_inference_time_window_seconds") {
		t.Error("window-series alone exports the opt-in inference histogram's window summary")
	}
}

// An absent expected family still reads 1 at the defaults: the alert on
// it reads > 0.
func TestMissingFamilyReportedAtDefaults(t *testing.T) {
	body := fixture(t, "vllm-main-2026-08-v1.txt")
	var kept [][]byte
	for _, l := range bytes.Split(body, []byte("\n")) {
		if !bytes.Contains(l, []byte("vllm:num_requests_waiting{")) {
			kept = append(kept, l)
		}
	}
	srv := newFakeVLLM(t, bytes.Join(kept, []byte("\n")), "text/plain")
	s := newTestScraper(t, srv.URL, func(o *Options) { o.OptIn = nil })
	scrapeAt(s, t0)
	compareNoHelp(t, s, `
# TYPE vllm_exporter_expected_metric_missing gauge
vllm_exporter_expected_metric_missing{metric="vllm:num_requests_waiting"} 1
`, "vllm_exporter_expected_metric_missing")
}

func TestUnknownOptInRefused(t *testing.T) {
	if err := ValidateOptIn(OptInNames()); err != nil {
		t.Fatal(err)
	}
	err := ValidateOptIn([]string{"window-series", "vllm_time_to_first_token_seconds"})
	if err == nil || !strings.Contains(err.Error(), `"vllm_time_to_first_token_seconds"`) {
		t.Fatalf("got %v, want the unknown name refused", err)
	}
}

// A family exported by default is one a shipped alert, recording rule or
// dashboard panel reads; the rest of the table is opt-in (docs/cost.md).
func TestDefaultFamiliesAreReadByShippedFiles(t *testing.T) {
	read := testutil.ShippedReader(t)
	for i := range families.Rows {
		f := &families.Rows[i]
		if f.OptIn || f.WindowOnly {
			continue
		}
		if !read(f.Exported) {
			t.Errorf("%s is exported by default but no shipped alert, rule or panel reads it: make it OptIn or read it", f.Exported)
		}
	}
}
