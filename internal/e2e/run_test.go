package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	exporterBin, simBin string
	dir                 string
}

// e2eConfig is the exporter configuration of the end-to-end runs: probes
// every 2 seconds, a probe profile for the LoRA adapter e2eAdapters[0]
// (every 3 s, timeout under the SLO threshold: the LoRA burst's wait on
// the adapter budget fails probes, never pages) with its own SLO, and SLOs with an 18h period so the workbook's windows
// shrink 40x (5m -> 8s, 1h -> 90s, 6h -> 9m): a hard breach pages within
// a minute or two instead of an hour.
var e2eConfig = `
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
    - name: lora
      model: e2e-sql-lora
      endpoint: completions
      input_tokens: 64
      output_tokens: 16
      prefix: cold
      interval: 3s
      timeout: 2s
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
` + probeTTFTSLO("e2e-probe-ttft", "short") + probeTTFTSLO("e2e-lora-probe-ttft", "lora")

// probeTTFTSLO is a probe TTFT SLO (2.5 s, 99%) of one probe profile.
func probeTTFTSLO(name, profile string) string {
	return `  - name: ` + name + `
    source: probe
    kind: latency
    metric: ttft
    threshold: 2.5
    objective: 0.99
    period: 18h
    min_events: 3
    profiles: [` + profile + `]
`
}

