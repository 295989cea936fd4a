package upstream

import (
	"net/http"
	"strings"
	"testing"
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

// TestValidateURLNeverQuotesPassword: the error for an unparsable URL says
// what to do and shows the redacted URL only.
func TestValidateURLNeverQuotesPassword(t *testing.T) {
	err := ValidateURL("http://user:Pa/ss#w0rd@vllm:8000")
	if err == nil || strings.Contains(err.Error(), "w0rd") || strings.Contains(err.Error(), "Pa/ss") ||
		!strings.Contains(err.Error(), "xxxxx@vllm:8000") {
		t.Fatalf("ValidateURL: %v", err)
	}
	for _, bad := range []string{"ftp://vllm:21", "vllm:8000", "http://"} {
		if ValidateURL(bad) == nil {
			t.Errorf("ValidateURL(%q) accepted", bad)
		}
	}
	if err := ValidateURL("https://user:pw@vllm.example:8443/base"); err != nil {
		t.Fatal(err)
	}
}

// TestAccess: the bearer token wins over basic auth; the default policy
// uses no proxy at all, the opt-in one the environment's.
func TestAccess(t *testing.T) {
	req, _ := http.NewRequest("GET", "http://vllm:8000/metrics", nil)
	Access{BearerToken: "k", Username: "u", Password: "p"}.Authorize(req)
	if got := req.Header.Get("Authorization"); got != "Bearer k" {
		t.Fatalf("Authorization %q", got)
	}
	req.Header.Del("Authorization")
	Access{Username: "u", Password: "p"}.Authorize(req)
	if u, p, ok := req.BasicAuth(); !ok || u != "u" || p != "p" {
		t.Fatalf("basic auth %q %q %v", u, p, ok)
	}
	if (Access{}).Proxy() != nil {
		t.Fatal("the default policy has a proxy function")
	}
	if (Access{ProxyFromEnvironment: true}).Proxy() == nil {
		t.Fatal("the opt-in policy has no proxy function")
	}
}
