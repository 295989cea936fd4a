package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/crypto/bcrypt"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
)

// TestSecurityTLSAndBasicAuth: --web.config.file with TLS and a bcrypt
// basic-auth user. Plain HTTP is refused, an untrusted certificate fails the
// handshake, no or wrong credentials get 401 on every route (reload and
// pprof included), the right ones are served.
func TestSecurityTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	pki := testutil.NewPKI(t, "localhost")
	certFile, keyFile, pool := pki.ServerCertFile, pki.ServerKeyFile, pki.CA
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret-pass"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webConfig := filepath.Join(dir, "web-config.yml")
	if err := os.WriteFile(webConfig, fmt.Appendf(nil, "tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  prometheus: %s\n",
		certFile, keyFile, hash), 0o600); err != nil {
		t.Fatal(err)
	}
	sim := vllmsimtest.StartLoaded(t, 7)
	trusting := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	h := hardStart(t, trusting, append([]string{"--vllm.url=" + sim.URL(), "--web.config.file=" + webConfig, "--web.enable-pprof", "--web.enable-lifecycle"}, hardScrapeArgs...)...)
	if !strings.HasPrefix(h.base, "https://") {
		t.Fatalf("harness did not switch to https: %s", h.base)
	}
	addr := strings.TrimPrefix(h.base, "https://")

	do := func(c *http.Client, method, url, user, pass string) (int, string, error) {
		req, _ := http.NewRequest(method, url, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		code, body, err := testutil.Do(c, req)
		if code != 0 {
			err = nil // a body cut short is still an answer
		}
		return code, body, err
	}

	// Plain HTTP to the TLS port: refused, nothing served.
	plain := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	code, body, err := do(plain, "GET", "http://"+addr+"/metrics", "prometheus", "s3cret-pass")
	if err == nil && (code == http.StatusOK || strings.Contains(body, "vllm_up")) {
		t.Fatalf("plain HTTP served: %d %.200s", code, body)
	}
	// A client that does not trust the certificate fails the handshake.
	untrusting := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	if _, _, err := do(untrusting, "GET", h.base+"/metrics", "prometheus", "s3cret-pass"); err == nil {
		t.Fatal("TLS handshake succeeded with an untrusted self-signed certificate")
	}
	for _, r := range []struct{ method, path string }{
		{"GET", "/metrics"}, {"GET", "/"}, {"GET", "/-/healthy"}, {"POST", "/-/reload"}, {"GET", "/debug/pprof/"},
	} {
		for _, cred := range [][2]string{{"", ""}, {"prometheus", "wrong"}, {"nobody", "s3cret-pass"}} {
			code, body, err := do(trusting, r.method, h.base+r.path, cred[0], cred[1])
			if err != nil {
				t.Fatal(err)
			}
			if code != http.StatusUnauthorized || strings.Contains(body, "vllm_") {
				t.Fatalf("%s %s as %q/%q: %d %.200s, want 401", r.method, r.path, cred[0], cred[1], code, body)
			}
		}
	}
	// Authenticated: served.
	h.eventually("authenticated scrape", func() (bool, string) {
		code, body, err := do(trusting, "GET", h.base+"/metrics", "prometheus", "s3cret-pass")
		return err == nil && code == http.StatusOK && strings.Contains(body, "\nvllm_up 1"), fmt.Sprintf("%d %v", code, err)
	})
	if code, _, err := do(trusting, "POST", h.base+"/-/reload", "prometheus", "s3cret-pass"); err != nil || code != http.StatusOK {
		t.Fatalf("authenticated reload: %d %v", code, err)
	}
	if code, _, err := do(trusting, "GET", h.base+"/debug/pprof/", "prometheus", "s3cret-pass"); err != nil || code != http.StatusOK {
		t.Fatalf("authenticated pprof: %d %v", code, err)
	}
	// The bcrypt hash and the password never reach the logs.
	if logs := h.logs.String(); strings.Contains(logs, "s3cret-pass") || strings.Contains(logs, string(hash)) {
		t.Fatalf("credentials in the logs:\n%s", logs)
	}
	h.stop()

	// --config.check validates the web config too.
	var out, errOut strings.Builder
	if rc := checkConfig(&flags{web: h.webFlags(t, webConfig)}, &out, &errOut); rc != 0 {
		t.Fatalf("--config.check with a valid web config: rc %d %s", rc, errOut.String())
	}
	if !strings.Contains(out.String(), "web config "+webConfig+" is valid") {
		t.Fatalf("--config.check does not say it checked the web config: %q", out.String())
	}
	broken := filepath.Join(dir, "broken.yml")
	os.WriteFile(broken, []byte("basic_auth_users:\n  x: not-a-bcrypt-hash\ntls_server_config:\n  cert_file: /nonexistent\n"), 0o600)
	if rc := checkConfig(&flags{web: h.webFlags(t, broken)}, &out, &errOut); rc == 0 {
		t.Fatal("--config.check accepted a broken web config")
	}
}

