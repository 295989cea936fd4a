package e2e

import (
	"os"
	"os/exec"
	"testing"
)

// RequireTool returns the path of an external program the tests need
// (promtool, amtool, prometheus, prometheus-alertmanager). Missing: the test
// is skipped locally and fails under CI=true, where the rules and dashboards
// must be proven, not skipped.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := "/usr/bin/" + name; fileExists(p) {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found and CI=true: install the Debian prometheus and prometheus-alertmanager packages", name)
	}
	t.Skipf("%s not installed; skipping (CI=true makes this a failure)", name)
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
