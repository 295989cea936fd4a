package validate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

var (
	exporterOnce sync.Once
	exporterBin  string
	exporterErr  error
	exporterOut  []byte
)

// exporterBinary builds the exporter from this checkout once per test run.
func exporterBinary(t *testing.T) string {
	t.Helper()
	exporterOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vllm-exporter-validate-")
		if err != nil {
			exporterErr = err
			return
		}
		exporterBin = filepath.Join(dir, "vllm_exporter")
		cmd := exec.Command("go", "build", "-o", exporterBin, "./cmd/vllm_exporter")
		cmd.Dir = repoRoot
		exporterOut, exporterErr = cmd.CombinedOutput()
	})
	if exporterErr != nil {
		t.Fatalf("go build ./cmd/vllm_exporter: %v\n%s", exporterErr, exporterOut)
	}
	return exporterBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if exporterBin != "" {
		os.RemoveAll(filepath.Dir(exporterBin))
	}
	os.Exit(code)
}

// checkArgs runs the exporter with a container's arguments plus
// --config.check: every flag must exist and the configuration file the
// container mounts (configs: path -> content) must load. The SLO state file
// is checked in a directory that exists, as the container's volume does
// (the check refuses a missing directory).
func checkArgs(t *testing.T, where string, args []string, configs map[string]string) {
	t.Helper()
	dir := t.TempDir()
	var run []string
	for _, a := range args {
		if path, ok := strings.CutPrefix(a, "--config.file="); ok {
			body, found := configs[path]
			if !found {
				t.Errorf("%s: --config.file=%s is not mounted from a ConfigMap the manifests hold", where, path)
				continue
			}
			local := filepath.Join(dir, "config.yml")
			if err := os.WriteFile(local, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			a = "--config.file=" + local
		}
		if path, ok := strings.CutPrefix(a, "--slo.state-file="); ok {
			a = "--slo.state-file=" + filepath.Join(dir, filepath.Base(path))
		}
		run = append(run, a)
	}
	out, err := exec.Command(exporterBinary(t), append(run, "--config.check")...).CombinedOutput()
	if err != nil {
		t.Errorf("%s: vllm_exporter %v --config.check: %v\n%s", where, args, err, out)
	}
}

// mountedConfigs maps the paths a container mounts ConfigMap keys at to
// their content, for ConfigMaps among objs.
func mountedConfigs(t *testing.T, pod corev1.PodSpec, c corev1.Container, objs []Object) map[string]string {
	t.Helper()
	cms := map[string]map[string]string{}
	for _, o := range objs {
		if o.Kind == "ConfigMap" {
			var cm corev1.ConfigMap
			decode(t, o, &cm)
			cms[cm.Name] = cm.Data
		}
	}
	out := map[string]string{}
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				for k, body := range cms[v.ConfigMap.Name] {
					out[m.MountPath+"/"+k] = body
				}
			}
		}
	}
	return out
}

func sidecarOf(t *testing.T, pod corev1.PodSpec) corev1.Container {
	t.Helper()
	for _, c := range pod.InitContainers {
		if c.Name == "vllm-exporter" {
			return c
		}
	}
	t.Fatal("no vllm-exporter sidecar")
	return corev1.Container{}
}

// The exporter accepts the command line every deployment gives it: the
// chart for each CI values file, the Kustomize manifest, the compose file.
func TestDeployedArgsAcceptedByExporter(t *testing.T) {
	ch := loadChart(t, chartDir)
	for name, vals := range ciValues(t) {
		r := renderObjects(t, ch, vals)
		for _, dep := range r.byKind["Deployment"] {
			var d podTemplate
			decode(t, dep, &d)
			pod := d.Spec.Template.Spec
			c := sidecarOf(t, pod)
			checkArgs(t, "chart "+name, c.Args, mountedConfigs(t, pod, c, r.objs))
		}
	}

	var objs []Object
	paths, _ := filepath.Glob(filepath.Join(repoRoot, "deploy/kubernetes/*.yaml"))
	for _, p := range paths {
		objs = append(objs, readObjects(t, p)...)
	}
	found := false
	for _, o := range objs {
		if o.Kind == "Deployment" {
			var d podTemplate
			decode(t, o, &d)
			pod := d.Spec.Template.Spec
			c := sidecarOf(t, pod)
			checkArgs(t, "deploy/kubernetes", c.Args, mountedConfigs(t, pod, c, objs))
			found = true
		}
	}
	if !found {
		t.Error("no Deployment in deploy/kubernetes")
	}

	for _, profile := range []string{"sim", "gpu"} {
		p := loadCompose(t, profile)
		exp := p.Services["exporter-"+profile]
		configs := map[string]string{}
		for _, v := range exp.Volumes {
			if b, err := os.ReadFile(v.Source); err == nil {
				configs[v.Target] = string(b)
			}
		}
		checkArgs(t, "compose "+profile, exp.Command, configs)
	}
}

// The Kustomize manifests are valid Kubernetes 1.29 and Prometheus
// Operator objects, like the chart's.
func TestKustomizeManifestsValid(t *testing.T) {
	v := validator(t)
	paths, _ := filepath.Glob(filepath.Join(repoRoot, "deploy/kubernetes/*.yaml"))
	n := 0
	for _, p := range paths {
		for _, o := range readObjects(t, p) {
			if o.Kind == "Kustomization" {
				continue // kustomize's own file, not an API object
			}
			if err := v.Validate(o); err != nil {
				t.Errorf("%s: %v", filepath.Base(p), err)
			}
			n++
		}
	}
	if n < 5 {
		t.Fatalf("validated %d objects in deploy/kubernetes", n)
	}
}

// readObjects is the Kubernetes objects of the YAML file at path.
func readObjects(t *testing.T, path string) []Object {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := SplitYAML(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return objs
}
