// Package toolbuild builds the real Prometheus, promtool, Alertmanager and
// amtool that the tests run, from the pinned tool modules under
// internal/tools/ (one go.mod per tool version, with `tool` directives), and
// caches the binaries between runs on one machine.
//
// The tests never take these programs from PATH or a distribution package:
// what they prove holds for the versions pinned here. A module is built
// once per machine and cache key (its go.mod and go.sum, the Go version,
// the build tags and the stamped version); a file lock makes parallel test
// binaries wait for one build instead of each starting its own.
package toolbuild

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// CacheEnv names the environment variable that overrides the cache
// directory (default: <os.UserCacheDir()>/vllm_exporter/tools).
const CacheEnv = "VLLM_EXPORTER_TOOLS_CACHE"

// A family is a set of programs built from one upstream repository: its
// tool modules are internal/tools/<family>-<version>.
type family struct {
	name    string   // "prometheus", "alertmanager"
	module  string   // the upstream module whose version is stamped
	cmds    []string // the programs, by binary name
	deflt   string   // the version tests get unless they ask for another
	tagsFor func(version string) []string
}

var families = []family{
	{
		name:   "prometheus",
		module: "github.com/prometheus/prometheus",
		cmds:   []string{"prometheus", "promtool"},
		deflt:  "3.16",
		// Since 3.10 remove_all_sd leaves out the bundled service
		// discoveries (file and HTTP stay): the tests use static targets,
		// and the build is a fraction of the size and time.
		tagsFor: func(v string) []string {
			if minorAtLeast(v, 3, 10) {
				return []string{"remove_all_sd"}
			}
			return nil
		},
	},
	{
		name:    "alertmanager",
		module:  "github.com/prometheus/alertmanager",
		cmds:    []string{"alertmanager", "amtool"},
		deflt:   "0.31",
		tagsFor: func(string) []string { return nil },
	},
}

// Known reports whether name is a program this package builds
// (prometheus, promtool, alertmanager, amtool).
func Known(name string) bool { _, ok := familyOf(name); return ok }

func familyOf(name string) (family, bool) {
	for _, f := range families {
		for _, c := range f.cmds {
			if c == name {
				return f, true
			}
		}
	}
	return family{}, false
}

// DefaultVersion is the version of name that Path("name", "") builds:
// "3.16" for prometheus and promtool, "0.31" for alertmanager and amtool.
func DefaultVersion(name string) string {
	f, _ := familyOf(name)
	return f.deflt
}

// Versions lists the pinned versions of name (the internal/tools/<family>-*
// modules), newest first, e.g. ["3.16", "3.5"] for promtool.
func Versions(name string) ([]string, error) {
	f, ok := familyOf(name)
	if !ok {
		return nil, fmt.Errorf("toolbuild: unknown tool %q", name)
	}
	mods, err := Modules()
	var vs []string
	for _, m := range mods {
		if mf, v, _ := splitModule(m); mf.name == f.name {
			vs = append(vs, v)
		}
	}
	sort.Slice(vs, func(i, j int) bool { return versionLess(vs[j], vs[i]) })
	return vs, err
}

// Modules lists every tool module (e.g. "prometheus-3.16"), for a step that
// builds them all ahead of the tests.
func Modules() ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dirs, err := filepath.Glob(filepath.Join(root, "internal", "tools", "*", "go.mod"))
	if err != nil {
		return nil, err
	}
	var ms []string
	for _, d := range dirs {
		m := filepath.Base(filepath.Dir(d))
		if _, _, err := splitModule(m); err == nil {
			ms = append(ms, m)
		}
	}
	sort.Strings(ms)
	return ms, nil
}

func splitModule(m string) (family, string, error) {
	for _, f := range families {
		if v, ok := strings.CutPrefix(m, f.name+"-"); ok && v != "" {
			return f, v, nil
		}
	}
	return family{}, "", fmt.Errorf("toolbuild: %q is not a tool module (<family>-<version>)", m)
}

// BuildError is a failed build, with the go command's output.
type BuildError struct {
	Module string
	Err    error
	Output string
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("building internal/tools/%s: %v\n%s", e.Module, e.Err, e.Output)
}

func (e *BuildError) Unwrap() error { return e.Err }

