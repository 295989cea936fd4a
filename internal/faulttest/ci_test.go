package faulttest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCIRunsTheDocumentedSetup: .ci/run (CI on a fresh machine) runs the
// README's test command, and installs exactly the Debian packages that
// docs/development.md's Prerequisites tell a new user to install, so the
// documented set-up is the one CI proves.
func TestCIRunsTheDocumentedSetup(t *testing.T) {
	root := repoRoot(t)
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	readme, ci, dev := read("README.md"), read(".ci/run"), read("docs/development.md")

	m := regexp.MustCompile(`(?m)^(\S[^#\n]*?)\s+# run every test$`).FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README.md names no test command (a shell line commented `# run every test`)")
	}
	var ciLines []string
	for _, l := range strings.Split(ci, "\n") {
		ciLines = append(ciLines, strings.TrimSpace(l))
	}
	if !slices.Contains(ciLines, m[1]) {
		t.Fatalf(".ci/run does not run the README's test command %q", m[1])
	}

	var ciPkgs []string
	for _, m := range regexp.MustCompile(`need\+=\(([^)]*)\)`).FindAllStringSubmatch(ci, -1) {
		ciPkgs = append(ciPkgs, strings.Fields(m[1])...)
	}
	inst := regexp.MustCompile(`apt-get install -y --no-install-recommends((?:[^\n\\]|\\\n)*)`).FindStringSubmatch(dev)
	if inst == nil {
		t.Fatal("docs/development.md has no `apt-get install -y --no-install-recommends ...` line")
	}
	docPkgs := strings.Fields(strings.ReplaceAll(inst[1], "\\", " "))
	slices.Sort(ciPkgs)
	slices.Sort(docPkgs)
	if len(ciPkgs) == 0 || !slices.Equal(ciPkgs, docPkgs) {
		t.Fatalf(".ci/run installs %q, docs/development.md tells users to install %q", ciPkgs, docPkgs)
	}
}
