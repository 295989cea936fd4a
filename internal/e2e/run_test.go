package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stack is a running simulated vLLM plus the exporter scraping it.
type stack struct {
	simURL, exporterURL string
	configPath          string
	sim, exporter       *proc
	exporterBin         string
}

// e2eConfig is the exporter configuration of the end-to-end runs: probes
// every 2 seconds, and SLOs with an 18h period so the workbook's windows
// shrink 40x (5m -> 8s, 1h -> 90s, 6h -> 9m): a hard breach pages within
// a minute or two instead of an hour.
const e2eConfig = `
probes:
  max_requests_per_minute: 240
  max_tokens_per_hour: 2000000
  ttft_gap_window: 1m
  profiles:
    - name: short
      endpoint: completions
      input_tokens: 64
      output_tokens: 16
      prefix: cold
      interval: 2s
      timeout: 1500ms
      jitter: 200ms
slos:
  - name: e2e-ttft
    description: 99% of requests get their first token within 250ms.
    source: server
    kind: latency
    metric: ttft
    threshold: 0.25
    objective: 0.99
    period: 18h
    min_events: 5
  - name: e2e-availability
    source: server
    kind: availability
    objective: 0.99
    period: 18h
    min_events: 5
  - name: e2e-probe-ttft
    source: probe
    kind: latency
    metric: ttft
    threshold: 2.5
    objective: 0.99
    period: 18h
    min_events: 3
`

// startStack starts vllm-sim (healthy scenario, built-in load, two
// data-parallel engines so per-engine series exist) and the
// exporter on free loopback ports and waits until the exporter is ready.
func startStack(t *testing.T) *stack {
	t.Helper()
	exporterBin, simBin := binaries(t)
	dir := t.TempDir()
	s := &stack{exporterBin: exporterBin, configPath: filepath.Join(dir, "config.yml")}
	if err := os.WriteFile(s.configPath, []byte(e2eConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := runCmd(t, exporterBin, "--config.check", "--config.file="+s.configPath); len(out) == 0 {
		t.Log("config check printed nothing")
	}

	simPort := freePort(t)
	s.simURL = fmt.Sprintf("http://127.0.0.1:%d", simPort)
	s.sim = startProc(t, "vllm-sim", simBin,
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", simPort),
		"--served-model-name=e2e-model", "--data-parallel-size=2", "--seed=7", "--scenario=healthy",
		// Today's vLLM layout with the optional families on, so every
		// dashboard panel has data: speculative decoding, the MFU
		// counters and engine_healthy (vLLM --enable-fault-tolerance).
		"--metrics-version=v1-0.33", "--spec-decode.num-speculative-tokens=3",
		"--enable-mfu-metrics", "--enable-fault-tolerance")
	waitFor(t, "vllm-sim /health", 30*time.Second, []*proc{s.sim}, httpOK(s.simURL+"/health"))

	expPort := freePort(t)
	s.exporterURL = fmt.Sprintf("http://127.0.0.1:%d", expPort)
	args := []string{
		"--vllm.url=" + s.simURL,
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", expPort),
		"--vllm.scrape-interval=1s",
		"--config.file=" + s.configPath,
		"--log.level=debug",
	}
	args = append(args, optionalFlags(t, exporterBin, map[string]string{
		"slo.interval":       "--slo.interval=1s",
		"slo.state-file":     "--slo.state-file=" + filepath.Join(dir, "slo-state.json"),
		"model.weight-bytes": "--model.weight-bytes=16060000000",
		// no GPU in CI: the roofline needs a bandwidth (H100 SXM, 3.35 TB/s)
		"model.memory-bandwidth": "--model.memory-bandwidth=3350000000000",
		// MFU/MBU from vLLM's counters need one GPU's peaks (H100 SXM BF16).
		"gpu.peak-flops":            "--gpu.peak-flops=989e12",
		"gpu.peak-memory-bandwidth": "--gpu.peak-memory-bandwidth=3.35e12",
	})...)
	s.exporter = startProc(t, "vllm_exporter", exporterBin, args...)
	waitFor(t, "exporter /-/ready", 30*time.Second, []*proc{s.sim, s.exporter}, httpOK(s.exporterURL+"/-/ready"))
	return s
}

// optionalFlags returns the flags among want (flag name -> argument) that
// the exporter binary has; flags of components not merged yet are left out
// and logged, so the run shows what was exercised.
func optionalFlags(t *testing.T, bin string, want map[string]string) []string {
	t.Helper()
	help := string(runCmd(t, bin, "--help-long"))
	var out []string
	for name, arg := range want {
		if strings.Contains(help, "--"+name+"=") || strings.Contains(help, "--[no-]"+name) {
			out = append(out, arg)
		} else {
			t.Logf("exporter has no --%s flag; running without it", name)
		}
	}
	return out
}

func (s *stack) setScenario(t *testing.T, body map[string]any) {
	t.Helper()
	if err := postJSON(s.simURL+"/admin/scenario", body); err != nil {
		t.Fatal(err)
	}
}

func (s *stack) fault(t *testing.T, body map[string]any) {
	t.Helper()
	if err := postJSON(s.simURL+"/admin/fault", body); err != nil {
		t.Fatal(err)
	}
}
