package validate

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// parentTemplate is the vLLM Deployment of a chart that uses vllm-exporter
// as a dependency in sidecar mode, as docs/deploy.md shows it.
const parentTemplate = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-vllm
spec:
  selector:
    matchLabels:
      app: my-vllm
  template:
    metadata:
      labels:
        app: my-vllm
    spec:
      initContainers:
        {{- include "vllm-exporter.sidecar" (index .Subcharts "vllm-exporter") | nindent 8 }}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args: ["--model=Qwen/Qwen2.5-7B-Instruct", "--port=8000"]
          ports:
            - name: http
              containerPort: 8000
          resources:
            limits:
              nvidia.com/gpu: 1
      volumes:
        {{- include "vllm-exporter.volumes" (index .Subcharts "vllm-exporter") | nindent 8 }}
`

// copyDir copies the chart into a parent chart's charts/ directory.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A parent chart merges the native sidecar into its own vLLM pod with the
// chart's named templates, and the monitors select that pod.
func TestChartAsSidecarOfParentChart(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, chartDir, filepath.Join(dir, "charts", "vllm-exporter"))
	files := map[string]string{
		"Chart.yaml": `apiVersion: v2
name: my-vllm
version: 1.0.0
dependencies:
  - name: vllm-exporter
    version: 0.1.0
`,
		"values.yaml": `vllm-exporter:
  mode: sidecar
  podSelector:
    app: my-vllm
  config:
    probes:
      model: qwen2.5-7b
`,
		"templates/deployment.yaml": parentTemplate,
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var vals map[string]any
	if err := yaml.Unmarshal([]byte(files["values.yaml"]), &vals); err != nil {
		t.Fatal(err)
	}
	r := renderObjects(t, loadChart(t, dir), map[string]any{})
	v := validator(t)
	for _, o := range r.objs {
		if err := v.Validate(o); err != nil {
			t.Error(err)
		}
	}
	deps := r.byKind["Deployment"]
	if len(deps) != 1 || deps[0].Name != "llama-vllm" {
		t.Fatalf("want only the parent's Deployment, got %v", deps)
	}
	var d podTemplate
	decode(t, deps[0], &d)
	checkSidecar(t, d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0])
	checkMonitors(t, r, vals["vllm-exporter"].(map[string]any))
	if len(r.byKind["ConfigMap"]) == 0 {
		t.Error("the sidecar's config ConfigMap was not rendered")
	}
}
