package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// timeToPageConfig is the shipped SLO set (30d period, so the shipped
// windows, and the default min_events), except the e2e threshold: the
// simulator's requests last seconds, so a 10x slowdown does not push half
// of them past the shipped 60s; 10s does.
const timeToPageConfig = `
slos:
  - {name: ttft-p99, source: server, kind: latency, metric: ttft, threshold: 1.0, objective: 0.99}
  - {name: tpot-p99, source: server, kind: latency, metric: tpot, threshold: 0.1, objective: 0.99}
  - {name: e2e-p99, source: server, kind: latency, metric: e2e, threshold: 10, objective: 0.99}
  - {name: preemption, source: server, kind: preemption, threshold: 0.01}
  - {name: availability, source: server, kind: availability, objective: 0.999}
`

// TestTimeToPage measures, end to end and at the shipped timing, how long a
// hard breach takes to page: simulated vLLM -> exporter (default scrape
// interval) -> a real Prometheus with the shipped global section (15s
// scrapes, 30s evaluations) and the rules `vllm_exporter rules` generates ->
// a real Alertmanager with the shipped routing and waits (group_wait 30s;
// only the receiver URLs point at the test's webhook). Three simulated
// servers, one model each, run healthy for the fast tier's 5-minute window,
// then all break at once: "slow-m" 10x slower engine steps (TTFT, TPOT and
// e2e), "kv-m" a KV-cache-exhaustion preemption storm, "abort-m" 60% of
// requests aborted by the engine. It prints the seconds from the breach to
// the page at the pager receiver for each of the five SLOs and requires 3
// minutes at most; nothing may page while healthy, and the heartbeat must
// arrive every minute throughout (requirement of a dead-man's switch).
func TestTimeToPage(t *testing.T) {
	if testing.Short() {
		t.Skip("time-to-page test takes about 9 minutes")
	}
	t.Parallel()
	RequireTool(t, "prometheus")
	RequireTool(t, "alertmanager")
	exporterBin, simBin := binaries(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfg, []byte(timeToPageConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	rulesDir := filepath.Join(dir, "rules")
	if err := os.Mkdir(rulesDir, 0o755); err != nil {
		t.Fatal(err)
	}
	runCmd(t, exporterBin, "rules", "--config.file="+cfg, "--rules.output-dir="+rulesDir)
	ruleFiles, _ := filepath.Glob(filepath.Join(rulesDir, "*.yml"))
	sort.Strings(ruleFiles)
	if len(ruleFiles) != 3 {
		t.Fatalf("vllm_exporter rules --rules.output-dir wrote %v", ruleFiles)
	}

	type server struct {
		model, simURL string
		targets       string
		breach        map[string]any
	}
	servers := []*server{
		{model: "slow-m", breach: map[string]any{"scenario": "throttled", "step_factor": 10, "load": map[string]any{"rate": 2}}},
		{model: "kv-m", breach: map[string]any{"scenario": "kv_exhausted"}},
		{model: "abort-m", breach: map[string]any{"scenario": "healthy", "abort_fraction": 0.6, "load": map[string]any{"rate": 1}}},
	}
	var procs []*proc
	var targets []string
	for i, s := range servers {
		simPort := freePort(t)
		s.simURL = fmt.Sprintf("http://127.0.0.1:%d", simPort)
		// healthy at 2 requests/s (slow-m: a 10x slowdown then queues
		// them, so TTFT breaks too), 1/s (abort-m) and 0.5/s (kv-m, so its
		// preemption storm, about half a preemption per finished request,
		// shows in the 5-minute window as fast as the others)
		rate := map[string]string{"slow-m": "2", "kv-m": "0.5", "abort-m": "1"}[s.model]
		sim := startProc(t, "vllm-sim-"+s.model, simBin, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", simPort),
			"--served-model-name="+s.model, fmt.Sprintf("--seed=%d", 40+i), "--scenario=healthy", "--load.rate="+rate)
		waitFor(t, s.model+" /health", 30*time.Second, []*proc{sim}, httpOK(s.simURL+"/health"))
		expPort := freePort(t)
		exp := startProc(t, "vllm_exporter-"+s.model, exporterBin, "--vllm.url="+s.simURL,
			fmt.Sprintf("--web.listen-address=127.0.0.1:%d", expPort), "--config.file="+cfg)
		waitFor(t, s.model+" exporter ready", 30*time.Second, []*proc{sim, exp}, httpOK(fmt.Sprintf("http://127.0.0.1:%d/-/ready", expPort)))
		procs = append(procs, sim, exp)
		targets = append(targets, fmt.Sprintf("127.0.0.1:%d", expPort))
	}
	hook := newWebhook(t)
	global, eval := shippedPrometheusGlobal(t)
	a := startAlerting(t, hook, shippedAlertmanagerConfig(t, hook.srv.URL, false), global, ruleFiles, targets, procs...)
	waitFor(t, "exporter targets up", time.Minute, a.procsAlive, func() error {
		res, err := a.pc.query(`count(up{job="vllm"} == 1)`)
		if err == nil && (len(res) == 0 || res[0].Value[1] != "3") {
			err = fmt.Errorf("targets up: %v", res)
		}
		return err
	})
	start := time.Now()

	// Healthy for the fast tier's long window (plus two evaluations), so
	// the 5m window is at steady state when the breach starts.
	const warm = 5*time.Minute + time.Minute
	waitFor(t, "healthy warm-up", warm+time.Minute, a.procsAlive, func() error {
		if n, ok := hook.find(start, "firing", map[string]string{"severity": "critical"}); ok {
			t.Fatalf("paged while healthy: %+v\n%s", n, hook.summary())
		}
		if d := time.Since(start); d < warm {
			return fmt.Errorf("%v of %v", d.Round(time.Second), warm)
		}
		return nil
	})
	res, err := a.pc.query(`slo:sli_events:increase5m`)
	if err != nil || len(res) < 5 {
		t.Fatalf("5m event records before the breach: %v %v", res, err)
	}

	breach := time.Now()
	for _, s := range servers {
		if err := postJSON(s.simURL+"/admin/scenario", s.breach); err != nil {
			t.Fatal(err)
		}
	}
	// Each SLO is hard-breached (half its events bad or more) on at least
	// one of the servers (TTFT on slow-m and kv-m, e2e on both too); the
	// time to page is that of its first page.
	slos := []string{"ttft-p99", "tpot-p99", "e2e-p99", "preemption", "availability"}
	paged := map[string]notification{}
	waitFor(t, "a page per SLO at the pager", 6*time.Minute, a.procsAlive, func() error {
		var missing []string
		for _, slo := range slos {
			if _, ok := paged[slo]; ok {
				continue
			}
			n, ok := hook.find(breach, "firing", map[string]string{"alertname": "VLLMSLOBurnRatePage", "slo": slo})
			if ok && n.Path == "/pager" {
				paged[slo] = n
				continue
			}
			missing = append(missing, slo)
		}
		if len(missing) > 0 {
			return fmt.Errorf("not paged yet: %v", missing)
		}
		return nil
	})
	var lines []string
	for _, slo := range slos {
		n := paged[slo]
		var models []string
		for _, al := range n.Alerts {
			if al.Labels["slo"] == slo && al.Status == "firing" {
				models = append(models, al.Labels["model"])
			}
		}
		took := n.Received.Sub(breach)
		lines = append(lines, fmt.Sprintf("  %-13s %5.0f s  (%s)", slo, took.Seconds(), strings.Join(models, ",")))
		if took > 3*time.Minute {
			t.Errorf("%s paged %v after the breach, want within 3 minutes", slo, took.Round(time.Second))
		}
	}
	t.Logf("time to page at the shipped timing (breach -> webhook):\n%s", strings.Join(lines, "\n"))
	// the 6-minute warm-up alone holds five intervals
	checkHeartbeat(t, hook, eval, 5)
	if t.Failed() {
		t.Logf("notifications:\n%s", hook.summary())
	}
}
