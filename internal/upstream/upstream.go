// Package upstream is how the exporter reaches the vLLM server, shared by
// every component that talks to it (the /metrics scraper and the synthetic
// probes): one proxy policy, one way to attach credentials, one way to
// write the server's URL into logs, errors and pages without its secrets.
//
// Why one package: the scraper used to honour HTTP(S)_PROXY while the probes
// ignored it, so with a proxy variable set the bearer key went to a proxy it
// was never meant for. A policy decided in one place cannot diverge.
package upstream

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// Access is what every request to the vLLM server carries and how it
// travels. The zero value sends no credentials and uses no proxy.
type Access struct {
	// BearerToken is sent as "Authorization: Bearer" (vLLM's --api-key, or
	// an auth proxy in front of vLLM).
	BearerToken string
	// Username and Password, when Username is set, are sent as HTTP basic
	// auth (an auth proxy in front of vLLM). Credentials in the URL itself
	// are sent by net/http as basic auth too.
	Username, Password string
	// ProxyFromEnvironment routes requests through HTTP_PROXY/HTTPS_PROXY
	// (minus NO_PROXY) when true. The default is a direct connection: the
	// exporter is a sidecar of vLLM, and a proxy would see every credential.
	ProxyFromEnvironment bool
}

// Proxy is the http.Transport.Proxy function of the policy: nil (direct)
// unless ProxyFromEnvironment.
func (a Access) Proxy() func(*http.Request) (*url.URL, error) {
	if a.ProxyFromEnvironment {
		return http.ProxyFromEnvironment
	}
	return nil
}

// Authorize adds the credentials to req. A bearer token wins over basic
// auth: both use the Authorization header.
func (a Access) Authorize(req *http.Request) {
	switch {
	case a.BearerToken != "":
		req.Header.Set("Authorization", "Bearer "+a.BearerToken)
	case a.Username != "":
		req.SetBasicAuth(a.Username, a.Password)
	}
}

// Secrets lists the credential values, for callers that must keep them out
// of their own output (tests, error scrubbing).
func (a Access) Secrets() []string {
	var out []string
	for _, s := range []string{a.BearerToken, a.Password} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Redact returns raw with the user info of its authority replaced by
// "xxxxx" (or the password alone when the URL parses), for logs, errors and
// pages. It works on strings that do not parse as URLs too: a password that
// is not percent-encoded (one with '/', '#' or '?') makes url.Parse fail,
// and its error message quotes the whole URL.
func Redact(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Opaque == "" {
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		scheme, rest = "", raw
	}
	// Unencoded user info may contain '/', '?' and '#', so the authority's
	// end is unknown: everything up to the last '@' is treated as user info.
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = "xxxxx@" + rest[at+1:]
	}
	if ok {
		return scheme + "://" + rest
	}
	return rest
}

// ValidateURL checks that raw is an absolute http(s) URL with a host. Its
// error never quotes the URL (it may carry credentials), only the redacted
// form.
func ValidateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the URL in clear
		}
		return fmt.Errorf("%s does not parse (%v); percent-encode reserved characters in the user name and password, or use a credentials file", Redact(raw), err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s is not an http(s)://host[:port] URL", Redact(raw))
	}
	return nil
}

// HasUserInfo reports whether raw carries credentials in its authority.
func HasUserInfo(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.User != nil
}

// ReadSecretFile reads a credential from path (as --*-file flags name it):
// surrounding white space, such as the trailing newline of `echo`, is
// removed. flag names the flag for the error; the file's content is never
// part of an error.
func ReadSecretFile(flag, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", flag, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("--%s: %s is empty", flag, path)
	}
	return s, nil
}

// Scrub replaces every secret in s with "xxxxx": for error messages from
// libraries that may echo a request (defence in depth; Redact covers URLs).
func Scrub(s string, secrets ...string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "xxxxx")
		}
	}
	return s
}
