package main

// Tests of how the exporter reaches vLLM: one proxy policy for the scraper
// and the probes, credentials from files, and no credential in any log line,
// error, /metrics or the landing page.

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// TestUnparsableURLPasswordNotLogged: a --vllm.url whose password is not
// percent-encoded does not parse, and Go's parse error quotes the URL. The
// exporter refuses to start with an error that names the problem without
// the password, also with --no-probe.enabled (the path that logged it).
func TestUnparsableURLPasswordNotLogged(t *testing.T) {
	const pass = "Pa/ss#w0rd?leak"
	for _, extra := range [][]string{nil, {"--no-probe.enabled"}} {
		var out, errb bytes.Buffer
		args := append([]string{"--vllm.url=http://scraper:" + pass + "@vllm.example:8000", "--log.level=debug"}, extra...)
		if code := run(args, &out, &errb); code == 0 {
			t.Fatalf("%v: started with an unparsable URL", extra)
		}
		all := out.String() + errb.String()
		for _, part := range []string{pass, "Pa/ss", "w0rd"} {
			if strings.Contains(all, part) {
				t.Fatalf("%v: the password (%q) is in the output:\n%s", extra, part, all)
			}
		}
		if !strings.Contains(all, "xxxxx@vllm.example:8000") || !strings.Contains(all, "percent-encode") {
			t.Fatalf("%v: the error does not say which URL and what to do:\n%s", extra, all)
		}
	}
}

// recordingProxy is an HTTP forward proxy that records every request it is
// asked to forward (and answers 503 itself): it stands for a proxy named by
// HTTP_PROXY that must not see the exporter's traffic.
type recordingProxy struct {
	*httptest.Server
	seen testutil.Log[string] // "path authorization"
}

func newRecordingProxy(t *testing.T) *recordingProxy {
	p := &recordingProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.seen.Add(r.URL.Path + " " + r.Header.Get("Authorization"))
		http.Error(w, "proxy says no", http.StatusServiceUnavailable)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *recordingProxy) requests() []string { return p.seen.All() }

// TestProxyPolicyShared: with HTTP_PROXY set, the scraper and the probes
// both connect directly by default (the proxy sees nothing, so not the
// bearer key either), and both go through the proxy with
// --vllm.proxy-from-environment. Against the binary: net/http reads the
// proxy variables once per process. vLLM's host name is unresolvable, so a
// direct connection fails and only the proxy could answer; loopback
// addresses are never proxied by Go, which is why no local server is used.
func TestProxyPolicyShared(t *testing.T) {
	buildBinary(t)
	const key = "sk-proxy-must-not-see-this"
	proxy := newRecordingProxy(t)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	t.Setenv("VLLM_API_KEY", key)
	args := []string{"--vllm.url=http://vllm.invalid:8000", "--vllm.scrape-interval=100ms", "--log.level=debug"}

	// Default: direct. Scrapes fail to connect; probes fail too (their
	// first one is due within one jitter of the start).
	p := testutil.StartExporter(t, args...)
	p.WaitServing("/-/healthy", http.StatusOK)
	testutil.Eventually(t, "direct scrapes and a probe fail", p.Logs, func() (bool, string) {
		m := p.Metrics()
		scr, _ := m.Value("vllm_exporter_scrape_errors_total", "reason", "connect")
		probes, _ := m.Value("vllm_probe_requests_total", "profile", "short-chat")
		fails, _ := m.Value("vllm_probe_failures_total", "profile", "short-chat", "reason", "connect")
		return scr >= 3 && (probes >= 1 || fails >= 1), "scrape connect errors and probe attempts not seen yet"
	})
	p.Signal(15)
	if seen := proxy.requests(); len(seen) != 0 {
		t.Fatalf("without --vllm.proxy-from-environment the proxy got %d requests: %q", len(seen), seen)
	}

	// Opt in: both go through the proxy, with the key (the operator chose it).
	p = testutil.StartExporter(t, append(args, "--vllm.proxy-from-environment")...)
	p.WaitServing("/-/healthy", http.StatusOK)
	testutil.Eventually(t, "scrapes and probes through the proxy", p.Logs, func() (bool, string) {
		var metrics, api bool
		for _, r := range proxy.requests() {
			metrics = metrics || strings.HasPrefix(r, "/metrics Bearer "+key)
			api = api || strings.HasPrefix(r, "/v1/")
		}
		return metrics && api, strings.Join(proxy.requests(), "; ")
	})
	p.Signal(15)
	if strings.Contains(p.Logs.String(), key) {
		t.Fatalf("the key is in the logs:\n%s", p.Logs)
	}
}

// TestBasicAuthFromFile: --vllm.basic-auth-username with
// --vllm.basic-auth-password-file authenticates the scrapes (credentials
// stay off the command line); the password is in no log line, not in
// /metrics and not on the landing page. Flag mistakes are clear errors.
func TestBasicAuthFromFile(t *testing.T) {
	const user, pass = "scraper", "f1le-Passw0rd-secret"
	body, err := os.ReadFile(fixtureV1)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != pass {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(body)
	}))
	defer srv.Close()
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := hardStart(t, nil, append([]string{"--vllm.url=" + srv.URL, "--vllm.basic-auth-username=" + user,
		"--vllm.basic-auth-password-file=" + pwFile, "--no-probe.enabled"}, hardScrapeArgs...)...)
	h.waitMetric("authenticated scrape", hardIs("vllm_up", 1))
	_, metrics := h.get("/metrics")
	_, landing := h.get("/")
	h.stop()
	for what, text := range map[string]string{"logs": h.logs.String(), "/metrics": metrics, "landing page": landing} {
		if strings.Contains(text, pass) {
			t.Fatalf("the password is in the %s", what)
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--vllm.url=" + srv.URL, "--vllm.basic-auth-username=" + user}, "go together"},
		{[]string{"--vllm.url=http://a:b@127.0.0.1:1", "--vllm.basic-auth-username=" + user, "--vllm.basic-auth-password-file=" + pwFile}, "use one"},
		{[]string{"--vllm.url=" + srv.URL, "--vllm.basic-auth-username=" + user, "--vllm.basic-auth-password-file=" + pwFile + ".missing"}, "vllm.basic-auth-password-file"},
	} {
		var out, errb bytes.Buffer
		if code := run(append(c.args, "--no-probe.enabled"), &out, &errb); code == 0 || !strings.Contains(errb.String(), c.want) {
			t.Fatalf("%v: exit %d, stderr %q; want an error saying %q", c.args, code, errb.String(), c.want)
		}
		if strings.Contains(errb.String(), pass) {
			t.Fatalf("%v: the password is in the error", c.args)
		}
	}
}
