package deploy

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vllm-exporter/vllm_exporter/alerts"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/e2e"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the generated manifests in deploy/kubernetes")

func dashboardFiles(t *testing.T) map[string][]byte {
	t.Helper()
	paths, _ := filepath.Glob("../dashboards/*.json")
	if len(paths) == 0 {
		t.Fatal("no dashboards found in ../dashboards")
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// The generated manifests are exactly what their sources render.
func TestGeneratedManifestsAreCurrent(t *testing.T) {
	gen := map[string]func() ([]byte, error){
		"kubernetes/prometheusrule.yaml": func() ([]byte, error) {
			// from the generator itself, not the checked-in alerts/*.yml:
			// both copies must equal what `vllm_exporter rules` renders
			files, err := alerts.Generate(alerts.Options{})
			if err != nil {
				return nil, err
			}
			m := map[string][]byte{}
			for _, f := range files {
				m[f.Name] = f.Data
			}
			return PrometheusRule(m)
		},
		"kubernetes/grafana-dashboards.yaml": func() ([]byte, error) { return DashboardConfigMaps(dashboardFiles(t)) },
	}
	for path, fn := range gen {
		want, err := fn()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		got := testutil.Golden(t, path, want, *update, "run: go test ./deploy -update")
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: its sources changed (run: go test ./deploy -update)", path)
		}
	}
}

type object struct {
	APIVersion string         `yaml:"apiVersion"`
	Kind       string         `yaml:"kind"`
	Metadata   map[string]any `yaml:"metadata"`
	Spec       map[string]any `yaml:"spec"`
	Data       map[string]any `yaml:"data"`
	Resources  []string       `yaml:"resources"`
	raw        map[string]any
}

func readObjects(t *testing.T, path string) []object {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []object
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var raw map[string]any
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if raw == nil {
			continue
		}
		rb, _ := yaml.Marshal(raw)
		var o object
		if err := yaml.Unmarshal(rb, &o); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		o.raw = raw
		if o.APIVersion == "" || o.Kind == "" {
			t.Errorf("%s: a document without apiVersion/kind", path)
		}
		out = append(out, o)
	}
	return out
}

