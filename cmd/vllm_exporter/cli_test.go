package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/version"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
)

// helpFlagRE finds the flags a help page lists (kingpin's two-column
// format: indented "--name" or "--[no-]name" at the start of a line).
var helpFlagRE = regexp.MustCompile(`(?m)^\s{2,6}(?:-\w, )?--(?:\[no-\])?([a-z0-9][a-z0-9.-]*)`)

func helpFlags(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command(buildBinary(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	var names []string
	for _, m := range helpFlagRE.FindAllStringSubmatch(string(out), -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	sort.Strings(names)
	return names
}

// `help <subcommand>` lists the subcommand's own flags and the serving
// flags it reads, nothing else; `--help` (serve) lists every serving flag.
func TestSubcommandHelpShowsOnlyItsFlags(t *testing.T) {
	c := newCLI()
	app, commands := c.app, c.commands
	var serving []string
	for _, f := range app.Model().Flags {
		if !f.Hidden {
			serving = append(serving, f.Name)
		}
	}
	sort.Strings(serving)
	if got := helpFlags(t, "--help"); !reflect.DeepEqual(got, serving) {
		t.Errorf("--help lists %v, want every serving flag %v", got, serving)
	}
	if len(commands) < 3 {
		t.Fatalf("commands = %d", len(commands))
	}
	for _, c := range commands {
		var want []string
		for _, f := range app.GetCommand(c.name).Model().Flags {
			want = append(want, f.Name)
		}
		for _, name := range serving {
			if commandUses(&c, name) {
				want = append(want, name)
			}
		}
		sort.Strings(want)
		got := helpFlags(t, "help", c.name)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("help %s lists %v, want %v", c.name, got, want)
		}
		if len(got) >= len(serving) {
			t.Errorf("help %s lists %d flags, as many as serving (%d)", c.name, len(got), len(serving))
		}
		for _, u := range c.uses {
			found := false
			for _, name := range serving {
				found = found || commandUses(&command{uses: []string{u}}, name)
			}
			if !found {
				t.Errorf("%s uses %q, which is no serving flag", c.name, u)
			}
		}
	}
}

// A serving flag given to a subcommand that does not read it is an error,
// not silently ignored; one it reads is accepted.
func TestSubcommandRejectsServingFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"rules", "--web.listen-address=:9999"}, &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "--web.listen-address is a flag of the exporter, not of rules") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	out := t.TempDir() + "/rules.yml"
	if code := run([]string{"rules", "--config.file=", "--log.level=warn", "--rules.output=" + out}, &stdout, &stderr); code != 0 {
		t.Errorf("rules with flags it reads: exit %d, stderr %q", code, stderr.String())
	} else if b, err := os.ReadFile(out); err != nil || !strings.Contains(string(b), "groups:") {
		t.Errorf("rules wrote %q: %v", b, err)
	}
}

// enumOptions returns the values an enum flag accepts (kingpin keeps them
// unexported in its enum value types), or nil for other flags.
func enumOptions(v kingpin.Value) []string {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return nil
	}
	opts := rv.Elem().FieldByName("options")
	if !strings.Contains(rv.Type().String(), "enum") || !opts.IsValid() || opts.Kind() != reflect.Slice {
		return nil
	}
	out := make([]string, opts.Len())
	for i := range out {
		out[i] = opts.Index(i).String()
	}
	return out
}

// Every flag that takes one of a fixed set of values lists them in its help.
func TestEnumFlagsListTheirValues(t *testing.T) {
	app := newCLI().app
	flagsOf := map[string][]*kingpin.FlagModel{"": app.Model().Flags}
	for _, c := range app.Model().Commands {
		flagsOf[c.Name] = c.Flags
	}
	enums := 0
	for cmd, fs := range flagsOf {
		for _, f := range fs {
			opts := enumOptions(f.Value)
			if opts == nil {
				continue
			}
			enums++
			for _, o := range opts {
				if !strings.Contains(f.Help, o) {
					t.Errorf("%s --%s: help %q does not list the value %q", cmd, f.Name, f.Help, o)
				}
			}
		}
	}
	if enums < 3 { // --log.level, --log.format, diagnose --output
		t.Fatalf("found %d enum flags; the kingpin enum detection broke", enums)
	}
}

