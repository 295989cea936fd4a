package validate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

const (
	chartDir = "../helm/vllm-exporter"
	repoRoot = "../.."
	// The oldest Kubernetes the chart supports (native sidecars are on by
	// default from 1.29).
	kubeVersion = "v1.29.0"
)

func ciValues(t *testing.T) map[string]map[string]any {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if len(paths) < 3 {
		t.Fatalf("want ci/*-values.yaml files, found %v", paths)
	}
	out := map[string]map[string]any{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[filepath.Base(p)] = v
	}
	return out
}

// templateAction is `helm template` (release llama in namespace inference)
// for a Kubernetes 1.29 cluster with the Prometheus Operator's API.
func templateAction(t *testing.T) *action.Install {
	t.Helper()
	inst := action.NewInstall(&action.Configuration{})
	inst.ClientOnly = true
	inst.DryRun = true
	inst.Replace = true
	inst.ReleaseName = "llama"
	inst.Namespace = "inference"
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	inst.KubeVersion = kv
	inst.APIVersions = chartutil.VersionSet{"monitoring.coreos.com/v1"}
	return inst
}

// render renders the chart with vals like `helm template`.
func render(t *testing.T, ch *chart.Chart, vals map[string]any) (manifest, notes string) {
	t.Helper()
	rel, err := templateAction(t).Run(ch, vals)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	return rel.Manifest, rel.Info.Notes
}

func loadChart(t *testing.T, dir string) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func validator(t *testing.T) *Validator {
	t.Helper()
	v, err := NewValidator("testdata/crds")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// `helm lint --strict` for every CI values file.
func TestChartLint(t *testing.T) {
	kv, _ := chartutil.ParseKubeVersion(kubeVersion)
	for name, vals := range ciValues(t) {
		l := lint.AllWithKubeVersion(chartDir, vals, "inference", kv)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: helm lint: %s", name, m)
			}
		}
	}
}

// The values schema rejects what the chart cannot render: a wrong type, an
// unknown key, an unknown mode.
func TestChartValuesSchemaRejects(t *testing.T) {
	ch := loadChart(t, chartDir)
	for name, vals := range map[string]map[string]any{
		"unknown key":      {"exporter": map[string]any{"prot": 9470}},
		"string port":      {"exporter": map[string]any{"port": "9470"}},
		"unknown mode":     {"mode": "daemonset"},
		"bare extra arg":   {"exporter": map[string]any{"extraArgs": []any{"model.weight-bytes=1"}}},
		"bad log level":    {"exporter": map[string]any{"logLevel": "verbose"}},
		"bad goMemLimit":   {"exporter": map[string]any{"goMemLimit": "100M"}},
		"bad image digest": {"image": map[string]any{"digest": "latest"}},
	} {
		if _, err := templateAction(t).Run(ch, vals); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("%s: rendered without a schema error (err %v)", name, err)
		}
	}
}

type rendered struct {
	objs   []Object
	byKind map[string][]Object
}

func renderObjects(t *testing.T, ch *chart.Chart, vals map[string]any) rendered {
	t.Helper()
	manifest, notes := render(t, ch, vals)
	// NOTES.txt tells the user the next step: the port-forward, or how to
	// merge the sidecar into their pod.
	if ch.IsRoot() && ch.Name() == "vllm-exporter" {
		want := "port-forward"
		if vals["mode"] == "sidecar" {
			want = `include "vllm-exporter.sidecar" (index .Subcharts "vllm-exporter")`
		}
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES.txt lacks %q:\n%s", want, notes)
		}
	}
	objs, err := SplitYAML([]byte(manifest))
	if err != nil {
		t.Fatalf("rendered manifest does not parse: %v", err)
	}
	r := rendered{objs: objs, byKind: map[string][]Object{}}
	for _, o := range objs {
		r.byKind[o.Kind] = append(r.byKind[o.Kind], o)
	}
	return r
}

