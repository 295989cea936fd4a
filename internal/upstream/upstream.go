// Package upstream is how the exporter reaches the vLLM server, shared by
// every component that talks to it (the /metrics scraper and the synthetic
// probes): one github.com/prometheus/common/config.HTTPClientConfig (TLS,
// credentials, proxy, redirects), one way to write the server's URL into
// logs, errors and pages without its secrets.
//
// Why one package: the scraper used to honour HTTP(S)_PROXY while the probes
// ignored it, so with a proxy variable set the bearer key went to a proxy it
// was never meant for. A configuration decided in one place cannot diverge.
//
// Credentials are common/config Secrets (they marshal as <secret>), and the
// *_file forms (authorization.credentials_file, basic_auth.password_file) are
// read on every request, so a rotated token is used without a restart.
// Files of tls_config (CA, certificate, key) are re-read when they change.
package upstream

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	commoncfg "github.com/prometheus/common/config"
)

// DefaultHTTPClientConfig is the connection to vLLM when nothing is
// configured: no credentials, no TLS settings (the system roots), a direct
// connection (no proxy, not even one from the environment), redirects
// followed within the vLLM server.
func DefaultHTTPClientConfig() commoncfg.HTTPClientConfig {
	return commoncfg.DefaultHTTPClientConfig
}

// Shortcuts are the command-line flags that fill the HTTP client
// configuration (the vllm: section of --config.file) without a file.
type Shortcuts struct {
	// APIKeyFile is --vllm.api-key-file: a bearer token, re-read on change.
	APIKeyFile string
	// APIKey is $VLLM_API_KEY: the bearer token when neither the flags nor
	// the file configure any credentials.
	APIKey string
	// BasicAuthUsername and BasicAuthPasswordFile are
	// --vllm.basic-auth-username and --vllm.basic-auth-password-file.
	BasicAuthUsername, BasicAuthPasswordFile string
	// ProxyFromEnvironment is --vllm.proxy-from-environment.
	ProxyFromEnvironment bool
}

// Resolve applies the shortcuts to cfg (the file's section) and checks the
// result against the vLLM URL. A setting given both by a flag and by the
// file is an error, so which credential is sent is never a guess; so is
// basic auth configured while the URL carries credentials. Credential files
// named by flags must exist and not be empty (a typo fails at start, not at
// the first scrape). Errors name flags, keys and files, never a secret.
func Resolve(cfg commoncfg.HTTPClientConfig, vllmURL string, s Shortcuts) (commoncfg.HTTPClientConfig, error) {
	fileAuth := cfg.Authorization != nil || cfg.BasicAuth != nil || cfg.OAuth2 != nil ||
		cfg.BearerToken != "" || cfg.BearerTokenFile != ""
	switch {
	case (s.BasicAuthUsername == "") != (s.BasicAuthPasswordFile == ""):
		return cfg, errors.New("--vllm.basic-auth-username and --vllm.basic-auth-password-file go together")
	case s.APIKeyFile != "" && s.BasicAuthUsername != "":
		return cfg, errors.New("--vllm.api-key-file and --vllm.basic-auth-username both set credentials: use one")
	case (s.APIKeyFile != "" || s.BasicAuthUsername != "") && fileAuth:
		return cfg, errors.New("credentials are set both by flags (--vllm.api-key-file or --vllm.basic-auth-*) and by the vllm: section of --config.file: use one")
	case s.ProxyFromEnvironment && cfg.ProxyURL.URL != nil:
		return cfg, errors.New("--vllm.proxy-from-environment and vllm.proxy_url in --config.file: use one")
	}
	switch {
	case s.APIKeyFile != "":
		if err := CheckSecretFile("vllm.api-key-file", s.APIKeyFile); err != nil {
			return cfg, err
		}
		cfg.Authorization = &commoncfg.Authorization{Type: "Bearer", CredentialsFile: s.APIKeyFile}
	case s.BasicAuthUsername != "":
		if err := CheckSecretFile("vllm.basic-auth-password-file", s.BasicAuthPasswordFile); err != nil {
			return cfg, err
		}
		cfg.BasicAuth = &commoncfg.BasicAuth{Username: s.BasicAuthUsername, PasswordFile: s.BasicAuthPasswordFile}
	case s.APIKey != "" && !fileAuth:
		cfg.Authorization = &commoncfg.Authorization{Type: "Bearer", Credentials: commoncfg.Secret(s.APIKey)}
	}
	if s.ProxyFromEnvironment {
		cfg.ProxyFromEnvironment = true
	}
	if cfg.BasicAuth != nil && HasUserInfo(vllmURL) {
		return cfg, errors.New("--vllm.url carries credentials and basic auth is configured (--vllm.basic-auth-username or vllm.basic_auth): use one")
	}
	if err := checkFiles(cfg); err != nil {
		return cfg, err
	}
	if p := cfg.ProxyURL.URL; p != nil && (p.Hostname() == "" || (p.Scheme != "http" && p.Scheme != "https" && p.Scheme != "socks5")) {
		return cfg, fmt.Errorf("vllm.proxy_url: %s is not an http://, https:// or socks5:// URL with a host", Redact(p.String()))
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("vllm HTTP client: %w", err)
	}
	return cfg, nil
}

// Upstream is the connection to the vLLM server: one HTTPClientConfig from
// which every component gets its client. Apply swaps the configuration of
// every client handed out (a configuration reload); requests in flight
// finish on the old one. A nil *Upstream is the default configuration.
type Upstream struct {
	mu      sync.Mutex
	cfg     commoncfg.HTTPClientConfig
	clients []*Client
}

