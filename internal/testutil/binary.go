package testutil

// Helpers for tests that run the real exporter binary: build it once per
// test process, start it on a free loopback port, wait until it serves,
// and read its /metrics page.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllm-exporter/vllm_exporter/internal/toolbuild"
)

// ModuleRoot returns the repository's root directory (where go.mod and
// internal/tools are).
func ModuleRoot(t testing.TB) string {
	t.Helper()
	root, err := toolbuild.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

var (
	buildOnce sync.Once
	buildDir  string
	binPath   string
	buildErr  error
)

// ExporterBinary builds ./cmd/vllm_exporter once per test process and
// returns the binary's path. It is a plain `go build` (no -trimpath, no
// version ldflags) in the test's own environment (`make test` exports the
// Makefile's CGO_CFLAGS), so it reuses the packages `go test` compiled for
// the test binaries and is mostly a link step. Call RemoveBinaries from
// TestMain.
func ExporterBinary(t testing.TB) string {
	t.Helper()
	root := ModuleRoot(t)
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "vllm_exporter-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "vllm_exporter")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/vllm_exporter")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/vllm_exporter: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// RemoveBinaries deletes what ExporterBinary built; call it from TestMain
// after m.Run.
func RemoveBinaries() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// Process is one running exporter binary.
type Process struct {
	t    testing.TB
	Cmd  *exec.Cmd
	Addr string // 127.0.0.1:port
	Base string // http://Addr
	Logs *SyncBuffer
	exit chan error
	err  error
	done bool
}

// noKeepAlive is the client of the helpers below: no connection outlives a
// request, so no test sees another's idle connection.
var noKeepAlive = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// StartExporter runs ExporterBinary with args followed by
// --web.listen-address on a free loopback port, with stdout and stderr
// collected in Logs. It does not wait for the listener (WaitServing does).
// The process is killed at the end of the test if it still runs.
func StartExporter(t testing.TB, args ...string) *Process {
	t.Helper()
	return StartBinary(t, ExporterBinary(t), args...)
}

// StartBinary is StartExporter for a given binary.
func StartBinary(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	addr := FreeAddr(t)
	p := &Process{t: t, Addr: addr, Base: "http://" + addr, Logs: &SyncBuffer{}, exit: make(chan error, 1)}
	p.Cmd = exec.Command(bin, append(args, "--web.listen-address="+addr)...)
	p.Cmd.Stdout, p.Cmd.Stderr = p.Logs, p.Logs
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exit <- p.Cmd.Wait() }()
	t.Cleanup(func() {
		if _, exited := p.Exited(); !exited {
			p.Cmd.Process.Kill()
			p.Wait(time.Minute)
		}
	})
	return p
}

// Exited reports whether the process has exited, and its Wait error.
func (p *Process) Exited() (error, bool) {
	select {
	case p.err = <-p.exit:
		p.done = true
	default:
	}
	return p.err, p.done
}

// Wait waits up to d for the process to exit and returns its Wait error;
// it fails the test if the process is still running after d (a liveness
// bound for a broken run, not a timing assertion).
func (p *Process) Wait(d time.Duration) error {
	p.t.Helper()
	if _, done := p.Exited(); !done {
		select {
		case p.err = <-p.exit:
			p.done = true
		case <-time.After(d):
			p.t.Fatalf("process still running %v later\n%s", d, p.Logs)
		}
	}
	return p.err
}

// Signal sends sig and waits (up to 30 s) for the process to exit; a
// non-zero exit fails the test.
func (p *Process) Signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	if err := p.Wait(30 * time.Second); err != nil {
		p.t.Fatalf("exit after %v: %v\n%s", sig, err, p.Logs)
	}
}

// WaitServing waits until path answers with status want (0: any HTTP
// answer at all, e.g. a 401 behind basic auth). It fails the test at once
// if the process exits meanwhile.
func (p *Process) WaitServing(path string, want int) {
	p.t.Helper()
	p.Await(30*time.Second, "exporter serving "+path, func() (bool, string) {
		resp, err := noKeepAlive.Get(p.Base + path)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return want == 0 || resp.StatusCode == want, resp.Status
	})
}

