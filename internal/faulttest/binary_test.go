package faulttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
)

// repoRoot is the module root.
func repoRoot(t testing.TB) string { return testutil.ModuleRoot(t) }

// TestMain removes the binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBinaries()
	os.Exit(code)
}

// proc is one running exporter process.
type proc struct {
	*testutil.Process
	t *testing.T
}

var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// startExporter runs the binary with --log.level=debug and args and waits
// until /-/healthy answers 200.
func startExporter(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{Process: testutil.StartExporter(t, append([]string{"--log.level=debug"}, args...)...), t: t}
	p.WaitServing("/-/healthy", http.StatusOK)
	return p
}

// eventually polls cond; the deadline is a liveness bound, far beyond need.
func eventually(t *testing.T, p *proc, what string, cond func() (bool, string)) {
	t.Helper()
	var logs fmt.Stringer
	if p != nil {
		logs = p.Logs
	}
	testutil.Eventually(t, what, logs, cond)
}

// value scrapes /metrics and returns name's first sample.
func (p *proc) value(name string) (float64, bool) {
	p.t.Helper()
	return p.Metrics().Value(name)
}

func (p *proc) waitValue(name string, want float64) {
	p.t.Helper()
	eventually(p.t, p, fmt.Sprintf("%s == %v", name, want), func() (bool, string) {
		v, ok := p.value(name)
		return ok && v == want, fmt.Sprintf("%v (present %v)", v, ok)
	})
}

// stopWith sends a terminating signal and waits for a clean exit.
func (p *proc) stopWith(sig syscall.Signal) {
	p.t.Helper()
	p.Signal(sig)
}

// TestSIGHUPReload drives the real binary: SIGHUP with a broken file keeps
// running (old config kept, vllm_exporter_config_last_reload_successful 0,
// success timestamp unchanged); SIGHUP after fixing it sets 1 and moves the
// timestamp; scraping vLLM never stops.
func TestSIGHUPReload(t *testing.T) {
	sim := vllmsimtest.StartLoaded(t, 3)
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
	p.Cmd.Process.Signal(syscall.SIGHUP)
	p.waitValue("vllm_exporter_config_last_reload_successful", 0)
	if ts, _ := p.value("vllm_exporter_config_last_reload_success_timestamp_seconds"); ts != ts0 {
		t.Fatalf("a failed reload moved the success timestamp: %v -> %v", ts0, ts)
	}
	if !strings.Contains(p.Logs.String(), "config reload failed; keeping the running configuration") {
		t.Fatalf("failed SIGHUP reload not logged:\n%s", p.Logs)
	}
	scrapes, _ := p.value("vllm_exporter_scrapes_total")
	eventually(t, p, "scraping goes on", func() (bool, string) {
		v, _ := p.value("vllm_exporter_scrapes_total")
		return v >= scrapes+3, fmt.Sprint(v)
	})

	// The success timestamp must be able to move: the three scrapes 100 ms
	// apart waited for above put the wall clock past ts0 already; say so
	// rather than sleep.
	if now := float64(time.Now().UnixNano()) / 1e9; !(now > ts0) {
		t.Fatalf("the clock (%v) is not past the first load (%v)", now, ts0)
	}
	os.WriteFile(cfg, good, 0o644)
	p.Cmd.Process.Signal(syscall.SIGHUP)
	p.waitValue("vllm_exporter_config_last_reload_successful", 1)
	if ts, _ := p.value("vllm_exporter_config_last_reload_success_timestamp_seconds"); !(ts > ts0) {
		t.Fatalf("success timestamp did not move: %v -> %v", ts0, ts)
	}
	// Without --web.enable-lifecycle the HTTP reload is refused (a
	// cross-site form could otherwise POST it): SIGHUP is the way.
	resp, err := client.Post(p.Base+"/-/reload", "text/plain", nil)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("POST /-/reload without --web.enable-lifecycle: %v %v, want 403", resp, err)
	}
	resp.Body.Close()
	p.stopWith(syscall.SIGTERM)

	// With it, a reload through the API works on the process as well.
	p = startExporter(t, "--vllm.url="+sim.URL(), "--vllm.scrape-interval=100ms", "--config.file="+cfg, "--web.enable-lifecycle")
	p.waitValue("vllm_exporter_config_last_reload_successful", 1)
	resp, err = client.Post(p.Base+"/-/reload", "text/plain", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /-/reload with --web.enable-lifecycle: %v %v", resp, err)
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
			sim := vllmsimtest.StartLoaded(t, 3)
			p := startExporter(t, "--vllm.url="+sim.URL(), "--vllm.scrape-interval=10s", "--vllm.timeout=9s")
			p.waitValue("vllm_up", 1)
			if c.hang {
				sim.InjectFault(vllmsim.FaultSpec{Kind: vllmsim.FaultHang})
				eventually(t, p, "a scrape stuck in flight", func() (bool, string) { return sim.Hanging() > 0, "no request held" })
			}
			p.stopWith(c.sig)
			if !strings.Contains(p.Logs.String(), "shutting down") {
				t.Fatalf("no shutdown log:\n%s", p.Logs)
			}
			if _, err := client.Get(p.Base + "/-/healthy"); err == nil {
				t.Fatal("still serving after exit")
			}
			for _, bad := range []string{"panic:", "goroutine ", "level=error"} {
				if strings.Contains(p.Logs.String(), bad) {
					t.Fatalf("%q in the logs of a clean shutdown:\n%s", bad, p.Logs)
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
	sim := vllmsimtest.StartLoaded(t, 3)
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
		t.Fatalf("no SLO checkpoint after SIGTERM: %v\n%s", err, p.Logs)
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
	if strings.Contains(p.Logs.String(), "checkpoint failed") {
		t.Fatalf("checkpoint failure logged:\n%s", p.Logs)
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
		cmd := exec.Command(testutil.ExporterBinary(t), "--config.check", "--config.file="+file)
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
