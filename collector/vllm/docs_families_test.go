package vllm

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
)

// connectorFamilyNames pick out the vLLM families of serving features
// and KV connectors among the table rows: admission control, NIXL,
// LoRA, KV offload (both layouts), the Mooncake store, KV block
// residency, the multimodal and external caches, NaN logits.
var connectorFamilyNames = regexp.MustCompile(`^vllm:(admission_rejections|nixl_|lora_requests_info|kv_offload_|mooncake_store_|kv_block_|mm_cache_|external_prefix_cache_|corrupted_requests)`)

// connectorFamilies are the name-table rows of connectorFamilyNames.
func connectorFamilies() []*families.Family {
	var out []*families.Family
	for i := range families.Rows {
		if slices.ContainsFunc(families.Rows[i].NameList(), connectorFamilyNames.MatchString) {
			out = append(out, &families.Rows[i])
		}
	}
	return out
}

// testsNaming maps each Test function of this package's test files to its
// source text (declaration and body).
func testsNaming(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestDocsShowTheConnectorFamilyTests" {
				continue
			}
			out[name+": "+fn.Name.Name] = string(src[fset.Position(fn.Pos()).Offset:fset.Position(fn.End()).Offset])
		}
	}
	return out
}

// connectorFamilyTestTable renders the connector families: vLLM family ->
// exported series -> the tests (file: function) of this package whose
// code names the exported series (checks what the exporter exports, not
// only what it read). A family no test names is an error.
func connectorFamilyTestTable(t *testing.T) string {
	t.Helper()
	tests := testsNaming(t)
	var b strings.Builder
	b.WriteString("| vLLM family (preferred first) | exported series | tested by (`collector/vllm`) |\n|---|---|---|\n")
	for _, f := range connectorFamilies() {
		var by []string
		for name, src := range tests {
			if regexp.MustCompile(`\b` + f.Exported + `\b`).MatchString(src) {
				by = append(by, name)
			}
		}
		if len(by) == 0 {
			t.Errorf("%s (%s): no test of collector/vllm checks the exported series", f.Exported, strings.Join(f.NameList(), ", "))
			continue
		}
		slices.Sort(by)
		names := make([]string, len(f.Names))
		for i, n := range f.NameList() {
			names[i] = "`" + n + "`"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s |\n", strings.Join(names, ", "), f.Exported, "`"+strings.Join(by, "`, `")+"`")
	}
	return b.String()
}

// docs/vllm-versions.md carries the connector family -> series -> test
// table as rendered here. After adding a family or a test, run
// go test ./collector/vllm -run TestDocsShowTheConnectorFamilyTests -update.
func TestDocsShowTheConnectorFamilyTests(t *testing.T) {
	if n := len(connectorFamilies()); n < 25 {
		t.Fatalf("only %d connector families in the name table: is connectorFamilyNames right?", n)
	}
	table := connectorFamilyTestTable(t)
	if t.Failed() {
		return
	}
	docHoldsTable(t, "../../docs/vllm-versions.md", table, "TestDocsShowTheConnectorFamilyTests")
}
