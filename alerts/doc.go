// Package alerts holds the Prometheus rule files for vLLM and vllm_exporter,
// their runbooks and promtool unit tests, and the one generator of every
// rule file (Generate, behind `vllm_exporter rules`): the hand-written alerts
// and fleet recording rules of src/ with their runbook and dashboard links
// filled in, and the SLO rules compiled from the SLO config. The generated
// files are embedded, so deploy/ and the Helm chart package exactly what is
// tested.
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
