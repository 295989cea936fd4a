package main

// Tests of the connection to a vLLM behind TLS with client certificates
// (mTLS, as behind a gateway): the vllm: section of --config.file
// configures the scraper and the probes alike, a bearer token file is
// re-read when it is rotated, and no credential (token, password, private
// key) reaches a log line, an error, /metrics, the landing page or
// --config.check.

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/probes"
)

// tlsVLLM is the simulated vLLM behind an HTTPS server that requires a
// client certificate signed by pki's CA and a bearer token (the current
// value of token) on every route, /metrics included, as a gateway would.
type tlsVLLM struct {
	*httptest.Server
	token atomic.Pointer[string]

	mu     sync.Mutex
	tokens map[string]int // bearer tokens accepted, by value: how many requests
	probes int            // probe requests accepted
}

func startTLSVLLM(t *testing.T, pki *testutil.PKI, token string) *tlsVLLM {
	t.Helper()
	sim, err := vllmsim.New(vllmsim.Config{Seed: 23, LoadGen: true, Scenario: "healthy"})
	if err != nil {
		t.Fatal(err)
	}
	sim.StartClock()
	t.Cleanup(sim.Close)
	v := &tlsVLLM{tokens: map[string]int{}}
	v.token.Store(&token)
	api := sim.Handler()
	v.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if got != *v.token.Load() {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		v.mu.Lock()
		v.tokens[got]++
		if strings.HasPrefix(r.Header.Get("X-Request-Id"), probes.RequestIDPrefix) {
			v.probes++
		}
		v.mu.Unlock()
		api.ServeHTTP(w, r)
	}))
	v.TLS = pki.ServerTLS(true)
	v.StartTLS()
	t.Cleanup(v.Close)
	return v
}

// accepted is how many requests carried tok, and how many were probes.
func (v *tlsVLLM) accepted(tok string) (requests, probes int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.tokens[tok], v.probes
}