// `helm template` for every CI values file renders objects that are valid
// for Kubernetes 1.29 and the Prometheus Operator, and that fit together.
func TestChartTemplate(t *testing.T) {
	ch := loadChart(t, chartDir)
	v := validator(t)
	for name, vals := range ciValues(t) {
		t.Run(name, func(t *testing.T) {
			r := renderObjects(t, ch, vals)
			seen := map[string]bool{}
			for _, o := range r.objs {
				if err := v.Validate(o); err != nil {
					t.Error(err)
				}
				if key := o.Kind + "/" + o.Name; seen[key] {
					t.Errorf("%s rendered twice", key)
				} else {
					seen[key] = true
				}
			}
			mode, _ := vals["mode"].(string)
			if mode == "" {
				mode = "deployment"
			}
			deps := r.byKind["Deployment"]
			if mode == "sidecar" {
				if len(deps) != 0 {
					t.Errorf("sidecar mode rendered %d Deployments", len(deps))
				}
			} else {
				if len(deps) != 1 {
					t.Fatalf("deployment mode rendered %d Deployments", len(deps))
				}
				checkPod(t, deps[0], r)
			}
			checkMonitors(t, r, vals)
			checkRules(t, r, vals)
			checkDashboards(t, r)
		})
	}
}

// imageUID is the numeric user the Dockerfile's runtime stage runs as. The
// exporter's module has the same helper (deploy/version_test.go); this
// module does not depend on that one, so it keeps a copy.
func imageUID(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^USER (\d+):(\d+)\s*$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("Dockerfile has no numeric USER uid:gid")
	}
	uid, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return uid
}

// labelSelector is the matchLabels part of a Kubernetes label selector.
type labelSelector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