// New checks that cfg builds a client (TLS files readable, certificates
// parse) and returns the Upstream for it.
func New(cfg commoncfg.HTTPClientConfig) (*Upstream, error) {
	if _, err := newRoundTripper(cfg, "check"); err != nil {
		return nil, err
	}
	return &Upstream{cfg: cfg}, nil
}

// Config is the configuration in force.
func (u *Upstream) Config() commoncfg.HTTPClientConfig {
	if u == nil {
		return DefaultHTTPClientConfig()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cfg
}

// Client returns a client following u's configuration; name labels its
// connections (go-conntrack) and opts are the component's transport needs
// (the probes' timestamping dialer and HTTP/1.1).
func (u *Upstream) Client(name string, opts ...commoncfg.HTTPClientOption) (*http.Client, error) {
	if u == nil {
		u = &Upstream{cfg: DefaultHTTPClientConfig()}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	c := &Client{name: name, opts: opts}
	if err := c.apply(u.cfg); err != nil {
		return nil, err
	}
	u.clients = append(u.clients, c)
	return &http.Client{Transport: c, CheckRedirect: c.checkRedirect}, nil
}

// Apply builds every client for cfg and, only when all of them build,
// switches them over: a configuration with an unreadable CA file changes
// nothing. Idle connections of the old transports are closed.
func (u *Upstream) Apply(cfg commoncfg.HTTPClientConfig) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	rts := make([]http.RoundTripper, len(u.clients))
	for i, c := range u.clients {
		rt, err := newRoundTripper(cfg, c.name, c.opts...)
		if err != nil {
			return err
		}
		rts[i] = rt
	}
	u.cfg = cfg
	for i, c := range u.clients {
		c.swap(rts[i], cfg.FollowRedirects)
	}
	return nil
}

// Client is one component's transport: the round tripper built from the
// current configuration.
type Client struct {
	name   string
	opts   []commoncfg.HTTPClientOption
	rt     atomic.Pointer[http.RoundTripper]
	follow atomic.Bool
}

func (c *Client) apply(cfg commoncfg.HTTPClientConfig) error {
	rt, err := newRoundTripper(cfg, c.name, c.opts...)
	if err != nil {
		return err
	}
	c.swap(rt, cfg.FollowRedirects)
	return nil
}

func (c *Client) swap(rt http.RoundTripper, follow bool) {
	c.follow.Store(follow)
	if old := c.rt.Swap(&rt); old != nil {
		if ci, ok := (*old).(interface{ CloseIdleConnections() }); ok {
			ci.CloseIdleConnections()
		}
	}
}

// RoundTrip sends req with the current configuration.
func (c *Client) RoundTrip(req *http.Request) (*http.Response, error) {
	return (*c.rt.Load()).RoundTrip(req)
}

// CloseIdleConnections closes the current transport's idle connections.
func (c *Client) CloseIdleConnections() {
	if ci, ok := (*c.rt.Load()).(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// checkRedirect follows a redirect only with follow_redirects and only
// within the configured server (some vLLM versions answer /metrics with 307
// to /metrics/): requests, and the credentials they carry, never reach
// another host. A redirect elsewhere is returned as is (for the scraper,
// reason http_status).
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if !c.follow.Load() || len(via) >= 3 || req.URL.Scheme != via[0].URL.Scheme || req.URL.Host != via[0].URL.Host {
		return http.ErrUseLastResponse
	}
	return nil
}

func newRoundTripper(cfg commoncfg.HTTPClientConfig, name string, opts ...commoncfg.HTTPClientOption) (http.RoundTripper, error) {
	rt, err := commoncfg.NewRoundTripperFromConfig(cfg, name, opts...)
	if err != nil {
		return nil, fmt.Errorf("vllm HTTP client: %w", err)
	}
	return rt, nil
}

// checkFiles: every file the configuration names can be opened, so a typo
// fails at start (naming its key) rather than at every request.
func checkFiles(cfg commoncfg.HTTPClientConfig) error {
	files := [][2]string{{"tls_config.ca_file", cfg.TLSConfig.CAFile}, {"tls_config.cert_file", cfg.TLSConfig.CertFile},
		{"tls_config.key_file", cfg.TLSConfig.KeyFile}}
	if a := cfg.Authorization; a != nil { // common/config moves bearer_token_file here
		files = append(files, [2]string{"authorization.credentials_file (or bearer_token_file)", a.CredentialsFile})
	}
	if b := cfg.BasicAuth; b != nil {
		files = append(files, [2]string{"basic_auth.username_file", b.UsernameFile}, [2]string{"basic_auth.password_file", b.PasswordFile})
	}
	if o := cfg.OAuth2; o != nil {
		files = append(files, [2]string{"oauth2.client_secret_file", o.ClientSecretFile})
	}
	for _, f := range files {
		if f[1] == "" {
			continue
		}
		fh, err := os.Open(f[1])
		if err != nil {
			return fmt.Errorf("vllm.%s: %w", f[0], err)
		}
		fh.Close()
	}
	return nil
}

// CheckSecretFile checks that the credential file a flag names can be read
// and is not empty (white space aside). flag names the flag for the error;
// the file's content is never part of an error.
func CheckSecretFile(flag, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--%s: %w", flag, err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return fmt.Errorf("--%s: %s is empty", flag, path)
	}
	return nil
}
