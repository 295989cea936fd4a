package vllm

import (
	"bytes"
	"os/exec"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// TestPromtoolCheckMetrics lints everything the scraper can export: both
// fixtures' series, windowed series, a DP body's per-engine series, and the
// self-metrics.
func TestPromtoolCheckMetrics(t *testing.T) {
	tool := testutil.Promtool(t)
	for _, name := range []string{"vllm-main-2026-08-v1.txt", "vllm-0.7.3-v0-multiprocess.txt", "dp2"} {
		t.Run(name, func(t *testing.T) {
			var body []byte
			if name == "dp2" {
				body = []byte(dp2Body)
			} else {
				body = fixture(t, name)
			}
			srv := newFakeVLLM(t, body, "text/plain")
			s := newTestScraper(t, srv.URL, nil)
			scrapeAt(s, t0)
			if name == "vllm-main-2026-08-v1.txt" {
				srv.set(v1After60s(t, body), nil)
			}
			scrapeAt(s, t0.Add(time.Minute))
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(s)
			out := gatherText(t, reg)
			if !bytes.Contains(out, []byte("_per_second{")) {
				t.Fatalf("no windowed series to lint:\n%s", out)
			}
			cmd := exec.Command(tool, "check", "metrics")
			cmd.Stdin = bytes.NewReader(out)
			if res, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("promtool check metrics: %v\n%s", err, res)
			}
		})
	}
}