// Await polls cond (Poll, every 20 ms) until it holds, for at most within;
// it fails the test at once, with the logs, if the process exits meanwhile.
func (p *Process) Await(within time.Duration, what string, cond func() (ok bool, why string)) {
	p.t.Helper()
	Poll(p.t, within, 20*time.Millisecond, what, p.Logs, func() (bool, string) {
		if err, exited := p.Exited(); exited {
			p.t.Fatalf("exporter exited while waiting for %s: %v\n%s", what, err, p.Logs)
		}
		return cond()
	})
}

// Get fetches Base+path and returns the status and body (0 and the error's
// text when the request fails).
func (p *Process) Get(path string) (int, string) {
	return HTTPGet(p.Base + path)
}

// Metrics scrapes Base+/metrics and parses it; a failed scrape or an
// invalid page fails the test.
func (p *Process) Metrics() Metrics {
	p.t.Helper()
	code, body := p.Get("/metrics")
	if code != http.StatusOK {
		p.t.Fatalf("/metrics answered %d: %.500s", code, body)
	}
	m, err := ParseMetrics(body)
	if err != nil {
		p.t.Fatalf("/metrics is not valid text exposition: %v", err)
	}
	return m
}

// Do sends req with c (nil: http.DefaultClient) and reads the whole
// answer: its status and body, and the error of the request or of reading
// the body (with what was read before it: a stream cut short).
func Do(c *http.Client, req *http.Request) (int, string, error) {
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// HTTPGet fetches url without keep-alive and returns the status and body
// (0 and the error's text when the request fails).
func HTTPGet(url string) (int, string) {
	resp, err := noKeepAlive.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Eventually polls cond every 20 ms until it holds; after 30 s (a liveness
// bound far beyond any case's need, not a timing assertion) it fails the
// test with cond's last explanation and, when logs is not nil, the logs.
func Eventually(t testing.TB, what string, logs fmt.Stringer, cond func() (ok bool, why string)) {
	t.Helper()
	Poll(t, 30*time.Second, 20*time.Millisecond, what, logs, cond)
}

// Poll is Eventually with its bound and period given: cond is checked at
// once and then every period until it holds; after within it fails the
// test. It is the one place tests wait on what testing/synctest cannot see
// (a child process, a real socket, the real transport's goroutines): the
// sleep paces the poll, the bound only ends a broken run.
func Poll(t testing.TB, within, period time.Duration, what string, logs fmt.Stringer, cond func() (ok bool, why string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			l := ""
			if logs != nil {
				l = "\nlogs:\n" + logs.String()
			}
			t.Fatalf("%s: never happened within %v (last: %s)%s", what, within, why, l)
		}
		time.Sleep(period)
	}
}

// Metrics is one parsed /metrics page, by family name.
type Metrics map[string]*dto.MetricFamily

// ParseMetrics parses a text exposition page (UTF-8 names allowed).
func ParseMetrics(text string) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(strings.NewReader(text))
}

// Value returns the value of the first sample of name whose labels include
// every k, v pair in kv (a histogram's sample count, a summary's count), and
// whether there is one.
func (m Metrics) Value(name string, kv ...string) (float64, bool) {
	mf := m[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, s := range mf.GetMetric() {
		for i := 0; i+1 < len(kv); i += 2 {
			found := false
			for _, l := range s.GetLabel() {
				if l.GetName() == kv[i] && l.GetValue() == kv[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case s.Gauge != nil:
			return s.GetGauge().GetValue(), true
		case s.Counter != nil:
			return s.GetCounter().GetValue(), true
		case s.Untyped != nil:
			return s.GetUntyped().GetValue(), true
		case s.Histogram != nil:
			return float64(s.GetHistogram().GetSampleCount()), true
		case s.Summary != nil:
			return float64(s.GetSummary().GetSampleCount()), true
		}
	}
	return 0, false
}
