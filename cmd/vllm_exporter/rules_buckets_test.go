package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `vllm_exporter rules` takes the bucket bounds from the config: a TTFT
// threshold that only vLLM's --custom-histogram-buckets has is refused
// without histogram_buckets and compiled into an le matcher with it.
func TestRulesCommandTakesBoundsFromConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yml")
	slo := "slos:\n- {name: fast, kind: latency, metric: ttft, threshold: 0.35, objective: 0.99}\n"
	os.WriteFile(cfg, []byte(slo), 0o600)
	out := filepath.Join(dir, "out.yml")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"rules", "--config.file=" + cfg, "--rules.output=" + out}, &stdout, &stderr); code == 0 {
		t.Fatal("threshold 0.35 accepted without histogram_buckets")
	}
	os.WriteFile(cfg, []byte("histogram_buckets:\n  ttft: [0.05, 0.1, 0.2, 0.35, 0.5, 1, 2, 5]\n"+slo), 0o600)
	stderr.Reset()
	if code := run([]string{"rules", "--config.file=" + cfg, "--rules.output=" + out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, _ := os.ReadFile(out)
	if !strings.Contains(string(b), `le=~"0\\.35"`) {
		t.Fatalf("no le matcher for 0.35 in:\n%s", b)
	}
}
