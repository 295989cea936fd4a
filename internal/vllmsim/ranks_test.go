package vllmsim

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestRanksServeOneEngineEachAndASupervisor: each rank's /metrics shows its
// own engine only, under its rank; the supervisor answers /health, /ready
// and /readyz (200 while every rank's /health does, 503 once one is down)
// and nothing else.
func TestRanksServeOneEngineEachAndASupervisor(t *testing.T) {
	var sims []*Sim
	for range 3 {
		s, err := New(Config{VirtualClock: true})
		if err != nil {
			t.Fatal(err)
		}
		sims = append(sims, s)
	}
	rk, err := StartRanks(sims, []string{"127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rk.Close()
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for r, s := range sims {
		_, body := get(s.URL() + "/metrics")
		for e := range 3 {
			if has := strings.Contains(body, `engine="`+strconv.Itoa(e)+`"`); has != (e == r) {
				t.Errorf("rank %d's /metrics: engine %d shown %v", r, e, has)
			}
		}
	}
	for _, p := range []string{"/health", "/ready", "/readyz"} {
		if code, _ := get(rk.SupervisorURL() + p); code != http.StatusOK {
			t.Errorf("supervisor %s: %d", p, code)
		}
	}
	if code, _ := get(rk.SupervisorURL() + "/metrics"); code != http.StatusNotFound {
		t.Errorf("supervisor /metrics: %d, want 404", code)
	}
	if err := sims[1].InjectFault(FaultSpec{Kind: FaultDown}); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(rk.SupervisorURL() + "/health"); code != http.StatusServiceUnavailable {
		t.Errorf("supervisor /health with rank 1 down: %d, want 503", code)
	}
}
