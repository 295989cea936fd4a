package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
)

// hardScrapeArgs make the exporter scrape fast so each fault case needs
// only a few seconds of wall time; the timeout must be shorter than the
// interval (validateFlags).
// Window series on: the fault checks see that no derived series outlives
// a failed scrape either.
var hardScrapeArgs = []string{"--vllm.scrape-interval=350ms", "--vllm.timeout=300ms", "--log.level=debug", "--vllm.opt-in=window-series"}

// TestFaultMatrix runs the whole exporter (every component wired)
// against the simulated vLLM, injects each fault at run time, and checks
// that the exporter keeps serving /metrics and /-/healthy, reports the fault
// through vllm_up, vllm_exporter_collector_up and
// vllm_exporter_scrape_errors_total{reason}, shows no stale vLLM series,
// recovers when the fault clears, shuts down cleanly, and leaves no
// goroutine or retained heap behind.
func TestFaultMatrix(t *testing.T) {
	cases := []struct {
		name   string
		fault  vllmsim.FaultSpec
		args   []string
		reason string
	}{
		{name: "vLLM down", fault: vllmsim.FaultSpec{Kind: vllmsim.FaultDown}, reason: vllm.ReasonConnect},
		{name: "hang", fault: vllmsim.FaultSpec{Kind: vllmsim.FaultHang}, reason: vllm.ReasonTimeout},
		{name: "slow metrics beyond the timeout", fault: vllmsim.FaultSpec{Kind: vllmsim.FaultSlowMetrics, Delay: 3 * time.Second}, reason: vllm.ReasonTimeout},
		{name: "5xx", fault: vllmsim.FaultSpec{Kind: vllmsim.Fault5xx}, reason: vllm.ReasonHTTP5xx},
		{name: "garbage", fault: vllmsim.FaultSpec{Kind: vllmsim.FaultGarbageMetrics}, reason: vllm.ReasonParse},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := hardSnapshot()
			sim := vllmsimtest.StartLoaded(t, 7)
			h := hardStart(t, nil, append([]string{"--vllm.url=" + sim.URL()}, append(hardScrapeArgs, c.args...)...)...)
			h.waitMetric("first good scrape", hardAll(hardIs("vllm_up", 1), hardIs("vllm_exporter_collector_up", 1, "collector", "vllm"),
				hardPresent("vllm_requests_running")))

			if err := sim.InjectFault(c.fault); err != nil {
				t.Fatal(err)
			}
			page := h.waitMetric("fault reported", hardAll(hardIs("vllm_up", 0), hardIs("vllm_exporter_collector_up", 0, "collector", "vllm"),
				hardAtLeast("vllm_exporter_scrape_errors_total", 1, "reason", c.reason)))
			hardCheckServingDuringFault(t, h, page, true)
			// Several more failed scrapes: nothing accumulates, the
			// process keeps answering.
			scrapes, _ := page.Value("vllm_exporter_scrapes_total")
			page = h.waitMetric("more failed scrapes", hardAll(hardAtLeast("vllm_exporter_scrapes_total", scrapes+5), hardIs("vllm_up", 0)))
			hardCheckServingDuringFault(t, h, page, true)
			// The health verdict a liveness probe reads says down.
			h.waitMetric("health verdict down", hardIs("vllm_health_verdict", 1, "state", "down"))
			if code, body := h.get("/-/vllm/healthy"); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "down: ") {
				t.Fatalf("/-/vllm/healthy = %d %q during a vLLM fault, want 503 down", code, body)
			}

			sim.ClearFault(c.fault.Kind)
			h.waitMetric("recovery", hardAll(hardIs("vllm_up", 1), hardIs("vllm_exporter_collector_up", 1, "collector", "vllm"), hardPresent("vllm_requests_running")))
			h.waitMetric("health verdict serving", hardIs("vllm_health_verdict", 1, "state", "serving"))
			if code, body := h.get("/-/vllm/ready"); code != http.StatusOK || !strings.HasPrefix(body, "serving: ") {
				t.Fatalf("/-/vllm/ready = %d %q after recovery, want 200 serving", code, body)
			}
			h.stop()
			sim.Close()
			hardCheckLeaks(t, before, 32<<20)
		})
	}
}

