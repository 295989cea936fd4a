// Package vllmsimtest starts the simulated vLLM for tests in other
// packages: one helper instead of a copy of New/Start/Cleanup per package.
package vllmsimtest

import (
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

// Start builds a simulator from cfg, serves it (on a free loopback port
// unless cfg.Addr names one) and closes it when the test ends.
func Start(tb testing.TB, cfg vllmsim.Config) *vllmsim.Sim {
	tb.Helper()
	sim, err := vllmsim.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := sim.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(sim.Close)
	return sim
}

// StartLoaded starts a simulator in real time with its load generator on,
// seeded with seed: traffic for a real exporter to scrape and probe.
func StartLoaded(tb testing.TB, seed int64) *vllmsim.Sim {
	tb.Helper()
	return Start(tb, vllmsim.Config{Seed: seed, LoadGen: true})
}
