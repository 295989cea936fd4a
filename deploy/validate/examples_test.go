package validate

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"
)

const examplesDir = repoRoot + "/examples"

func loadCompose(t *testing.T, profile string) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{filepath.Join(examplesDir, "compose.yaml")},
		cli.WithProfiles([]string{profile}),
		cli.WithEnv([]string{"HF_TOKEN=x"}),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose.yaml (profile %s) does not load: %v", profile, err)
	}
	return p
}

// hostsOf maps every name a service answers to on the default network
// (its service name and its aliases) to the service.
func hostsOf(p *types.Project) map[string]string {
	out := map[string]string{}
	for name, s := range p.Services {
		out[name] = name
		for _, n := range s.Networks {
			if n == nil {
				continue
			}
			for _, a := range n.Aliases {
				out[a] = name
			}
		}
	}
	return out
}

func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// The compose example loads with the Compose specification's own loader
// (schema-checked) in both profiles, mounts only files that exist, builds
// from Dockerfile stages that exist, and wires vLLM -> exporter ->
// Prometheus -> Alertmanager and Prometheus -> Grafana by the names and
// ports the services really have.
func TestComposeExample(t *testing.T) {
	dockerfile, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, profile := range []string{"sim", "gpu"} {
		t.Run(profile, func(t *testing.T) {
			p := loadCompose(t, profile)
			var names []string
			for n := range p.Services {
				names = append(names, n)
			}
			sort.Strings(names)
			want := []string{"alertmanager", "exporter-" + profile, "grafana", "prometheus"}
			if profile == "sim" {
				want = append(want, "vllm-sim")
			} else {
				want = append(want, "vllm")
			}
			sort.Strings(want)
			if !slices.Equal(names, want) {
				t.Fatalf("profile %s runs %v, want %v", profile, names, want)
			}
			hosts := hostsOf(p)
			mounts := map[string]string{} // target in service -> source on the host
			for name, s := range p.Services {
				if s.Image == "" && s.Build == nil {
					t.Errorf("%s has neither image nor build", name)
				}
				if s.Image != "" && !strings.Contains(s.Image, ":") || strings.HasSuffix(s.Image, ":latest") {
					t.Errorf("%s: image %q is not pinned to a tag", name, s.Image)
				}
				if s.Build != nil {
					if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
						t.Errorf("%s builds from a missing Dockerfile: %v", name, err)
					}
					if s.Build.Target != "" && !regexp.MustCompile(`(?m)^FROM .* AS `+regexp.QuoteMeta(s.Build.Target)+`$`).Match(dockerfile) {
						t.Errorf("%s builds Dockerfile stage %q, which does not exist", name, s.Build.Target)
					}
				}
				for _, v := range s.Volumes {
					if v.Type != types.VolumeTypeBind {
						continue
					}
					if _, err := os.Stat(v.Source); err != nil {
						t.Errorf("%s mounts a missing path: %v", name, err)
					}
					mounts[name+":"+v.Target] = v.Source
				}
			}

			// vLLM <- exporter: --vllm.url names the vLLM service and its port.
			exp := p.Services["exporter-"+profile]
			u, err := url.Parse(flagValue(exp.Command, "vllm.url"))
			if err != nil || hosts[u.Hostname()] == "" {
				t.Fatalf("exporter --vllm.url %q names no service (have %v)", flagValue(exp.Command, "vllm.url"), hosts)
			}
			vllm := p.Services[hosts[u.Hostname()]]
			if !regexp.MustCompile(`--(port|web\.listen-address)=:?` + u.Port() + `\b`).MatchString(strings.Join(vllm.Command, " ")) {
				t.Errorf("vLLM service %s does not listen on port %s", vllm.Name, u.Port())
			}
			// the exporter's config file is mounted where --config.file says
			if cfg := flagValue(exp.Command, "config.file"); mounts[exp.Name+":"+cfg] == "" {
				t.Errorf("exporter --config.file=%s is not mounted", cfg)
			}

			// exporter <- Prometheus -> Alertmanager, rules loaded from alerts/.
			promCfgPath := mounts["prometheus:/etc/prometheus/prometheus.yml"]
			if promCfgPath == "" {
				t.Fatal("prometheus.yml is not mounted")
			}
			var promCfg struct {
				RuleFiles []string `json:"rule_files"`
				Alerting  struct {
					Alertmanagers []struct {
						StaticConfigs []struct {
							Targets []string `json:"targets"`
						} `json:"static_configs"`
					} `json:"alertmanagers"`
				} `json:"alerting"`
				ScrapeConfigs []struct {
					StaticConfigs []struct {
						Targets []string `json:"targets"`
					} `json:"static_configs"`
				} `json:"scrape_configs"`
			}
			b, err := os.ReadFile(promCfgPath)
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(b, &promCfg); err != nil {
				t.Fatal(err)
			}
			listen := strings.TrimPrefix(flagValue(exp.Command, "web.listen-address"), ":")
			target := promCfg.ScrapeConfigs[0].StaticConfigs[0].Targets[0]
			host, port, _ := strings.Cut(target, ":")
			if hosts[host] != exp.Name || port != listen {
				t.Errorf("Prometheus scrapes %s; the exporter is %s listening on %s", target, exp.Name, listen)
			}
			amTarget := promCfg.Alerting.Alertmanagers[0].StaticConfigs[0].Targets[0]
			if h, _, _ := strings.Cut(amTarget, ":"); hosts[h] != "alertmanager" {
				t.Errorf("Prometheus alerts to %s, not the alertmanager service", amTarget)
			}
			rulesDir := mounts["prometheus:/etc/prometheus/rules"]
			if len(promCfg.RuleFiles) != 1 || promCfg.RuleFiles[0] != "rules/*.yml" || filepath.Base(rulesDir) != "alerts" {
				t.Errorf("Prometheus must load the shipped rules: rule_files %v, rules mounted from %q", promCfg.RuleFiles, rulesDir)
			}

			// Prometheus <- Grafana: the provisioned datasource's host.
			ds := mounts["grafana:/etc/grafana/provisioning/datasources/vllm.yml"]
			b, err = os.ReadFile(ds)
			if err != nil {
				t.Fatalf("Grafana datasource provisioning: %v", err)
			}
			var dsCfg struct {
				Datasources []struct {
					URL string `json:"url"`
				} `json:"datasources"`
			}
			if err := yaml.Unmarshal(b, &dsCfg); err != nil {
				t.Fatal(err)
			}
			if du, err := url.Parse(dsCfg.Datasources[0].URL); err != nil || hosts[du.Hostname()] != "prometheus" {
				t.Errorf("Grafana's datasource %s is not the prometheus service", dsCfg.Datasources[0].URL)
			}
			if d := mounts["grafana:/var/lib/grafana/dashboards/vllm"]; filepath.Base(d) != "dashboards" {
				t.Errorf("Grafana's dashboards are mounted from %q, not dashboards/", d)
			}
		})
	}
}

