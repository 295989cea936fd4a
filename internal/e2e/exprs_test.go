package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"gopkg.in/yaml.v3"
)

// query is one PromQL expression shipped in alerts/ or dashboards/.
type query struct {
	Where string // file and rule/panel, for messages
	Expr  string // as written (dashboards: with Grafana variables)
	// Dashboard panels only.
	Dashboard, Panel, RefID string
}

type rulesFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert  string `yaml:"alert"`
			Record string `yaml:"record"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// ruleQueries returns every rule expression of the given rule files and the
// names the recording rules define.
func ruleQueries(t *testing.T, paths []string) (qs []query, records map[string]bool) {
	t.Helper()
	records = map[string]bool{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var rf rulesFile
		if err := yaml.Unmarshal(b, &rf); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				name := r.Alert
				if r.Record != "" {
					name = r.Record
					records[r.Record] = true
				}
				qs = append(qs, query{Where: fmt.Sprintf("%s: %s", filepath.Base(p), name), Expr: r.Expr})
			}
		}
	}
	return qs, records
}

func ruleFiles(t *testing.T) []string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(testutil.ModuleRoot(t), "alerts", "*.yml"))
	if len(paths) == 0 {
		t.Fatal("no rule files in alerts/")
	}
	sort.Strings(paths)
	return paths
}

type grafanaDashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// dashboardQueries returns every panel query and every variable query of
// dashboards/*.json.
func dashboardQueries(t *testing.T) (panels, variables []query) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(testutil.ModuleRoot(t), "dashboards", "*.json"))
	if len(paths) == 0 {
		t.Fatal("no dashboards in dashboards/")
	}
	sort.Strings(paths)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var d grafanaDashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		base := filepath.Base(p)
		for _, pan := range d.Panels {
			for _, tg := range pan.Targets {
				panels = append(panels, query{
					Where: fmt.Sprintf("%s: panel %q %s", base, pan.Title, tg.RefID),
					Expr:  tg.Expr, Dashboard: base, Panel: pan.Title, RefID: tg.RefID,
				})
			}
		}
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			var q string
			switch x := v.Query.(type) {
			case string:
				q = x
			case map[string]any:
				q, _ = x["query"].(string)
			}
			variables = append(variables, query{Where: fmt.Sprintf("%s: variable %s", base, v.Name), Expr: q, Dashboard: base})
		}
	}
	return panels, variables
}