// webFlags parses just --web.config.file into a web.FlagConfig.
func (h *hardExporter) webFlags(t *testing.T, file string) *web.FlagConfig {
	t.Helper()
	app, f, _ := newApp()
	if _, err := app.Parse([]string{"--web.config.file=" + file}); err != nil {
		t.Fatal(err)
	}
	return f.web
}

// TestSecurityPprofOffByDefault: no /debug/pprof/ unless --web.enable-pprof.
func TestSecurityPprofOffByDefault(t *testing.T) {
	sim := vllmsimtest.StartLoaded(t, 7)
	for _, enabled := range []bool{false, true} {
		args := append([]string{"--vllm.url=" + sim.URL()}, hardScrapeArgs...)
		if enabled {
			args = append(args, "--web.enable-pprof")
		}
		h := hardStart(t, nil, args...)
		for _, p := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=1"} {
			code, body := h.get(p)
			if served := code == http.StatusOK; served != enabled {
				t.Fatalf("--web.enable-pprof=%v: GET %s = %d %.100s", enabled, p, code, body)
			}
		}
		h.stop()
	}
}

// TestSecurityRequestBounds: a huge request body or header does not make the
// exporter buffer it: /-/reload ignores bodies, headers beyond the server's
// limit get 431, and the heap stays bounded.
func TestSecurityRequestBounds(t *testing.T) {
	before := hardSnapshot()
	sim := vllmsimtest.StartLoaded(t, 7)
	h := hardStart(t, nil, append([]string{"--vllm.url=" + sim.URL(), "--web.enable-lifecycle"}, hardScrapeArgs...)...)

	// A 256 MiB body streamed to /-/reload and /metrics: answered without
	// being read to the end. What the client manages to send is bounded by
	// the socket buffers and net/http's small post-handler discard, far
	// below the body's size; a handler that read the body would take it all.
	for _, p := range []string{"/-/reload", "/metrics"} {
		pr, pw := io.Pipe()
		var sent atomic.Int64
		writerDone := make(chan struct{})
		go func() {
			defer close(writerDone)
			chunk := make([]byte, 1<<20)
			for i := 0; i < 256; i++ {
				n, err := pw.Write(chunk)
				sent.Add(int64(n))
				if err != nil {
					return
				}
			}
			pw.Close()
		}()
		req, _ := http.NewRequest("POST", h.base+p, pr)
		resp, err := h.client.Do(req)
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if p == "/metrics" && resp.StatusCode == http.StatusOK {
				t.Fatalf("POST %s served", p)
			}
		}
		pr.CloseWithError(io.ErrClosedPipe)
		<-writerDone
		if n := sent.Load(); n >= 64<<20 {
			t.Fatalf("POST %s: the exporter read %d MiB of a request body it has no use for", p, n>>20)
		}
	}
	// 2 MiB of headers: refused by the server (default 1 MiB limit).
	req, _ := http.NewRequest("GET", h.base+"/metrics", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 2<<20))
	if resp, err := h.client.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("2 MiB header: %d, want 431", resp.StatusCode)
		}
	}
	// Still serving.
	h.waitMetric("still serving", hardIs("vllm_up", 1))
	h.stop()
	sim.Close()
	hardCheckLeaks(t, before, 32<<20)
}

// TestSecurityLabelValuesBounded: label values come from vLLM's body (model
// names, finished reasons, engines). A hostile or broken /metrics with
// thousands of model names or megabyte-long label values must not turn into
// thousands of series or megabyte labels on our /metrics.
func TestSecurityLabelValuesBounded(t *testing.T) {
	var b strings.Builder
	// The long value comes first, so no cap on the number of models hides it.
	long := strings.Repeat("x", 64<<10)
	b.WriteString("# TYPE vllm:num_requests_running gauge\n")
	fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"0\",model_name=%q} 1\n", long)
	for i := range 5000 {
		fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"0\",model_name=\"model-%d\"} 1\n", i)
	}
	b.WriteString("# TYPE vllm:request_success_total counter\n")
	for i := range 5000 {
		fmt.Fprintf(&b, "vllm:request_success_total{engine=\"0\",finished_reason=\"r%d\",model_name=\"model-0\"} 1\n", i)
	}
	body := b.String()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, body)
	}))
	defer srv.Close()
	h := hardStart(t, nil, append([]string{"--vllm.url=" + srv.URL}, hardScrapeArgs...)...)
	page := h.waitMetric("scraped", hardIs("vllm_up", 1))
	_, text := h.get("/metrics")
	h.stop()
	n := len(page["vllm_requests_running"].GetMetric())
	f := len(page["vllm_requests_finished_total"].GetMetric())
	if n == 0 || n > 64 || f > 64 {
		t.Fatalf("%d model series and %d finished_reason series exported from a hostile body; want 1..64", n, f)
	}
	if strings.Contains(text, long[:4096]) {
		t.Fatal("a 64 KiB label value was exported")
	}
	if !strings.Contains(h.logs.String(), "dropped") {
		t.Fatalf("dropping series was not logged:\n%.2000s", h.logs)
	}
}

