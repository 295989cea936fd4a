package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestGoldenUpdatesThenReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.txt")
	if got := Golden(t, path, []byte("new"), true, "hint"); string(got) != "new" {
		t.Fatalf("after update: %q", got)
	}
	if err := os.WriteFile(path, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := Golden(t, path, []byte("other"), false, "hint"); string(got) != "kept" {
		t.Fatalf("without update the file must be read as it is: %q", got)
	}
}