// tlsConfigFile writes a --config.file with the given vllm: section and one
// probe profile due at once and every two seconds.
func tlsConfigFile(t *testing.T, vllmSection string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yml")
	doc := vllmSection + `probes:
  profiles:
    - {name: tls, endpoint: completions, input_tokens: 8, output_tokens: 2, interval: 2s, timeout: 1500ms, jitter: 0s}
`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeSecret(t *testing.T, path, value string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestVLLMOverMutualTLS: with the CA, the client certificate and the token
// file in the vllm: section, the exporter scrapes the mTLS vLLM (vllm_up 1)
// and probes it successfully; rotating the token file switches every later
// request to the new token without a restart (the server accepts only the
// current one). Neither token nor private key appears in the logs,
// /metrics or the landing page.
func TestVLLMOverMutualTLS(t *testing.T) {
	pki := testutil.NewPKI(t, "vllm.test")
	const tok1, tok2 = "tok-one-Zq9Xsecret", "tok-two-Hk4Wsecret"
	v := startTLSVLLM(t, pki, tok1)
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeSecret(t, tokenFile, tok1)
	cfg := tlsConfigFile(t, fmt.Sprintf(`vllm:
  tls_config:
    ca_file: %s
    cert_file: %s
    key_file: %s
    server_name: vllm.test
  authorization:
    credentials_file: %s
`, pki.CAFile, pki.ClientCertFile, pki.ClientKeyFile, tokenFile))

	h := hardStart(t, nil, append([]string{"--vllm.url=" + v.URL, "--config.file=" + cfg}, hardScrapeArgs...)...)
	h.waitMetric("scraped and probed over mTLS", hardAll(
		hardIs("vllm_up", 1),
		hardAtLeast("vllm_probe_requests_total", 1, "profile", "tls"),
		hardIs("vllm_probe_failures_total", 0, "profile", "tls", "reason", "connect"),
	))
	if n, p := v.accepted(tok1); n == 0 || p == 0 {
		t.Fatalf("the server accepted %d requests (%d probes) with the token", n, p)
	}

	// Rotate: the server now wants tok2, the file says tok2.
	next := tok2
	v.token.Store(&next)
	writeSecret(t, tokenFile, tok2)
	h.eventually("requests with the rotated token", func() (bool, string) {
		n, _ := v.accepted(tok2)
		return n >= 3, fmt.Sprintf("%d requests with the new token", n)
	})
	h.waitMetric("still up after the rotation", hardIs("vllm_up", 1))

	_, metrics := h.get("/metrics")
	_, landing := h.get("/")
	h.stop()
	for what, text := range map[string]string{"logs": h.logs.String(), "/metrics": metrics, "landing page": landing} {
		for _, secret := range []string{tok1, tok2, pki.ClientKeyPEM, strings.Split(pki.ClientKeyPEM, "\n")[1]} {
			if strings.Contains(text, secret) {
				t.Fatalf("a secret (%.12q...) is in the %s", secret, what)
			}
		}
	}
}

// TestVLLMMutualTLSRefused: without the client certificate, or trusting
// the wrong CA, every scrape fails with reason tls (not a generic connect)
// and the log says why; the probes fail too. The token is sent in neither
// case (the handshake fails first) and appears in no log line.
func TestVLLMMutualTLSRefused(t *testing.T) {
	pki := testutil.NewPKI(t, "vllm.test")
	other := testutil.NewPKI(t, "vllm.test")
	const tok = "tok-refused-Pq7Lsecret"
	v := startTLSVLLM(t, pki, tok)
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeSecret(t, tokenFile, tok)
	for _, c := range []struct {
		name, tls, log string
	}{
		{"no client certificate", fmt.Sprintf("    ca_file: %s\n", pki.CAFile), "certificate required"},
		{"wrong CA", fmt.Sprintf("    ca_file: %s\n    cert_file: %s\n    key_file: %s\n", other.CAFile, pki.ClientCertFile, pki.ClientKeyFile),
			"certificate signed by unknown authority"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := tlsConfigFile(t, "vllm:\n  tls_config:\n"+c.tls+"  authorization:\n    credentials_file: "+tokenFile+"\n")
			h := hardStart(t, nil, append([]string{"--vllm.url=" + v.URL, "--config.file=" + cfg}, hardScrapeArgs...)...)
			h.waitMetric("scrapes and a probe refused", hardAll(
				hardIs("vllm_up", 0),
				hardAtLeast("vllm_exporter_scrape_errors_total", 2, "reason", "tls"),
				hardIs("vllm_exporter_scrape_errors_total", 0, "reason", "connect"),
				hardAtLeast("vllm_probe_failures_total", 1, "profile", "tls", "reason", "connect"),
			))
			h.stop()
			logs := h.logs.String()
			if !strings.Contains(logs, c.log) {
				t.Errorf("the log does not say %q:\n%s", c.log, logs)
			}
			if strings.Contains(logs, tok) {
				t.Error("the token is in the logs")
			}
		})
	}
	if n, _ := v.accepted(tok); n != 0 {
		t.Fatalf("the server accepted %d requests from misconfigured exporters", n)
	}
}

// TestVLLMConnectionConfigErrors: a vllm: section that cannot work is
// refused at start and by --config.check, with an error that names the
// problem and never the secret: an unreadable CA file next to an inline
// token, credentials set both by a flag and the file, a key file that is
// not a key.
func TestVLLMConnectionConfigErrors(t *testing.T) {
	pki := testutil.NewPKI(t, "vllm.test")
	const secret = "inline-Ym3Tsecret"
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "api-key")
	writeSecret(t, keyFile, "flag-Vb8Rsecret")
	notAKey := filepath.Join(dir, "not-a-key.pem")
	writeSecret(t, notAKey, "hunter2-Kx5Nsecret")
	for _, c := range []struct {
		name, section string
		args          []string
		want          string
	}{
		{"missing CA file", "vllm:\n  tls_config: {ca_file: " + filepath.Join(dir, "nope.pem") + "}\n  authorization: {credentials: " + secret + "}\n", nil, "nope.pem"},
		{"credentials twice", "vllm:\n  authorization: {credentials: " + secret + "}\n", []string{"--vllm.api-key-file=" + keyFile}, "use one"},
		{"key file not a key", fmt.Sprintf("vllm:\n  tls_config: {cert_file: %s, key_file: %s}\n", pki.ClientCertFile, notAKey), nil, "unable to use specified client cert"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := tlsConfigFile(t, c.section)
			for _, mode := range [][]string{{"--config.check"}, {"--vllm.url=https://127.0.0.1:1", "--no-probe.enabled"}} {
				var out, errb bytes.Buffer
				args := append(append([]string{"--config.file=" + cfg, "--log.level=debug"}, mode...), c.args...)
				if code := run(args, &out, &errb); code == 0 {
					t.Fatalf("%v: accepted", mode)
				}
				all := out.String() + errb.String()
				if !strings.Contains(all, c.want) {
					t.Errorf("%v: the error does not mention %q:\n%s", mode, c.want, all)
				}
				for _, s := range []string{secret, "flag-Vb8Rsecret", "hunter2-Kx5Nsecret"} {
					if strings.Contains(all, s) {
						t.Errorf("%v: a secret (%s) is in the output:\n%s", mode, s, all)
					}
				}
			}
		})
	}
}

