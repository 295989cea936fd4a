package upstream

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	commoncfg "github.com/prometheus/common/config"
)

// TestScrubShapes: each shape of credential a log line, an error or an
// echoed body may carry is replaced; ordinary text about tokens, passwords
// and basic auth is left alone.
func TestScrubShapes(t *testing.T) {
	basic := base64.StdEncoding.EncodeToString([]byte("scraper:s3cret-Pw"))
	for _, c := range []struct{ in, gone, kept string }{
		{"you sent Authorization: Basic " + basic, basic, "Authorization: Basic xxxxx"},
		{"got basic " + strings.TrimRight(basic, "=") + " from you", strings.TrimRight(basic, "="), "basic xxxxx"},
		{`{"detail":"bad header Authorization: Bearer tok_9f8e7d6c5b4a"}`, "tok_9f8e7d6c5b4a", "Bearer xxxxx"},
		{"authorization=Token a1b2c3d4e5f6", "a1b2c3d4e5f6", "Token xxxxx"},
		{"key sk-proj-AbCdEf1234567890 rejected", "AbCdEf1234567890", "sk-xxxxx"},
		{"GET http://vllm:8000/metrics?api_key=KEY12345&x=1", "KEY12345", "?api_key=xxxxx&x=1"},
		{"GET /v1/models?access_token=abcdef123", "abcdef123", "access_token=xxxxx"},
		{`{"token": "tok-123456", "model": "m"}`, "tok-123456", `"model": "m"`},
		{"password=hunter22 user=bob", "hunter22", "user=bob"},
		{"X-Api-Key: abcd1234efgh", "abcd1234efgh", "X-Api-Key: xxxxx"},
		{`parse "http://u:p/w@proxy:3128": invalid port ":p" after host`, "p/w", `"http://xxxxx@proxy:3128": invalid port ":xxxxx" after host`},
		{"dial http://u:p@ss/w#rd@127.0.0.1:18104 failed", "ss/w#rd", "http://xxxxx@127.0.0.1:18104 failed"},
		{"scraping https://user:pw@vllm:8443/", "pw@", "https://xxxxx@vllm:8443/"},
	} {
		got := Scrub(c.in)
		if strings.Contains(got, c.gone) || !strings.Contains(got, c.kept) {
			t.Errorf("Scrub(%q) = %q; want %q gone and %q kept", c.in, got, c.gone, c.kept)
		}
	}
	for _, benign := range []string{
		"basic auth is configured (--vllm.basic-auth-username or vllm.basic_auth): use one",
		"max_tokens_per_hour: must be in [1, 100000000], got 5",
		"profiles[0] (p): input_tokens+output_tokens = 5000 exceeds max_tokens_per_hour 100",
		"token_id_min/token_id_max: need 0 <= min and at least 100 IDs in [min, max), got [5, 6)",
		"--vllm.basic-auth-password-file: /run/secret/pw is empty",
		"sent as a bearer token to /metrics",
		"first token after 1.2s on http://vllm:8000/v1/completions",
	} {
		if got := Scrub(benign); got != benign {
			t.Errorf("Scrub changed ordinary text:\n  %q\n  %q", benign, got)
		}
	}
	// Literal secrets, longest first; too short ones are left to the shapes.
	if got := Scrub("Unauthorized TOPSECRETKEY (TOPSECRET)", "TOPSECRET", "TOPSECRETKEY", "ab"); got != "Unauthorized xxxxx (xxxxx)" {
		t.Errorf("literal secrets: %q", got)
	}
}