// hardCheckServingDuringFault: during a vLLM fault the exporter still
// answers health, readiness (a scrape was attempted) and /metrics with its
// own series, keeps the last success time, and shows no vLLM series as if
// they were fresh.
func hardCheckServingDuringFault(t *testing.T, h *hardExporter, page hardMetrics, hadSuccess bool) {
	t.Helper()
	if code, body := h.get("/-/healthy"); code != http.StatusOK {
		t.Fatalf("/-/healthy = %d %s during a vLLM fault", code, body)
	}
	if code, body := h.get("/-/ready"); code != http.StatusOK {
		t.Fatalf("/-/ready = %d %s during a vLLM fault", code, body)
	}
	for _, name := range []string{"vllm_exporter_build_info", "vllm_exporter_config_last_reload_successful", "vllm_exporter_scrape_duration_seconds"} {
		if _, ok := page.Value(name); !ok {
			t.Fatalf("%s missing during a vLLM fault", name)
		}
	}
	if _, ok := page.Value("vllm_exporter_last_successful_scrape_timestamp_seconds"); ok != hadSuccess {
		t.Fatalf("vllm_exporter_last_successful_scrape_timestamp_seconds present = %v, want %v", ok, hadSuccess)
	}
	for _, name := range []string{"vllm_requests_running", "vllm_kv_cache_usage_ratio", "vllm_prompt_tokens_total", "vllm_time_to_first_token_seconds", "vllm_prompt_tokens_per_second"} {
		if _, ok := page.Value(name); ok {
			t.Fatalf("%s still exported during a vLLM fault: stale data shown as fresh", name)
		}
	}
}

func hardPresent(name string, kv ...string) func(hardMetrics) (bool, string) {
	return func(m hardMetrics) (bool, string) {
		_, ok := m.Value(name, kv...)
		return ok, name + " absent"
	}
}

// TestFaultOversizeBody: a /metrics that never ends (or is merely larger
// than --vllm.max-body-bytes) is cut at the limit: body_too_large, and the
// heap the exporter keeps stays bounded by the limit, not by the stream.
func TestFaultOversizeBody(t *testing.T) {
	before := hardSnapshot()
	chunk := []byte(strings.Repeat("# padding that never ends\n", 4096))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	// A quarter MiB: read well inside --vllm.timeout even on a loaded machine.
	const limit = 1 << 18
	h := hardStart(t, nil, append([]string{"--vllm.url=" + srv.URL, fmt.Sprintf("--vllm.max-body-bytes=%d", limit)}, hardScrapeArgs...)...)
	page := h.waitMetric("oversize reported", hardAll(hardIs("vllm_up", 0),
		hardAtLeast("vllm_exporter_scrape_errors_total", 10, "reason", vllm.ReasonBodyTooLarge)))
	if v, _ := page.Value("vllm_exporter_scrape_errors_total", "reason", vllm.ReasonTimeout); v != 0 {
		t.Fatalf("an endless body timed out %v times instead of being cut at the limit", v)
	}
	hardCheckServingDuringFault(t, h, page, false)
	h.stop()
	srv.CloseClientConnections()
	srv.Close()
	// Retained heap bounded (8 MiB), never growing with the stream.
	hardCheckLeaks(t, before, 32*limit)
}

// TestFaultOversizeSim: the simulator's real /metrics under a limit smaller
// than it.
func TestFaultOversizeSim(t *testing.T) {
	before := hardSnapshot()
	sim := vllmsimtest.StartLoaded(t, 7)
	h := hardStart(t, nil, append([]string{"--vllm.url=" + sim.URL(), "--vllm.max-body-bytes=2048"}, hardScrapeArgs...)...)
	page := h.waitMetric("oversize reported", hardAll(hardIs("vllm_up", 0),
		hardAtLeast("vllm_exporter_scrape_errors_total", 1, "reason", vllm.ReasonBodyTooLarge)))
	hardCheckServingDuringFault(t, h, page, false)
	h.stop()
	sim.Close()
	hardCheckLeaks(t, before, 32<<20)
}