type podTemplate struct {
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec corev1.PodSpec `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

func decode(t *testing.T, o Object, into any) {
	t.Helper()
	if err := json.Unmarshal(o.JSON, into); err != nil {
		t.Fatalf("%s %s: %v", o.Kind, o.Name, err)
	}
}

// checkPod: vLLM as the main container, the exporter as a native sidecar
// pointing at it, secured like the image, with its volumes.
func checkPod(t *testing.T, dep Object, r rendered) {
	t.Helper()
	var d podTemplate
	decode(t, dep, &d)
	pod := d.Spec.Template.Spec
	for k, v := range d.Spec.Selector.MatchLabels {
		if d.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod labels", k, v)
		}
	}
	if len(pod.Containers) != 1 || pod.Containers[0].Name != "vllm" {
		t.Fatalf("containers = %v, want only vllm", pod.Containers)
	}
	checkSidecar(t, pod, pod.Containers[0])
	for _, svc := range r.byKind["Service"] {
		var s corev1.Service
		decode(t, svc, &s)
		for k, v := range s.Spec.Selector {
			if d.Spec.Template.Metadata.Labels[k] != v {
				t.Errorf("Service %s selects %s=%s, which the pods do not carry", svc.Name, k, v)
			}
		}
	}
}

// checkSidecar checks the exporter among pod's initContainers against the
// vLLM container it watches.
func checkSidecar(t *testing.T, pod corev1.PodSpec, vllm corev1.Container) {
	t.Helper()
	var exp *corev1.Container
	for i := range pod.InitContainers {
		if pod.InitContainers[i].Name == "vllm-exporter" {
			exp = &pod.InitContainers[i]
		}
	}
	if exp == nil {
		t.Fatalf("no vllm-exporter init container in %v", pod.InitContainers)
	}
	if exp.RestartPolicy == nil || *exp.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Error("the exporter is not a native sidecar (restartPolicy: Always)")
	}
	args := strings.Join(exp.Args, " ")
	var vllmPort int32
	for _, p := range vllm.Ports {
		if p.Name == "http" {
			vllmPort = p.ContainerPort
		}
	}
	if !strings.Contains(args, "--vllm.url=http://localhost:"+strconv.Itoa(int(vllmPort))) {
		t.Errorf("exporter args %q do not point at vLLM's port %d", args, vllmPort)
	}
	var metricsPort int32
	for _, p := range exp.Ports {
		if p.Name == "metrics" {
			metricsPort = p.ContainerPort
		}
	}
	if metricsPort == 0 || !strings.Contains(args, "--web.listen-address=:"+strconv.Itoa(int(metricsPort))) {
		t.Errorf("exporter needs a port named metrics matching --web.listen-address (args %q)", args)
	}
	for name, p := range map[string]*corev1.Probe{"readiness": exp.ReadinessProbe, "liveness": exp.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.String() != "metrics" {
			t.Errorf("exporter %s probe must GET the metrics port", name)
		}
	}
	sc := exp.SecurityContext
	uid := imageUID(t)
	switch {
	case sc == nil:
		t.Fatal("exporter has no securityContext")
	case sc.RunAsUser == nil:
		t.Error("exporter securityContext sets no runAsUser")
	case *sc.RunAsUser != uid:
		t.Errorf("runAsUser %d, the image's uid is %d", *sc.RunAsUser, uid)
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot,
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem,
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation,
		sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
		t.Errorf("exporter securityContext is not locked down: %+v", sc)
	}
	limit := exp.Resources.Limits.Memory()
	if limit.IsZero() {
		t.Error("exporter has no memory limit")
	}
	for _, e := range exp.Env {
		if e.Name == "GOMEMLIMIT" {
			q, err := resource.ParseQuantity(strings.TrimSuffix(e.Value, "B"))
			if err != nil {
				t.Fatalf("GOMEMLIMIT %q: %v", e.Value, err)
			}
			if q.Cmp(*limit) >= 0 {
				t.Errorf("GOMEMLIMIT %s is not below the memory limit %s", e.Value, limit)
			}
		}
	}
	volumes := map[string]bool{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = true
	}
	for _, m := range exp.VolumeMounts {
		if !volumes[m.Name] {
			t.Errorf("exporter mounts %s, which the pod does not define", m.Name)
		}
	}
	if strings.Contains(args, "--slo.state-file=") {
		ok := false
		for _, m := range exp.VolumeMounts {
			ok = ok || (strings.HasPrefix(strings.SplitN(args, "--slo.state-file=", 2)[1], m.MountPath+"/") && !m.ReadOnly)
		}
		if !ok {
			t.Error("--slo.state-file is not on a writable volume (the root filesystem is read-only)")
		}
	}
}

func checkMonitors(t *testing.T, r rendered, vals map[string]any) {
	t.Helper()
	podLabels := map[string]string{}
	if deps := r.byKind["Deployment"]; len(deps) == 1 {
		var d podTemplate
		decode(t, deps[0], &d)
		podLabels = d.Spec.Template.Metadata.Labels
	} else if sel, ok := vals["podSelector"].(map[string]any); ok {
		for k, v := range sel {
			podLabels[k] = v.(string)
		}
	}
	for _, pm := range r.byKind["PodMonitor"] {
		var m struct {
			Spec struct {
				Selector  labelSelector `json:"selector"`
				Endpoints []struct {
					Port string `json:"port"`
				} `json:"podMetricsEndpoints"`
			} `json:"spec"`
		}
		decode(t, pm, &m)
		if len(m.Spec.Selector.MatchLabels) == 0 {
			t.Error("PodMonitor selects every pod")
		}
		for k, v := range m.Spec.Selector.MatchLabels {
			if podLabels[k] != v {
				t.Errorf("PodMonitor selects %s=%s; the vLLM pods carry %v", k, v, podLabels)
			}
		}
		if len(m.Spec.Endpoints) != 1 || m.Spec.Endpoints[0].Port != "metrics" {
			t.Error("PodMonitor must scrape the port named metrics")
		}
	}
	for _, sm := range r.byKind["ServiceMonitor"] {
		var m struct {
			Spec struct {
				Selector labelSelector `json:"selector"`
			} `json:"spec"`
		}
		decode(t, sm, &m)
		found := false
		for _, svc := range r.byKind["Service"] {
			var s corev1.Service
			decode(t, svc, &s)
			match := true
			for k, v := range m.Spec.Selector.MatchLabels {
				match = match && s.Labels[k] == v
			}
			if match {
				found = true
				if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Name != "metrics" || s.Spec.ClusterIP != "None" {
					t.Errorf("ServiceMonitor selects Service %s, which is not the headless metrics Service", s.Name)
				}
			}
		}
		if !found {
			t.Error("ServiceMonitor selects no rendered Service")
		}
	}
}

// ruleGroups reads the groups of one rule file.
func ruleGroups(t *testing.T, b []byte) []any {
	t.Helper()
	var f struct {
		Groups []any `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f.Groups
}

