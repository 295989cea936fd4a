package deploy

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/e2e"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// warnLine matches a warning in the logfmt or JSON logs of Prometheus and
// Alertmanager (slog: level=WARN; go-kit before: level=warn) and in the
// checkers' output ("WARNING").
var warnLine = regexp.MustCompile(`(?i)level=warn|"level":"warn|\bwarning\b`)

// shutdownLine is the one warning the test itself causes: Prometheus 3
// logs the SIGTERM that stops it at level=WARN ("Received an OS signal,
// exiting gracefully..."), after the config and rules loaded. It says
// nothing about the config, so it is not counted.
var shutdownLine = regexp.MustCompile(`msg="Received an OS signal, exiting gracefully\.\.\."`)

func warnings(out string) []string {
	var w []string
	for _, l := range strings.Split(out, "\n") {
		if warnLine.MatchString(l) && !shutdownLine.MatchString(l) {
			w = append(w, l)
		}
	}
	return w
}

// The shipped deploy/prometheus/prometheus.yml (with the rules it loads)
// and deploy/alertmanager/alertmanager.yml load without a single warning on
// every pinned Prometheus (3.16, 3.5 LTS) and Alertmanager (0.31): checked
// by promtool and amtool, and by starting each server on the file until it
// is ready. A warning at load is what an operator sees first (Alertmanager
// 0.31 warned about the heartbeat route's repeat_interval).
func TestDeployConfigsLoadWithoutWarnings(t *testing.T) {
	for _, v := range e2e.ToolVersions(t, "prometheus") {
		t.Run("prometheus-"+v, func(t *testing.T) {
			checkClean(t, "promtool "+v+" check config", e2e.RequireToolVersion(t, "promtool", v),
				"check", "config", "--lint=all", "prometheus/prometheus.yml")

			p := testutil.StartBinary(t, e2e.RequireToolVersion(t, "prometheus", v),
				"--config.file=prometheus/prometheus.yml",
				"--storage.tsdb.path="+filepath.Join(t.TempDir(), "data"))
			p.WaitServing("/-/ready", 200)
			// Ready means the config and every rule file loaded.
			_, body := p.Get("/api/v1/rules")
			var rules struct {
				Data struct {
					Groups []struct{ Name string } `json:"groups"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(body), &rules); err != nil || len(rules.Data.Groups) == 0 {
				t.Errorf("prometheus %s loaded no rule groups from the shipped config: %v\n%.500s", v, err, body)
			}
			stopLoadedClean(t, "prometheus "+v, p)
		})
	}
	for _, v := range e2e.ToolVersions(t, "alertmanager") {
		t.Run("alertmanager-"+v, func(t *testing.T) {
			checkClean(t, "amtool "+v+" check-config", e2e.RequireToolVersion(t, "amtool", v),
				"check-config", "alertmanager/alertmanager.yml")

			// No cluster: a test binds no fixed port (9094).
			p := testutil.StartBinary(t, e2e.RequireToolVersion(t, "alertmanager", v),
				"--config.file=alertmanager/alertmanager.yml",
				"--storage.path="+t.TempDir(),
				"--cluster.listen-address=")
			p.WaitServing("/-/ready", 200)
			stopLoadedClean(t, "alertmanager "+v, p)
		})
	}
}

// The warning matcher catches the warning Alertmanager 0.31 logged for the
// old heartbeat route, and the forms promtool and Prometheus use.
func TestWarningsMatcher(t *testing.T) {
	for _, l := range []string{
		`time=2026-11-25T19:00:00.000Z level=WARN source=main.go:536 msg="repeat_interval is less than group_interval. Notifications will not repeat until the next group_interval." repeat_interval=30s group_interval=1m0s route="{}/{alertname=\"Watchdog\"}"`,
		`ts=2023-01-01T00:00:00Z caller=main.go:1 level=warn msg="x"`,
		`{"time":"2026-11-25T19:00:00Z","level":"WARN","msg":"x"}`,
		`  WARNING: 1 rule(s) have no "for" clause`,
		`time=2026-11-25T20:57:42.823Z level=WARN source=main.go:1301 msg="Received SIGHUP, reloading" signal=hangup`,
	} {
		if len(warnings(l)) != 1 {
			t.Errorf("not a warning: %s", l)
		}
	}
	for _, l := range []string{
		`time=2026-11-25T19:00:00.000Z level=INFO source=coordinator.go:125 msg="Completed loading of configuration file"`,
		`SUCCESS: prometheus/prometheus.yml is valid prometheus config file syntax`,
		// Prometheus 3.16 and 3.5 on the SIGTERM the test sends.
		`time=2026-11-25T20:57:42.823Z level=WARN source=main.go:1301 msg="Received an OS signal, exiting gracefully..." signal=terminated`,
	} {
		if len(warnings(l)) != 0 {
			t.Errorf("taken for a warning: %s", l)
		}
	}
}

// checkClean runs a tool's check of a config (bin args...) and fails the
// test on an error or on a warning in its output.
func checkClean(t *testing.T, what, bin string, args ...string) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
	if w := warnings(string(out)); len(w) > 0 {
		t.Errorf("%s warns:\n%s", what, strings.Join(w, "\n"))
	}
}

// stopLoadedClean stops the server p with SIGTERM (its exit status is not
// the point: the logs are) and checks that its logs say the configuration
// loaded, without a warning.
func stopLoadedClean(t *testing.T, what string, p *testutil.Process) {
	t.Helper()
	p.Cmd.Process.Signal(syscall.SIGTERM)
	p.Wait(30 * time.Second)
	logs := p.Logs.String()
	if !strings.Contains(logs, "Completed loading of configuration file") {
		t.Errorf("%s never logged loading the config:\n%s", what, logs)
	}
	if w := warnings(logs); len(w) > 0 {
		t.Errorf("%s warns loading the shipped config:\n%s", what, strings.Join(w, "\n"))
	}
}