// startStack starts vllm-sim (healthy scenario, built-in load, two
// data-parallel engines so per-engine series exist) and the exporter on
// free loopback ports and waits until the exporter is ready. The
// simulator runs today's vLLM layout with every optional feature a
// dashboard panel reads turned on (see productionControls): it is the
// decode pod of a disaggregated pair (startPrefillPeer starts the other).
func startStack(t *testing.T) *stack {
	t.Helper()
	exporterBin, simBin := binaries(t)
	dir := t.TempDir()
	s := &stack{exporterBin: exporterBin, simBin: simBin, dir: dir, configPath: filepath.Join(dir, "config.yml")}
	if err := os.WriteFile(s.configPath, []byte(e2eConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := runCmd(t, exporterBin, "--config.check", "--config.file="+s.configPath); len(out) == 0 {
		t.Log("config check printed nothing")
	}
	s.simURL, s.sim = s.startSim(t, "vllm-sim")
	for path, body := range productionControls(RoleDecode) {
		if err := postJSON(s.simURL+path, body); err != nil {
			t.Fatal(err)
		}
	}
	s.exporterURL, s.exporter = s.startExporter(t, "vllm_exporter", s.simURL, dir, s.sim)
	return s
}

// RoleDecode and RolePrefill are the simulator's P/D roles (POST /admin/pd).
const (
	RoleDecode  = "decode"
	RolePrefill = "prefill"
)

// e2eAdapters are the LoRA adapters the simulators serve: three, with
// max_lora 1, so three long requests for distinct adapters on two engines
// make one wait (loraBurst).
var e2eAdapters = []string{"e2e-sql-lora", "e2e-chat-lora", "e2e-summarize-lora"}

// productionControls are the simulator controls (path -> body) of the
// production features the dashboards show (issue 24): admission limits
// (high: no request is refused, the counters exist), the NIXL connector
// in role with short transfers (TTFT stays far under the SLO's 250 ms) of
// which 2% fail (under the VLLMKVTransferFailures page's 5%) and 2% expire,
// LoRA adapters taking 3 % of the load (loraBurst holds the adapter budget
// for seconds, and the requests for the other adapters wait behind it:
// real TTFT misses, the healthy phase's only misses by design, which is
// why TestEndToEnd waits loraBurstAfter before the burst),
// KV offload in both name generations with external-cache lookups and a
// second tier, HF3FS saves and loads, a few failures of each,
// --kv-cache-metrics, and Mooncake store traffic of which 2% fails.
func productionControls(role string) map[string]any {
	return map[string]any{
		"/admin/admission": map[string]any{"max_queued_requests": 1000, "max_queued_tokens": 2000000},
		"/admin/pd":        map[string]any{"role": role, "transfer_seconds": 0.01, "bytes_per_second": 25e9, "fail_fraction": 0.02, "expire_fraction": 0.02},
		"/admin/lora":      map[string]any{"max_lora": 1, "adapters": e2eAdapters, "load_fraction": 0.03},
		"/admin/offload": map[string]any{"load_bytes_per_second": 2e9, "store_bytes_per_second": 5e9, "layout": "both",
			"external_query_tokens_per_second": 1000, "hit_ratio": 0.4,
			// Failures well under VLLMKVOffloadFailures' one a minute, so the failure panel has data.
			"allocation_failures_per_second": 0.005, "promotion_allocation_failures_per_second": 0.005,
			"tiers": []map[string]any{{"name": "disk", "read_bytes_per_second": 1e9, "write_bytes_per_second": 1e9,
				"block_queries_per_second": 10, "hit_ratio": 0.5, "promotion_failures_per_second": 0.005,
				"cascade_failures_per_second": 0.005, "write_usage": 0.1, "read_usage": 0.1}}},
		"/admin/hf3fs": map[string]any{"saves_per_second": 1, "loads_per_second": 1, "save_seconds": 0.01, "load_seconds": 0.01,
			"fail_fraction": 0.005},
		"/admin/kv_cache_metrics": map[string]any{"enabled": true},
		"/admin/mooncake": map[string]any{"ops_per_second": 5, "error_fraction": 0.02, "keys_per_op": 16, "bytes_per_key": 1 << 20,
			"op_seconds": 0.004},
	}
}

// startSim starts a simulator (healthy scenario, two engines, today's
// layout with speculative decoding, the MFU counters and engine_healthy)
// on a free port and waits for its /health.
func (s *stack) startSim(t *testing.T, name string) (string, *proc) {
	t.Helper()
	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	p := startProc(t, name, s.simBin,
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--served-model-name=e2e-model", "--data-parallel-size=2", "--seed=7", "--scenario=healthy",
		"--metrics-version=v1-0.33", "--spec-decode.num-speculative-tokens=3",
		"--enable-mfu-metrics", "--enable-fault-tolerance")
	waitFor(t, name+" /health", 30*time.Second, []*proc{p}, httpOK(url+"/health"))
	return url, p
}

// startExporter starts the exporter against simURL with the stack's
// configuration (state files under dir) and waits until it is ready.
func (s *stack) startExporter(t *testing.T, name, simURL, dir string, sim *proc) (string, *proc) {
	t.Helper()
	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	args := []string{
		"--vllm.url=" + simURL,
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--vllm.scrape-interval=1s",
		"--config.file=" + s.configPath,
		"--log.level=debug",
	}
	args = append(args, optionalFlags(t, s.exporterBin, map[string]string{
		"slo.interval":       "--slo.interval=1s",
		"slo.state-file":     "--slo.state-file=" + filepath.Join(dir, "slo-state.json"),
		"model.weight-bytes": "--model.weight-bytes=16060000000",
		// no GPU in CI: the roofline needs a bandwidth (H100 SXM, 3.35 TB/s)
		"model.memory-bandwidth": "--model.memory-bandwidth=3350000000000",
		// MFU/MBU from vLLM's counters need one GPU's peaks (H100 SXM BF16).
		"gpu.peak-flops":            "--gpu.peak-flops=989e12",
		"gpu.peak-memory-bandwidth": "--gpu.peak-memory-bandwidth=3.35e12",
		// the capacity table's cost row (vllm_cost_per_million_output_tokens)
		"cost.gpu-hour": "--cost.gpu-hour=2.5",
	})...)
	p := startProc(t, name, s.exporterBin, args...)
	waitFor(t, name+" /-/ready", 30*time.Second, []*proc{sim, p}, httpOK(url+"/-/ready"))
	return url, p
}

// peer is the prefill pod of the stack's P/D pair: a simulator in the
// prefill role and its exporter.
type peer struct {
	simURL, exporterURL string
	sim, exporter       *proc
}

// startPrefillPeer starts the prefill side of the pair whose decode side
// is the stack's simulator, with the same production controls.
func (s *stack) startPrefillPeer(t *testing.T) *peer {
	t.Helper()
	p := &peer{}
	p.simURL, p.sim = s.startSim(t, "vllm-sim-prefill")
	for path, body := range productionControls(RolePrefill) {
		if err := postJSON(p.simURL+path, body); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	p.exporterURL, p.exporter = s.startExporter(t, "vllm_exporter-prefill", p.simURL, dir, p.sim)
	return p
}

// loraBurst sends one long completion for each adapter at once, in the
// background: with max_lora 1 and two engines, two of the three share an
// engine and one of them waits on the LoRA budget for as long as the
// other runs (vllm_lora_adapter_waiting has data).
// The requests outlive the shared client's 10 s timeout; an error shows as
// the LoRA waiting panel without data, which TestEndToEnd reports.
func (s *stack) loraBurst() {
	c := &http.Client{Timeout: 2 * time.Minute}
	for _, a := range e2eAdapters {
		b, _ := json.Marshal(map[string]any{"model": a, "prompt": "LoRA budget burst", "max_tokens": 1500, "ignore_eos": true})
		go func() {
			if resp, err := c.Post(s.simURL+"/v1/completions", "application/json", bytes.NewReader(b)); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
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
