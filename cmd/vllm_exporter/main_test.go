package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/internal/toolbuild"
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
	got, err := parseWindows("1m, 5m,1h", 5*time.Second)
	if err != nil || len(got) != 3 || got[0] != time.Minute || got[2] != time.Hour {
		t.Fatalf("parseWindows = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1x", "0s", "1m,,-5m", "1m,9s"} {
		if _, err := parseWindows(bad, 5*time.Second); err == nil {
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
	if c := get("/-/reload"); c != http.StatusForbidden {
		t.Fatalf("GET /-/reload without --web.enable-lifecycle: %d, want 403", c)
	}
}

// httpGet fetches url and returns status and body (0 and the error's text
// when the request fails).
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	return testutil.HTTPGet(url)
}

// waitFor polls until cond holds; the deadline only bounds a broken run.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, what, nil, func() (bool, string) { return cond(), "not yet" })
}

// buildBinary builds the exporter once per test run (skipped with -short).
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	return testutil.ExporterBinary(t)
}

// startBinary runs the exporter with args on a free loopback port and
// returns the process, its base URL and its logs.
func startBinary(t *testing.T, args ...string) *testutil.Process {
	t.Helper()
	buildBinary(t)
	return testutil.StartExporter(t, args...)
}

// TestBinaryDemo: --demo serves a simulated vLLM without any real one.
func TestBinaryDemo(t *testing.T) {
	base := startBinary(t, "--demo", "--vllm.scrape-interval=200ms").Base
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
	p := startBinary(t, "--vllm.url="+vllmSrv.URL,
		"--vllm.scrape-interval=200ms", "--config.file="+cfg, "--log.format=json", "--log.level=debug", "--web.enable-lifecycle")
	base, logs := p.Base, p.Logs

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
	// The pinned promtool (internal/tools); the rest of this test holds
	// without it, so a local machine that cannot build it goes on.
	if p, err := toolbuild.Path("promtool", ""); err == nil {
		check := exec.Command(p, "check", "metrics")
		check.Stdin = strings.NewReader(metrics)
		if out, err := check.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	} else if os.Getenv("CI") == "true" {
		t.Errorf("promtool (CI=true): %v", err)
	}

	// POST /-/reload with a valid file, then SIGHUP with a broken one.
	resp, err := http.Post(base+"/-/reload", "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /-/reload: %v %v", err, resp)
	}
	resp.Body.Close()
	os.WriteFile(cfg, []byte("slos: [\n"), 0o600)
	p.Cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "failed reload to show", func() bool {
		_, m := httpGet(t, base+"/metrics")
		return strings.Contains(m, "vllm_exporter_config_last_reload_successful 0")
	})

	p.Signal(syscall.SIGTERM) // fails the test unless it exits 0 within 30s
	if !strings.Contains(logs.String(), `"msg":"shutting down"`) {
		t.Errorf("logs lack the shutdown message (json format?):\n%s", logs.String())
	}
}

func TestMain(m *testing.M) {
	// os/signal starts its watcher goroutine on the first Notify and keeps
	// it for the life of the process; start it now so it is not counted as
	// a leak of the first test that runs serveMain.
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR2)
	signal.Stop(c)
	code := m.Run()
	testutil.RemoveBinaries()
	os.Exit(code)
}

func TestBinaryVersion(t *testing.T) {
	// A plain `go build` (no Makefile ldflags) still prints a version: the
	// module version from Go's build information, or "devel".
	out, err := exec.Command(buildBinary(t), "--version").CombinedOutput()
	if err != nil || !regexp.MustCompile(`^vllm_exporter, version (v\S+|devel\S*) \(`).Match(out) {
		t.Fatalf("--version: %v\n%s", err, out)
	}
}

// TestBinaryListenFailure: a listen address in use is an error and exit 1,
// not a process that hangs with its background loops still running.
func TestBinaryListenFailure(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var logs bytes.Buffer
	cmd := exec.Command(buildBinary(t), "--vllm.url=http://127.0.0.1:1", "--web.listen-address="+busy.Addr().String())
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("exit: %v, want status 1\n%s", err, logs.String())
		}
		if !strings.Contains(logs.String(), "address already in use") {
			t.Errorf("logs do not name the listen error:\n%s", logs.String())
		}
	case <-time.After(30 * time.Second): // bounds a broken run only
		cmd.Process.Kill()
		<-exited
		t.Fatalf("still running 30s after its listener failed\n%s", logs.String())
	}
}

