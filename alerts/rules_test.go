package alerts

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func ruleFilePaths(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob("*.yml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no rule files found: %v", err)
	}
	sort.Strings(paths)
	return paths
}

func loadRules(t *testing.T) map[string]ruleFile {
	t.Helper()
	out := map[string]ruleFile{}
	for _, p := range ruleFilePaths(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var rf ruleFile
		if err := yamlUnmarshalStrict(b, &rf); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[p] = rf
	}
	return out
}

// yamlUnmarshalStrict decodes b into v, failing on unknown fields.
func yamlUnmarshalStrict(b []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// Every rule file loads on every pinned promtool (Prometheus 3.16 and 3.5),
// which refuses experimental functions unless a feature flag enables them.
func TestPromtoolCheckRules(t *testing.T) {
	testutil.CheckRules(t, ruleFilePaths(t)...)
}

// The rule files load unchanged in Thanos Ruler and Grafana Mimir's ruler
// (docs/deploy.md): loadRules decodes strictly, so a group holds nothing
// but name, interval and rules (no limit, query_offset or
// keep_firing_for); no expression uses the @ modifier; record and label
// names pass the legacy name check rulers older than Prometheus 3 apply;
// and the groups fit Mimir's per-tenant rule limits as docs/deploy.md
// states them.
func TestRulesLoadInOtherRulers(t *testing.T) {
	quoted := regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	metricName := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName := regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	groups, most := 0, 0
	for p, rf := range loadRules(t) {
		for _, g := range rf.Groups {
			groups, most = groups+1, max(most, len(g.Rules))
			for _, r := range g.Rules {
				if strings.Contains(quoted.ReplaceAllString(r.Expr, `""`), "@") {
					t.Errorf("%s: %s%s uses the @ modifier", p, r.Record, r.Alert)
				}
				if r.Record != "" && !metricName.MatchString(r.Record) {
					t.Errorf("%s: record %q is not a legacy metric name", p, r.Record)
				}
				for l := range r.Labels {
					if !labelName.MatchString(l) {
						t.Errorf("%s: %s%s: label %q is not a legacy label name", p, r.Record, r.Alert, l)
					}
				}
			}
		}
	}
	doc, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	limit := func(name string) int {
		m := regexp.MustCompile("`" + name + `: (\d+)` + "`").FindSubmatch(doc)
		if m == nil {
			t.Fatalf("docs/deploy.md names no `%s: N`", name)
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	if n := limit("ruler_max_rules_per_rule_group"); n < most {
		t.Errorf("docs/deploy.md: ruler_max_rules_per_rule_group %d, but a group holds %d rules", n, most)
	}
	if n := limit("ruler_max_rule_groups_per_tenant"); n < groups {
		t.Errorf("docs/deploy.md: ruler_max_rule_groups_per_tenant %d, but the files hold %d groups", n, groups)
	}
	if !bytes.Contains(doc, []byte(fmt.Sprintf("largest group holds %d rules", most))) {
		t.Errorf("docs/deploy.md does not say the largest group holds %d rules", most)
	}
}

// githubAnchor turns a Markdown heading into the anchor GitHub renders.
func githubAnchor(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func runbookAnchors(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			anchors[githubAnchor(strings.TrimLeft(line, "#"))] = true
		}
	}
	return anchors
}

var (
	recordName = regexp.MustCompile(`^[a-z_]+:[a-z0-9_]+:[a-z0-9_]+$`)
	alertName  = regexp.MustCompile(`^[A-Z][A-Za-z0-9]+$`)
)

// Every alert carries the labels and annotations on-call needs, and its
// runbook link resolves to a heading of runbooks.md.
func TestAlertsAreWellFormed(t *testing.T) {
	anchors := runbookAnchors(t)
	seen := map[string]string{}
	nAlerts := 0
	for path, rf := range loadRules(t) {
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Record != "" {
					// Generated SLO rules may use Sloth-style names; ours must
					// follow level:metric:operation.
					if !strings.HasPrefix(path, "slo-") && !recordName.MatchString(r.Record) {
						t.Errorf("%s: recording rule %q is not level:metric:operation", path, r.Record)
					}
					continue
				}
				nAlerts++
				where := fmt.Sprintf("%s: alert %s", path, r.Alert)
				if !alertName.MatchString(r.Alert) {
					t.Errorf("%s: name is not CamelCase", where)
				}
				if prev, ok := seen[r.Alert+r.Labels["severity"]+r.Labels["slo"]]; ok && prev != path {
					t.Errorf("%s: also defined in %s", where, prev)
				}
				seen[r.Alert+r.Labels["severity"]+r.Labels["slo"]] = path
				switch r.Labels["severity"] {
				case "critical", "warning", "none":
				default:
					t.Errorf("%s: severity %q, want critical, warning or none", where, r.Labels["severity"])
				}
				for _, a := range []string{"summary", "description", "runbook_url"} {
					if strings.TrimSpace(r.Annotations[a]) == "" {
						t.Errorf("%s: missing annotation %s", where, a)
					}
				}
				// The heartbeat and absent() alerts have no value or label
				// worth templating.
				noLabels := r.Alert == "Watchdog" || strings.HasPrefix(strings.TrimSpace(r.Expr), "absent(")
				if !noLabels && !strings.Contains(r.Annotations["description"], "{{") {
					t.Errorf("%s: description is not templated with any value or label", where)
				}
				u := r.Annotations["runbook_url"]
				i := strings.Index(u, "alerts/runbooks.md#")
				if i < 0 {
					t.Errorf("%s: runbook_url %q does not point at alerts/runbooks.md#<anchor>", where, u)
					continue
				}
				anchor := u[i+len("alerts/runbooks.md#"):]
				if strings.Contains(anchor, "{{") {
					// Templated anchors (one per SLO) must render to an
					// existing heading for every value; checked by the
					// generated-rule test below.
					continue
				}
				if !anchors[anchor] {
					t.Errorf("%s: runbook anchor #%s has no heading in runbooks.md", where, anchor)
				}
			}
		}
	}
	if nAlerts < 14 {
		t.Errorf("only %d alerts found; the hand-written file alone has 14", nAlerts)
	}
}

