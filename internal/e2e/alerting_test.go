package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// shippedPrometheusGlobal returns the global section of
// deploy/prometheus/prometheus.yml (scrape and evaluation intervals as
// shipped) and its evaluation interval.
func shippedPrometheusGlobal(t *testing.T) (map[string]any, time.Duration) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.ModuleRoot(t), "deploy", "prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Global map[string]any `yaml:"global"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	s, _ := cfg.Global["evaluation_interval"].(string)
	eval, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("shipped prometheus.yml: evaluation_interval %q: %v", s, err)
	}
	return cfg.Global, eval
}

// alerting is a real Alertmanager and a real Prometheus sending to it.
type alerting struct {
	hook       *webhook
	am, prom   *proc
	amURL      string
	pc         promClient
	ruleFiles  []string
	procsAlive []*proc
}

// startAlerting starts Alertmanager with amCfg and Prometheus with the
// given global section, rule files and scrape targets (host:port, job
// "vllm"), and waits until both are ready.
func startAlerting(t *testing.T, hook *webhook, amCfg []byte, global map[string]any, ruleFiles, targets []string, extra ...*proc) *alerting {
	t.Helper()
	a := startAlertingNoWait(t, "", hook, amCfg, global, nil, ruleFiles, targets, extra...)
	a.waitReady(t)
	return a
}

// startAlertingNoWait is startAlerting without the wait; name suffixes the
// process names, scrape holds extra fields of the vllm job's scrape config
// (the histogram mode).
func startAlertingNoWait(t *testing.T, name string, hook *webhook, amCfg []byte, global, scrape map[string]any, ruleFiles, targets []string, extra ...*proc) *alerting {
	t.Helper()
	amBin := RequireTool(t, "alertmanager")
	if name != "" {
		name = "-" + name
	}
	dir := t.TempDir()
	a := &alerting{hook: hook, ruleFiles: ruleFiles}
	amPort := freePort(t)
	amPath := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(amPath, amCfg, 0o644); err != nil {
		t.Fatal(err)
	}
	a.am = startProc(t, "alertmanager"+name, amBin, "--config.file="+amPath, "--storage.path="+filepath.Join(dir, "am"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", amPort), "--cluster.listen-address=", "--log.level=debug")
	a.amURL = fmt.Sprintf("http://127.0.0.1:%d", amPort)

	a.prom, a.pc = startPrometheus(t, "prometheus"+name, global, scrape, ruleFiles, targets, fmt.Sprintf("127.0.0.1:%d", amPort))
	a.procsAlive = append([]*proc{a.am, a.prom}, extra...)
	return a
}

// startPrometheus starts Prometheus with the given global section, rule
// files and scrape targets (host:port, job "vllm"; scrape holds extra fields
// of the job: the histogram mode), sending alerts to alertmanager
// (host:port; "" for none). It does not wait for it to be ready.
func startPrometheus(t *testing.T, name string, global, scrape map[string]any, ruleFiles, targets []string, alertmanager string) (*proc, promClient) {
	t.Helper()
	promBin := RequireTool(t, "prometheus")
	dir := t.TempDir()
	promPort := freePort(t)
	promCfg := filepath.Join(dir, "prometheus.yml")
	scrapeCfgs := []any{}
	if len(targets) > 0 {
		job := map[string]any{
			"job_name":       "vllm",
			"static_configs": []any{map[string]any{"targets": targets}}}
		for k, v := range scrape {
			job[k] = v
		}
		scrapeCfgs = append(scrapeCfgs, job)
	}
	cfg := map[string]any{"global": global, "rule_files": ruleFiles, "scrape_configs": scrapeCfgs}
	if alertmanager != "" {
		cfg["alerting"] = map[string]any{"alertmanagers": []any{map[string]any{
			"static_configs": []any{map[string]any{"targets": []string{alertmanager}}}}}}
	}
	cb, _ := yaml.Marshal(cfg)
	if err := os.WriteFile(promCfg, cb, 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, name, promBin, "--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(dir, "prom"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort), "--log.level=info")
	return p, promClient{base: fmt.Sprintf("http://127.0.0.1:%d", promPort)}
}

// waitReady waits until Alertmanager and Prometheus answer ready.
func (a *alerting) waitReady(t *testing.T) {
	t.Helper()
	waitFor(t, "alertmanager ready", time.Minute, a.procsAlive, httpOK(a.amURL+"/-/ready"))
	waitFor(t, "prometheus ready", time.Minute, a.procsAlive, httpOK(a.pc.base+"/-/ready"))
}

// arrivals returns when notifications carrying a firing alert named
// alertname reached path.
func (w *webhook) arrivals(path, alertname string) []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Time
	for _, n := range w.seen {
		if n.Path != path {
			continue
		}
		for _, a := range n.Alerts {
			if a.Status == "firing" && a.Labels["alertname"] == alertname {
				out = append(out, n.Received)
				break
			}
		}
	}
	return out
}

func gaps(ts []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(ts); i++ {
		out = append(out, ts[i].Sub(ts[i-1]))
	}
	return out
}

// checkHeartbeat asserts that the Watchdog reached the heartbeat receiver
// every minute, within one evaluation interval, at least minGaps times.
func checkHeartbeat(t *testing.T, hook *webhook, eval time.Duration, minGaps int) []time.Duration {
	t.Helper()
	g := gaps(hook.arrivals("/heartbeat", "Watchdog"))
	var s []string
	for _, d := range g {
		s = append(s, d.Round(100*time.Millisecond).String())
	}
	t.Logf("heartbeat intervals at the webhook: %s", strings.Join(s, " "))
	if len(g) < minGaps {
		t.Fatalf("%d heartbeat intervals seen, want >= %d", len(g), minGaps)
	}
	for i, d := range g {
		if d < time.Minute-eval || d > time.Minute+eval {
			t.Errorf("heartbeat interval %d is %v, want 1m +- %v (one evaluation interval)", i+1, d.Round(time.Second), eval)
		}
	}
	return g
}
