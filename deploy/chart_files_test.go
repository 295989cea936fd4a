package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/alerts"
)

// chartDir is the Helm chart; a chart can only read files inside itself, so
// it carries copies of the rule files and dashboards under files/.
const chartDir = "helm/vllm-exporter"

// The chart's copies of alerts/*.yml and dashboards/*.json are byte-equal to
// their sources, and it carries no file that has no source any more.
// `go test ./deploy -update` rewrites them.
func TestChartFilesAreCurrent(t *testing.T) {
	sets := map[string]map[string][]byte{
		filepath.Join(chartDir, "files/rules"):      alerts.RuleFiles(),
		filepath.Join(chartDir, "files/dashboards"): dashboardFiles(t),
	}
	for dir, want := range sets {
		if *update {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, body := range want {
				if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("%v (run: go test ./deploy -update)", err)
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
			body, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if w, ok := want[e.Name()]; !ok {
				t.Errorf("%s/%s has no source any more (run: go test ./deploy -update)", dir, e.Name())
			} else if !bytes.Equal(body, w) {
				t.Errorf("%s/%s is stale (run: go test ./deploy -update)", dir, e.Name())
			}
		}
		if len(got) != len(want) {
			var names []string
			for n := range want {
				names = append(names, n)
			}
			sort.Strings(names)
			t.Errorf("%s holds %v, want %v (run: go test ./deploy -update)", dir, got, names)
		}
	}
}
