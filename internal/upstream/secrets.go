package upstream

// What must never be written out: the credentials the exporter sends to
// vLLM, and those a server (or a proxy in front of it) echoes back in an
// error body. One scrubber serves every output: the logger (Scrubber.Logger
// scrubs every value of every line), error texts, pages and the pprof
// command line.

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
)

// credentialShapes catch credentials by their shape, whoever configured them
// and whatever echoes them.
var credentialShapes = []struct {
	re   *regexp.Regexp
	repl string
}{
	// URL user info, up to the word's last '@': a password that is not
	// percent-encoded may hold '/', '#' or '?', and Go's parse errors quote it.
	{regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://)[^\s"'<>` + "`" + `]*@`), "${1}xxxxx@"},
	// url.Parse's error for a password with a '/': the authority ends at
	// the '/', and what follows the user name's ':' is quoted as a port.
	{regexp.MustCompile(`(invalid port ")[^"]*(" after host)`), "${1}:xxxxx${2}"},
	// An echoed Authorization header of any scheme, and bearer tokens alone.
	{regexp.MustCompile(`(?i)(\bauthorization["']?\s*[:=]\s*["']?[a-z][a-z0-9_-]*\s+)[^\s"',;]+`), "${1}xxxxx"},
	// A bearer token has a digit or eight characters ("bearer token" stays).
	{regexp.MustCompile(`(?i)\b(bearer\s+)(?:[a-z0-9._~+/=-]{8,}|[a-z._~+/=-]*[0-9][a-z0-9._~+/=-]*)`), "${1}xxxxx"},
	// OpenAI-style keys.
	{regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{8,}`), "sk-xxxxx"},
	// key=value, "key": "value" and query parameters whose name says secret.
	{regexp.MustCompile(`(?i)((?:^|[?&;\s"'{,(])(?:x-)?(?:api[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token|id[_-]?token|token|password|passwd|secret|client[_-]?secret)["']?\s*[:=]\s*["']?)[^\s"'&;,})]+`), "${1}xxxxx"},
}

// basicCredential is "Basic <base64>"; it is replaced only when the base64
// decodes to "user:password" (so "basic auth" in a sentence stays).
var basicCredential = regexp.MustCompile(`(?i)\b(basic\s+)([a-z0-9+/]{4,}={0,2})`)

// minSecretLen: a configured secret shorter than this is not replaced
// literally (every "ab" in every line would go); the shapes above still
// catch it in a URL or an Authorization header.
const minSecretLen = 4

// Scrub returns s with every secret and every credential-shaped text (URL
// user info, Authorization headers, bearer and basic credentials, sk- keys,
// api_key=/token=/password= values) replaced by "xxxxx".
func Scrub(s string, secrets ...string) string {
	secrets = slices.Clone(secrets)
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) }) // a secret inside a longer one goes with it
	for _, sec := range secrets {
		if len(sec) >= minSecretLen {
			s = strings.ReplaceAll(s, sec, "xxxxx")
		}
	}
	s = basicCredential.ReplaceAllStringFunc(s, func(m string) string {
		sub := basicCredential.FindStringSubmatch(m)
		b, err := base64.StdEncoding.DecodeString(sub[2])
		if err != nil {
			b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(sub[2], "="))
		}
		if err == nil && strings.Contains(string(b), ":") {
			return sub[1] + "xxxxx"
		}
		return m
	})
	for _, c := range credentialShapes {
		s = c.re.ReplaceAllString(s, c.repl)
	}
	return s
}

// Scrubber knows the secrets of one exporter: those of --vllm.url and
// $VLLM_API_KEY from the start, then those of the connection it follows
// (inline credentials and the current contents of credential files, which
// rotate). A nil Scrubber scrubs by shape only.
type Scrubber struct {
	fixed  []string
	follow atomic.Pointer[Upstream]
}

// NewScrubber returns the Scrubber for vllmURL's user info and apiKey.
func NewScrubber(vllmURL, apiKey string) *Scrubber {
	s := &Scrubber{fixed: withVariants(nil, apiKey)}
	_, rest, ok := strings.Cut(vllmURL, "://")
	if !ok {
		rest = vllmURL
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		info := rest[:at] // as typed, encoded or not; a user name alone is no secret
		if user, pass, ok := strings.Cut(info, ":"); ok {
			// Go sends the user info as basic auth.
			s.fixed = withVariants(s.fixed, info, pass, unescaped(pass), basicToken(unescaped(user), unescaped(pass)))
		}
	}
	return s
}

