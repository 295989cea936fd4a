package faulttest

import (
	"go/version"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGoDirectiveIsMinimal: go.mod's go line is the oldest Go the build
// can use, i.e. the newest go line among the modules that provide the
// packages we build and test (the go command refuses a main module older
// than its dependencies), and there is no toolchain line. A higher go line
// (say 1.26.8) makes every user on an older 1.26.x download a toolchain.
func TestGoDirectiveIsMinimal(t *testing.T) {
	root := repoRoot(t)
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	ours := string(m[1])
	if regexp.MustCompile(`(?m)^toolchain `).Match(gomod) {
		t.Error("go.mod has a toolchain line: it forces a toolchain download on older Go")
	}
	cmd := exec.Command("go", "list", "-deps", "-test", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.GoVersion}}{{end}}{{end}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	need, by := "1.0", ""
	for _, l := range strings.Split(string(out), "\n") {
		path, v, ok := strings.Cut(l, " ")
		if ok && v != "" && version.Compare("go"+v, "go"+need) > 0 {
			need, by = v, path
		}
	}
	if ours != need {
		t.Fatalf("go.mod says go %s; the dependencies need go %s (%s): set the go line to that", ours, need, by)
	}
}