// TestSecurityOnlyConfiguredVLLM: the scraper and the probes talk only to
// --vllm.url. A vLLM (or something in front of it) that redirects elsewhere
// does not make the exporter request another host, and the API key is never
// sent anywhere but the configured server.
func TestSecurityOnlyConfiguredVLLM(t *testing.T) {
	const key = "sk-redirect-test-key-0042"
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		if strings.Contains(r.Header.Get("Authorization"), key) {
			t.Errorf("API key sent to another host on %s", r.URL.Path)
		}
		http.Error(w, "not vLLM", http.StatusTeapot)
	}))
	defer other.Close()
	var seen, probeSeen atomic.Int64
	vllmSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		if strings.HasPrefix(r.URL.Path, "/v1/") { // the probes' API, not /metrics
			probeSeen.Add(1)
		}
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
	}))
	defer vllmSrv.Close()
	cfg := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(cfg, []byte(hardProbeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VLLM_API_KEY", key)
	h := hardStart(t, nil, append([]string{"--vllm.url=" + vllmSrv.URL, "--config.file=" + cfg}, hardScrapeArgs...)...)
	h.waitMetric("redirects seen as failures", hardAll(hardIs("vllm_up", 0), hardAtLeast("vllm_exporter_scrapes_total", 5)))
	// The probes must have been redirected too, not only the scraper.
	h.eventually("probe attempts", func() (bool, string) {
		return seen.Load() >= 8 && probeSeen.Load() >= 2, fmt.Sprint(seen.Load(), " requests to vLLM, ", probeSeen.Load(), " on /v1/")
	})
	h.stop()
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the exporter followed redirects to another host %d times", n)
	}
}

// TestSameOriginRedirectFollowed: vLLM versions that mount /metrics as a
// sub-application answer /metrics with 307 to /metrics/; that redirect stays
// on the configured server and is followed.
func TestSameOriginRedirectFollowed(t *testing.T) {
	body, err := os.ReadFile("../../collector/vllm/testdata/vllm-main-2026-08-v1.txt")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			http.Redirect(w, r, "/metrics/", http.StatusTemporaryRedirect)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(body)
	}))
	defer srv.Close()
	h := hardStart(t, nil, append([]string{"--vllm.url=" + srv.URL, "--no-probe.enabled"}, hardScrapeArgs...)...)
	h.waitMetric("scraped through the redirect", hardAll(hardIs("vllm_up", 1), hardPresent("vllm_requests_running")))
	h.stop()
}

// hardBlockingCollector is an unchecked collector whose Collect, while
// block is set, counts itself in flight and waits for release.
type hardBlockingCollector struct {
	block    *atomic.Bool
	inFlight *atomic.Int64
	release  chan struct{}
}

func (hardBlockingCollector) Describe(chan<- *prometheus.Desc) {}

func (c hardBlockingCollector) Collect(chan<- prometheus.Metric) {
	if c.block.Load() {
		c.inFlight.Add(1)
		<-c.release
	}
}

// TestSecurityMetricsInFlightBound: at most 10 /metrics renders run at
// once; one more is answered 503 at once instead of queueing behind them
// (load shedding, so many scrapers cannot pile up goroutines and memory).
// When the renders finish, /metrics serves again.
func TestSecurityMetricsInFlightBound(t *testing.T) {
	before := hardSnapshot()
	var block atomic.Bool
	var inFlight atomic.Int64
	release := make(chan struct{})
	start := func(_ context.Context, x *exporter) error {
		return x.registry.Register(hardBlockingCollector{block: &block, inFlight: &inFlight, release: release})
	}
	hardExtraStart.Store(&start)
	t.Cleanup(func() { hardExtraStart.Store(nil) })
	sim := vllmsimtest.StartLoaded(t, 7)
	h := hardStart(t, nil, append([]string{"--vllm.url=" + sim.URL(), "--no-probe.enabled"}, hardScrapeArgs...)...)
	h.waitMetric("serving", hardIs("vllm_up", 1))

	block.Store(true)
	slow := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	codes := make(chan int, 10)
	for range 10 {
		go func() {
			resp, err := slow.Get(h.base + "/metrics")
			if err != nil {
				codes <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	h.eventually("10 renders in flight", func() (bool, string) {
		return inFlight.Load() == 10, fmt.Sprint(inFlight.Load(), " in flight")
	})
	if code, body := h.get("/metrics"); code != http.StatusServiceUnavailable {
		t.Fatalf("an 11th concurrent /metrics: %d %.200s, want 503", code, body)
	}
	if code, _ := h.get("/-/healthy"); code != http.StatusOK {
		t.Fatalf("/-/healthy = %d while /metrics is saturated", code)
	}
	block.Store(false)
	close(release)
	for range 10 {
		if code := <-codes; code != http.StatusOK {
			t.Fatalf("a render held in flight answered %d, want 200", code)
		}
	}
	if n := inFlight.Load(); n != 10 {
		t.Fatalf("%d renders ran while 10 were allowed", n)
	}
	h.waitMetric("serving again", hardIs("vllm_up", 1))
	h.stop()
	sim.Close()
	hardCheckLeaks(t, before, 32<<20)
}