// The KEDA ScaledObject is valid for KEDA's CRD, scales the Deployment the
// Helm chart renders for the release it names, and queries series the
// exporter exports.
func TestKEDAScaledObjectExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(examplesDir, "keda-scaledobject.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := SplitYAML(b)
	if err != nil || len(objs) != 1 {
		t.Fatalf("want one ScaledObject: %v", err)
	}
	so := objs[0]
	if err := validator(t).Validate(so); err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Metadata struct {
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec struct {
			ScaleTargetRef struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"scaleTargetRef"`
			Triggers []struct {
				Type     string            `json:"type"`
				Metadata map[string]string `json:"metadata"`
			} `json:"triggers"`
		} `json:"spec"`
	}
	decode(t, so, &spec)

	// The chart's Deployment for release llama in that namespace.
	r := renderObjects(t, loadChart(t, chartDir), map[string]any{})
	dep := r.byKind["Deployment"][0]
	if spec.Spec.ScaleTargetRef.Kind != "Deployment" || spec.Spec.ScaleTargetRef.Name != dep.Name || spec.Metadata.Namespace != "inference" {
		t.Errorf("ScaledObject scales %s/%s in %s; the chart renders Deployment %s for release llama in inference",
			spec.Spec.ScaleTargetRef.Kind, spec.Spec.ScaleTargetRef.Name, spec.Metadata.Namespace, dep.Name)
	}
	// Its queries read exporter series, with the job label the PodMonitor
	// gives them (jobLabel app.kubernetes.io/name = the chart's name).
	jobRE := regexp.MustCompile(`job="([^"]+)"`)
	seriesRE := regexp.MustCompile(`\b(vllm_[a-z_]+)\{`)
	if len(spec.Spec.Triggers) == 0 {
		t.Fatal("no triggers")
	}
	for _, tr := range spec.Spec.Triggers {
		q := tr.Metadata["query"]
		if tr.Type != "prometheus" || q == "" || tr.Metadata["threshold"] == "" {
			t.Errorf("trigger %v is not a Prometheus query with a threshold", tr)
			continue
		}
		if m := jobRE.FindStringSubmatch(q); m == nil || m[1] != "vllm-exporter" {
			t.Errorf("query %q does not select job=\"vllm-exporter\" (the PodMonitor's job)", q)
		}
		for _, m := range seriesRE.FindAllStringSubmatch(q, -1) {
			if !exporterExports(t, m[1]) {
				t.Errorf("query %q reads %s, which the exporter does not export", q, m[1])
			}
		}
	}
}

// exporterExports reports whether the exporter's source declares a series.
func exporterExports(t *testing.T, name string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(repoRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil || found {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "deploy") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			b, err := os.ReadFile(p)
			if err == nil && strings.Contains(string(b), `"`+name+`"`) {
				found = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