// TestScrubberKnowsURLAndConnection: the Scrubber scrubs the password of
// --vllm.url (as typed, decoded, and as the basic credential Go sends for
// it), $VLLM_API_KEY, and the current contents of the credential files of
// the connection it follows, rotated ones included.
func TestScrubberKnowsURLAndConnection(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pwFile, []byte("first-Passw0rd\n"), 0o600)
	s := NewScrubber("http://scraper:p%40ss%2Fw%23rd@vllm:8000", "sk-env-key-0042")
	cfg := DefaultHTTPClientConfig()
	cfg.BasicAuth = &commoncfg.BasicAuth{Username: "proxyuser", PasswordFile: pwFile}
	u, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Follow(u)
	urlBasic := base64.StdEncoding.EncodeToString([]byte("scraper:p@ss/w#rd"))
	text := func() string {
		return "p%40ss%2Fw%23rd p@ss/w#rd " + urlBasic + " sk-env-key-0042 " +
			base64.StdEncoding.EncodeToString([]byte("proxyuser:second-Passw0rd")) + " first-Passw0rd second-Passw0rd"
	}
	os.WriteFile(pwFile, []byte("second-Passw0rd\n"), 0o600) // rotated
	got := s.Scrub(text())
	for _, leak := range []string{"p%40ss", "p@ss", "w#rd", urlBasic, "env-key", "second-Passw0rd", "cHJveHl1c2Vy"} {
		if strings.Contains(got, leak) {
			t.Errorf("%q survives: %s", leak, got)
		}
	}
	if NewScrubber("http://scraper@vllm:8000", "").Scrub("scraper ok") != "scraper ok" {
		t.Error("a user name without a password was taken for a secret")
	}
	var none *Scrubber
	if got := none.Scrub("Bearer abcdefgh12345"); got != "Bearer xxxxx" {
		t.Errorf("nil Scrubber: %q", got)
	}
}

type nilErr struct{}

func (*nilErr) Error() string { panic("nil receiver") }

// TestScrubberLogger: every value of a line is scrubbed (strings, errors,
// Stringers); levels still filter (the scrubber sits under the filter),
// times keep their format, a nil error pointer does not panic.
func TestScrubberLogger(t *testing.T) {
	var buf bytes.Buffer
	s := NewScrubber("http://u:Url-Secret1@vllm:8000", "")
	logger := level.NewFilter(s.Logger(log.NewLogfmtLogger(&buf)), level.AllowInfo())
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var ne *nilErr
	level.Warn(logger).Log("msg", "probe failed: Url-Secret1", "err", errors.New("401: you sent Bearer abcdefgh12345"),
		"url", stringer("http://u:Url-Secret1@vllm:8000"), "at", at, "nil", ne, "n", 3)
	level.Debug(logger).Log("msg", "filtered out")
	out := buf.String()
	for _, leak := range []string{"Url-Secret1", "abcdefgh12345", "filtered out"} {
		if strings.Contains(out, leak) {
			t.Errorf("%q in %s", leak, out)
		}
	}
	for _, want := range []string{"level=warn", "Bearer xxxxx", "url=http://xxxxx@vllm:8000", "at=2026-03-01T00:00:00Z", "n=3"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q not in %s", want, out)
		}
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

// TestValidateURL: refused without a lookup, each with a message that says
// what is wrong, how to encode credentials where they are the cause, and
// never the password, the query or the fragment.
func TestValidateURL(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"http://u:p@ss/w#rd@127.0.0.1:18104", "not percent-encoded"},
		{"http://user:Pa/ss#w0rd@vllm:8000", "%2F"},
		{"https://u:p?q@@h:1", "%3F"},
		{"http://us/er:pa55w@vllm:8000", "%40"},
		{"http://user:pa ss@vllm:8000", "does not parse"},
		{"http://vllm example:8000", "does not parse"},
		{"http://vllm:8000/?api_key=sk-0123456789", "has a query"},
		{"http://vllm:8000?", "has a query"},
		{"http://vllm:8000/#frag-secret", "has a fragment"},
		{"http://vllm:8000/#", "has a fragment"},
		{"http://vllm:99999", "port 99999 is not in [1, 65535]"},
		{"http://vllm:0", "port 0"},
		{"ftp://vllm:21", "not an http(s)://host[:port] URL"},
		{"vllm:8000", "not an http(s)://host[:port] URL"},
		{"http://", "not an http(s)://host[:port] URL"},
		{"http://:8000", "not an http(s)://host[:port] URL"},
		{"/v1", "not an http(s)://host[:port] URL"},
	} {
		err := ValidateURL(c.url)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidateURL(%q) = %v, want an error saying %q", c.url, err, c.want)
			continue
		}
		for _, leak := range []string{"w#rd", "Pa/ss", "p?q", "pa55w", "pa ss", "sk-0123", "frag-secret"} {
			if strings.Contains(c.url, leak) && strings.Contains(err.Error(), leak) {
				t.Errorf("ValidateURL(%q): %q in %v", c.url, leak, err)
			}
		}
	}
	for _, good := range []string{"http://localhost:8000", "https://user:p%40ss%2Fw%23rd@vllm.example:8443/base", "http://[::1]:8000", "http://vllm"} {
		if err := ValidateURL(good); err != nil {
			t.Errorf("ValidateURL(%q): %v", good, err)
		}
	}
}
