package faulttest

import (
	"go/version"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGoDirectiveIsMinimal: the go line of every go.mod in the repository
// (the exporter's and deploy/validate's) is the oldest Go that module can
// use, i.e. the newest go line among the modules that provide the packages
// it builds and tests (the go command refuses a main module older than its
// dependencies), and there is no toolchain line. A higher go line (say
// 1.26.8) makes every user on an older 1.26.x download a toolchain to run
// `make test`.
func TestGoDirectiveIsMinimal(t *testing.T) {
	root := repoRoot(t)
	var mods []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" {
			mods = append(mods, filepath.Dir(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range mods {
		rel, _ := filepath.Rel(root, filepath.Join(dir, "go.mod"))
		t.Run(rel, func(t *testing.T) { checkGoDirective(t, dir, rel) })
	}
}

func checkGoDirective(t *testing.T, dir, rel string) {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	if m == nil {
		t.Fatalf("%s has no go line", rel)
	}
	ours := string(m[1])
	if regexp.MustCompile(`(?m)^toolchain `).Match(gomod) {
		t.Errorf("%s has a toolchain line: it forces a toolchain download on older Go", rel)
	}
	args := []string{"list", "-deps", "-test", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.GoVersion}}{{end}}{{end}}", "./..."}
	if regexp.MustCompile(`(?m)^tool[ (]`).Match(gomod) {
		// A tools module (internal/tools) has no packages of its own: what
		// it builds are its tool directives' packages.
		args = append(args, "tool")
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list in %s: %v\n%s", filepath.Dir(rel), err, stderr)
	}
	need, by := "1.0", ""
	for _, l := range strings.Split(string(out), "\n") {
		path, v, ok := strings.Cut(l, " ")
		if ok && v != "" && version.Compare("go"+v, "go"+need) > 0 {
			need, by = v, path
		}
	}
	if ours != need {
		t.Fatalf("%s says go %s; its dependencies need go %s (%s): set the go line to that", rel, ours, need, by)
	}
}
