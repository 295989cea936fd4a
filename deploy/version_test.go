package deploy

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// imageUID is the numeric uid the Dockerfile's runtime stage runs as; the
// manifests' runAsUser must be the same. deploy/validate has its own copy
// (imageUID in chart_test.go): it is a module of its own that does not
// depend on the exporter's module (its go.mod would have to require and
// replace it, pulling the exporter's dependencies in), so the ten lines
// are kept twice rather than shared through internal/testutil.
func imageUID(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^USER (\d+):\d+\s*$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("Dockerfile has no numeric USER uid:gid")
	}
	uid, _ := strconv.Atoi(string(m[1]))
	return uid
}

// releaseVersion is the newest released version in CHANGELOG.md
// ("## 0.1.0 / 2026-11-24"), the one the manifests deploy.
func releaseVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## (\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?) / \d{4}-\d{2}-\d{2}$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("CHANGELOG.md has no release heading like '## 0.1.0 / 2026-11-24'")
	}
	return string(m[1])
}

// The chart, the Kustomize manifests and the examples deploy the release
// CHANGELOG.md names, by a pinned tag, never :latest.
func TestManifestsDeployTheRelease(t *testing.T) {
	v := releaseVersion(t)
	var chart struct {
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
	}
	b, err := os.ReadFile(chartDir + "/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.AppVersion != v || chart.Version != v {
		t.Errorf("Chart.yaml version %s appVersion %s, CHANGELOG.md's release %s", chart.Version, chart.AppVersion, v)
	}
	imageRE := regexp.MustCompile(`ghcr\.io/vllm-exporter/vllm_exporter(:[^\s"']*)?`)
	for _, f := range []string{"kubernetes/vllm-deployment.yaml", "../examples/compose.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range imageRE.FindAllString(string(b), -1) {
			if !strings.HasSuffix(m, ":v"+v) {
				t.Errorf("%s uses image %s, want tag v%s", f, m, v)
			}
		}
	}
}

// Every deployment sets the image's GOMEMLIMIT (docs/hardening.md measures
// it for a 64 MiB limit), so a change of the default reaches all of them.
func TestDeploymentsUseTheImagesMemoryLimit(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`GOMEMLIMIT=(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("the Dockerfile sets no GOMEMLIMIT")
	}
	want := string(m[1])
	for file, re := range map[string]string{
		chartDir + "/values.yaml":           `(?m)^  goMemLimit: (\S+)$`,
		"kubernetes/vllm-deployment.yaml":   `name: GOMEMLIMIT\s+value: (\S+)`,
		"../examples/compose.yaml":          `GOMEMLIMIT: (\S+)`,
		"../examples/vllm_exporter.service": `Environment=GOMEMLIMIT=(\S+)`,
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		got := regexp.MustCompile(re).FindSubmatch(b)
		if got == nil || string(got[1]) != want {
			t.Errorf("%s sets GOMEMLIMIT %q, the image %q", file, got, want)
		}
	}
}
