package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/modelset"
	"github.com/vllm-exporter/vllm_exporter/slo"
)

func TestRulesCommandDefaultMatchesCheckedInFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "rules.yml")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"rules", "--rules.output=" + out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../alerts/slo-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("`vllm_exporter rules` output differs from alerts/slo-rules.yml")
	}
}

func TestRulesCommandFileAndErrors(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yml")
	os.WriteFile(cfg, []byte("slos:\n- {name: a, kind: availability, objective: 0.99}\n"), 0o600)
	outFile := filepath.Join(dir, "out.yml")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"rules", "--config.file=" + cfg, "--rules.output=" + outFile, `--rules.selector=job="vllm"`}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, _ := os.ReadFile(outFile)
	if !strings.Contains(string(b), `vllm_requests_finished_total{job="vllm"}`) || !strings.Contains(string(b), "from "+cfg) {
		t.Fatalf("output:\n%s", b)
	}
	os.WriteFile(cfg, []byte("slos:\n- {name: a, kind: latency, metric: ttft, threshold: 0.3, objective: 0.99}\n"), 0o600)
	app := kingpin.New("x", "")
	rc := addRulesFlags(app.Command("rules", ""))
	if _, err := app.Parse([]string{"rules"}); err != nil {
		t.Fatal(err)
	}
	if err := rc.run(cfg, &stdout); err == nil || !strings.Contains(err.Error(), "threshold: 0.3 is not a bucket boundary") {
		t.Fatalf("bad config: %v", err)
	}
}

func TestSetupSLO(t *testing.T) {
	app := kingpin.New("vllm_exporter", "")
	f := addSLOFlags(app)
	state := filepath.Join(t.TempDir(), "s.json")
	if _, err := app.Parse([]string{"--slo.interval=5s", "--slo.state-file=" + state}); err != nil {
		t.Fatal(err)
	}
	h, err := config.NewHolder("")
	if err != nil {
		t.Fatal(err)
	}
	w, err := setupSLO(f, h, slo.Sources{}, modelset.Limits{}, log.NewNopLogger())
	if err != nil || w == nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(w)
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	if err := w.SaveState(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(state); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Parse([]string{"--slo.interval=0s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := setupSLO(f, h, slo.Sources{}, modelset.Limits{}, log.NewNopLogger()); err == nil {
		t.Fatal("zero interval accepted")
	}
}

// `vllm_exporter rules` renders every shipped copy: --rules.output-dir the
// rule files of alerts/, --format=prometheusrule the Kubernetes manifest;
// --rules.dashboard-url and --rules.runbook-url change the links.
func TestRulesCommandRendersEveryShippedCopy(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"rules", "--rules.output-dir=" + dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	shipped, _ := filepath.Glob("../../alerts/*.yml")
	if len(shipped) < 3 {
		t.Fatalf("shipped rule files: %v", shipped)
	}
	for _, p := range shipped {
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(filepath.Join(dir, filepath.Base(p)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("--rules.output-dir %s differs from alerts/%s (%v)", filepath.Base(p), filepath.Base(p), err)
		}
	}
	out := filepath.Join(dir, "pr.yaml")
	if code := run([]string{"rules", "--format=prometheusrule", "--rules.output=" + out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got, _ := os.ReadFile(out)
	want, _ := os.ReadFile("../../deploy/kubernetes/prometheusrule.yaml")
	if !bytes.Equal(got, want) {
		t.Error("--format=prometheusrule differs from deploy/kubernetes/prometheusrule.yaml")
	}
	if code := run([]string{"rules", "--format=prometheusrule", "--rules.output=" + out, "--rules.dashboard-url=https://grafana.example.com", "--rules.runbook-url=https://wiki.example.com/rb"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got, _ = os.ReadFile(out)
	for _, s := range []string{"https://grafana.example.com/d/vllm-exporter-slos?var-model=", "https://wiki.example.com/rb#vllmenginestalled", "https://grafana.example.com/d/vllm-exporter-gpu"} {
		if !strings.Contains(string(got), s) {
			t.Errorf("custom links: output lacks %s", s)
		}
	}
	if strings.Contains(string(got), "localhost:3000") || strings.Contains(string(got), "github.com/vllm-exporter/vllm_exporter/blob") {
		t.Error("custom links: a default link is left")
	}
	if code := run([]string{"rules", "--rules.dashboard-url=grafana"}, &stdout, &stderr); code != 1 {
		t.Errorf("bad dashboard URL: exit %d", code)
	}
}