// TestFaultCounterReset: vLLM restarts (every counter back to zero). The
// exporter stays up, re-exports vLLM's counters as they are (Prometheus's
// rate() handles the reset), and its own windowed rates never go negative.
func TestFaultCounterReset(t *testing.T) {
	before := hardSnapshot()
	sim := vllmsimtest.StartLoaded(t, 7)
	h := hardStart(t, nil, append([]string{"--vllm.url=" + sim.URL(), "--vllm.windows=1s,5s"}, hardScrapeArgs...)...)
	page := h.waitMetric("traffic counted", hardAll(hardIs("vllm_up", 1), hardAtLeast("vllm_prompt_tokens_total", 1000),
		hardPresent("vllm_prompt_tokens_per_second", "window", "1s")))
	high, _ := page.Value("vllm_prompt_tokens_total")

	if err := sim.InjectFault(vllmsim.FaultSpec{Kind: vllmsim.FaultRestart}); err != nil {
		t.Fatal(err)
	}
	h.waitMetric("counter reset seen", func(m hardMetrics) (bool, string) {
		v, ok := m.Value("vllm_prompt_tokens_total")
		return ok && v < high, "no reset yet"
	})
	// For the next two windows' worth of scrapes (5s at 100ms) every page
	// stays sane: one page per new scrape, not per fixed sleep.
	scrapes, _ := h.metrics().Value("vllm_exporter_scrapes_total")
	for n := 0; n < 50; n++ {
		page := h.waitMetric("the next scrape", hardAtLeast("vllm_exporter_scrapes_total", scrapes+float64(n)+1))
		if v, _ := page.Value("vllm_up"); v != 1 {
			t.Fatalf("vllm_up = %v across a vLLM restart", v)
		}
		for name, mf := range page {
			if !strings.HasSuffix(name, "_per_second") && !strings.HasSuffix(name, "_ratio") {
				continue
			}
			for _, m := range mf.GetMetric() {
				if v := m.GetGauge().GetValue(); v < 0 || v != v {
					t.Fatalf("%s%v = %v after a counter reset", name, m.GetLabel(), v)
				}
			}
		}
	}
	h.stop()
	sim.Close()
	hardCheckLeaks(t, before, 32<<20)
}