// checkRules: the PrometheusRule holds exactly the groups of alerts/*.yml
// (without the SLO file when sloRules is false), rule for rule.
func checkRules(t *testing.T, r rendered, vals map[string]any) {
	t.Helper()
	prs := r.byKind["PrometheusRule"]
	if len(prs) != 1 {
		t.Fatalf("%d PrometheusRules rendered, want 1", len(prs))
	}
	sloRules := true
	if pr, ok := vals["prometheusRule"].(map[string]any); ok {
		if b, ok := pr["sloRules"].(bool); ok {
			sloRules = b
		}
	}
	paths, _ := filepath.Glob(filepath.Join(repoRoot, "alerts", "*.yml"))
	sort.Strings(paths)
	var want []any
	for _, p := range paths {
		if !sloRules && filepath.Base(p) == "slo-rules.yml" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ruleGroups(t, b)...)
	}
	var got struct {
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	decode(t, prs[0], &got)
	if len(want) == 0 || !reflect.DeepEqual(got.Spec.Groups, want) {
		t.Errorf("PrometheusRule groups (%d) differ from alerts/*.yml (%d groups); run go test ./deploy -update", len(got.Spec.Groups), len(want))
	}
}

// checkDashboards: one ConfigMap per dashboards/*.json, byte-equal, with
// the Grafana sidecar's label.
func checkDashboards(t *testing.T, r rendered) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(repoRoot, "dashboards", "*.json"))
	want := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		want[filepath.Base(p)] = string(b)
	}
	got := map[string]string{}
	for _, cm := range r.byKind["ConfigMap"] {
		var c corev1.ConfigMap
		decode(t, cm, &c)
		if c.Labels["grafana_dashboard"] != "1" {
			continue
		}
		for k, v := range c.Data {
			got[k] = v
		}
	}
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("%d dashboards rendered, %d in dashboards/", len(got), len(want))
	}
	for name, body := range want {
		if strings.TrimRight(got[name], "\n") != strings.TrimRight(body, "\n") {
			t.Errorf("dashboard %s differs from dashboards/%s; run go test ./deploy -update", name, name)
		}
	}
}

// The chart refuses clusters older than 1.29, where a native sidecar would
// be an init container that never finishes and vLLM would never start.
func TestChartRefusesClustersWithoutNativeSidecars(t *testing.T) {
	inst := templateAction(t)
	kv, _ := chartutil.ParseKubeVersion("v1.28.9")
	inst.KubeVersion = kv
	if _, err := inst.Run(loadChart(t, chartDir), map[string]any{}); err == nil || !strings.Contains(err.Error(), "kubeVersion") {
		t.Errorf("rendered for Kubernetes 1.28 (err %v)", err)
	}
}

// Own SLOs with the shipped SLO rules would page on objectives nobody set:
// the chart refuses the combination and says what to do.
func TestChartRefusesOwnSLOsWithShippedSLORules(t *testing.T) {
	inst := templateAction(t)
	vals := map[string]any{"config": map[string]any{"slos": []any{map[string]any{
		"name": "ttft", "kind": "latency", "metric": "ttft", "threshold": 2.5, "objective": 0.95}}}}
	if _, err := inst.Run(loadChart(t, chartDir), vals); err == nil || !strings.Contains(err.Error(), "vllm_exporter rules") {
		t.Errorf("rendered own SLOs with the shipped SLO rules (err %v)", err)
	}
	vals["prometheusRule"] = map[string]any{"sloRules": false}
	if _, err := inst.Run(loadChart(t, chartDir), vals); err != nil {
		t.Errorf("own SLOs without the shipped SLO rules: %v", err)
	}
}
