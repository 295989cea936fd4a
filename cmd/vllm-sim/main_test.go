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
