package upstream

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	commoncfg "github.com/prometheus/common/config"
)

// TestRedact: the password never survives, whether the URL parses or not;
// the host does, so the operator can still tell which server is meant.
func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want, secret string }{
		{"http://vllm:8000", "http://vllm:8000", ""},
		{"http://user:pw@vllm:8000/metrics", "http://user:xxxxx@vllm:8000/metrics", "pw@"},
		{"http://user:pa/ss@vllm:8000", "http://xxxxx@vllm:8000", "pa/ss"},
		{"http://user:pa#ss@vllm:8000/x", "http://xxxxx@vllm:8000/x", "pa#ss"},
		{"https://u:p?q@@h:1", "https://xxxxx@h:1", "p?q"},
		{"u:s3cr/et@h:1", "xxxxx@h:1", "s3cr"},
	} {
		got := Redact(c.in)
		if got != c.want || (c.secret != "" && strings.Contains(got, c.secret)) {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestResolveShortcuts: each flag fills its part of the HTTP client
// configuration; $VLLM_API_KEY only when nothing else authenticates; a
// setting given twice (two flags, a flag and the file) is an error that
// names both and no secret.
func TestResolveShortcuts(t *testing.T) {
	dir := t.TempDir()
	keyFile, pwFile, empty := filepath.Join(dir, "key"), filepath.Join(dir, "pw"), filepath.Join(dir, "empty")
	for path, v := range map[string]string{keyFile: "k-Secret1\n", pwFile: "p-Secret2\n", empty: " \n"} {
		if err := os.WriteFile(path, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	def := DefaultHTTPClientConfig()
	withAuth := DefaultHTTPClientConfig()
	withAuth.Authorization = &commoncfg.Authorization{Credentials: "file-Secret3"}
	withProxy := DefaultHTTPClientConfig()
	withProxy.ProxyURL = commoncfg.URL{URL: &url.URL{Scheme: "http", Host: "proxy:3128"}}

	got, err := Resolve(def, "http://vllm:8000", Shortcuts{APIKeyFile: keyFile, APIKey: "env-Secret4", ProxyFromEnvironment: true})
	if err != nil || got.Authorization == nil || got.Authorization.CredentialsFile != keyFile || got.Authorization.Credentials != "" || !got.ProxyFromEnvironment {
		t.Fatalf("--vllm.api-key-file: %+v %v", got.Authorization, err)
	}
	got, err = Resolve(def, "http://vllm:8000", Shortcuts{BasicAuthUsername: "u", BasicAuthPasswordFile: pwFile})
	if err != nil || got.BasicAuth == nil || got.BasicAuth.Username != "u" || got.BasicAuth.PasswordFile != pwFile || got.Authorization != nil {
		t.Fatalf("basic auth flags: %+v %v", got.BasicAuth, err)
	}
	got, err = Resolve(def, "http://vllm:8000", Shortcuts{APIKey: "env-Secret4"})
	if err != nil || got.Authorization == nil || string(got.Authorization.Credentials) != "env-Secret4" {
		t.Fatalf("$VLLM_API_KEY: %+v %v", got.Authorization, err)
	}
	got, err = Resolve(withAuth, "http://vllm:8000", Shortcuts{APIKey: "env-Secret4"})
	if err != nil || string(got.Authorization.Credentials) != "file-Secret3" {
		t.Fatalf("$VLLM_API_KEY replaced the file's credentials: %v", err)
	}
	if got, _ := Resolve(def, "http://vllm:8000", Shortcuts{}); got.Authorization != nil || got.BasicAuth != nil || got.Proxy() != nil {
		t.Fatalf("no shortcuts: credentials or a proxy appeared: %+v", got)
	}

	for _, c := range []struct {
		cfg  commoncfg.HTTPClientConfig
		url  string
		s    Shortcuts
		want string
	}{
		{def, "http://vllm:8000", Shortcuts{BasicAuthUsername: "u"}, "go together"},
		{def, "http://vllm:8000", Shortcuts{APIKeyFile: keyFile, BasicAuthUsername: "u", BasicAuthPasswordFile: pwFile}, "use one"},
		{withAuth, "http://vllm:8000", Shortcuts{APIKeyFile: keyFile}, "use one"},
		{withProxy, "http://vllm:8000", Shortcuts{ProxyFromEnvironment: true}, "use one"},
		{def, "http://a:b@vllm:8000", Shortcuts{BasicAuthUsername: "u", BasicAuthPasswordFile: pwFile}, "use one"},
		{def, "http://vllm:8000", Shortcuts{APIKeyFile: filepath.Join(dir, "missing")}, "--vllm.api-key-file"},
		{def, "http://vllm:8000", Shortcuts{BasicAuthUsername: "u", BasicAuthPasswordFile: empty}, "is empty"},
	} {
		_, err := Resolve(c.cfg, c.url, c.s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.s, err, c.want)
			continue
		}
		for _, secret := range []string{"Secret1", "Secret2", "Secret3"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%+v: a secret is in the error %q", c.s, err)
			}
		}
	}
}

// authServer records the Authorization header of every request.
func authServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func get(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// newTestClient is the Upstream for cfg and one client from it.
func newTestClient(t *testing.T, cfg commoncfg.HTTPClientConfig) (*Upstream, *http.Client) {
	t.Helper()
	u, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := u.Client("test")
	if err != nil {
		t.Fatal(err)
	}
	return u, c
}

// TestTokenFileReread: a rotated credentials_file is sent from the next
// request on, by the same client (no restart, no rebuild).
func TestTokenFileReread(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, seen := authServer(t, nil)
	cfg := DefaultHTTPClientConfig()
	cfg.Authorization = &commoncfg.Authorization{Type: "Bearer", CredentialsFile: tokenFile}
	_, c := newTestClient(t, cfg)
	get(t, c, srv.URL+"/a")
	if err := os.WriteFile(tokenFile, []byte("two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	get(t, c, srv.URL+"/b")
	if got := seen(); len(got) != 2 || got[0] != "/a Bearer one" || got[1] != "/b Bearer two" {
		t.Fatalf("requests: %q", got)
	}
}

// TestRedirectPolicy: follow_redirects follows within the server only (the
// credentials never reach another host); without it nothing is followed.
func TestRedirectPolicy(t *testing.T) {
	other, otherSeen := authServer(t, nil)
	srv, seen := authServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			http.Redirect(w, r, "/metrics/", http.StatusTemporaryRedirect)
		case "/away":
			http.Redirect(w, r, other.URL+"/stolen", http.StatusTemporaryRedirect)
		}
	})
	cfg := DefaultHTTPClientConfig()
	cfg.Authorization = &commoncfg.Authorization{Type: "Bearer", Credentials: "k"}
	u, c := newTestClient(t, cfg)
	if code := get(t, c, srv.URL+"/metrics"); code != http.StatusOK {
		t.Fatalf("same-server redirect: %d", code)
	}
	if code := get(t, c, srv.URL+"/away"); code != http.StatusTemporaryRedirect || len(otherSeen()) != 0 {
		t.Fatalf("redirect to another host: %d, there %q", code, otherSeen())
	}
	cfg.FollowRedirects = false
	if err := u.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if code := get(t, c, srv.URL+"/metrics"); code != http.StatusTemporaryRedirect {
		t.Fatalf("follow_redirects: false followed: %d", code)
	}
	want := []string{"/metrics Bearer k", "/metrics/ Bearer k", "/away Bearer k", "/metrics Bearer k"}
	if got := seen(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("requests %q, want %q", got, want)
	}
}

// TestApply: a new configuration reaches clients handed out before it; one
// that does not build (missing CA file) changes nothing.
func TestApply(t *testing.T) {
	srv, seen := authServer(t, nil)
	cfg := DefaultHTTPClientConfig()
	cfg.Authorization = &commoncfg.Authorization{Type: "Bearer", Credentials: "old"}
	u, c := newTestClient(t, cfg)
	bad := cfg
	bad.TLSConfig.CAFile = filepath.Join(t.TempDir(), "missing.pem")
	if err := u.Apply(bad); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Fatalf("a missing CA file was applied: %v", err)
	}
	get(t, c, srv.URL+"/a")
	cfg.Authorization = &commoncfg.Authorization{Type: "Bearer", Credentials: "new"}
	if err := u.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	get(t, c, srv.URL+"/b")
	if got := seen(); len(got) != 2 || got[0] != "/a Bearer old" || got[1] != "/b Bearer new" {
		t.Fatalf("requests: %q", got)
	}
	if _, err := New(bad); err == nil {
		t.Fatal("New accepted a missing CA file")
	}
}

// The client's connections carry requests and keep-alive as usual: a scrape
// every interval reuses one connection rather than dialling each time.
func TestClientConnectionsAreReused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("ok ", 10000)))
	}))
	defer srv.Close()
	u, err := New(DefaultHTTPClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	c, err := u.Client("test")
	if err != nil {
		t.Fatal(err)
	}
	var reused int
	for range 3 {
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
			if i.Reused {
				reused++
			}
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, srv.URL, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || len(b) != 30000 {
			t.Fatalf("body: %d bytes, %v", len(b), err)
		}
	}
	if reused != 2 {
		t.Fatalf("%d of 3 requests reused the connection, want 2", reused)
	}
}
