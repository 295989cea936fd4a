package testutil

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestPollWaitsForTheCondition(t *testing.T) {
	n := 0
	Poll(t, 10*time.Second, time.Millisecond, "third call", nil, func() (bool, string) {
		n++
		return n == 3, "not yet"
	})
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

func TestDoReadsStatusAndBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		w.Write([]byte(r.Method + " " + r.URL.Path))
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/x", nil)
	if code, body, err := Do(nil, req); code != http.StatusTeapot || body != "POST /x" || err != nil {
		t.Fatalf("Do: %d %q %v", code, body, err)
	}
	srv.Close()
	req, _ = http.NewRequest(http.MethodGet, srv.URL, nil)
	if code, _, err := Do(nil, req); code != 0 || err == nil {
		t.Fatalf("Do on a closed server: %d %v", code, err)
	}
}
