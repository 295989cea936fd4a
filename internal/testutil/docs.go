package testutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DocsText returns the operator- and developer-facing Markdown, README.md
// and every docs/**/*.md (in path order), concatenated, each preceded by a
// line naming the file. Tests that keep the documentation true (every flag,
// every series) read it whole, so a fact may live in whichever page suits
// the reader.
func DocsText(t testing.TB) string {
	t.Helper()
	root := ModuleRoot(t)
	var b strings.Builder
	add := func(p string) error {
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		b.WriteString("\n<!-- file: " + filepath.ToSlash(rel) + " -->\n")
		b.Write(data)
		b.WriteString("\n")
		return err
	}
	err := add(filepath.Join(root, "README.md"))
	if err == nil {
		// WalkDir visits in lexical order.
		err = filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
				return err
			}
			return add(p)
		})
	}
	if err != nil {
		t.Fatalf("reading the docs: %v", err)
	}
	return b.String()
}
