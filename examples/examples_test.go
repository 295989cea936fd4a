// Package examples holds no code: its tests check that the example files
// work with the real programs (the exporter's config loader and flag
// parser, systemd, promtool). The compose file and the KEDA ScaledObject are
// checked against their schemas in deploy/validate.
package examples

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/e2e"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBinaries()
	os.Exit(code)
}

// Every example configuration loads with the exporter's own loader (strict:
// unknown keys are errors), including the ones inside the Helm chart's
// values files.
func TestConfigExamplesLoad(t *testing.T) {
	f, err := config.Load("config.yml")
	if err != nil {
		t.Fatal(err)
	}
	// The commented example shows every section with a non-default value.
	if f.Probes.Model == "" || len(f.Probes.Profiles) < 2 {
		t.Errorf("config.yml should show a served model and several probe profiles: %+v", f.Probes)
	}
	if reflect.DeepEqual(f.SLOs, config.DefaultSLOs()) {
		t.Error("config.yml should show SLOs of its own")
	}
	if f.Bottleneck.DailyRequests == 0 {
		t.Error("config.yml should show the bottleneck section (daily_requests)")
	}
	if _, err := config.Load("compose/exporter.yml"); err != nil {
		t.Error(err)
	}
	values, _ := filepath.Glob("../deploy/helm/vllm-exporter/ci/*-values.yaml")
	values = append(values, "../deploy/helm/vllm-exporter/values.yaml")
	for _, p := range values {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Config map[string]any `yaml:"config"`
		}
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(v.Config) == 0 {
			continue
		}
		body, _ := yaml.Marshal(v.Config)
		if _, err := config.Parse(body, p+" config:"); err != nil {
			t.Error(err)
		}
	}
}

// unitFile is a parsed systemd unit: section -> key -> values in order.
type unitFile map[string]map[string][]string

// parseUnit reads systemd's unit syntax: [Section], Key=Value, comments,
// and lines continued with a trailing backslash.
func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	var pending string
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if pending != "" {
			line = pending + " " + line
			pending = ""
		}
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			pending = strings.TrimSuffix(line, `\`)
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			t.Fatalf("%s:%d: not Key=Value in a section: %q", path, n, line)
		}
		u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
	}
	return u
}

// The systemd unit starts the exporter with flags it accepts, a config
// file that loads, and a state file in the directory systemd creates; and
// systemd itself finds nothing wrong with it.
func TestSystemdUnit(t *testing.T) {
	u := parseUnit(t, "vllm_exporter.service")
	svc := u["Service"]
	if len(svc["ExecStart"]) != 1 {
		t.Fatalf("ExecStart = %v", svc["ExecStart"])
	}
	argv := strings.Fields(svc["ExecStart"][0])
	if argv[0] != "/usr/local/bin/vllm_exporter" {
		t.Errorf("ExecStart runs %s", argv[0])
	}
	if got := svc["ExecReload"]; len(got) != 1 || !strings.Contains(got[0], "-HUP $MAINPID") {
		t.Errorf("ExecReload = %v, want a SIGHUP to the exporter (its reload signal)", got)
	}
	if len(svc["StateDirectory"]) != 1 || len(u["Install"]["WantedBy"]) != 1 {
		t.Errorf("want StateDirectory and [Install] WantedBy: %v", u)
	}
	// The flags parse and the config file is valid: run the exporter with
	// ExecStart's arguments plus --config.check, the installed config path
	// pointing at examples/config.yml (what the install steps copy there)
	// and the state file in a directory that exists, as StateDirectory's
	// does when the unit runs (the check refuses a missing directory).
	stateDir := "/var/lib/" + svc["StateDirectory"][0] + "/"
	var args []string
	for _, a := range argv[1:] {
		switch {
		case a == "--config.file=/etc/vllm_exporter/config.yml":
			a = "--config.file=config.yml"
		case strings.HasPrefix(a, "--slo.state-file="):
			file, ok := strings.CutPrefix(strings.TrimPrefix(a, "--slo.state-file="), stateDir)
			if !ok {
				t.Errorf("%s is outside StateDirectory %s (the rest of the file system is read-only)", a, stateDir)
			}
			a = "--slo.state-file=" + filepath.Join(t.TempDir(), file)
		}
		args = append(args, a)
	}
	bin := testutil.ExporterBinary(t)
	out, err := exec.Command(bin, append(args, "--config.check")...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "config.yml is valid") {
		t.Fatalf("exporter %v --config.check: %v\n%s", args, err, out)
	}

	analyze := e2e.RequireTool(t, "systemd-analyze")
	body, err := os.ReadFile("vllm_exporter.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "vllm_exporter.service")
	if err := os.WriteFile(unit, bytes.ReplaceAll(body, []byte("/usr/local/bin/vllm_exporter"), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", unit)
	cmd.Dir = t.TempDir()
	out, err = cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), filepath.Base(unit)) {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// The compose example's Prometheus configuration is valid and loads the
// shipped rules from where compose mounts them (../alerts at rules/).
func TestComposePrometheusConfig(t *testing.T) {
	promtool := e2e.RequireTool(t, "promtool")
	dir := t.TempDir()
	b, err := os.ReadFile("compose/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	alerts, err := filepath.Abs("../alerts")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(alerts, filepath.Join(dir, "rules")); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "config", filepath.Join(dir, "prometheus.yml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	rules, _ := filepath.Glob("../alerts/*.yml")
	if !strings.Contains(string(out), "SUCCESS") || strings.Count(string(out), "rules found") != len(rules) {
		t.Errorf("promtool did not load the %d rule files:\n%s", len(rules), out)
	}
}