// get walks a decoded YAML tree: keys for maps, ints for lists.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func TestKubernetesExample(t *testing.T) {
	files, _ := filepath.Glob("kubernetes/*.yaml")
	byKind := map[string][]object{}
	for _, f := range files {
		for _, o := range readObjects(t, f) {
			byKind[o.Kind] = append(byKind[o.Kind], o)
		}
	}
	var kinds []string
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	want := []string{"ConfigMap", "Deployment", "Kustomization", "PodMonitor", "PrometheusRule", "Service"}
	if !reflect.DeepEqual(kinds, want) {
		t.Fatalf("kinds = %v, want %v", kinds, want)
	}
	if byKind["PodMonitor"][0].APIVersion != "monitoring.coreos.com/v1" || byKind["PrometheusRule"][0].APIVersion != "monitoring.coreos.com/v1" {
		t.Error("PodMonitor/PrometheusRule must be monitoring.coreos.com/v1")
	}

	// Kustomization lists every manifest, and every listed file exists.
	var listed []string
	listed = append(listed, byKind["Kustomization"][0].Resources...)
	sort.Strings(listed)
	var onDisk []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			onDisk = append(onDisk, b)
		}
	}
	if !reflect.DeepEqual(listed, onDisk) {
		t.Errorf("kustomization resources %v, files %v", listed, onDisk)
	}

	// Deployment: vLLM plus the exporter sidecar pointing at it on localhost.
	dep := byKind["Deployment"][0].raw
	podLabels, _ := get(dep, "spec", "template", "metadata", "labels").(map[string]any)
	sel, _ := get(dep, "spec", "selector", "matchLabels").(map[string]any)
	for k, v := range sel {
		if podLabels[k] != v {
			t.Errorf("Deployment selector %s=%v does not match the pod template", k, v)
		}
	}
	containers := map[string]map[string]any{}
	for _, kind := range []string{"containers", "initContainers"} {
		l, _ := get(dep, "spec", "template", "spec", kind).([]any)
		for _, c := range l {
			cm := c.(map[string]any)
			containers[kind+"/"+cm["name"].(string)] = cm
		}
	}
	// vLLM is the main container; the exporter a native sidecar (an init
	// container that keeps running), so it starts before vLLM and stops after.
	vllmC, exp := containers["containers/vllm"], containers["initContainers/vllm-exporter"]
	if vllmC == nil || exp == nil {
		t.Fatalf("Deployment containers %v, want containers/vllm and initContainers/vllm-exporter", reflect.ValueOf(containers).MapKeys())
	}
	if exp["restartPolicy"] != "Always" {
		t.Error("the exporter is not a native sidecar (restartPolicy: Always)")
	}
	vllmPort := get(vllmC, "ports", 0, "containerPort")
	args := strings.Join(toStrings(exp["args"]), " ")
	if !strings.Contains(args, "--vllm.url=http://localhost:"+toString(vllmPort)) {
		t.Errorf("exporter args %q do not point at vLLM's port %v on localhost", args, vllmPort)
	}
	metricsPort := ""
	for _, p := range exp["ports"].([]any) {
		if get(p, "name") == "metrics" {
			metricsPort = toString(get(p, "containerPort"))
		}
	}
	if metricsPort == "" || !strings.Contains(args, "--web.listen-address=:"+metricsPort) {
		t.Errorf("exporter needs a port named metrics matching --web.listen-address (args %q)", args)
	}
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		if get(exp, probe, "httpGet", "port") != "metrics" {
			t.Errorf("exporter %s must use the metrics port", probe)
		}
	}
	if get(exp, "securityContext", "runAsNonRoot") != true {
		t.Error("exporter must not run as root")
	}
	if uid := imageUID(t); get(exp, "securityContext", "runAsUser") != uid {
		t.Errorf("exporter runAsUser %v, the image runs as uid %d", get(exp, "securityContext", "runAsUser"), uid)
	}
	// the exporter config volume is the generated ConfigMap
	cmNames := map[string]object{}
	for _, o := range byKind["ConfigMap"] {
		cmNames[o.Metadata["name"].(string)] = o
	}
	for _, v := range get(dep, "spec", "template", "spec", "volumes").([]any) {
		if n := get(v, "configMap", "name"); n != nil {
			if _, ok := cmNames[n.(string)]; !ok {
				t.Errorf("volume refers to ConfigMap %v which is not in the manifests", n)
			}
		}
	}
	if cfg, ok := cmNames["vllm-exporter-config"]; !ok {
		t.Error("no vllm-exporter-config ConfigMap")
	} else if f, err := config.Parse([]byte(toString(cfg.Data["config.yml"])), "configmap"); err != nil {
		t.Errorf("exporter ConfigMap holds an invalid config: %v", err)
	} else if !reflect.DeepEqual(f.SLOs, config.Default().SLOs) {
		// prometheusrule.yaml carries alerts/slo-rules.yml, generated from
		// the default SLOs: the sidecar's watchdog must evaluate the same.
		t.Errorf("exporter ConfigMap SLOs differ from the shipped defaults that alerts/slo-rules.yml was generated from")
	}

	// PodMonitor selects these pods and scrapes the exporter's port.
	pm := byKind["PodMonitor"][0].raw
	for k, v := range get(pm, "spec", "selector", "matchLabels").(map[string]any) {
		if podLabels[k] != v {
			t.Errorf("PodMonitor selector %s=%v does not match the pod labels %v", k, v, podLabels)
		}
	}
	if get(pm, "spec", "podMetricsEndpoints", 0, "port") != "metrics" || get(pm, "spec", "podMetricsEndpoints", 0, "path") != "/metrics" {
		t.Error("PodMonitor must scrape port metrics, path /metrics")
	}

	// PrometheusRule carries every group of every alerts/*.yml file.
	var wantGroups []string
	for _, name := range alerts.RuleFileNames() {
		var rf struct {
			Groups []struct {
				Name string `yaml:"name"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(alerts.RuleFiles()[name], &rf); err != nil {
			t.Fatal(err)
		}
		for _, g := range rf.Groups {
			wantGroups = append(wantGroups, g.Name)
		}
	}
	var gotGroups []string
	for _, g := range get(byKind["PrometheusRule"][0].raw, "spec", "groups").([]any) {
		gotGroups = append(gotGroups, get(g, "name").(string))
	}
	if !reflect.DeepEqual(gotGroups, wantGroups) {
		t.Errorf("PrometheusRule groups %v, alerts/ groups %v", gotGroups, wantGroups)
	}

	// One dashboard ConfigMap per dashboard, for the Grafana sidecar.
	dashboards := dashboardFiles(t)
	found := 0
	for _, o := range byKind["ConfigMap"] {
		if get(o.Metadata, "labels", "grafana_dashboard") != "1" {
			continue
		}
		for k, v := range o.Data {
			if toString(v) != string(dashboards[k]) {
				t.Errorf("ConfigMap %v: %s differs from dashboards/%s", o.Metadata["name"], k, k)
			}
			found++
		}
	}
	if found != len(dashboards) {
		t.Errorf("%d dashboard ConfigMap entries, %d dashboards", found, len(dashboards))
	}
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	}
	return ""
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, toString(x))
	}
	return out
}

func TestPrometheusConfig(t *testing.T) {
	out, err := exec.Command(e2e.RequireTool(t, "promtool"), "check", "config", "prometheus/prometheus.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "rule files found") {
		t.Errorf("prometheus.yml loads no rule files:\n%s", out)
	}
}

func TestAlertmanagerConfig(t *testing.T) {
	out, err := exec.Command(e2e.RequireTool(t, "amtool"), "check-config", "alertmanager/alertmanager.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("amtool check-config: %v\n%s", err, out)
	}
}

// The PrometheusRule's spec is a valid Prometheus rule file.
func TestPrometheusRuleSpecLoads(t *testing.T) {
	objs := readObjects(t, "kubernetes/prometheusrule.yaml")
	spec, err := yaml.Marshal(objs[0].raw["spec"])
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(p, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.CheckRules(t, p)
}
