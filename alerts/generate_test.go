package alerts

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

var update = flag.Bool("update", false, "rewrite the generated alerts/*.yml from alerts/src and the shipped SLOs")

// The rule files in alerts/ are exactly what Generate renders with the
// default options: editing a generated file instead of its source, or
// changing the generator without regenerating, fails here (and the
// Kubernetes copy is checked against Generate in ./deploy).
func TestShippedRulesAreGenerated(t *testing.T) {
	files, err := Generate(Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, f := range files {
		want[f.Name] = true
		if *update {
			if err := os.WriteFile(f.Name, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(f.Name)
		if err != nil {
			t.Fatalf("%v (run: go test ./alerts -run TestShippedRulesAreGenerated -update)", err)
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("alerts/%s differs from the generator's output (edit alerts/src or the SLO config, then run: go test ./alerts -run TestShippedRulesAreGenerated -update)", f.Name)
		}
	}
	on, _ := filepath.Glob("*.yml")
	for _, p := range on {
		if !want[p] {
			t.Errorf("alerts/%s is not generated: hand-written rules go in alerts/src/", p)
		}
	}
}

// Every alert of every generated file links its runbook heading and a
// dashboard that exists, with the options given; other options change the
// links and nothing else; generation is deterministic.
func TestGeneratedLinks(t *testing.T) {
	uids := map[string]bool{}
	dash, _ := filepath.Glob("../dashboards/*.json")
	for _, p := range dash {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			UID string `json:"uid"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		uids[d.UID] = true
	}
	anchors := runbookAnchors(t)
	opts := Options{RunbookURL: "https://wiki.example.com/vllm/runbooks", DashboardURL: "https://grafana.example.com/"}
	custom, err := Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Generate(opts)
	def, _ := Generate(Options{})
	n := 0
	for i, f := range custom {
		if !bytes.Equal(f.Data, again[i].Data) {
			t.Errorf("%s: two runs with the same options differ", f.Name)
		}
		var rf ruleFile
		if err := yaml.Unmarshal(f.Data, &rf); err != nil {
			t.Fatal(err)
		}
		var rd ruleFile
		yaml.Unmarshal(def[i].Data, &rd)
		for gi, g := range rf.Groups {
			for ri, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				n++
				rb, du := r.Annotations["runbook_url"], r.Annotations["dashboard_url"]
				anchor, ok := strings.CutPrefix(rb, opts.RunbookURL+"#")
				if !ok || !anchors[anchor] {
					t.Errorf("%s: %s runbook_url %q: not %s#<heading of runbooks.md>", f.Name, r.Alert, rb, opts.RunbookURL)
				}
				rest, ok := strings.CutPrefix(du, "https://grafana.example.com/d/")
				uid, _, _ := strings.Cut(rest, "?")
				if !ok || !uids[uid] {
					t.Errorf("%s: %s dashboard_url %q does not open a dashboard of dashboards/ on the given Grafana", f.Name, r.Alert, du)
				}
				// apart from the links, the defaults render the same rule
				d := rd.Groups[gi].Rules[ri]
				if d.Alert != r.Alert || d.Expr != r.Expr || d.Annotations["summary"] != r.Annotations["summary"] ||
					!strings.HasPrefix(d.Annotations["dashboard_url"], DefaultDashboardURL+"/d/"+uid) {
					t.Errorf("%s: %s: options changed more than the links", f.Name, r.Alert)
				}
			}
		}
	}
	if n < 16 {
		t.Errorf("only %d alerts generated", n)
	}
	if _, err := Generate(Options{DashboardURL: "grafana:3000"}); err == nil {
		t.Error("a dashboard URL without scheme was accepted")
	}
	if _, err := Generate(Options{RunbookURL: "https://x/runbooks.md#top"}); err == nil {
		t.Error("a runbook URL with an anchor was accepted")
	}
}
