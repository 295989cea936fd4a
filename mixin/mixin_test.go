// Package mixin holds the monitoring mixin (mixin.libsonnet); its tests
// render it with go-jsonnet and compare it with the files it is built from.
package mixin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-jsonnet"
	"gopkg.in/yaml.v3"

	"github.com/vllm-exporter/vllm_exporter/alerts"
	"github.com/vllm-exporter/vllm_exporter/internal/e2e"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

type rule map[string]any

type group struct {
	Name  string `json:"name" yaml:"name"`
	Rules []rule `json:"rules" yaml:"rules"`
	// the rest of the group (interval, ...) compared as a whole
	Extra map[string]any `json:"-" yaml:",inline"`
}

type mixin struct {
	Alerts     struct{ Groups []group } `json:"prometheusAlerts"`
	Rules      struct{ Groups []group } `json:"prometheusRules"`
	Dashboards map[string]any           `json:"grafanaDashboards"`
}

// render evaluates the mixin with a _config override (jsonnet object
// fields) the way a user's jsonnet would.
func render(t *testing.T, config string) mixin {
	t.Helper()
	vm := jsonnet.MakeVM()
	vm.Importer(&jsonnet.FileImporter{JPaths: []string{"."}})
	src := `local m = (import 'mixin.libsonnet') + { _config+:: {` + config + `} };
{ prometheusAlerts: m.prometheusAlerts, prometheusRules: m.prometheusRules, grafanaDashboards: m.grafanaDashboards }`
	out, err := vm.EvaluateAnonymousSnippet("test.jsonnet", src)
	if err != nil {
		t.Fatalf("jsonnet: %v", err)
	}
	var m mixin
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// shippedGroups reads the groups of alerts/*.yml (through YAML -> JSON so
// they compare with jsonnet's output).
func shippedGroups(t *testing.T, skip string) []group {
	t.Helper()
	var out []group
	for _, name := range alerts.RuleFileNames() {
		if name == skip {
			continue
		}
		var f map[string]any
		if err := yaml.Unmarshal(alerts.RuleFiles()[name], &f); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(f)
		var gs struct{ Groups []group }
		if err := json.Unmarshal(b, &gs); err != nil {
			t.Fatal(err)
		}
		out = append(out, gs.Groups...)
	}
	return out
}

// merge puts the alert and the recording groups of the same name back
// together in the shipped rule order.
func merge(t *testing.T, m mixin, want []group) []group {
	t.Helper()
	byName := map[string][]rule{}
	for _, g := range append(slices.Clone(m.Rules.Groups), m.Alerts.Groups...) {
		byName[g.Name] = append(byName[g.Name], g.Rules...)
	}
	var out []group
	for _, w := range want {
		got := byName[w.Name]
		delete(byName, w.Name)
		// restore the shipped order: each rule where it was
		ordered := make([]rule, 0, len(got))
		for _, r := range w.Rules {
			for i, g := range got {
				if ruleKey(g) == ruleKey(r) {
					ordered = append(ordered, g)
					got = append(got[:i], got[i+1:]...)
					break
				}
			}
		}
		out = append(out, group{Name: w.Name, Rules: append(ordered, got...)})
	}
	for name := range byName {
		t.Errorf("the mixin has group %s, which alerts/ does not", name)
	}
	return out
}

// ruleKey identifies a rule regardless of its expression: its alert or
// record name and its labels.
func ruleKey(r rule) string {
	b, _ := json.Marshal([]any{r["alert"], r["record"], r["labels"]})
	return string(b)
}

func stripExtra(gs []group) []group {
	out := make([]group, len(gs))
	for i, g := range gs {
		out[i] = group{Name: g.Name, Rules: g.Rules}
	}
	return out
}

// With the default _config the mixin's rules are exactly alerts/*.yml
// (alerts in prometheusAlerts, recording rules in prometheusRules), its
// dashboards exactly dashboards/*.json, and it lists every such file.
func TestMixinEqualsShippedFiles(t *testing.T) {
	m := render(t, "")
	want := shippedGroups(t, "")
	if got := merge(t, m, want); !reflect.DeepEqual(got, stripExtra(want)) {
		t.Error("the mixin's rules differ from alerts/*.yml")
	}
	for _, g := range m.Alerts.Groups {
		for _, r := range g.Rules {
			if r["alert"] == nil {
				t.Errorf("prometheusAlerts group %s holds a recording rule %v", g.Name, r["record"])
			}
		}
	}
	for _, g := range m.Rules.Groups {
		for _, r := range g.Rules {
			if r["record"] == nil {
				t.Errorf("prometheusRules group %s holds an alert %v", g.Name, r["alert"])
			}
		}
	}

	src, err := os.ReadFile("mixin.libsonnet")
	if err != nil {
		t.Fatal(err)
	}
	imported := map[string]bool{}
	for _, m := range regexp.MustCompile(`import(?:str)? '\.\./((?:alerts|dashboards)/[^']+)'`).FindAllStringSubmatch(string(src), -1) {
		imported[m[1]] = true
	}
	files, _ := filepath.Glob("../dashboards/*.json")
	for _, name := range alerts.RuleFileNames() {
		files = append(files, "../alerts/"+name)
	}
	for _, f := range files {
		if !imported[strings.TrimPrefix(f, "../")] {
			t.Errorf("mixin.libsonnet does not import %s", f)
		}
	}
	if len(imported) != len(files) {
		t.Errorf("mixin.libsonnet imports %d files, alerts/ and dashboards/ hold %d", len(imported), len(files))
	}
	for _, f := range files {
		if !strings.HasSuffix(f, ".json") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d any
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(m.Dashboards[filepath.Base(f)], d) {
			t.Errorf("grafanaDashboards[%q] differs from %s", filepath.Base(f), f)
		}
	}
}

// With a selector every raw series every rule reads is narrowed to it
// (recorded series keep their sources' labels), nothing else changes, and
// Prometheus accepts the result.
func TestMixinSelector(t *testing.T) {
	m := render(t, `vllmSelector: 'job="vllm-exporter",namespace=~"inference-.*"'`)
	want := shippedGroups(t, "")
	got := merge(t, m, want)
	if len(got) != len(want) {
		t.Fatalf("%d groups, want %d", len(got), len(want))
	}
	exprs := 0
	for gi, g := range got {
		for ri, r := range g.Rules {
			w := want[gi].Rules[ri]
			expr, _ := r["expr"].(string)
			for k := range w {
				if k != "expr" && !reflect.DeepEqual(r[k], w[k]) {
					t.Errorf("%s: %s changed", g.Name, k)
				}
			}
			sels, err := e2e.Selectors(expr)
			if err != nil {
				t.Fatalf("%q: %v", expr, err)
			}
			wantSels, _ := e2e.Selectors(w["expr"].(string))
			if len(sels) != len(wantSels) {
				t.Errorf("%q: %d selectors, the shipped expression has %d", expr, len(sels), len(wantSels))
			}
			for _, s := range sels {
				if strings.Contains(s.Name, ":") {
					continue
				}
				if !slices.Contains(s.Labels, "job") || !slices.Contains(s.Labels, "namespace") {
					t.Errorf("%s: selector %s in %q lacks the _config selector", g.Name, s.Name, expr)
				}
			}
			exprs++
		}
	}
	if exprs == 0 {
		t.Fatal("no rules")
	}

	dir := t.TempDir()
	var paths []string
	for name, groups := range map[string][]group{"alerts.yml": m.Alerts.Groups, "rules.yml": m.Rules.Groups} {
		b, _ := json.Marshal(map[string]any{"groups": groups})
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	testutil.CheckRules(t, paths...)
}

// sloRules: false leaves out exactly the generated SLO rules.
func TestMixinWithoutSLORules(t *testing.T) {
	want := shippedGroups(t, "slo-rules.yml")
	if got := merge(t, render(t, "sloRules: false"), want); !reflect.DeepEqual(got, stripExtra(want)) {
		t.Error("with sloRules: false the mixin's rules differ from alerts/*.yml without slo-rules.yml")
	}
}
