// Package alerts holds the Prometheus rule files for vLLM and vllm_exporter
// (hand-written alerts and fleet recording rules, plus the SLO rules that
// `vllm_exporter rules` generates), their runbooks and promtool unit tests.
// The Go code here only embeds the files, so deploy/ can build the
// Kubernetes PrometheusRule from exactly what is tested.
package alerts

import (
	"embed"
	"io/fs"
	"path"
	"sort"
)

//go:embed *.yml
var files embed.FS

// RuleFiles returns the rule files in this directory (file name -> content),
// hand-written and generated, in name order via RuleFileNames.
func RuleFiles() map[string][]byte {
	out := map[string][]byte{}
	matches, _ := fs.Glob(files, "*.yml")
	for _, m := range matches {
		b, err := files.ReadFile(m)
		if err == nil {
			out[path.Base(m)] = b
		}
	}
	return out
}

// RuleFileNames returns the sorted names of RuleFiles.
func RuleFileNames() []string {
	var names []string
	for n := range RuleFiles() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
