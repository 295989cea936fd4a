package testutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
)

// ConfigHolder writes yaml to a config file in a fresh temporary directory
// and loads it into a config.Holder (an invalid file fails the test); the
// file's path is returned for tests that rewrite it and reload.
func ConfigHolder(t testing.TB, yaml string) (*config.Holder, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := config.NewHolder(path)
	if err != nil {
		t.Fatal(err)
	}
	return h, path
}
