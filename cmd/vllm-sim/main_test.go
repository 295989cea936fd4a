package main

import (
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