// The landing page links only routes that are served: no profiling links
// unless --web.enable-pprof added them, and then they answer.
func TestLandingPageLinksOnlyServedRoutes(t *testing.T) {
	for _, pprof := range []bool{false, true} {
		holder, err := config.NewHolder("")
		if err != nil {
			t.Fatal(err)
		}
		x := &exporter{logger: log.NewNopLogger(), registry: prometheus.NewRegistry(), config: holder,
			vllmURL: "http://127.0.0.1:1", vllm: vllm.New(vllm.Options{URL: "http://127.0.0.1:1"}, nil)}
		c := newCLI()
		args := []string{}
		if pprof {
			args = append(args, "--web.enable-pprof")
		}
		if _, err := c.app.Parse(args); err != nil {
			t.Fatal(err)
		}
		startPprof(c.flags, x)
		h, err := x.routes(&flags{telemetryPath: "/metrics"})
		if err != nil {
			t.Fatal(err)
		}
		get := func(path string) (int, string) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			return rec.Code, rec.Body.String()
		}
		code, body := get("/")
		if code != 200 {
			t.Fatalf("landing page: %d", code)
		}
		links := regexp.MustCompile(`href="([^"]+)"`).FindAllStringSubmatch(body, -1)
		var local []string
		for _, l := range links {
			if !strings.Contains(l[1], "://") {
				local = append(local, l[1])
			}
		}
		hasPprof := strings.Contains(strings.Join(local, " "), "debug/pprof")
		if hasPprof != pprof {
			t.Errorf("pprof enabled %v, landing page links it %v: %v", pprof, hasPprof, local)
		}
		for _, l := range local {
			path := "/" + strings.TrimPrefix(l, "/")
			if strings.Contains(path, "seconds=") {
				continue // a 60 s CPU profile: its route is the one checked below
			}
			if code, _ := get(path); code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
				t.Errorf("pprof %v: landing page links %s, which answers %d", pprof, l, code)
			}
		}
		if pprof {
			if code, _ := get("/debug/pprof/profile?seconds=0"); code == http.StatusNotFound {
				t.Error("the CPU profile link's route is not served")
			}
		}
	}
}

// Without the Makefile's ldflags the version comes from Go's build
// information: the module version of `go install ...@v0.1.0`, else "devel";
// ldflags win.
func TestVersionFromBuildInfo(t *testing.T) {
	saved := [3]string{version.Version, version.BuildDate, version.BuildUser}
	defer func() { version.Version, version.BuildDate, version.BuildUser = saved[0], saved[1], saved[2] }()
	for _, tc := range []struct{ ldflags, module, want string }{
		{"", "v0.1.0", "v0.1.0"},
		{"", "v0.0.0-20261124011500-7ba7b7e1c0de+dirty", "v0.0.0-20261124011500-7ba7b7e1c0de+dirty"},
		{"", "(devel)", "devel"},
		{"", "", "devel"},
		{"0.1.0", "(devel)", "0.1.0"},
	} {
		version.Version, version.BuildDate, version.BuildUser = tc.ldflags, "", ""
		versionFromBuildInfo(&debug.BuildInfo{Main: debug.Module{Version: tc.module},
			Settings: []debug.BuildSetting{{Key: "vcs.time", Value: "2026-11-24T01:15:00Z"}}})
		if version.Version != tc.want || version.BuildDate != "2026-11-24T01:15:00Z" {
			t.Errorf("ldflags %q module %q: version %q date %q, want %q", tc.ldflags, tc.module, version.Version, version.BuildDate, tc.want)
		}
	}
}

// A failing subcommand reports its error once.
func TestCommandErrorLoggedOnce(t *testing.T) {
	bad := t.TempDir() + "/bad.yml"
	if err := os.WriteFile(bad, []byte("slos: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"rules", "--config.file=" + bad}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if n := strings.Count(stderr.String(), bad); n != 1 {
		t.Errorf("the error names %s %d times:\n%s", bad, n, stderr.String())
	}
	if n := strings.Count(stderr.String(), "level=error"); n != 1 {
		t.Errorf("%d error lines:\n%s", n, stderr.String())
	}
}