// Path returns the binary of name (prometheus, promtool, alertmanager,
// amtool) at version ("" for DefaultVersion), building its tool module
// into the cache first if it is not there.
func Path(name, version string) (string, error) {
	f, ok := familyOf(name)
	if !ok {
		return "", fmt.Errorf("toolbuild: unknown tool %q", name)
	}
	if version == "" {
		version = f.deflt
	}
	dir, err := Build(f.name + "-" + version)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// builds holds one build per module for the process.
var builds sync.Map // module -> func() (string, error)

// Build builds the tool module (e.g. "prometheus-3.16") unless the cache
// holds it, and returns the directory holding its programs. One build per
// module per process; a failure is remembered for the process.
func Build(module string) (string, error) {
	f, _ := builds.LoadOrStore(module, sync.OnceValues(func() (string, error) { return build(module) }))
	return f.(func() (string, error))()
}

// CacheDir is where built tools are kept: $VLLM_EXPORTER_TOOLS_CACHE, or
// vllm_exporter/tools under the user cache directory.
func CacheDir() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return filepath.Abs(d)
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("toolbuild: no cache directory (set %s): %w", CacheEnv, err)
	}
	return filepath.Join(d, "vllm_exporter", "tools"), nil
}

// RepoRoot is the exporter module's root directory (where internal/tools
// lives): found from this source file, else upwards from the working
// directory.
func RepoRoot() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		root := filepath.Join(filepath.Dir(file), "..", "..")
		if isRoot(root) {
			return filepath.Clean(root), nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if isRoot(d) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("toolbuild: internal/tools not found above " + wd)
		}
	}
}

func isRoot(d string) bool {
	st, err := os.Stat(filepath.Join(d, "internal", "tools"))
	return err == nil && st.IsDir()
}

// spec is everything that decides a build's output.
type spec struct {
	module, dir       string
	fam               family
	version, upstream string // "3.16", "v0.316.0"
	stamp             string // "3.16.0"
	tags              []string
	ldflags           string
	key               string
}

func plan(module string) (spec, error) {
	f, v, err := splitModule(module)
	if err != nil {
		return spec{}, err
	}
	root, err := RepoRoot()
	if err != nil {
		return spec{}, err
	}
	s := spec{module: module, dir: filepath.Join(root, "internal", "tools", module), fam: f, version: v, tags: f.tagsFor(v)}
	gomod, err := os.ReadFile(filepath.Join(s.dir, "go.mod"))
	if err != nil {
		return spec{}, fmt.Errorf("toolbuild: %w", err)
	}
	gosum, err := os.ReadFile(filepath.Join(s.dir, "go.sum"))
	if err != nil {
		return spec{}, fmt.Errorf("toolbuild: %w", err)
	}
	s.upstream = requiredVersion(gomod, f.module)
	if s.upstream == "" {
		return spec{}, fmt.Errorf("toolbuild: internal/tools/%s/go.mod does not require %s", module, f.module)
	}
	s.stamp = releaseVersion(f.module, s.upstream)
	if !strings.HasPrefix(s.stamp, v+".") {
		return spec{}, fmt.Errorf("toolbuild: internal/tools/%s pins %s %s, which is release %s, not %s", module, f.module, s.upstream, s.stamp, v)
	}
	const pkg = "github.com/prometheus/common/version"
	s.ldflags = strings.Join([]string{"-s", "-w",
		"-X", pkg + ".Version=" + s.stamp,
		"-X", pkg + ".Revision=" + s.upstream,
		"-X", pkg + ".Branch=" + s.upstream,
		"-X", pkg + ".BuildUser=vllm_exporter-toolbuild",
	}, " ")
	goVersion, err := goVersion()
	if err != nil {
		return spec{}, err
	}
	h := sha256.New()
	for _, part := range [][]byte{gomod, gosum, []byte(goVersion), []byte(strings.Join(s.tags, ",")), []byte(s.ldflags)} {
		fmt.Fprintf(h, "%d\n", len(part))
		h.Write(part)
	}
	s.key = hex.EncodeToString(h.Sum(nil))[:16]
	return s, nil
}

// requiredVersion finds mod's version in a go.mod's require lines.
func requiredVersion(gomod []byte, mod string) string {
	for _, l := range strings.Split(string(gomod), "\n") {
		fs := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), "require "))
		if len(fs) >= 2 && fs[0] == mod {
			return fs[1]
		}
	}
	return ""
}

