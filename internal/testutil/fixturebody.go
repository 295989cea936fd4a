package testutil

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// WithValues returns a /metrics body with the value of each listed series
// (name and labels exactly as the body prints them) replaced; it fails the
// test if one is absent.
func WithValues(t testing.TB, body string, values map[string]string) string {
	t.Helper()
	lines := strings.Split(body, "\n")
	for series, v := range values {
		found := false
		for i, l := range lines {
			if strings.HasPrefix(l, series+" ") {
				lines[i], found = series+" "+v, true
			}
		}
		if !found {
			t.Fatalf("series %s not in the body", series)
		}
	}
	return strings.Join(lines, "\n")
}

// BodyServer is a fake vLLM /metrics endpoint serving a settable body,
// closed when the test ends.
type BodyServer struct {
	*httptest.Server
	mu   sync.Mutex
	body string
}

// NewBodyServer starts a BodyServer serving body.
func NewBodyServer(t testing.TB, body string) *BodyServer {
	b := &BodyServer{body: body}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b.mu.Lock()
		defer b.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=1.0.0; charset=utf-8")
		w.Write([]byte(b.body))
	}))
	t.Cleanup(b.Close)
	return b
}

// Set replaces the body served from now on.
func (b *BodyServer) Set(body string) {
	b.mu.Lock()
	b.body = body
	b.mu.Unlock()
}
