package toolbuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestReleaseVersion(t *testing.T) {
	for _, c := range []struct{ mod, v, want string }{
		{"github.com/prometheus/prometheus", "v0.316.0", "3.16.0"},
		{"github.com/prometheus/prometheus", "v0.305.2", "3.5.2"},
		{"github.com/prometheus/prometheus", "v0.300.1", "3.0.1"},
		{"github.com/prometheus/alertmanager", "v0.31.0", "0.31.0"},
	} {
		if got := releaseVersion(c.mod, c.v); got != c.want {
			t.Errorf("releaseVersion(%s, %s) = %s, want %s", c.mod, c.v, got, c.want)
		}
	}
}

// The pinned modules are the ones the tests and docs promise: Prometheus
// 3.16 and the 3.5 LTS, Alertmanager 0.31, each pinning the release its
// directory names (plan fails otherwise).
func TestPinnedVersions(t *testing.T) {
	for name, want := range map[string][]string{
		"promtool": {"3.16", "3.5"}, "prometheus": {"3.16", "3.5"},
		"amtool": {"0.31"}, "alertmanager": {"0.31"},
	} {
		got, err := Versions(name)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("Versions(%s) = %v, %v; want %v", name, got, err, want)
		}
		if d := DefaultVersion(name); d != want[0] {
			t.Errorf("DefaultVersion(%s) = %s, want the newest, %s", name, d, want[0])
		}
	}
	mods, err := Modules()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		s, err := plan(m)
		if err != nil {
			t.Errorf("%s: %v", m, err)
			continue
		}
		if !strings.Contains(s.ldflags, "version.Version="+s.stamp) {
			t.Errorf("%s: ldflags %q do not stamp %s", m, s.ldflags, s.stamp)
		}
		if m == "prometheus-3.16" && !slices.Contains(s.tags, "remove_all_sd") {
			t.Errorf("%s: tags %v, want remove_all_sd", m, s.tags)
		}
		if m == "prometheus-3.5" && len(s.tags) != 0 {
			t.Errorf("%s: tags %v; remove_all_sd exists only from 3.10", m, s.tags)
		}
	}
}

// The cache key changes with anything that changes the binaries.
func TestCacheKeyFollowsInputs(t *testing.T) {
	a, err := plan("prometheus-3.16")
	if err != nil {
		t.Fatal(err)
	}
	b, err := plan("prometheus-3.5")
	if err != nil {
		t.Fatal(err)
	}
	if a.key == b.key {
		t.Errorf("3.16 and 3.5 share cache key %s", a.key)
	}
	a2, _ := plan("prometheus-3.16")
	if a.key != a2.key {
		t.Errorf("cache key not stable: %s, %s", a.key, a2.key)
	}
}

func TestCacheDirOverride(t *testing.T) {
	d := t.TempDir()
	t.Setenv(CacheEnv, d)
	if got, err := CacheDir(); err != nil || got != d {
		t.Errorf("CacheDir() = %s, %v; want %s", got, err, d)
	}
}

// recorder is a testing.TB that records Skipf and Fatalf instead of
// acting (Require and Missing call nothing else).
type recorder struct {
	testing.TB
	skipped, fatal bool
	msg            string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(f string, a ...any) {
	r.skipped, r.msg = true, f
	runtime.Goexit()
}
func (r *recorder) Fatalf(f string, a ...any) {
	r.fatal, r.msg = true, f
	runtime.Goexit()
}

func record(f func(testing.TB)) *recorder {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

// A tool that cannot be had is a skip locally and a failure under CI=true:
// CI never passes with a real-tool test skipped.
func TestMissingToolFailsUnderCI(t *testing.T) {
	missing := func(tb testing.TB) { Require(tb, "promtool", "9.99") } // no such module
	t.Setenv("CI", "")
	if r := record(missing); !r.skipped || r.fatal {
		t.Errorf("locally: skipped=%v fatal=%v, want a skip", r.skipped, r.fatal)
	}
	t.Setenv("CI", "true")
	if r := record(missing); r.skipped || !r.fatal {
		t.Errorf("CI=true: skipped=%v fatal=%v, want a failure", r.skipped, r.fatal)
	}
	if r := record(func(tb testing.TB) { Require(tb, "prometheus-alertmanager", "") }); !r.fatal {
		t.Errorf("an unknown tool name was accepted")
	}
}

// Every pinned module builds, and each program reports the pinned release
// with --version: the stamp is what a failing test's log shows. Under
// CI=true a build failure fails here (with the go command's output), so CI
// cannot pass with the rule and end-to-end tests skipped.
func TestEveryPinnedToolBuilds(t *testing.T) {
	mods, err := Modules()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		t.Run(m, func(t *testing.T) {
			f, v, _ := splitModule(m)
			for _, c := range f.cmds {
				bin := Require(t, c, v)
				out, err := exec.Command(bin, "--version").CombinedOutput()
				if err != nil {
					t.Fatalf("%s --version: %v\n%s", bin, err, out)
				}
				s, _ := plan(m)
				if !strings.Contains(string(out), "version "+s.stamp) {
					t.Errorf("%s --version does not say %s:\n%s", c, s.stamp, out)
				}
			}
		})
	}
}

// The pinned tools win over anything on PATH (a distribution's promtool
// 2.x there must not decide what the tests prove).
func TestPathIsNotConsulted(t *testing.T) {
	fake := t.TempDir()
	if err := os.WriteFile(filepath.Join(fake, "promtool"), []byte("#!/bin/sh\necho fake\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", fake+string(os.PathListSeparator)+os.Getenv("PATH"))
	got := Require(t, "promtool", "")
	cache, _ := CacheDir()
	if filepath.Dir(got) == fake || !strings.HasPrefix(got, cache) {
		t.Errorf("Require(promtool) = %s, want a build under %s", got, cache)
	}
}

func TestTail(t *testing.T) {
	if got := Tail("a\nb\nc\n", 2); got != "[... 1 lines before]\nb\nc" {
		t.Fatalf("Tail = %q", got)
	}
	if got := Tail("a\nb\n", 5); got != "a\nb" {
		t.Fatalf("Tail of a short text = %q", got)
	}
}
