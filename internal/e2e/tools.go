package e2e

import (
	"os/exec"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/toolbuild"
)

// RequireTool returns the path of an external program the tests need.
// prometheus, promtool, alertmanager and amtool are never taken from PATH
// or a distribution package: the test setup builds them from the pinned
// tool modules under internal/tools (Prometheus 3.16 and Alertmanager 0.31
// by default) and caches them between runs; see RequireToolVersion. Any
// other program (systemd-analyze, ...) is looked up on PATH. Missing or
// unbuildable: the test is skipped locally, with the reason, and fails
// under CI=true, where the rules and dashboards must be proven, not skipped.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	if toolbuild.Known(name) {
		return toolbuild.Require(t, name, "")
	}
	p, err := exec.LookPath(name)
	if err != nil {
		toolbuild.Missing(t, name+" not found on PATH")
	}
	return p
}

// RequireToolVersion returns prometheus, promtool, alertmanager or amtool
// at a pinned version: "3.16" or "3.5" for prometheus and promtool, "0.31"
// for alertmanager and amtool, "" for the default. It is built from
// internal/tools/<prometheus|alertmanager>-<version> on first use and
// cached under $VLLM_EXPORTER_TOOLS_CACHE (default <user cache
// dir>/vllm_exporter/tools), keyed by the module's go.mod and go.sum, the
// Go version and the build flags; a file lock makes parallel test
// binaries share one build. The binary's --version prints the release.
func RequireToolVersion(t testing.TB, name, version string) string {
	t.Helper()
	return toolbuild.Require(t, name, version)
}

// ToolVersions lists the pinned versions of name, newest first (["3.16",
// "3.5"] for prometheus and promtool).
func ToolVersions(t testing.TB, name string) []string {
	t.Helper()
	return toolbuild.RequireVersions(t, name)
}
