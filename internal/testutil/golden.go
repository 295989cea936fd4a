package testutil

import (
	"os"
	"testing"
)

// Golden returns the golden file at path, first rewritten with got when
// update is set (the test package's -update flag). A missing file fails the
// test with hint (how to create it). Comparing, and showing a difference,
// stay with the caller: what a useful difference is depends on the file.
func Golden(t testing.TB, path string, got []byte, update bool, hint string) []byte {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (%s)", err, hint)
	}
	return want
}