// TestFaultBadConfigReload: a broken config file on reload (POST /-/reload
// and SIGHUP) keeps the running configuration and sets
// vllm_exporter_config_last_reload_successful 0; fixing the file and
// reloading sets it back to 1 with a newer timestamp.
func TestFaultBadConfigReload(t *testing.T) {
	before := hardSnapshot()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yml")
	// One SLO of our own: the watchdog exports it, so /metrics shows which
	// configuration is running.
	good := []byte("slos:\n  - name: harden-availability\n    source: server\n    kind: availability\n    objective: 0.995\n")
	if err := os.WriteFile(cfgPath, good, 0o644); err != nil {
		t.Fatal(err)
	}
	sim := vllmsimtest.StartLoaded(t, 7)
	h := hardStart(t, nil, append([]string{"--vllm.url=" + sim.URL(), "--config.file=" + cfgPath, "--slo.interval=100ms", "--web.enable-lifecycle"}, hardScrapeArgs...)...)
	if h.x == nil {
		t.Fatal("the harness did not see the wired exporter")
	}
	running := h.x.config.Get()
	page := h.waitMetric("initial load", hardAll(hardIs("vllm_exporter_config_last_reload_successful", 1),
		hardIs("vllm_slo_objective_ratio", 0.995, "slo", "harden-availability")))
	ts0, _ := page.Value("vllm_exporter_config_last_reload_success_timestamp_seconds")

	for _, bad := range []string{"slos: [\n", "no_such_section: 1\n", "probes: {}\n---\nslos: []\n"} {
		if err := os.WriteFile(cfgPath, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		code, body := h.post("/-/reload")
		if code != http.StatusInternalServerError || !strings.Contains(body, cfgPath) {
			t.Fatalf("reload of %q: %d %q, want 500 naming the file", bad, code, body)
		}
		if h.x.config.Get() != running {
			t.Fatalf("a failed reload replaced the running configuration")
		}
		h.waitMetric("reload failure exported", hardAll(hardIs("vllm_exporter_config_last_reload_successful", 0),
			hardIs("vllm_exporter_config_last_reload_success_timestamp_seconds", ts0), hardIs("vllm_up", 1)))
		// The running SLO is still evaluated after further ticks.
		evals, _ := h.metrics().Value("vllm_slo_last_evaluation_timestamp_seconds", "slo", "harden-availability")
		h.waitMetric("old SLO still evaluated", hardAll(hardIs("vllm_slo_objective_ratio", 0.995, "slo", "harden-availability"),
			func(m hardMetrics) (bool, string) {
				v, ok := m.Value("vllm_slo_last_evaluation_timestamp_seconds", "slo", "harden-availability")
				return ok && v > evals, "no newer evaluation of the running SLO"
			}))
	}
	if !strings.Contains(h.logs.String(), "config reload failed; keeping the running configuration") {
		t.Fatalf("failed reload not logged:\n%s", h.logs)
	}

	// The success timestamp must be able to move: the waits above (a newer
	// SLO evaluation, 100 ms apart) put the wall clock past ts0 already;
	// say so rather than sleep.
	if now := float64(time.Now().UnixNano()) / 1e9; !(now > ts0) {
		t.Fatalf("the clock (%v) is not past the first load (%v)", now, ts0)
	}
	if err := os.WriteFile(cfgPath, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, body := h.post("/-/reload"); code != http.StatusOK {
		t.Fatalf("reload of the fixed file: %d %s", code, body)
	}
	if h.x.config.Get() == running {
		t.Fatal("a successful reload kept the old configuration object")
	}
	page = h.waitMetric("reload success exported", hardIs("vllm_exporter_config_last_reload_successful", 1))
	if ts1, _ := page.Value("vllm_exporter_config_last_reload_success_timestamp_seconds"); !(ts1 > ts0) {
		t.Fatalf("success timestamp %v did not move past %v", ts1, ts0)
	}
	// GET is not a reload.
	reloaded := h.x.config.Get()
	if code, _ := h.get("/-/reload"); code == http.StatusOK || h.x.config.Get() != reloaded {
		t.Fatalf("GET /-/reload answered %d and reloaded: only POST may", code)
	}
	h.stop()
	sim.Close()
	hardCheckLeaks(t, before, 32<<20)
}

// TestFaultNVMLMissing: on a machine without libnvidia-ml (this CI box, any
// CPU-only pod) the GPU collector reports itself down and everything else
// is served. Skipped where NVML loads (a GPU host).
func TestFaultNVMLMissing(t *testing.T) {
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		t.Skip("an NVIDIA driver is present")
	}
	before := hardSnapshot()
	sim := vllmsimtest.StartLoaded(t, 7)
	h := hardStart(t, nil, append([]string{"--vllm.url=" + sim.URL()}, hardScrapeArgs...)...)
	page := h.waitMetric("vLLM up", hardIs("vllm_up", 1))
	t.Logf("GPU collector registered: %v", h.x.gpu != nil)
	if h.x.gpu == nil {
		// A build without NVML (CGO_ENABLED=0 or -tags nonvml) has no GPU collector at all.
		if _, ok := page.Value("vllm_exporter_collector_up", "collector", "gpu"); ok {
			t.Fatal("a build without NVML exports a gpu collector")
		}
	} else {
		h.waitMetric("GPU collector down", hardIs("vllm_exporter_collector_up", 0, "collector", "gpu"))
		if !strings.Contains(h.logs.String(), "NVML is unavailable") {
			t.Fatalf("NVML missing not logged:\n%s", h.logs)
		}
		if n := strings.Count(h.logs.String(), "NVML is unavailable"); n != 1 {
			t.Fatalf("NVML missing logged %d times, want once", n)
		}
	}
	h.stop()
	sim.Close()
	hardCheckLeaks(t, before, 32<<20)
}

// hardProbeConfig is a config file with one fast probe profile.
const hardProbeConfig = `probes:
  max_requests_per_minute: 600
  profiles:
    - name: fast
      endpoint: completions
      input_tokens: 16
      output_tokens: 8
      interval: 1s
      timeout: 900ms
      jitter: 0s
`

// TestFaultStreamCutMidProbe: vLLM cuts the SSE stream of a probe after two
// chunks (connection closed, no [DONE]). The probe fails with reason
// stream_error, vllm_probe_last_success drops to 0, the scraper and the
// rest of /metrics are unaffected, and probes succeed again once the fault
// clears; no goroutine of an abandoned stream is left behind.
func TestFaultStreamCutMidProbe(t *testing.T) {
	before := hardSnapshot()
	cfg := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(cfg, []byte(hardProbeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	sim := vllmsimtest.StartLoaded(t, 7)
	h := hardStart(t, nil, append([]string{"--vllm.url=" + sim.URL(), "--config.file=" + cfg}, hardScrapeArgs...)...)
	if h.x.probes == nil {
		t.Skip("no probes in this build")
	}
	h.waitMetric("a probe succeeded", hardAll(hardIs("vllm_up", 1), hardIs("vllm_probe_last_success", 1, "profile", "fast")))

	if err := sim.InjectFault(vllmsim.FaultSpec{Kind: vllmsim.FaultStreamCut, AfterChunks: 2}); err != nil {
		t.Fatal(err)
	}
	page := h.waitMetric("cut streams counted", hardAll(hardAtLeast("vllm_probe_failures_total", 2, "profile", "fast", "reason", "stream_error"),
		hardIs("vllm_probe_last_success", 0, "profile", "fast")))
	if v, _ := page.Value("vllm_up"); v != 1 {
		t.Fatalf("vllm_up = %v while only probe streams are cut", v)
	}
	if code, _ := h.get("/-/healthy"); code != http.StatusOK {
		t.Fatalf("/-/healthy = %d", code)
	}
	sim.ClearFault(vllmsim.FaultStreamCut)
	h.waitMetric("probes recover", hardIs("vllm_probe_last_success", 1, "profile", "fast"))
	h.stop()
	sim.Close()
	hardCheckLeaks(t, before, 32<<20)
}

// TestReloadIsAtomic: while POST /-/reload and SIGHUP-equivalent reloads
// swap between two valid files (each written by rename, as a ConfigMap
// update does), every reader sees one whole configuration, never a mix,
// and /metrics keeps answering.
func TestReloadIsAtomic(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yml")
	doc := func(prefix string, n int) []byte {
		var b strings.Builder
		b.WriteString("slos:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - name: %s-%d\n    source: server\n    kind: availability\n    objective: 0.99\n", prefix, i)
		}
		return []byte(b.String())
	}
	docs := [][]byte{doc("a", 2), doc("b", 5)}
	write := func(b []byte) {
		tmp := cfg + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfg); err != nil {
			t.Fatal(err)
		}
	}
	write(docs[0])
	sim := vllmsimtest.StartLoaded(t, 7)
	h := hardStart(t, nil, append([]string{"--vllm.url=" + sim.URL(), "--config.file=" + cfg, "--no-probe.enabled", "--web.enable-lifecycle"}, hardScrapeArgs...)...)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var torn atomic.Int64
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Microsecond):
				}
				f := h.x.config.Get()
				want := map[byte]int{'a': 2, 'b': 5}[f.SLOs[0].Name[0]]
				if len(f.SLOs) != want {
					torn.Add(1)
				}
				for _, s := range f.SLOs {
					if s.Name[0] != f.SLOs[0].Name[0] {
						torn.Add(1)
					}
				}
			}
		})
	}
	for i := range 40 {
		write(docs[i%2])
		if i%2 == 0 {
			if code, body := h.post("/-/reload"); code != http.StatusOK {
				t.Fatalf("reload %d: %d %s", i, code, body)
			}
		} else if err := reload(h.x.config, h.x.logger); err != nil { // what SIGHUP runs
			t.Fatalf("reload %d: %v", i, err)
		}
		h.metrics()
	}
	close(stop)
	wg.Wait()
	if n := torn.Load(); n != 0 {
		t.Fatalf("%d reads saw a mix of two configurations", n)
	}
	h.waitMetric("last reload ok", hardIs("vllm_exporter_config_last_reload_successful", 1))
}
