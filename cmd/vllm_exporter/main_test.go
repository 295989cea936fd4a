package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
)

const fixtureV1 = "../../collector/vllm/testdata/vllm-main-2026-08-v1.txt"

func fakeVLLM(t *testing.T) *httptest.Server {
	body, err := os.ReadFile(fixtureV1)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=1.0.0; charset=utf-8")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestParseWindows(t *testing.T) {
	got, err := parseWindows("1m, 5m,1h")
	if err != nil || len(got) != 3 || got[0] != time.Minute || got[2] != time.Hour {
		t.Fatalf("parseWindows = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1x", "0s", "1m,,-5m"} {
		if _, err := parseWindows(bad); err == nil {
			t.Errorf("parseWindows(%q): want error", bad)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yml")
	bad := filepath.Join(dir, "bad.yml")
	os.WriteFile(good, []byte("slos: []\n"), 0o600)
	os.WriteFile(bad, []byte("no_such_section: 1\n"), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"--config.check", "--config.file=" + good}, &out, &errb); code != 0 {
		t.Fatalf("good config: exit %d, %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "valid") {
		t.Errorf("good config output %q", out.String())
	}
	errb.Reset()
	if code := run([]string{"--config.check", "--config.file=" + bad}, &out, &errb); code != 1 {
		t.Fatalf("bad config: exit %d", code)
	}
	if !strings.Contains(errb.String(), "no_such_section") {
		t.Errorf("error does not name the field: %q", errb.String())
	}
}

// Readiness flips only once a scrape has been attempted (even a failed one:
// a down vLLM is reported by vllm_up, not by hiding the exporter).
func TestReadyAfterFirstScrapeAttempt(t *testing.T) {
	holder, err := config.NewHolder("")
	if err != nil {
		t.Fatal(err)
	}
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	x := &exporter{logger: log.NewNopLogger(), registry: prometheus.NewRegistry(), config: holder, vllm: vllm.New(vllm.Options{URL: dead.URL, Timeout: time.Second}, nil)}
	h, err := x.routes(&flags{telemetryPath: "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	if c := get("/-/ready"); c != http.StatusServiceUnavailable {
		t.Fatalf("ready before any scrape: %d", c)
	}
	if c := get("/-/healthy"); c != http.StatusOK {
		t.Fatalf("healthy: %d", c)
	}
	x.vllm.ScrapeOnce(context.Background(), time.Now())
	if c := get("/-/ready"); c != http.StatusOK {
		t.Fatalf("ready after a scrape attempt: %d", c)
	}
	if c := get("/-/reload"); c != http.StatusMethodNotAllowed {
		t.Fatalf("GET /-/reload: %d, want 405", c)
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor polls until cond holds; the deadline only bounds a broken run.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("gave up waiting for %s", what)
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildOut  []byte
)

// buildBinary builds the exporter once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vllm_exporter-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "vllm_exporter")
		buildOut, buildErr = exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, buildOut)
	}
	return binPath
}

// startBinary runs the exporter with args on a free loopback port and
// returns its base URL and a channel closed with its exit error.
func startBinary(t *testing.T, logs *bytes.Buffer, args ...string) (*exec.Cmd, string, chan error) {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(buildBinary(t), append(args, "--web.listen-address="+addr)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	})
	return cmd, "http://" + addr, exited
}

// TestBinaryDemo: --demo serves a simulated vLLM without any real one.
func TestBinaryDemo(t *testing.T) {
	var logs bytes.Buffer
	_, base, _ := startBinary(t, &logs, "--demo", "--vllm.scrape-interval=200ms")
	waitFor(t, "demo series", func() bool {
		_, m := httpGet(t, base+"/metrics")
		return strings.Contains(m, "vllm_up 1") && strings.Contains(m, "vllm_requests_running{")
	})
}

// TestBinary builds the real binary and runs it against an httptest vLLM.
func TestBinary(t *testing.T) {
	vllmSrv := fakeVLLM(t)
	cfg := filepath.Join(t.TempDir(), "config.yml")
	os.WriteFile(cfg, []byte("slos: []\n"), 0o600)
	var logs bytes.Buffer
	cmd, base, exited := startBinary(t, &logs, "--vllm.url="+vllmSrv.URL,
		"--vllm.scrape-interval=200ms", "--config.file="+cfg, "--log.format=json", "--log.level=debug")

	waitFor(t, "/-/ready", func() bool { c, _ := httpGet(t, base+"/-/ready"); return c == 200 })
	if c, _ := httpGet(t, base+"/-/healthy"); c != 200 {
		t.Fatalf("/-/healthy: %d", c)
	}
	if c, body := httpGet(t, base+"/"); c != 200 || !strings.Contains(body, "/metrics") {
		t.Fatalf("landing page: %d %q", c, body)
	}
	_, metrics := httpGet(t, base+"/metrics")
	for _, want := range []string{
		"vllm_up 1",
		`vllm_requests_running{model="meta-llama/Llama-3.1-8B-Instruct"} 7`,
		`vllm_exporter_build_info{`,
		`vllm_exporter_collector_up{collector="vllm"} 1`,
		"vllm_exporter_config_last_reload_successful 1",
		"vllm_exporter_config_last_reload_success_timestamp_seconds ",
		`vllm_exporter_vllm_schema_info{schema="v1"} 1`,
		"go_goroutines ",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		check := exec.Command(p, "check", "metrics")
		check.Stdin = strings.NewReader(metrics)
		if out, err := check.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	} else if os.Getenv("CI") == "true" {
		t.Error("promtool not installed (CI=true)")
	}

	// POST /-/reload with a valid file, then SIGHUP with a broken one.
	resp, err := http.Post(base+"/-/reload", "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /-/reload: %v %v", err, resp)
	}
	resp.Body.Close()
	os.WriteFile(cfg, []byte("slos: [\n"), 0o600)
	cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "failed reload to show", func() bool {
		_, m := httpGet(t, base+"/metrics")
		return strings.Contains(m, "vllm_exporter_config_last_reload_successful 0")
	})

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit after SIGTERM\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `"msg":"shutting down"`) {
		t.Errorf("logs lack the shutdown message (json format?):\n%s", logs.String())
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

func TestBinaryVersion(t *testing.T) {
	out, err := exec.Command(buildBinary(t), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "vllm_exporter, version") {
		t.Fatalf("--version: %v\n%s", err, out)
	}
}