// releaseVersion maps a module version to the release it is: Prometheus
// publishes release 3.X.Y as module version v0.3XX.Y (v0.316.0 is 3.16.0,
// v0.305.0 is 3.5.0); Alertmanager's module version is its release.
func releaseVersion(mod, v string) string {
	v = strings.TrimPrefix(v, "v")
	if mod != "github.com/prometheus/prometheus" {
		return v
	}
	parts := strings.SplitN(v, ".", 3)
	if len(parts) != 3 || parts[0] != "0" || len(parts[1]) != 3 {
		return v
	}
	minor := strings.TrimLeft(parts[1][1:], "0")
	if minor == "" {
		minor = "0"
	}
	return parts[1][:1] + "." + minor + "." + parts[2]
}

// goVersion is the identity of the go command's toolchain (go test puts
// GOROOT/bin first on PATH), part of the cache key.
var goVersion = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("go", "env", "GOVERSION", "GOOS", "GOARCH").Output()
	if err != nil {
		return "", fmt.Errorf("toolbuild: go env: %w", err)
	}
	return strings.Join(strings.Fields(string(out)), " "), nil
})

// build returns the cached directory for module, building it under the
// module's file lock if no finished build is there.
func build(module string) (string, error) {
	s, err := plan(module)
	if err != nil {
		return "", err
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("toolbuild: %w", err)
	}
	final := filepath.Join(cache, module+"-"+s.key)
	if complete(final, s) {
		return final, nil
	}
	unlock, err := lockFile(filepath.Join(cache, module+".lock"))
	if err != nil {
		return "", fmt.Errorf("toolbuild: locking the cache: %w", err)
	}
	defer unlock()
	if complete(final, s) { // another process built it while we waited
		return final, nil
	}
	// Left by a run killed mid-build (a test timeout): nobody else builds
	// this module while we hold its lock.
	stale, _ := filepath.Glob(filepath.Join(cache, module+".tmp-*"))
	for _, d := range stale {
		os.RemoveAll(d)
	}
	tmp, err := os.MkdirTemp(cache, module+".tmp-")
	if err != nil {
		return "", fmt.Errorf("toolbuild: %w", err)
	}
	defer os.RemoveAll(tmp)
	args := []string{"build", "-trimpath", "-ldflags", s.ldflags, "-o", tmp + string(filepath.Separator)}
	if len(s.tags) > 0 {
		args = append(args, "-tags", strings.Join(s.tags, ","))
	}
	for _, c := range s.fam.cmds {
		args = append(args, s.fam.module+"/cmd/"+c)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = s.dir
	// The tool module is its own main module: no workspace, the pinned
	// go.sum as is, no cgo (static binaries, no C toolchain involved).
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false", "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return "", &BuildError{Module: module, Err: err, Output: Tail(out.String(), 60)}
	}
	goVer, _ := goVersion()
	info := fmt.Sprintf("module=%s\nupstream=%s %s\nversion=%s\ntags=%s\ngo=%s\nbuild_seconds=%.0f\n",
		module, s.fam.module, s.upstream, s.stamp, strings.Join(s.tags, ","), goVer, time.Since(start).Seconds())
	if err := os.WriteFile(filepath.Join(tmp, "BUILD-INFO"), []byte(info), 0o644); err != nil {
		return "", fmt.Errorf("toolbuild: %w", err)
	}
	os.RemoveAll(final) // a partial directory from a crashed run
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("toolbuild: %w", err)
	}
	return final, nil
}

// complete reports whether dir holds a finished build: BUILD-INFO is
// written last, after every program.
func complete(dir string, s spec) bool {
	if _, err := os.Stat(filepath.Join(dir, "BUILD-INFO")); err != nil {
		return false
	}
	for _, c := range s.fam.cmds {
		if st, err := os.Stat(filepath.Join(dir, c)); err != nil || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// Tail is the last lines of s, after a line saying how many came before:
// a tool's output cut to what an error message needs.
func Tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = append([]string{fmt.Sprintf("[... %d lines before]", len(ls)-lines)}, ls[len(ls)-lines:]...)
	}
	return strings.Join(ls, "\n")
}

// minorAtLeast reports whether version "M.m" is at least maj.min.
func minorAtLeast(v string, maj, min int) bool {
	var a, b int
	if _, err := fmt.Sscanf(v, "%d.%d", &a, &b); err != nil {
		return false
	}
	return a > maj || a == maj && b >= min
}

// versionLess orders "3.5" before "3.16".
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		var x, y int
		fmt.Sscanf(pa[i], "%d", &x)
		fmt.Sscanf(pb[i], "%d", &y)
		if x != y {
			return x < y
		}
	}
	return len(pa) < len(pb)
}
