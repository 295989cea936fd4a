package faulttest

import (
	"bufio"
	"context"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// instr is one Dockerfile instruction with continuation lines joined.
type instr struct {
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
}

// stage is one FROM ... block.
type stage struct {
	from, name string
	instrs     []instr
}

// parseDockerfile reads the instructions of a Dockerfile (comments and
// continuations handled; enough for ours, not a full BuildKit parser) and
// returns the global ARG defaults and the stages.
func parseDockerfile(t *testing.T, path string) (globalArgs map[string]string, stages []*stage) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	globalArgs = map[string]string{}
	var cur strings.Builder
	var all []instr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		full := cur.String()
		cur.Reset()
		cmd, args, _ := strings.Cut(full, " ")
		all = append(all, instr{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
	}
	for _, in := range all {
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			s := &stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
		case len(stages) == 0 && in.cmd == "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			globalArgs[k] = v
		case len(stages) == 0:
			t.Fatalf("%s before the first FROM", in.cmd)
		default:
			s := stages[len(stages)-1]
			s.instrs = append(s.instrs, in)
		}
	}
	return globalArgs, stages
}

func expandArgs(s string, args map[string]string) string {
	return os.Expand(s, func(k string) string { return args[k] })
}

// makeRecipe returns the recipe lines of target in the Makefile.
func makeRecipe(t *testing.T, makefile, target string) []string {
	t.Helper()
	b, err := os.ReadFile(makefile)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, target+":"):
			in = true
		case in && strings.HasPrefix(line, "\t"):
			out = append(out, strings.TrimSpace(line))
		case in:
			return out
		}
	}
	return out
}

// TestDockerfileMatchesBuild checks, without a Docker engine, that the
// image is built the way `make build` builds (so version ldflags and cgo
// cannot drift), that the runtime stage is glibc, non-root, exposes the
// default port and runs the binary the build stage produced, and that it
// carries what the NVIDIA container runtime needs.
func TestDockerfileMatchesBuild(t *testing.T) {
	root := repoRoot(t)
	gargs, stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage build, got %d stage(s)", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]

	// Go version of the build image = go.mod's go directive (major.minor).
	gomod, _ := os.ReadFile(filepath.Join(root, "go.mod"))
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("no go directive in go.mod")
	}
	from := expandArgs(build.from, gargs)
	if want := "golang:" + string(m[1]) + "-bookworm"; from != want {
		t.Fatalf("build stage FROM %s, want %s (go.mod says go %s; bookworm = the runtime's glibc)", from, want, m[1])
	}
	// Runtime: glibc, same Debian release as the build stage.
	if f := expandArgs(final.from, gargs); f != "debian:bookworm-slim" && !strings.HasPrefix(f, "gcr.io/distroless/base-debian12") {
		t.Fatalf("runtime stage FROM %s: want a glibc bookworm image", f)
	}

	// The build stage builds with `make build` and nothing else compiles.
	var runs []string
	for _, in := range build.instrs {
		if in.cmd == "RUN" {
			runs = append(runs, in.args)
		}
		if in.cmd == "ENV" && (strings.Contains(in.args, "CGO_ENABLED=0") || strings.Contains(in.args, "nonvml")) {
			t.Fatalf("build stage disables cgo/NVML: ENV %s", in.args)
		}
	}
	var makeBuild string
	for _, r := range runs {
		if strings.HasPrefix(r, "make build") {
			makeBuild = r
		}
		if strings.Contains(r, "go build") {
			t.Fatalf("build stage runs go build itself (%q): use make build so flags cannot drift", r)
		}
		if strings.Contains(r, "CGO_ENABLED=0") || strings.Contains(r, "nonvml") {
			t.Fatalf("build stage disables cgo/NVML: %q", r)
		}
	}
	if makeBuild == "" {
		t.Fatalf("build stage never runs `make build`: %q", runs)
	}
	for _, v := range []string{"VERSION", "REVISION", "BRANCH"} {
		if !strings.Contains(makeBuild, v+"=") {
			t.Fatalf("`%s` does not pass %s (the context has no .git to describe)", makeBuild, v)
		}
	}
	recipe := makeRecipe(t, filepath.Join(root, "Makefile"), "build")
	var exporterLine string
	for _, l := range recipe {
		if strings.Contains(l, "./cmd/vllm_exporter") {
			exporterLine = l
		}
	}
	if !strings.Contains(exporterLine, "-o bin/vllm_exporter") || !strings.Contains(exporterLine, "$(LDFLAGS)") {
		t.Fatalf("Makefile build recipe changed shape: %q", recipe)
	}
	mk, _ := os.ReadFile(filepath.Join(root, "Makefile"))
	for _, want := range []string{"PKG       := github.com/prometheus/common/version", "-X $(PKG).Version=$(VERSION)", "-X $(PKG).Revision=$(REVISION)", "CGO_ENABLED ?= 1"} {
		if !strings.Contains(string(mk), want) {
			t.Fatalf("Makefile lacks %q: the image's version ldflags or cgo would differ", want)
		}
	}
	// CI builds and tests through the same Makefile.
	if ci, _ := os.ReadFile(filepath.Join(root, ".ci", "run")); !strings.Contains(string(ci), "make test") {
		t.Fatal(".ci/run no longer uses the Makefile")
	}

	// Runtime stage.
	var user, expose, entry, copyFrom string
	env := map[string]string{}
	for _, in := range final.instrs {
		switch in.cmd {
		case "USER":
			user = in.args
		case "EXPOSE":
			expose = in.args
		case "ENTRYPOINT":
			entry = in.args
		case "COPY":
			if strings.Contains(in.args, "--from="+build.name) {
				copyFrom = in.args
			}
		case "ENV":
			for _, kv := range strings.Fields(in.args) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		}
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "0" || u == "root" {
		t.Fatalf("runtime USER %q: must be a non-root user", user)
	}
	mainGo, _ := os.ReadFile(filepath.Join(root, "cmd", "vllm_exporter", "main.go"))
	port := regexp.MustCompile(`defaultListenAddress = ":(\d+)"`).FindSubmatch(mainGo)
	if port == nil || expose != string(port[1]) {
		t.Fatalf("EXPOSE %q, default listen port %q", expose, port)
	}
	f := strings.Fields(copyFrom)
	if len(f) != 3 || f[1] != "/src/bin/vllm_exporter" {
		t.Fatalf("runtime stage copies %q, want the build stage's /src/bin/vllm_exporter (WORKDIR /src + make's -o bin/vllm_exporter)", copyFrom)
	}
	if entry != `["`+f[2]+`"]` {
		t.Fatalf("ENTRYPOINT %s, want exec form [%q] so flags append and signals reach the exporter", entry, f[2])
	}
	if env["NVIDIA_VISIBLE_DEVICES"] == "" || !slices.Contains(strings.Split(env["NVIDIA_DRIVER_CAPABILITIES"], ","), "utility") {
		t.Fatalf("NVIDIA container runtime env missing: %v", env)
	}
	var workdir string
	for _, in := range build.instrs {
		if in.cmd == "WORKDIR" {
			workdir = in.args
		}
	}
	if workdir != "/src" {
		t.Fatalf("build stage WORKDIR %q, the COPY --from path assumes /src", workdir)
	}
}

