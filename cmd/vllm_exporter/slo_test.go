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
	"github.com/vllm-exporter/vllm_exporter/slo"
)

func TestRulesCommandDefaultMatchesCheckedInFile(t *testing.T) {
	app := kingpin.New("vllm_exporter", "")
	rc := addRulesCommand(app)
	if _, err := app.Parse([]string{"rules"}); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := rc.run("", &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want, err := os.ReadFile("../../alerts/slo-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatal("`vllm_exporter rules` output differs from alerts/slo-rules.yml")
	}
}

func TestRulesCommandFileAndErrors(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yml")
	os.WriteFile(cfg, []byte("slos:\n- {name: a, kind: availability, objective: 0.99}\n"), 0o600)
	outFile := filepath.Join(dir, "out.yml")
	app := kingpin.New("vllm_exporter", "")
	rc := addRulesCommand(app)
	if _, err := app.Parse([]string{"rules", "--rules.output=" + outFile, `--rules.selector=job="vllm"`}); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := rc.run(cfg, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	b, _ := os.ReadFile(outFile)
	if !strings.Contains(string(b), `vllm_requests_finished_total{job="vllm"}`) || !strings.Contains(string(b), "from "+cfg) {
		t.Fatalf("output:\n%s", b)
	}
	os.WriteFile(cfg, []byte("slos:\n- {name: a, kind: latency, metric: ttft, threshold: 0.3, objective: 0.99}\n"), 0o600)
	errb.Reset()
	if code := rc.run(cfg, &out, &errb); code != 1 || !strings.Contains(errb.String(), "threshold: 0.3 is not a bucket boundary") {
		t.Fatalf("bad config: exit %d %s", code, errb.String())
	}
}

func TestConfigCheck(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runConfigCheck("", &out, &errb); code != 0 || !strings.Contains(out.String(), "OK") {
		t.Fatalf("default: %d %s %s", code, out.String(), errb.String())
	}
	if code := runConfigCheck(filepath.Join(t.TempDir(), "missing.yml"), &out, &errb); code != 1 {
		t.Fatal("missing file passed")
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
	reg := prometheus.NewPedanticRegistry()
	w, err := setupSLO(f, h, slo.Sources{}, reg, log.NewNopLogger())
	if err != nil || w == nil {
		t.Fatal(err)
	}
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
	if _, err := setupSLO(f, h, slo.Sources{}, prometheus.NewRegistry(), log.NewNopLogger()); err == nil {
		t.Fatal("zero interval accepted")
	}
}
