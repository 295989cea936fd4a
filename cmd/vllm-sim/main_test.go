package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--scenario=bogus"},
		{"--metrics-version=v2"},
		{"--num-gpu-blocks=1", "--max-model-len=8192"},
		{"--metrics-version=v0", "--data-parallel-size=2"},
		{"--cost.step-base=-1"},
	} {
		err := run(args)
		if err == nil {
			t.Errorf("%v: no error", args)
			continue
		}
		if strings.TrimSpace(err.Error()) == "" {
			t.Errorf("%v: empty error", args)
		}
	}
}

func TestRunRejectsBadControlFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--metrics-version=v1-0.33", "--custom-histogram-buckets={bad json"},
		{"--metrics-version=v1-0.33", `--custom-histogram-buckets={"ttft":[1,2]}`},
		{"--metrics-version=v1", `--custom-histogram-buckets={"time_to_first_token":[1,2]}`},
		{"--metrics-version=v1-0.33", `--custom-histogram-buckets={"time_to_first_token":[2,1]}`},
		{"--scheduling-policy=lifo"},
		{"--spec-decode.num-speculative-tokens=3", "--spec-decode.acceptance-rate=1.5"},
	} {
		if err := run(args); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestMultiPortExternalLB: with --data-parallel-multi-port-external-lb each
// rank is an API server of its own (its engine only on its /metrics) and
// the supervisor answers /health; the flag needs several ranks and a port.
func TestMultiPortExternalLB(t *testing.T) {
	for _, args := range [][]string{
		{"--data-parallel-multi-port-external-lb"},
		{"--data-parallel-multi-port-external-lb", "--data-parallel-size=2", "--web.listen-address=127.0.0.1"},
		{"--data-parallel-multi-port-external-lb", "--data-parallel-size=2", "--admin.listen-address=127.0.0.1:0"},
	} {
		o, err := parseFlags(args)
		if err == nil {
			_, err = startRanks(o)
		}
		if err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	o, err := parseFlags([]string{"--data-parallel-multi-port-external-lb", "--data-parallel-size=2", "--web.listen-address=127.0.0.1:0",
		"--data-parallel-supervisor-port=0", "--no-load-gen"})
	if err != nil {
		t.Fatal(err)
	}
	rk, err := startRanks(o)
	if err != nil {
		t.Fatal(err)
	}
	defer rk.Close()
	for r, s := range rk.Sims {
		resp, err := http.Get(s.URL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), fmt.Sprintf(`engine="%d"`, r)) || strings.Contains(string(b), fmt.Sprintf(`engine="%d"`, 1-r)) {
			t.Errorf("rank %d's /metrics does not show its engine alone", r)
		}
	}
	resp, err := http.Get(rk.SupervisorURL() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("supervisor /health: %d", resp.StatusCode)
	}
}