// Every alert defined in alerts/*.yml is exercised by the promtool cases
// (promtoolFiles): at least one evaluation where it fires and at least two
// where it must be silent (before the fault, on healthy noise, after it
// resolved), one of them later in the same test than a firing one (it
// resolves). promtool compares the full set of firing alerts, so a firing
// case also proves the noisy healthy series of the same test stay silent.
// A generated alert exists once per SLO (label slo): each SLO's rule must
// fire in some test, not just one of them.
func TestEveryAlertIsUnitTested(t *testing.T) {
	fires := map[string]int{}    // alert or alert/slo
	silent := map[string]int{}   // alert
	resolves := map[string]int{} // alert or alert/slo
	covered := map[string]bool{}
	for _, f := range promtoolFiles() {
		for _, rf := range f.rules {
			covered[rf] = true
		}
		for _, tc := range f.build(t).Tests {
			firedAt := map[string]time.Duration{} // key -> earliest firing check
			var silentAt []testutil.AlertTest
			for _, a := range tc.AlertTests {
				at := time.Duration(a.EvalTime)
				if len(a.ExpAlerts) == 0 {
					silent[a.Alertname]++
					silentAt = append(silentAt, a)
					continue
				}
				for _, e := range a.ExpAlerts {
					key := a.Alertname
					if slo := e.ExpLabels["slo"]; slo != "" {
						key += "/" + slo
					}
					fires[key]++
					if prev, ok := firedAt[key]; !ok || at < prev {
						firedAt[key] = at
					}
				}
			}
			for key, at := range firedAt {
				alert, _, _ := strings.Cut(key, "/")
				for _, s := range silentAt {
					if s.Alertname == alert && time.Duration(s.EvalTime) > at {
						resolves[key]++
						break
					}
				}
			}
		}
	}
	for path, rf := range loadRules(t) {
		hasAlerts := false
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				hasAlerts = true
				key := r.Alert
				if slo := r.Labels["slo"]; slo != "" {
					key += "/" + slo
				}
				if fires[key] == 0 {
					t.Errorf("%s: alert %s never expected to fire in the promtool cases", path, key)
				}
				if r.Alert == "Watchdog" {
					continue
				}
				if silent[r.Alert] < 2 {
					t.Errorf("%s: alert %s has %d silent checks in the promtool cases, want >= 2 (before and after)", path, r.Alert, silent[r.Alert])
				}
				if resolves[key] == 0 {
					t.Errorf("%s: alert %s is never checked silent after firing in the same test (resolves)", path, key)
				}
			}
		}
		if hasAlerts && !covered[path] {
			t.Errorf("%s is not loaded by any promtool case file (promtoolFiles)", path)
		}
	}
}