// The landing page names the vLLM it scrapes, without a password.
func TestLandingPageRedactsURL(t *testing.T) {
	holder, err := config.NewHolder("")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://scraper:s3cret@127.0.0.1:1"
	x := &exporter{logger: log.NewNopLogger(), registry: prometheus.NewRegistry(), config: holder, vllmURL: u,
		vllm: vllm.New(vllm.Options{URL: u}, nil)}
	h, err := x.routes(&flags{telemetryPath: "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if body := rec.Body.String(); rec.Code != 200 || strings.Contains(body, "s3cret") || !strings.Contains(body, "127.0.0.1:1") {
		t.Fatalf("landing page %d:\n%s", rec.Code, body)
	}
}

// A client that sends its headers slowly is cut off: the server has a
// header timeout (10s in production; shortened here), and every other phase
// of a connection is bounded too.
func TestHTTPServerTimeouts(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler(), log.NewNopLogger())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Fatalf("unbounded server: %+v", srv)
	}
	// The promhttp handler gives up after 30s: writing must be allowed that long.
	if srv.WriteTimeout <= 30*time.Second {
		t.Errorf("WriteTimeout %v cuts off the metrics handler's own 30s timeout", srv.WriteTimeout)
	}
	srv.ReadHeaderTimeout = 100 * time.Millisecond
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n"))    // never finishes its headers
	c.SetReadDeadline(time.Now().Add(30 * time.Second)) // bounds a broken run only
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("connection not closed by the server: %v", err)
	}
}

// --web.config.file (exporter-toolkit) protects every endpoint with basic
// auth, and --web.telemetry-path moves the metrics.
func TestBinaryWebConfigAndTelemetryPath(t *testing.T) {
	vllmSrv := fakeVLLM(t)
	webCfg := filepath.Join(t.TempDir(), "web.yml")
	// bcrypt of "s3cret" (cost 4).
	os.WriteFile(webCfg, []byte("basic_auth_users:\n  prom: $2a$04$5mD.G5ruAL4plU9TQJn63OkdS7CW01Pljw..CXSnrMvhY8JZDXaa2\n"), 0o600)
	base := startBinary(t, "--vllm.url="+vllmSrv.URL, "--vllm.scrape-interval=200ms",
		"--web.config.file="+webCfg, "--web.telemetry-path=/vllm-metrics").Base
	get := func(path, pass string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if pass != "" {
			req.SetBasicAuth("prom", pass)
		}
		code, body, err := testutil.Do(nil, req)
		if code == 0 {
			return 0, err.Error()
		}
		return code, body
	}
	waitFor(t, "metrics behind basic auth", func() bool {
		c, body := get("/vllm-metrics", "s3cret")
		return c == 200 && strings.Contains(body, "vllm_up 1")
	})
	for _, pass := range []string{"", "wrong"} {
		if c, _ := get("/vllm-metrics", pass); c != http.StatusUnauthorized {
			t.Errorf("metrics with password %q: %d, want 401", pass, c)
		}
	}
	if c, _ := get("/-/ready", ""); c != http.StatusUnauthorized {
		t.Errorf("/-/ready without auth: %d, want 401", c)
	}
	if c, body := get("/", "s3cret"); c != 200 || !strings.Contains(body, "/vllm-metrics") {
		t.Errorf("landing page does not link the telemetry path: %d\n%s", c, body)
	}
}

// VLLMDown's grace for a vLLM that never came up reads the exporter's own
// start time, so it must survive --web.disable-exporter-metrics (which
// drops the go_* and process_* series).
func TestStartTimeSurvivesDisabledExporterMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	before := float64(time.Now().Add(-time.Second).Unix())
	p := testutil.StartExporter(t, "--vllm.url=http://127.0.0.1:1", "--web.disable-exporter-metrics",
		"--no-collector.gpu", "--no-probe.enabled")
	p.WaitServing("/metrics", http.StatusOK)
	m := p.Metrics()
	v, ok := m.Value("vllm_exporter_start_time_seconds")
	if !ok || v < before || v > float64(time.Now().Unix()+1) {
		t.Fatalf("vllm_exporter_start_time_seconds = %v (present %v), want about now", v, ok)
	}
	if _, ok := m.Value("process_cpu_seconds_total"); ok {
		t.Fatal("process_* metrics exported despite --web.disable-exporter-metrics")
	}
}
