package dashboards

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vllm-exporter/vllm_exporter/internal/e2e"
)

var update = flag.Bool("update", false, "rewrite dashboards/*.json from the Go definitions")

// The committed JSON is what Grafana loads; it must be exactly what the
// definitions render.
func TestDashboardFilesMatchDefinitions(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		for name, b := range files {
			if err := os.WriteFile(name, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	onDisk, _ := filepath.Glob("*.json")
	if len(onDisk) != len(files) {
		t.Errorf("dashboards/ has %d JSON files, definitions render %d: %v", len(onDisk), len(files), onDisk)
	}
	for name, want := range files {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%v (run: go test ./dashboards -run TestDashboardFilesMatchDefinitions -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s drifted from the definitions in defs.go (run: go test ./dashboards -run TestDashboardFilesMatchDefinitions -update)", name)
		}
	}
}

// Panel types that ship with Grafana: no plugin may be required.
var builtinPanels = map[string]bool{
	"row": true, "timeseries": true, "stat": true, "table": true, "bargauge": true,
	"gauge": true, "state-timeline": true, "text": true, "heatmap": true,
}

type dash struct {
	UID           string           `json:"uid"`
	Title         string           `json:"title"`
	SchemaVersion int              `json:"schemaVersion"`
	Requires      []any            `json:"__requires"`
	Inputs        []any            `json:"__inputs"`
	Panels        []map[string]any `json:"panels"`
	Templating    struct {
		List []map[string]any `json:"list"`
	} `json:"templating"`
}

var rawVLLMSeries = regexp.MustCompile(`\bvllm_[a-z0-9_]+\{`)

// varRef finds Grafana variable references: $name or ${name}.
var varRef = regexp.MustCompile(`\$(?:\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|([A-Za-z_][A-Za-z0-9_]*))`)

// modelMatch is the $model filter: exact, or also keeping the series with no
// model (probe SLOs carry model="").
var modelMatch = regexp.MustCompile(`model=~"\$model\|?"`)

// hasModelLabel says whether a series (by name) carries a model label, per
// the series contract: vLLM's own series, SLOs (probe SLOs with model=""),
// the bottleneck classifier and the model:/slo: recording rules do; GPU
// series (by design), probe series (label profile; vllm_probe_target_info
// names a profile's target model, and the Probes dashboard, which has no
// Model variable, is the only one reading it), the exporter's self
// metrics, vllm_up, vllm_engine_stalled, vllm_health_verdict (one verdict
// per vLLM server), vllm_slo_unmeasurable (per SLO and reason, whichever
// model) and slo:objective:ratio do not.
// internal/e2e checks the same against the labels a real run exposes.
func hasModelLabel(name string) bool {
	for _, prefix := range []string{"vllm_gpu_", "vllm_probe_", "vllm_exporter_"} {
		if strings.HasPrefix(name, prefix) {
			return false
		}
	}
	switch name {
	case "vllm_up", "vllm_server_info", "vllm_engine_stalled", "vllm_health_verdict", "vllm_slo_unmeasurable", "slo:objective:ratio":
		return false
	}
	return strings.HasPrefix(name, "vllm_") || strings.HasPrefix(name, "model:") || strings.HasPrefix(name, "slo:")
}

func TestDashboardsAreSelfContainedAndFiltered(t *testing.T) {
	paths, _ := filepath.Glob("*.json")
	if len(paths) < 4 {
		t.Fatalf("want the Overview, SLOs, GPU and Probes dashboards, found %v", paths)
	}
	uids := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var d dash
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if d.SchemaVersion < 36 || d.SchemaVersion > 41 {
			t.Errorf("%s: schemaVersion %d, want about 39", p, d.SchemaVersion)
		}
		if len(d.Requires) > 0 || len(d.Inputs) > 0 {
			t.Errorf("%s: has __requires/__inputs (export-for-sharing artefacts)", p)
		}
		if d.UID == "" || uids[d.UID] != "" {
			t.Errorf("%s: uid %q empty or shared with %s", p, d.UID, uids[d.UID])
		}
		uids[d.UID] = p
		vars := map[string]map[string]any{}
		for _, v := range d.Templating.List {
			vars[v["name"].(string)] = v
		}
		if v := vars["datasource"]; v == nil || v["type"] != "datasource" || v["query"] != "prometheus" {
			t.Errorf("%s: no datasource variable of type prometheus", p)
		}
		if vars["instance"] == nil {
			t.Errorf("%s: no instance variable", p)
		}
		// Every variable is used by some query (a variable that filters
		// nothing is a lie to the user), and every variable a query uses
		// exists.
		used := map[string]bool{}
		for _, v := range d.Templating.List {
			if q, ok := v["definition"].(string); ok {
				for _, m := range varRef.FindAllStringSubmatch(q, -1) {
					used[m[1]+m[2]] = true
				}
			}
		}
		ids := map[float64]bool{}
		nTargets := 0
		for _, pan := range d.Panels {
			title, _ := pan["title"].(string)
			typ, _ := pan["type"].(string)
			if !builtinPanels[typ] {
				t.Errorf("%s: panel %q has type %q, not a built-in panel", p, title, typ)
			}
			id, _ := pan["id"].(float64)
			if ids[id] {
				t.Errorf("%s: duplicate panel id %v", p, id)
			}
			ids[id] = true
			gp, _ := pan["gridPos"].(map[string]any)
			if x, w := gp["x"].(float64), gp["w"].(float64); x+w > 24 {
				t.Errorf("%s: panel %q overflows the 24-column grid", p, title)
			}
			if typ == "row" {
				continue
			}
			if dsr, _ := pan["datasource"].(map[string]any); dsr["uid"] != "${datasource}" {
				t.Errorf("%s: panel %q datasource %v, want ${datasource}", p, title, pan["datasource"])
			}
			used["datasource"] = true
			targets, _ := pan["targets"].([]any)
			if len(targets) == 0 {
				t.Errorf("%s: panel %q has no queries", p, title)
			}
			for _, tt := range targets {
				tg := tt.(map[string]any)
				nTargets++
				expr, _ := tg["expr"].(string)
				if dsr, _ := tg["datasource"].(map[string]any); dsr["uid"] != "${datasource}" {
					t.Errorf("%s: panel %q target %v has a fixed datasource", p, title, tg["refId"])
				}
				// Every raw exporter series is filtered to the selected
				// instances; recording rules (model:...) are fleet-wide.
				if rawVLLMSeries.MatchString(expr) && !strings.Contains(expr, `instance=~"$instance"`) {
					t.Errorf("%s: panel %q query ignores $instance: %s", p, title, expr)
				}
				// ... each of them, not just one selector of the query.
				sels, err := e2e.Selectors(e2e.Substitute(expr))
				if err != nil {
					t.Errorf("%s: panel %q: %v", p, title, err)
				}
				for _, sel := range sels {
					if strings.HasPrefix(sel.Name, "vllm_") && !slices.Contains(sel.Labels, "instance") {
						t.Errorf("%s: panel %q: selector %s ignores $instance: %s", p, title, sel.Name, expr)
					}
				}
				for _, m := range varRef.FindAllStringSubmatch(expr, -1) {
					name := m[1] + m[2]
					used[name] = true
					if !strings.HasPrefix(name, "__") && vars[name] == nil {
						t.Errorf("%s: panel %q uses $%s, which the dashboard does not define: %s", p, title, name, expr)
					}
				}
				if strings.Contains(expr, "$model") && !modelMatch.MatchString(expr) {
					t.Errorf("%s: panel %q uses $model without a regex match: %s", p, title, expr)
				}
				// Every selector of a series that has a model label is
				// filtered on $model: otherwise the Model variable silently
				// does nothing for that panel.
				for _, sel := range sels {
					if !hasModelLabel(sel.Name) {
						continue
					}
					if !slices.Contains(sel.Labels, "model") {
						t.Errorf("%s: panel %q: selector %s ignores $model: %s", p, title, sel.Name, expr)
					} else if !modelMatch.MatchString(expr) {
						t.Errorf("%s: panel %q: selector %s filters model, but not on $model: %s", p, title, sel.Name, expr)
					}
				}
			}
		}
		if nTargets < 8 {
			t.Errorf("%s: only %d queries", p, nTargets)
		}
		for name := range vars {
			if !used[name] {
				t.Errorf("%s: variable %q is used by no query", p, name)
			}
		}
	}
}

func TestProvisioningFiles(t *testing.T) {
	type provider struct {
		Name    string         `yaml:"name"`
		Type    string         `yaml:"type"`
		Folder  string         `yaml:"folder"`
		Options map[string]any `yaml:"options"`
	}
	var dp struct {
		APIVersion int        `yaml:"apiVersion"`
		Providers  []provider `yaml:"providers"`
	}
	b, err := os.ReadFile("provisioning/dashboards.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &dp); err != nil {
		t.Fatal(err)
	}
	if dp.APIVersion != 1 || len(dp.Providers) == 0 || dp.Providers[0].Type != "file" || dp.Providers[0].Options["path"] == nil {
		t.Errorf("provisioning/dashboards.yml: want apiVersion 1 and a file provider with options.path, got %+v", dp)
	}
	var dsf struct {
		APIVersion  int              `yaml:"apiVersion"`
		Datasources []map[string]any `yaml:"datasources"`
	}
	b, err = os.ReadFile("provisioning/datasources.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &dsf); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, d := range dsf.Datasources {
		types = append(types, d["type"].(string))
	}
	sort.Strings(types)
	if dsf.APIVersion != 1 || len(types) == 0 || types[0] != "prometheus" {
		t.Errorf("provisioning/datasources.yml: want a prometheus datasource, got %v", types)
	}
}
