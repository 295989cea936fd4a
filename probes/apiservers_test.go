package probes

import (
	"context"
	"testing"
)

// TestProbesPickAnAPIServer: of several API servers (one per data-parallel
// rank) a probe goes to the first one up, or, with api_servers: each, to
// each in turn.
func TestProbesPickAnAPIServer(t *testing.T) {
	srvs := []*fakeVLLM{newFakeVLLM(t, nil), newFakeVLLM(t, nil), newFakeVLLM(t, nil)}
	urls := []string{srvs[0].URL, srvs[1].URL, srvs[2].URL}
	probed := func() []int {
		var n []int
		for _, s := range srvs {
			n = append(n, len(s.requests()))
		}
		return n
	}
	up := map[int]bool{1: true, 2: true}
	h, _ := writeConfig(t, probesYAML("m", profile("c", "completions", 8, 2, "")))
	s := New(Options{URLs: urls, Up: func(i int) bool { return up[i] }}, h, nil)
	for range 2 {
		if res, err := s.ProbeOnce(context.Background(), "c"); err != nil || res.Reason != "" {
			t.Fatalf("probe: %v %q", err, res.Reason)
		}
	}
	if got := probed(); got[0] != 0 || got[1] != 2 || got[2] != 0 {
		t.Errorf("first_up with endpoint 0 down: probes per server %v, want [0 2 0]", got)
	}

	h, _ = writeConfig(t, "probes:\n  model: m\n  api_servers: each\n  max_requests_per_minute: 600\n  profiles:\n"+profile("c", "completions", 8, 2, ""))
	s = New(Options{URLs: urls}, h, nil)
	for range 3 {
		if res, err := s.ProbeOnce(context.Background(), "c"); err != nil || res.Reason != "" {
			t.Fatalf("probe: %v %q", err, res.Reason)
		}
	}
	if got := probed(); got[0] != 1 || got[1] != 3 || got[2] != 1 {
		t.Errorf("each: probes per server %v, want [1 3 1]", got)
	}
}
