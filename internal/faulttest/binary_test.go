package faulttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
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

	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

// repoRoot is the module root, two levels up from this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(abs, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s", abs)
	}
	return abs
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

// TestMain removes the shared build directory after the package's tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// exporterBinary builds ./cmd/vllm_exporter once per test run (the build
// cache makes this a link step when the packages are already compiled).
func exporterBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "vllm_exporter-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "vllm_exporter")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/vllm_exporter")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// syncBuffer collects a process's stderr.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is one running exporter process.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string
	logs   *syncBuffer
	exited chan error
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// startExporter runs the binary with args and waits until it serves.
func startExporter(t *testing.T, args ...string) *proc {
	t.Helper()
	addr := freeAddr(t)
	p := &proc{t: t, base: "http://" + addr, logs: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(exporterBinary(t), append([]string{"--web.listen-address=" + addr, "--log.level=debug"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	eventually(t, p, "exporter serving", func() (bool, string) {
		select {
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("exporter exited at start: %v\n%s", err, p.logs)
		default:
		}
		resp, err := client.Get(p.base + "/-/healthy")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return p
}

// eventually polls cond; the deadline is a liveness bound, far beyond need.
func eventually(t *testing.T, p *proc, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			logs := ""
			if p != nil {
				logs = p.logs.String()
			}
			t.Fatalf("%s: never happened (last: %s)\n%s", what, why, logs)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// value scrapes /metrics and returns name's first sample.
func (p *proc) value(name string) (float64, bool) {
	p.t.Helper()
	resp, err := client.Get(p.base + "/metrics")
	if err != nil {
		p.t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		p.t.Fatalf("bad /metrics: %v", err)
	}
	mf := fams[name]
	if mf == nil || len(mf.GetMetric()) == 0 {
		return 0, false
	}
	m := mf.GetMetric()[0]
	switch mf.GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue(), true
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue(), true
	}
	return m.GetUntyped().GetValue(), true
}

func (p *proc) waitValue(name string, want float64) {
	p.t.Helper()
	eventually(p.t, p, fmt.Sprintf("%s == %v", name, want), func() (bool, string) {
		v, ok := p.value(name)
		return ok && v == want, fmt.Sprintf("%v (present %v)", v, ok)
	})
}

// signal sends sig and, for a terminating one, waits for a clean exit.
func (p *proc) stopWith(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			p.t.Fatalf("exit after %v: %v\n%s", sig, err, p.logs)
		}
	case <-time.After(30 * time.Second):
		p.t.Fatalf("no exit within 30s of %v\n%s", sig, p.logs)
	}
}

func startSim(t *testing.T) *vllmsim.Sim {
	t.Helper()
	sim, err := vllmsim.New(vllmsim.Config{Seed: 3, LoadGen: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	return sim
}

// TestSIGHUPReload drives the real binary: SIGHUP with a broken file keeps
// running (old config kept, vllm_exporter_config_last_reload_successful 0,
// success timestamp unchanged); SIGHUP after fixing it sets 1 and moves the
// timestamp; scraping vLLM never stops.
func TestSIGHUPReload(t *testing.T) {
	sim := startSim(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yml")
	good, err := os.ReadFile(filepath.Join(repoRoot(t), "internal", "config", "default.yml"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(cfg, good, 0o644)
	p := startExporter(t, "--vllm.url="+sim.URL(), "--vllm.scrape-interval=100ms", "--config.file="+cfg)
	p.waitValue("vllm_up", 1)
	p.waitValue("vllm_exporter_config_last_reload_successful", 1)
	ts0, _ := p.value("vllm_exporter_config_last_reload_success_timestamp_seconds")

	os.WriteFile(cfg, []byte("slos:\n  - name: [unterminated\n"), 0o644)
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.waitValue("vllm_exporter_config_last_reload_successful", 0)
	if ts, _ := p.value("vllm_exporter_config_last_reload_success_timestamp_seconds"); ts != ts0 {
		t.Fatalf("a failed reload moved the success timestamp: %v -> %v", ts0, ts)
	}
	if !strings.Contains(p.logs.String(), "config reload failed; keeping the running configuration") {
		t.Fatalf("failed SIGHUP reload not logged:\n%s", p.logs)
	}
	scrapes, _ := p.value("vllm_exporter_scrapes_total")
	eventually(t, p, "scraping goes on", func() (bool, string) {
		v, _ := p.value("vllm_exporter_scrapes_total")
		return v >= scrapes+3, fmt.Sprint(v)
	})

	time.Sleep(10 * time.Millisecond) // let the clock move past ts0
	os.WriteFile(cfg, good, 0o644)
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.waitValue("vllm_exporter_config_last_reload_successful", 1)
	if ts, _ := p.value("vllm_exporter_config_last_reload_success_timestamp_seconds"); !(ts > ts0) {
		t.Fatalf("success timestamp did not move: %v -> %v", ts0, ts)
	}
	// A reload through the API works on the process as well.
	resp, err := client.Post(p.base+"/-/reload", "text/plain", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /-/reload: %v %v", resp, err)
	}
	resp.Body.Close()
	p.stopWith(syscall.SIGTERM)
}

// TestSignalShutdown: SIGTERM (what Kubernetes sends) and SIGINT make the
// process log its shutdown, stop serving and exit 0, also while vLLM hangs
// (a scrape in flight must not hold the shutdown up).
func TestSignalShutdown(t *testing.T) {
	for _, c := range []struct {
		sig  syscall.Signal
		hang bool
	}{{syscall.SIGTERM, false}, {syscall.SIGINT, false}, {syscall.SIGTERM, true}} {
		t.Run(fmt.Sprintf("%v hang=%v", c.sig, c.hang), func(t *testing.T) {
			sim := startSim(t)
			p := startExporter(t, "--vllm.url="+sim.URL(), "--vllm.scrape-interval=100ms", "--vllm.timeout=20s")
			p.waitValue("vllm_up", 1)
			if c.hang {
				sim.InjectFault(vllmsim.FaultSpec{Kind: vllmsim.FaultHang})
				time.Sleep(300 * time.Millisecond) // a scrape is now stuck in flight
			}
			p.stopWith(c.sig)
			if !strings.Contains(p.logs.String(), "shutting down") {
				t.Fatalf("no shutdown log:\n%s", p.logs)
			}
			if _, err := client.Get(p.base + "/-/healthy"); err == nil {
				t.Fatal("still serving after exit")
			}
			for _, bad := range []string{"panic:", "goroutine ", "level=error"} {
				if strings.Contains(p.logs.String(), bad) {
					t.Fatalf("%q in the logs of a clean shutdown:\n%s", bad, p.logs)
				}
			}
		})
	}
}

// TestSIGTERMWritesSLOCheckpoint: on SIGTERM the SLO watchdog writes its
// state checkpoint before the process exits. The interval is an hour, so no
// periodic checkpoint happens during the test: the file is deleted before the
// signal and must be back, complete, after the exit.
func TestSIGTERMWritesSLOCheckpoint(t *testing.T) {
	sim := startSim(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "slo-state.json")
	p := startExporter(t, "--vllm.url="+sim.URL(), "--vllm.scrape-interval=100ms", "--slo.interval=1h", "--slo.state-file="+state)
	p.waitValue("vllm_up", 1)
	eventually(t, p, "SLO watchdog's first checkpoint", func() (bool, string) {
		_, ok := p.value("vllm_exporter_slo_state_last_save_timestamp_seconds")
		return ok, "no vllm_exporter_slo_state_last_save_timestamp_seconds"
	})
	os.Remove(state)
	removedAt := time.Now()
	p.stopWith(syscall.SIGTERM)

	data, err := os.ReadFile(state)
	if err != nil {
		t.Fatalf("no SLO checkpoint after SIGTERM: %v\n%s", err, p.logs)
	}
	var cp struct {
		Format  string    `json:"format"`
		SavedAt time.Time `json:"saved_at"`
	}
	if err := json.Unmarshal(data, &cp); err != nil {
		t.Fatalf("checkpoint is not complete JSON: %v", err)
	}
	if cp.Format != "vllm_exporter/slo-state" || cp.SavedAt.Before(removedAt.Add(-time.Second)) {
		t.Fatalf("unexpected checkpoint: format %q saved %v (signal at %v)", cp.Format, cp.SavedAt, removedAt)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("temp files left next to the checkpoint: %v", entries)
	}
	if strings.Contains(p.logs.String(), "checkpoint failed") {
		t.Fatalf("checkpoint failure logged:\n%s", p.logs)
	}
}

// TestConfigCheckFlag: --config.check exits 0 on a valid file and non-zero,
// naming the field, on an invalid one, without starting to serve.
func TestConfigCheckFlag(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yml")
	bad := filepath.Join(dir, "bad.yml")
	os.WriteFile(good, []byte("slos: []\n"), 0o644)
	os.WriteFile(bad, []byte("slos: []\nbogus_field: 1\n"), 0o644)
	run := func(file string) (int, string) {
		cmd := exec.Command(exporterBinary(t), "--config.check", "--config.file="+file)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, out.String()
	}
	if rc, out := run(good); rc != 0 {
		t.Fatalf("valid config: rc %d: %s", rc, out)
	}
	if rc, out := run(bad); rc == 0 || !strings.Contains(out, "bogus_field") {
		t.Fatalf("invalid config: rc %d: %s", rc, out)
	}
}