// dockerignored reports whether rel is excluded by the .dockerignore
// patterns (filepath.Match per pattern, a match on a parent directory
// excludes its contents, "**/" matches any depth; no "!" exceptions).
func dockerignored(rel string, patterns []string) bool {
	for _, p := range patterns {
		p = strings.TrimSuffix(strings.TrimPrefix(p, "/"), "/")
		parts := strings.Split(rel, "/")
		for i := 1; i <= len(parts); i++ {
			prefix := strings.Join(parts[:i], "/")
			if ok, _ := filepath.Match(p, prefix); ok {
				return true
			}
			if rest, found := strings.CutPrefix(p, "**/"); found {
				for j := 0; j < i; j++ {
					if ok, _ := filepath.Match(rest, strings.Join(parts[j:i], "/")); ok {
						return true
					}
				}
			}
		}
	}
	return false
}

// TestDockerBuildStageRuns replays the build stage without a Docker engine:
// the context is the repository minus .dockerignore, COPY instructions copy
// from it into a fresh WORKDIR, and RUN instructions run there with an
// empty module cache of their own, as in a fresh image. The RUNs before the
// context is copied in (the `go mod download` layer) may fetch; the ones
// after run with GOPROXY=off, so the test fails if that layer misses a
// module `make build` needs. The binary must carry the version passed as
// build arguments. Slow on a cold build cache (a -trimpath cgo build of
// everything), so skipped with -short.
func TestDockerBuildStageRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the whole binary with -trimpath; skipped with -short")
	}
	root := repoRoot(t)
	_, stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	build := stages[0]
	ignore, _ := os.ReadFile(filepath.Join(root, ".dockerignore"))
	var patterns []string
	for _, l := range strings.Split(string(ignore), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	// The context: every file git would hand to `docker build` from a clean
	// checkout, i.e. the tracked files (and untracked, unignored ones).
	ctxDir := t.TempDir()
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("git ls-files: %v: CI runs on a git clone with git installed", err)
		}
		t.Skipf("not a git checkout: %v", err)
	}
	copied := 0
	for _, rel := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if rel == "" || dockerignored(rel, patterns) {
			continue
		}
		src := filepath.Join(root, rel)
		st, err := os.Stat(src)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the worktree
		}
		if err := copyFile(src, filepath.Join(ctxDir, rel), st.Mode()); err != nil {
			t.Fatal(err)
		}
		copied++
	}
	if _, err := os.Stat(filepath.Join(ctxDir, ".git")); err == nil {
		t.Fatal(".git is in the build context")
	}

	// ARG defaults, overridden as `docker build --build-arg` would.
	args := map[string]string{}
	for _, in := range build.instrs {
		if in.cmd == "ARG" {
			k, v, _ := strings.Cut(in.args, "=")
			args[k] = v
		}
	}
	args["VERSION"], args["REVISION"], args["BRANCH"] = "9.8.7-dockertest", "0123456789abcdef", "dockertest"

	// The image's module cache starts empty. Fetches go first to this
	// machine's module cache (used as a file:// proxy, so a warm machine
	// stays offline), then to the configured proxy, as docker build would.
	modCache := t.TempDir()
	fetchProxy := "file://" + filepath.ToSlash(filepath.Join(goEnv(t, "GOMODCACHE"), "cache", "download"))
	if p := goEnv(t, "GOPROXY"); p != "" && p != "off" {
		fetchProxy += "," + p
	}
	workDir := t.TempDir() // the stage's WORKDIR, filled by its COPYs
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	ran, contextCopied := 0, false
	for _, in := range build.instrs {
		switch in.cmd {
		case "COPY":
			if copyInstr(t, in.args, ctxDir, workDir) {
				contextCopied = true
			}
			continue
		case "RUN":
		default:
			continue
		}
		proxy := fetchProxy
		if contextCopied {
			proxy = "off"
		}
		cmd := exec.CommandContext(ctx, "sh", "-c", in.args)
		cmd.Dir = workDir
		// -modcacherw: the temp module cache must be removable.
		cmd.Env = append(os.Environ(), "GOMODCACHE="+modCache, "GOPROXY="+proxy,
			"GOFLAGS=-mod=readonly -modcacherw", "GOTOOLCHAIN=local")
		for k, v := range args {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		if b, err := cmd.CombinedOutput(); err != nil {
			missing := missingModules(string(b), proxy == "off")
			switch {
			case len(missing) == 0:
				t.Fatalf("RUN %s (GOPROXY=%s): %v\n%s", in.args, proxy, err, b)
			case proxy == "off":
				t.Fatalf("RUN %s needs modules the build stage's download layer did not fetch: %s\n"+
					"(RUNs before `COPY . .` must download everything the build uses)\n%s", in.args, strings.Join(missing, ", "), b)
			default:
				t.Fatalf("RUN %s could not fetch %s from GOPROXY=%s: this test needs the module proxy "+
					"or a module cache that holds them\n%s", in.args, strings.Join(missing, ", "), proxy, b)
			}
		}
		ran++
	}
	if ran == 0 {
		t.Fatal("no RUN in the build stage")
	}
	if !contextCopied {
		t.Fatal("the build stage never copies the context (COPY . .)")
	}
	bin := filepath.Join(workDir, "bin", "vllm_exporter")
	v, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, v)
	}
	for _, want := range []string{"9.8.7-dockertest", "0123456789abcdef", "branch: dockertest"} {
		if !strings.Contains(string(v), want) {
			t.Fatalf("version output lacks %q (ldflags not applied):\n%s", want, v)
		}
	}
	// A cgo build (NVML can be loaded): the binary is dynamically linked.
	if b, err := exec.Command("go", "version", "-m", bin).Output(); err == nil && !strings.Contains(string(b), "CGO_ENABLED=1") {
		t.Fatalf("image binary not built with cgo:\n%s", b)
	}
	t.Logf("build context: %d files; build stage ran %d commands", copied, ran)
}

