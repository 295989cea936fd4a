package testutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// DocFiles lists the operator- and developer-facing Markdown of the
// repository: README.md and every file under docs/, relative to the module
// root, sorted. Tests that keep the documentation true (every flag, every
// series, every link) read this set, so a fact may live in whichever page
// suits the reader.
func DocFiles(t testing.TB) []string {
	t.Helper()
	root := ModuleRoot(t)
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listing docs/: %v", err)
	}
	sort.Strings(files[1:])
	return files
}

// DocsText returns README.md and every docs/**/*.md concatenated, each
// preceded by a line naming the file.
func DocsText(t testing.TB) string {
	t.Helper()
	root := ModuleRoot(t)
	var b strings.Builder
	for _, f := range DocFiles(t) {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("\n<!-- file: " + f + " -->\n")
		b.Write(data)
		b.WriteString("\n")
	}
	return b.String()
}
