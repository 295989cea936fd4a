package vllm

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

var update = flag.Bool("update", false, "rewrite docs/exporter.md's family table from MarkdownTable()")

// rowProblem says what is missing or contradictory in a row, "" if nothing.
func rowProblem(f *families.Family) string {
	sinks := 0
	// A row reading label values (Labels) exports its Map or Out: the Map
	// is then not a second place.
	for _, set := range []bool{f.Value != nil, f.Map != nil && f.ReadLabels == nil, f.Info != nil, f.State != nil, f.StateMap != nil, f.Hist != "", f.Server != nil, f.ReadLabels != nil} {
		if set {
			sinks++
		}
	}
	switch {
	case len(f.Names) == 0 || f.Exported == "":
		return "no vLLM name or no exported series"
	case sinks != 1:
		return fmt.Sprintf("%d places for a reading, want exactly one", sinks)
	case (f.Map != nil || f.Server != nil) && (f.Label == "" || f.Limit.Max == 0):
		return "a by-label reading needs Label and Limit"
	case f.StateMap != nil && f.KeyLabel == "", (f.State != nil || f.StateMap != nil) && (f.StateLabel == "" || len(f.States) == 0 || f.Agg != families.LeastAwake):
		return "a state set needs StateLabel, States (and KeyLabel for a map) and families.LeastAwake"
	case f.Hist != "" && (f.Type != families.Histogram || f.Agg != families.Buckets || (f.Unit != "" && !strings.HasSuffix(f.Exported, "_"+f.Unit))):
		return "a histogram is families.Histogram with families.Buckets, its name ending in its unit"
	case f.Agg == families.SumCount && f.Count == nil, f.Agg == families.Mean && f.Value == nil:
		return "aggregation " + f.Agg.String() + " needs Count / Value"
	case f.Engine != nil && (f.Scope != families.ScopeEngine || f.EngineHelp == ""), f.Scope == families.ScopeEngine && f.Engine == nil:
		return "per-engine rows have families.ScopeEngine, Engine and EngineHelp"
	case f.Server != nil && (f.Scope != families.ScopeServer || f.Out == nil):
		return "a reading into the server snapshot is server-wide and exported through Out"
	case f.ReadLabels != nil && ((f.Map == nil) == (f.Out == nil) || (f.Scope == families.ScopeServer) != (f.Share != nil) || f.Limit.Drop == ""):
		return "a reading of label values exports one of Map and Out, is shared when server-wide, and counts what its bound drops"
	case !strings.HasPrefix(f.Exported, "vllm_") || (f.Type == families.Counter) != strings.HasSuffix(f.Exported, "_total"):
		return "exported names start with vllm_, and only counters end in _total"
	case !f.WindowOnly && f.Help == "":
		return "no HELP"
	}
	return ""
}

// Every row is complete and unambiguous: one place its reading lands, the
// fields that place needs, and one exported series per name. A new row that
// misses something fails here, not at a scrape.
func TestFamilyRowsAreWellFormed(t *testing.T) {
	exported := map[string]bool{}
	for i := range families.Rows {
		f := &families.Rows[i]
		if p := rowProblem(f); p != "" {
			t.Errorf("%s (row %d): %s", f.Exported, i, p)
		}
		if !f.WindowOnly && exported[f.Exported] {
			t.Errorf("%s: exported by two rows", f.Exported)
		}
		exported[f.Exported] = true
	}
	// The check itself can fail: rows with a piece missing are refused.
	counter := families.Rows[slices.IndexFunc(families.Rows, func(f families.Family) bool { return f.Exported == "vllm_preemptions_total" })]
	broken := map[string]func(f *families.Family){
		"no place": func(f *families.Family) { f.Value = nil },
		"two places": func(f *families.Family) {
			f.Map = func(m *snapshot.Model) *map[string]float64 { return &m.FinishedByReason }
		},
		"unbounded label": func(f *families.Family) {
			f.Value, f.Map, f.Label = nil, func(m *snapshot.Model) *map[string]float64 { return &m.FinishedByReason }, "x"
		},
		"counter name": func(f *families.Family) { f.Exported = "vllm_preemptions" },
		"engine view":  func(f *families.Family) { f.Scope = families.ScopeEngine },
		"mean without sink": func(f *families.Family) {
			f.Agg, f.Value, f.Hist, f.Type = families.Mean, nil, snapshot.TTFT, families.Histogram
		},
	}
	for name, breakRow := range broken {
		f := counter
		breakRow(&f)
		if rowProblem(&f) == "" {
			t.Errorf("a row with %s passes the check", name)
		}
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
	for _, f := range families.Rows {
		if !strings.Contains(all, `fqName: "`+f.Exported+`"`) {
			t.Errorf("table row %s is not an exported series", f.Exported)
		}
	}
	table := MarkdownTable()
	if got := strings.Count(table, "\n"); got != len(families.Rows)+2 {
		t.Errorf("markdown table has %d lines, want %d", got, len(families.Rows)+2)
	}
}

// Every series read from vLLM says in its HELP where it comes from.
func TestHelpNamesTheSource(t *testing.T) {
	for _, d := range newDescs().all() {
		str := d.String()
		if strings.Contains(str, `fqName: "vllm_exporter_`) || strings.Contains(str, `fqName: "vllm_up"`) || strings.Contains(str, `fqName: "vllm_server_info"`) {
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
	docHoldsTable(t, "../../docs/exporter.md", MarkdownTable(), "TestDocsShowTheFamilyTable")
}

// docHoldsTable: the markdown file at path holds table verbatim; with
// -update, the table that starts with the same header line is replaced by
// it (the header must be there already).
func docHoldsTable(t *testing.T, path, table, test string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if strings.Contains(doc, table) {
		return
	}
	header := table[:strings.IndexByte(table, '\n')+1]
	start := strings.Index(doc, header)
	if !*update || start < 0 {
		t.Fatalf("%s does not contain the table rendered by %s; run: go test ./collector/vllm -run %s -update, or replace its table with:\n%s", path, test, test, table)
	}
	end := strings.Index(doc[start:], "\n\n")
	if end < 0 {
		end = len(doc) - start
	}
	if err := os.WriteFile(path, []byte(doc[:start]+table+doc[start+end+1:]), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Every histogram family of the table has a place in a model's
// HistogramSet (Set panics on a name it does not list).
func TestEveryHistogramFamilyHasAPlaceInTheSet(t *testing.T) {
	for _, f := range families.Rows {
		if f.Hist == "" {
			continue
		}
		var s snapshot.HistogramSet
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("family %v: histogram %q: %v", f.Names, f.Hist, r)
				}
			}()
			s.Set(f.Hist, snapshot.Histogram{Count: 1})
		}()
		if s.Get(f.Hist).Count != 1 {
			t.Errorf("family %v: histogram %q not kept", f.Names, f.Hist)
		}
	}
}