// goEnv returns `go env name`.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	b, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(b))
}

// copyInstr applies a COPY instruction (sources relative to the context,
// destination relative to the WORKDIR; no --from, globs or --chown) and
// reports whether it copied the whole context.
func copyInstr(t *testing.T, args, ctxDir, workDir string) (whole bool) {
	t.Helper()
	f := strings.Fields(args)
	if len(f) < 2 || strings.HasPrefix(f[0], "--") {
		t.Fatalf("COPY %s: the replay handles only `COPY src... dst`", args)
	}
	dst := filepath.Join(workDir, f[len(f)-1])
	for _, src := range f[:len(f)-1] {
		if src == "." {
			whole = true
			err := filepath.WalkDir(ctxDir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(ctxDir, p)
				st, err := d.Info()
				if err != nil {
					return err
				}
				return copyFile(p, filepath.Join(dst, rel), st.Mode())
			})
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		st, err := os.Stat(filepath.Join(ctxDir, src))
		if err != nil {
			t.Fatalf("COPY %s: %v", args, err)
		}
		if err := copyFile(filepath.Join(ctxDir, src), filepath.Join(dst, filepath.Base(src)), st.Mode()); err != nil {
			t.Fatal(err)
		}
	}
	return whole
}

// missingModules lists the module@version the go command said it could
// not fetch. Offline, every module it tried to download was missing (a
// failed package import names no module, only the "downloading" line does).
func missingModules(goOutput string, offline bool) []string {
	var out []string
	add := func(m string) {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	for _, m := range missingModuleRE.FindAllStringSubmatch(goOutput, -1) {
		add(m[1])
	}
	if offline {
		for _, m := range downloadingRE.FindAllStringSubmatch(goOutput, -1) {
			add(m[1] + "@" + m[2])
		}
	}
	return out
}

var (
	missingModuleRE = regexp.MustCompile(`(?m)(\S+@v\S+?):? (?:module lookup disabled|reading |verifying |missing go.sum)`)
	downloadingRE   = regexp.MustCompile(`(?m)^go: downloading (\S+) (v\S+)$`)
)

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TestDockerignore: the patterns keep .git and build outputs out and every
// source file in.
func TestDockerignore(t *testing.T) {
	ps := []string{".git", "bin/", "*.test", "**/testdata/fuzz"}
	for rel, want := range map[string]bool{
		".git/HEAD": true, "bin/vllm_exporter": true, "x.test": true, "collector/vllm/testdata/fuzz/FuzzScrape/1": true,
		"go.mod": false, "cmd/vllm_exporter/main.go": false, "collector/vllm/testdata/x.txt": false, "binary.go": false,
	} {
		if got := dockerignored(rel, ps); got != want {
			t.Errorf("dockerignored(%q) = %v, want %v", rel, got, want)
		}
	}
}

// TestFootprintScriptParses: the benchmark scripts (scripts/*.sh: the
// footprint, growth and rotation figures in docs/hardening.md) are valid
// bash, and the ones that measure the binaries build them with `make
// build`, the same build as the image. Running them needs node_exporter,
// wrk or minutes, so CI only checks that they parse.
func TestFootprintScriptParses(t *testing.T) {
	scripts, err := filepath.Glob(filepath.Join(repoRoot(t), "scripts", "*.sh"))
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, script := range scripts {
		if out, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
			t.Fatalf("bash -n %s: %v\n%s", script, err, out)
		}
	}
	for _, c := range []struct {
		name string
		want []string
	}{
		{"footprint.sh", []string{"make build", "bin/vllm_exporter", "bin/vllm-sim", "scripts/lib.sh"}},
		{"growth.sh", []string{"make build", "bin/vllm_exporter", "bin/vllm-sim", "scripts/lib.sh"}},
	} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts", c.name))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range c.want {
			if !strings.Contains(string(b), want) {
				t.Fatalf("%s no longer uses %q", c.name, want)
			}
		}
	}
}

