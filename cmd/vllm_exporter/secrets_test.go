package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-kit/log/level"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// echoVLLM is a vLLM behind an auth proxy that refuses every request and
// echoes back what it got: the Authorization header, the credential in it
// (a basic one decoded) and the path, in a 500 body on /metrics and in
// vLLM's error JSON with 401 on the API. It lists one model, so the probes
// get as far as their streaming request. auth holds every Authorization
// header it was sent.
func echoVLLM(t *testing.T) (srv *httptest.Server, auth *testutil.Log[string]) {
	auth = &testutil.Log[string]{}
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		auth.Add(got)
		cred := got[strings.IndexByte(got, ' ')+1:]
		if _, pass, ok := r.BasicAuth(); ok {
			cred = pass
		}
		echo := fmt.Sprintf("you sent Authorization: %s (credential %s) for %s", got, cred, r.URL.Path)
		switch {
		case r.URL.Path == "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model","max_model_len":4096}]}`)
		case strings.HasPrefix(r.URL.Path, "/v1/"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":%q,"type":"AuthenticationError","code":401}}`, echo)
		default:
			http.Error(w, echo, http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, auth
}

func basicB64(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// TestSecretsNeverLeave: each kind of credential the exporter sends to vLLM
// (basic auth from a file and from the config file, a password in
// --vllm.url, an API key from $VLLM_API_KEY and from --vllm.api-key-file, a
// bearer token in the config file) is sent, echoed back by vLLM in its
// error bodies, and found in no output: the logs at debug level (logfmt and
// JSON), /metrics, the landing page, /debug/pprof/cmdline, --config.check's
// output, the answer of a failed POST /-/reload and the error of a start
// that fails, the last two with the secret also in an unparsable proxy URL
// of the config file.
func TestSecretsNeverLeave(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name   string
		args   []string // besides --vllm.url
		user   string   // userinfo for --vllm.url (user:password, encoded)
		env    string   // $VLLM_API_KEY
		vllm   string   // the config file's vllm: section
		secret string   // the credential as sent
		sent   string   // the Authorization header vLLM must see
	}{
		{name: "basic auth from a file", args: []string{"--vllm.basic-auth-username=scraper", "--vllm.basic-auth-password-file=" + write("pw", "File-Basic-Pw-4711\n")},
			secret: "File-Basic-Pw-4711", sent: "Basic " + basicB64("scraper", "File-Basic-Pw-4711")},
		{name: "basic auth in the config file", vllm: "  basic_auth:\n    username: proxyuser\n    password: Inline-Basic-Pw-4711\n",
			secret: "Inline-Basic-Pw-4711", sent: "Basic " + basicB64("proxyuser", "Inline-Basic-Pw-4711")},
		{name: "password in --vllm.url", user: "scraper:Url%2FPa55w-4711", args: []string{"--log.format=json"},
			secret: "Url/Pa55w-4711", sent: "Basic " + basicB64("scraper", "Url/Pa55w-4711")},
		{name: "$VLLM_API_KEY", env: "sk-env-Zq9XtopSecretKey-4711", secret: "sk-env-Zq9XtopSecretKey-4711", sent: "Bearer sk-env-Zq9XtopSecretKey-4711"},
		{name: "--vllm.api-key-file", args: []string{"--vllm.api-key-file=" + write("key", "  tok_FileKey0042Secret\n")},
			secret: "tok_FileKey0042Secret", sent: "Bearer tok_FileKey0042Secret"},
		{name: "bearer token in the config file", vllm: "  authorization:\n    credentials: cfg-Inline-Secret-4711\n",
			secret: "cfg-Inline-Secret-4711", sent: "Bearer cfg-Inline-Secret-4711"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("VLLM_API_KEY", c.env)
			srv, auth := echoVLLM(t)
			url := srv.URL
			if c.user != "" {
				url = strings.Replace(url, "://", "://"+c.user+"@", 1)
			}
			cfg := "probes:\n  model: m\n" + strings.TrimPrefix(hardProbeConfig, "probes:\n")
			if c.vllm != "" {
				cfg += "vllm:\n" + c.vllm
			}
			argsWith := func(cfgFile string) []string {
				return append([]string{"--vllm.url=" + url, "--config.file=" + cfgFile, "--web.enable-pprof", "--web.enable-lifecycle"},
					append(hardScrapeArgs, c.args...)...)
			}
			args := argsWith(write("config.yml", cfg))
			oldArgs := os.Args
			os.Args = append([]string{program}, args...) // what /debug/pprof/cmdline serves
			t.Cleanup(func() { os.Args = oldArgs })

			h := hardStart(t, nil, args...)
			h.waitMetric("scrapes and a probe refused", hardAll(hardAtLeast("vllm_exporter_scrape_errors_total", 2, "reason", "http_5xx"),
				hardAtLeast("vllm_probe_failures_total", 1, "profile", "fast", "reason", "http_4xx")))
			outputs := map[string]string{}
			_, outputs["/metrics"] = h.get("/metrics")
			_, outputs["landing page"] = h.get("/")
			_, outputs["/debug/pprof/cmdline"] = h.get("/debug/pprof/cmdline")
			// A reload of a config whose proxy URL carries the secret, not
			// percent-encoded: url.Parse's error quotes it.
			broken := cfg + "vllm:\n  proxy_url: http://u:" + c.secret + "/x@proxy:3128\n"
			if c.vllm != "" {
				broken = cfg + "  proxy_url: http://u:" + c.secret + "/x@proxy:3128\n"
			}
			write("config.yml", broken)
			_, outputs["POST /-/reload"] = h.post("/-/reload")
			write("config.yml", cfg)
			// A secret bare in an error from any library: the logger itself
			// knows the running connection's secrets (and the URL's).
			level.Error(h.x.logger).Log("msg", "a library's error", "err", fmt.Errorf("upstream said %s", c.secret))
			h.stop()
			outputs["logs"] = h.logs.String()
			var out, errb bytes.Buffer
			run(append(args, "--config.check"), &out, &errb)
			outputs["--config.check"] = out.String() + errb.String()
			brokenFile := write("broken.yml", broken)
			out.Reset()
			errb.Reset()
			run(append(argsWith(brokenFile), "--config.check"), &out, &errb)
			outputs["--config.check of a broken file"] = out.String() + errb.String()
			errb.Reset()
			run(argsWith(brokenFile), &out, &errb)
			outputs["a failed start"] = errb.String()

			if sent := auth.All(); len(sent) == 0 || sent[len(sent)-1] != c.sent {
				t.Fatalf("vLLM was sent Authorization %q, want %q: the echo would prove nothing", sent, c.sent)
			}
			forms := []string{c.secret, c.sent[strings.IndexByte(c.sent, ' ')+1:], c.secret[len(c.secret)/3 : 2*len(c.secret)/3]}
			if c.user != "" {
				forms = append(forms, c.user)
			}
			for what, text := range outputs {
				for _, form := range forms {
					if strings.Contains(text, form) {
						t.Errorf("%q (of the secret) is in the %s:\n%s", form, what, text)
					}
				}
			}
			// The echoes were there to scrub: the probe's failure line
			// quotes vLLM's error text, the reload and the broken file
			// failed on the proxy URL.
			for what, want := range map[string][]string{
				"logs":                            {"debug", "probe failed", "you sent Authorization: ", "xxxxx", "config reload failed", "upstream said xxxxx"},
				"/debug/pprof/cmdline":            {"--vllm.url=http://", "--web.enable-pprof"},
				"POST /-/reload":                  {"reload failed", "vllm.proxy_url", "xxxxx@proxy:3128"},
				"--config.check":                  {"is valid"},
				"--config.check of a broken file": {"vllm.proxy_url", "xxxxx@proxy:3128"},
				"a failed start":                  {"vllm.proxy_url", "xxxxx@proxy:3128"},
			} {
				for _, w := range want {
					if !strings.Contains(outputs[what], w) {
						t.Errorf("the %s lack %q (the check would be vacuous):\n%s", what, w, outputs[what])
					}
				}
			}
		})
	}
}
