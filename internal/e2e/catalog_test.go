package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// catalog is the set of series names (with their label names) that really
// exist: seen on the exporter's /metrics during a run, declared by the GPU
// collector against a mock NVML, present in real vLLM exposition fixtures,
// defined by recording rules, or synthesised by Prometheus itself.
type catalog struct {
	names  map[string]map[string]bool // name -> label names (nil: labels unknown)
	source map[string]string
}

func newCatalog() *catalog {
	return &catalog{names: map[string]map[string]bool{}, source: map[string]string{}}
}

func (c *catalog) add(src string, names map[string]map[string]bool) {
	for n, ls := range names {
		if _, ok := c.names[n]; !ok {
			c.source[n] = src
			c.names[n] = map[string]bool{}
		}
		if ls == nil {
			c.names[n] = nil
			continue
		}
		if c.names[n] != nil {
			for l := range ls {
				c.names[n][l] = true
			}
		}
	}
}

// Labels Prometheus attaches to every scraped series.
var targetLabels = map[string]bool{"job": true, "instance": true}

// check reports the problems of one selector.
func (c *catalog) check(sel Selector) []string {
	var problems []string
	if sel.Name == "" && sel.NameRegex != "" {
		re, err := regexp.Compile("^(?:" + sel.NameRegex + ")$")
		if err != nil {
			return []string{"bad __name__ regex: " + err.Error()}
		}
		for n := range c.names {
			if re.MatchString(n) {
				return nil
			}
		}
		return []string{"__name__=~" + sel.NameRegex + " matches no known series"}
	}
	labels, ok := c.names[sel.Name]
	if !ok {
		return []string{"unknown series " + sel.Name}
	}
	if labels == nil {
		return nil
	}
	for _, l := range sel.Labels {
		if !labels[l] && !targetLabels[l] {
			var have []string
			for h := range labels {
				have = append(have, h)
			}
			sort.Strings(have)
			problems = append(problems, "series "+sel.Name+" has no label "+l+" (has "+strings.Join(have, ",")+")")
		}
	}
	return problems
}

// Series Prometheus synthesises (not scraped from any target).
var prometheusSeries = map[string]map[string]bool{
	"up":               nil,
	"ALERTS":           nil,
	"ALERTS_FOR_STATE": nil,
}

// exporterNames scrapes the running exporter repeatedly for a while and
// returns the union of what it exported. Faults are injected into the
// simulator on the way so the series that exist only after a failure
// (probe failures by reason, scrape errors by reason) are seen for real.
func exporterNames(t *testing.T, s *stack) map[string]map[string]bool {
	t.Helper()
	union := map[string]map[string]bool{}
	scrape := func() {
		body, err := getBody(s.exporterURL + "/metrics")
		if err != nil {
			t.Logf("scrape: %v", err)
			return
		}
		for n, ls := range scrapeNames(body) {
			if union[n] == nil {
				union[n] = map[string]bool{}
			}
			for l := range ls {
				union[n][l] = true
			}
		}
	}
	// A phase scrapes the real binary for d of wall time, every 500 ms.
	phase := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
			scrape()
		}
	}
	phase(8 * time.Second)
	s.fault(t, map[string]any{"fault": "stream_error", "after_chunks": 1, "duration": "3s"})
	s.fault(t, map[string]any{"fault": "garbage_metrics", "duration": "3s"})
	phase(5 * time.Second)
	s.fault(t, map[string]any{"fault": "none"})
	phase(2 * time.Second)
	return union
}

// fixtureNames reads real vLLM exposition bodies (copied from
// shared/fixtures: vLLM main V1 and 0.7.3 V0).
func fixtureNames(t *testing.T) map[string]map[string]bool {
	t.Helper()
	paths, _ := filepath.Glob("testdata/vllm-*.txt")
	if len(paths) == 0 {
		t.Fatal("no vLLM fixtures in testdata")
	}
	out := map[string]map[string]bool{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for n, ls := range scrapeNames(b) {
			if out[n] == nil {
				out[n] = map[string]bool{}
			}
			for l := range ls {
				out[n][l] = true
			}
		}
	}
	return out
}

var (
	catalogOnce  sync.Once
	catalogBuilt *catalog
	catalogErr   string
)

// Sources of the catalog whose names are the exporter's own (not vLLM's
// exposition, not Prometheus, not recording rules).
const (
	srcExporter   = "exporter /metrics (run against vllm-sim)"
	srcComponents = "exporter components in-process (probes against vllm-sim; declared series)"
)