// TestMissingModules: the module@version of the go command's fetch errors
// (offline, a file:// proxy without the file, a go.sum mismatch) are what
// TestDockerBuildStageRuns names when a build-stage RUN fails.
func TestMissingModules(t *testing.T) {
	out := `go: downloading github.com/go-kit/log v0.2.1
go: github.com/stretchr/testify@v1.9.0: module lookup disabled by GOPROXY=off
go: github.com/kylelemons/godebug@v1.1.0: reading file:///tmp/x/cache/download/github.com/kylelemons/godebug/@v/v1.1.0.mod: no such file or directory
cmd/vllm_exporter/main.go:12:2: golang.org/x/net@v0.61.0: module lookup disabled by GOPROXY=off
go: github.com/stretchr/testify@v1.9.0: module lookup disabled by GOPROXY=off
main.go:3:8: no required module provides package example.com/x; to add it:`
	want := []string{"github.com/stretchr/testify@v1.9.0", "github.com/kylelemons/godebug@v1.1.0", "golang.org/x/net@v0.61.0"}
	if got := missingModules(out, false); !slices.Equal(got, want) {
		t.Fatalf("missingModules(online) = %q, want %q", got, want)
	}
	// Offline, a "downloading" line is a module the cache lacked.
	want = append(want, "github.com/go-kit/log@v0.2.1")
	if got := missingModules(out, true); !slices.Equal(got, want) {
		t.Fatalf("missingModules(offline) = %q, want %q", got, want)
	}
}