func unescaped(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// Follow makes s scrub the secrets of u's configuration too.
func (s *Scrubber) Follow(u *Upstream) {
	if s != nil && u != nil {
		s.follow.Store(u)
	}
}

// Secrets are the literal secrets s knows now.
func (s *Scrubber) Secrets() []string {
	if s == nil {
		return nil
	}
	return append(slices.Clone(s.fixed), s.follow.Load().Secrets()...)
}

// Scrub is Scrub with s's secrets.
func (s *Scrubber) Scrub(text string) string { return Scrub(text, s.Secrets()...) }

// Logger returns a logger that scrubs every value of every line before
// next writes it. It belongs under the level filter, so that lines filtered
// out cost nothing.
func (s *Scrubber) Logger(next log.Logger) log.Logger {
	return log.LoggerFunc(func(keyvals ...any) error {
		secrets := s.Secrets()
		out := make([]any, len(keyvals))
		for i, v := range keyvals {
			out[i] = v
			if t, ok := logText(v); ok {
				out[i] = Scrub(t, secrets...)
			}
		}
		return next.Log(out...)
	})
}

// logText is the text a logger would write for v, when v is text that may
// carry a secret (strings, errors, Stringers); not for level values, times
// and other values the formatters render themselves.
func logText(v any) (text string, ok bool) {
	defer func() {
		if recover() != nil { // a nil pointer's Error or String
			text, ok = "", false
		}
	}()
	switch x := v.(type) {
	case string:
		return x, true
	case []byte:
		return string(x), true
	case level.Value, json.Marshaler, encoding.TextMarshaler:
		return "", false
	case error:
		return x.Error(), true
	case fmt.Stringer:
		return x.String(), true
	}
	return "", false
}

// withVariants appends each secret and the form a request or an echo may
// carry it in (percent-encoded).
func withVariants(out []string, secrets ...string) []string {
	for _, sec := range secrets {
		if sec = strings.TrimSpace(sec); sec != "" {
			out = append(out, sec)
			if q := url.QueryEscape(sec); q != sec {
				out = append(out, q)
			}
		}
	}
	return out
}

// basicToken is the base64 credential of an Authorization: Basic header.
func basicToken(user, pass string) string {
	if pass == "" {
		return ""
	}
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// Secrets are the credentials u sends as they stand now: inline ones, the
// contents of the credential files (read on each call, since the files
// rotate) and the basic-auth header they make. Text that may echo a request
// (a server's error body) is passed through Scrub with them before it is
// logged or shown.
func (u *Upstream) Secrets() []string {
	cfg := u.Config()
	read := func(path string) string {
		if path == "" {
			return ""
		}
		b, _ := os.ReadFile(path)
		return strings.TrimSpace(string(b))
	}
	out := withVariants(nil, string(cfg.BearerToken), read(cfg.BearerTokenFile))
	if a := cfg.Authorization; a != nil {
		out = withVariants(out, string(a.Credentials), read(a.CredentialsFile))
	}
	if b := cfg.BasicAuth; b != nil {
		user, pass := b.Username, string(b.Password)
		if b.UsernameFile != "" {
			user = read(b.UsernameFile)
		}
		if b.PasswordFile != "" {
			pass = read(b.PasswordFile)
		}
		out = withVariants(out, pass, basicToken(user, pass))
	}
	if o := cfg.OAuth2; o != nil {
		out = withVariants(out, string(o.ClientSecret), read(o.ClientSecretFile))
	}
	if p := cfg.ProxyURL.URL; p != nil && p.User != nil {
		pass, _ := p.User.Password()
		out = withVariants(out, pass, basicToken(p.User.Username(), pass))
	}
	return out
}

// Redact returns raw with the user info of its authority replaced by
// "xxxxx" (or the password alone when the URL parses cleanly), for logs,
// errors and pages. A password that is not percent-encoded (one with '@',
// '/', '#' or '?') moves the authority's end, so then everything up to the
// last '@' is taken for user info.
func Redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		scheme, rest = "", raw
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw
	}
	if u, err := url.Parse(raw); err == nil && ok && strings.Count(rest, "@") == 1 && !strings.ContainsAny(rest[:at], "/?#") {
		return u.Redacted()
	}
	rest = "xxxxx@" + rest[at+1:]
	if ok {
		return scheme + "://" + rest
	}
	return rest
}

// encodeHint says how to write credentials into a URL.
const encodeHint = "percent-encode the user name and password ('@' as %40, '/' as %2F, '#' as %23, '?' as %3F, ':' in the user name as %3A), " +
	"or use --vllm.basic-auth-username with --vllm.basic-auth-password-file"

// ValidateURL checks, without any network lookup, that raw is an absolute
// http(s) URL with a host and a port in range, with neither query nor
// fragment, and with percent-encoded user info. Its errors show the URL
// redacted and without query or fragment, never a password.
func ValidateURL(raw string) error {
	scheme, rest, hasScheme := strings.Cut(raw, "://")
	end := strings.IndexAny(rest, "/?#")
	if hasScheme && end >= 0 && strings.Contains(rest[end:], "@") {
		return fmt.Errorf("%s: its user info is not percent-encoded (an '@' after the host); %s", Redact(raw), encodeHint)
	}
	shown := Redact(raw)
	if hasScheme {
		if q := strings.IndexAny(rest, "?#"); q >= 0 {
			shown = Redact(scheme+"://"+rest[:q]) + rest[q:q+1] + "…"
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the URL in clear
		}
		return fmt.Errorf("%s does not parse (%v); %s", shown, err, encodeHint)
	}
	switch {
	case (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" || u.Hostname() == "":
		return fmt.Errorf("%s is not an http(s)://host[:port] URL", shown)
	case u.RawQuery != "" || u.ForceQuery:
		return fmt.Errorf("%s has a query: give the server's base URL only (credentials go in a file: --vllm.api-key-file)", shown)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return fmt.Errorf("%s has a fragment (#): give the server's base URL only; a '#' in a password is %%23", shown)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%s: port %s is not in [1, 65535]", shown, p)
		}
	}
	return nil
}

// HasUserInfo reports whether raw carries credentials in its authority.
func HasUserInfo(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.User != nil
}