// seriesCatalog builds the catalog once per test binary (starting the
// simulator and the exporter takes most of a minute on a loaded machine)
// and hands the same one to every test that needs it.
func seriesCatalog(t *testing.T) *catalog {
	t.Helper()
	catalogOnce.Do(func() {
		failed := true
		defer func() {
			if failed && catalogErr == "" {
				catalogErr = "building the series catalog failed in " + t.Name()
			}
		}()
		s := startStack(t)
		cat := newCatalog()
		cat.add(srcExporter, exporterNames(t, s))
		cat.add(srcComponents, componentNames(t, s))
		cat.add("vLLM fixtures", fixtureNames(t))
		cat.add("Prometheus", prometheusSeries)
		_, records := ruleQueries(t, ruleFiles(t))
		recs := map[string]map[string]bool{}
		for r := range records {
			recs[r] = nil
		}
		cat.add("recording rules", recs)
		catalogBuilt = cat
		failed = false
	})
	if catalogBuilt == nil {
		t.Fatal(catalogErr)
	}
	return catalogBuilt
}

// TestQueriesUseExistingSeries checks every metric name (and every label it
// is filtered on) in every rule of alerts/*.yml and every panel and variable
// query of dashboards/*.json against the catalog derived from a real run of
// the exporter against the simulated vLLM.
func TestQueriesUseExistingSeries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the exporter and the simulator")
	}
	cat := seriesCatalog(t)
	rules, _ := ruleQueries(t, ruleFiles(t))
	t.Logf("catalog: %d series names", len(cat.names))

	panels, vars := dashboardQueries(t)
	var all []query
	all = append(all, rules...)
	all = append(all, panels...)
	hasModelVar := map[string]bool{} // dashboard -> defines $model
	for _, v := range vars {
		if v.Where == v.Dashboard+": variable model" {
			hasModelVar[v.Dashboard] = true
		}
	}
	for _, v := range vars {
		expr, err := VariableExpr(v.Expr)
		if err != nil {
			t.Errorf("%s: %v", v.Where, err)
			continue
		}
		all = append(all, query{Where: v.Where, Expr: expr})
	}
	used := map[string]bool{}
	for _, q := range all {
		sels, err := Selectors(Substitute(q.Expr))
		if err != nil {
			t.Errorf("%s: %v", q.Where, err)
			continue
		}
		if len(sels) == 0 && !strings.Contains(q.Expr, "vector(") {
			t.Errorf("%s: no series found in %q", q.Where, q.Expr)
		}
		for _, sel := range sels {
			used[sel.Name] = true
			for _, p := range cat.check(sel) {
				t.Errorf("%s: %s", q.Where, p)
			}
			// A dashboard selector of a series that really carries a
			// model label must filter on $model, or the Model variable
			// does nothing for that panel (dashboards/ checks the same
			// from the naming contract; this checks it against a run).
			// A dashboard without a Model variable (Probes: its
			// vllm_probe_target_info names each profile's model) has
			// nothing to filter on.
			if hasModelVar[q.Dashboard] && cat.names[sel.Name]["model"] && !slices.Contains(sel.Labels, "model") {
				t.Errorf("%s: series %s has a model label but the query ignores $model: %s", q.Where, sel.Name, q.Expr)
			}
		}
	}
	// Informational: exporter series no dashboard or rule looks at.
	var unused []string
	for n, src := range cat.source {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(n, "vllm_") && !strings.HasPrefix(src, "vLLM") && !used[n] && !used[base+"_bucket"] && !used[base] {
			unused = append(unused, n)
		}
	}
	sort.Strings(unused)
	t.Logf("exported but not used by any rule or dashboard: %s", strings.Join(unused, " "))
}

// TestDashboardQueriesParse runs every dashboard query (variables
// substituted) through promtool as a recording rule: Prometheus' own parser
// must accept it.
func TestDashboardQueriesParse(t *testing.T) {
	promtool := RequireTool(t, "promtool")
	panels, _ := dashboardQueries(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard-queries\n    rules:\n")
	for i, q := range panels {
		b.WriteString("      - record: dashboard:query:" + strconv.Itoa(i) + "\n        expr: " + strconv.Quote(Substitute(q.Expr)) + "\n")
	}
	p := filepath.Join(t.TempDir(), "queries.yml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runCmdAllowFail(promtool, "check", "rules", p)
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool rejects dashboard queries:\n%s", out)
	}
}
