package interop

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
)

// fixture is an SLO config the converters are tested with.
type fixture struct {
	name string
	slos []config.SLO
	opts Options
}

// fixtures: the shipped default SLOs (internal/config/default.yml) and a
// custom config (probe SLOs with profiles, 7d and 28d periods, min_events 0,
// an underscore in a name) generated with a selector and a service name.
func fixtures(t *testing.T) []fixture {
	t.Helper()
	def, err := config.Load(filepath.Join("..", "..", "internal", "config", "default.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(def.SLOs) == 0 {
		t.Fatal("default.yml has no SLOs")
	}
	custom, err := config.Load(filepath.Join("testdata", "custom.yml"))
	if err != nil {
		t.Fatal(err)
	}
	return []fixture{
		{name: "default", slos: def.SLOs},
		{name: "custom", slos: custom.SLOs, opts: Options{Service: "llm-serving", Selector: `job="vllm"`}},
	}
}

// withDefaults returns s with its defaults applied.
func withDefaults(s config.SLO) config.SLO {
	s.ApplyDefaults()
	return s
}

// tools are the Go programs under testdata that run an SLO tool's own
// code, each a module of its own pinning the tool's published release (so
// the exporter's go.mod does not carry the tool's dependency tree).
var tools = []string{"slothcheck", "pyrracheck"}

type built struct {
	bin string
	err error
}

var (
	buildOnce sync.Once
	builds    = map[string]chan built{}
	buildDirs sync.Map // temp dirs holding the binaries, removed by TestMain
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, ch := range builds { // a build still running writes into its dir
		<-ch
	}
	buildDirs.Range(func(dir, _ any) bool {
		os.RemoveAll(dir.(string))
		return true
	})
	os.Exit(code)
}

// tool returns the binary of testdata/<name>. The first call starts
// building every tool at once (the first build downloads and compiles a
// tool: minutes on a busy machine; cached afterwards). When the build fails
// (no module proxy) the test skips, except under CI=true where it fails.
func tool(t *testing.T, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		for _, n := range tools {
			ch := make(chan built, 1)
			builds[n] = ch
			go func() { ch <- buildTool(n) }()
		}
	})
	ch, ok := builds[name]
	if !ok {
		t.Fatalf("no tool %q", name)
	}
	b := <-ch
	ch <- b // for the next caller
	if b.err != nil {
		missing(t, b.err.Error())
	}
	return b.bin
}

func buildTool(name string) built {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return built{err: fmt.Errorf("go toolchain not found: %w", err)}
	}
	dir, err := os.MkdirTemp("", "interop-"+name)
	if err != nil {
		return built{err: err}
	}
	buildDirs.Store(dir, true)
	bin := filepath.Join(dir, name)
	cmd := exec.Command(goBin, "build", "-mod=readonly", "-o", bin, ".")
	cmd.Dir = filepath.Join("testdata", name)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return built{err: fmt.Errorf("building testdata/%s: %w\n%s", name, err, out)}
	}
	return built{bin: bin}
}

func missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// run runs bin with stdin and returns its stdout; a non-zero exit fails
// the test with stderr.
func run(t *testing.T, stdin []byte, bin string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s\ninput:\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String(), stdin)
	}
	return stdout.Bytes()
}

// splitDocs splits a multi-document YAML stream.
func splitDocs(b []byte) [][]byte {
	var out [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\n`).Split(string(b), -1) {
		if strings.TrimSpace(d) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

var spaceRE = regexp.MustCompile(`\s+`)

// squash drops all white space, to compare PromQL a tool re-indented.
func squash(s string) string { return spaceRE.ReplaceAllString(s, "") }
