package toolbuild

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// Require returns name at version ("" for DefaultVersion) for a test,
// building it on first use. A failed build skips the test locally (the
// usual cause is an unreachable module proxy) and fails it, with the go
// command's output, under CI=true.
func Require(t testing.TB, name, version string) string {
	t.Helper()
	if !Known(name) {
		t.Fatalf("toolbuild: %s is not a pinned tool (prometheus, promtool, alertmanager, amtool)", name)
	}
	p, err := Path(name, version)
	if err != nil {
		var be *BuildError
		if errors.As(err, &be) && os.Getenv("CI") != "true" {
			err = errors.New("internal/tools/" + be.Module + " does not build here (module proxy unreachable?): " +
				be.Err.Error() + "\n" + Tail(be.Output, 8))
		}
		Missing(t, err.Error())
	}
	return p
}

// RequireVersions lists the pinned versions of name, newest first
// (["3.16", "3.5"] for promtool), for tests that must hold on every
// supported release.
func RequireVersions(t testing.TB, name string) []string {
	t.Helper()
	vs, err := Versions(name)
	if err != nil || len(vs) == 0 {
		t.Fatalf("toolbuild: no pinned versions of %s: %v", name, err)
	}
	return vs
}

// Missing skips the test with why, or fails it under CI=true, where every
// real-tool test must run.
func Missing(t testing.TB, why string) {
	t.Helper()
	why = strings.TrimSpace(why)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s\n(CI=true: every real-tool test must run)", why)
	}
	t.Skipf("%s\n(skipped; CI=true makes this a failure)", why)
}
