package vllm

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

var update = flag.Bool("update", false, "rewrite docs/exporter.md's family table from MarkdownTable()")

// Every row is complete and unambiguous: one place its reading lands, the
// fields that place needs, and one exported series per name. A new row that
// misses something fails here, not at a scrape.
func TestFamilyRowsAreWellFormed(t *testing.T) {
	exported := map[string]bool{}
	for i := range families {
		f := &families[i]
		sinks := 0
		for _, set := range []bool{f.Value != nil, f.Map != nil, f.Info != nil, f.State != nil, f.StateMap != nil, f.Hist != "", f.Server != nil} {
			if set {
				sinks++
			}
		}
		switch {
		case len(f.Names) == 0 || f.Exported == "":
			t.Errorf("row %d: no vLLM name or no exported series", i)
		case sinks != 1:
			t.Errorf("%s: %d places for a reading, want exactly one", f.Exported, sinks)
		case f.Map != nil && (f.Label == "" || f.Limit.Max == 0):
			t.Errorf("%s: a by-label reading needs Label and Limit", f.Exported)
		case f.StateMap != nil && f.KeyLabel == "", (f.State != nil || f.StateMap != nil) && (f.StateLabel == "" || len(f.States) == 0 || f.Agg != aggLeastAwake):
			t.Errorf("%s: a state set needs StateLabel, States (and KeyLabel for a map) and aggLeastAwake", f.Exported)
		case f.Hist != "" && (f.Type != typeHistogram || f.Agg != aggBuckets || (f.Unit != "" && !strings.HasSuffix(f.Exported, "_"+f.Unit))):
			t.Errorf("%s: a histogram is typeHistogram with aggBuckets, its name ending in its unit", f.Exported)
		case f.Agg == aggSumCount && f.Count == nil, f.Agg == aggMean && f.Value == nil:
			t.Errorf("%s: aggregation %s needs Count / Value", f.Exported, f.Agg)
		case f.Engine != nil && (f.Scope != scopeEngine || f.EngineHelp == ""), f.Scope == scopeEngine && f.Engine == nil:
			t.Errorf("%s: per-engine rows have scopeEngine, Engine and EngineHelp", f.Exported)
		case f.Server != nil && (f.Scope != scopeServer || f.Out == nil):
			t.Errorf("%s: a reading into the server snapshot is server-wide and exported through Out", f.Exported)
		case !strings.HasPrefix(f.Exported, "vllm_") || (f.Type == typeCounter) != strings.HasSuffix(f.Exported, "_total"):
			t.Errorf("%s: exported names start with vllm_, and only counters end in _total", f.Exported)
		}
		if f.WindowOnly {
			continue
		}
		if exported[f.Exported] {
			t.Errorf("%s: exported by two rows", f.Exported)
		}
		exported[f.Exported] = true
	}
}

// The family table and the exported Descs agree: every row is an exported
// series (or, WindowOnly, a window series).
func TestTableRowsAreExported(t *testing.T) {
	s := New(Options{URL: "http://127.0.0.1:1"}, nil)
	ch := make(chan *prometheus.Desc, 200)
	s.Describe(ch)
	close(ch)
	var all string
	for d := range ch {
		all += d.String() + "\n"
	}
	for _, f := range families {
		if !strings.Contains(all, `fqName: "`+f.Exported+`"`) {
			t.Errorf("table row %s is not an exported series", f.Exported)
		}
	}
	table := MarkdownTable()
	if got := strings.Count(table, "\n"); got != len(families)+2 {
		t.Errorf("markdown table has %d lines, want %d", got, len(families)+2)
	}
}

// Every series read from vLLM says in its HELP where it comes from.
func TestHelpNamesTheSource(t *testing.T) {
	for _, d := range newDescs().all() {
		str := d.String()
		if strings.Contains(str, `fqName: "vllm_exporter_`) || strings.Contains(str, `fqName: "vllm_up"`) {
			continue
		}
		if !strings.Contains(str, "; from vllm:") && !strings.Contains(str, "; derived from vllm:") && !strings.Contains(str, "; from http_requests_total") {
			t.Errorf("HELP does not name its vLLM source: %s", str)
		}
	}
}

// docs/exporter.md carries the table rendered from the Go table verbatim,
// so code and documentation cannot drift apart. After changing a row, run
// go test ./collector/vllm -run TestDocsShowTheFamilyTable -update.
func TestDocsShowTheFamilyTable(t *testing.T) {
	const path = "../../docs/exporter.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, table := string(b), MarkdownTable()
	if strings.Contains(doc, table) {
		return
	}
	header := table[:strings.IndexByte(table, '\n')+1]
	start := strings.Index(doc, header)
	if !*update || start < 0 {
		t.Fatalf("docs/exporter.md does not contain the family table rendered by MarkdownTable(); run this test with -update, or replace its table with:\n%s", table)
	}
	end := strings.Index(doc[start:], "\n\n")
	if end < 0 {
		end = len(doc) - start
	}
	if err := os.WriteFile(path, []byte(doc[:start]+table+doc[start+end+1:]), 0o644); err != nil {
		t.Fatal(err)
	}
}