// TestVLLMConnectionFollowsReload: a reload applies a changed vllm:
// section to the running scraper (a new inline token is sent from then on);
// a section that cannot work (a missing CA file) fails the reload and the
// running connection keeps scraping.
func TestVLLMConnectionFollowsReload(t *testing.T) {
	pki := testutil.NewPKI(t, "vllm.test")
	const tok1, tok2 = "reload-one-Jd2Qsecret", "reload-two-Wc6Zsecret"
	v := startTLSVLLM(t, pki, tok1)
	cfgPath := filepath.Join(t.TempDir(), "config.yml")
	section := func(ca, tok string) []byte {
		return fmt.Appendf(nil, "vllm:\n  tls_config: {ca_file: %s, cert_file: %s, key_file: %s}\n  authorization: {credentials: %s}\n",
			ca, pki.ClientCertFile, pki.ClientKeyFile, tok)
	}
	if err := os.WriteFile(cfgPath, section(pki.CAFile, tok1), 0o600); err != nil {
		t.Fatal(err)
	}
	h := hardStart(t, nil, append([]string{"--vllm.url=" + v.URL, "--config.file=" + cfgPath, "--no-probe.enabled", "--web.enable-lifecycle"}, hardScrapeArgs...)...)
	h.waitMetric("scraped with the first token", hardIs("vllm_up", 1))

	if err := os.WriteFile(cfgPath, section(pki.CAFile+".missing", tok2), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := h.post("/-/reload"); code != http.StatusInternalServerError || !strings.Contains(body, "ca.pem.missing") || strings.Contains(body, tok2) {
		t.Fatalf("reload with a missing CA file: %d %q", code, body)
	}
	before, _ := v.accepted(tok1)
	h.eventually("scrapes go on with the running connection", func() (bool, string) {
		n, _ := v.accepted(tok1)
		return n >= before+3, fmt.Sprintf("%d more requests with the first token", n-before)
	})
	h.waitMetric("the failed reload is reported", hardAll(hardIs("vllm_up", 1), hardIs("vllm_exporter_config_last_reload_successful", 0)))

	next := tok2
	v.token.Store(&next)
	if err := os.WriteFile(cfgPath, section(pki.CAFile, tok2), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := h.post("/-/reload"); code != http.StatusOK {
		t.Fatalf("reload with the new token: %d %q", code, body)
	}
	h.eventually("requests with the reloaded token", func() (bool, string) {
		n, _ := v.accepted(tok2)
		return n >= 3, fmt.Sprintf("%d requests with the new token", n)
	})
	h.waitMetric("up after the reload", hardAll(hardIs("vllm_up", 1), hardIs("vllm_exporter_config_last_reload_successful", 1)))
	h.stop()
	for _, tok := range []string{tok1, tok2} {
		if strings.Contains(h.logs.String(), tok) {
			t.Fatal("a token from the configuration file is in the logs")
		}
	}
}
