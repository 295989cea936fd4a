package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
)

// TestSLOHelperProcess is not a test: it is the exporter process that
// TestSLOStateSurvivesKill9 starts (and kills) through the test binary.
func TestSLOHelperProcess(t *testing.T) {
	if os.Getenv("VLLM_EXPORTER_SLO_HELPER") != "1" {
		t.Skip("helper process only")
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(run(args, os.Stdout, os.Stderr))
}

// The real exporter process is killed with SIGKILL mid-run and started
// again on the same --slo.state-file: the watchdog restores its windows and
// budget, and the requests vLLM finished while the exporter was down are
// counted, not lost: afterwards the availability SLO's period events equal
// every request the simulated vLLM finished since the first exporter's
// baseline (taken before any load).
func TestSLOStateSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts exporter processes")
	}
	sim := vllmsimtest.Start(t, vllmsim.Config{Seed: 3, Scenario: "healthy"})
	state := filepath.Join(t.TempDir(), "slo.state")
	start := func() (*exec.Cmd, string) {
		addr := testutil.FreeAddr(t)
		cmd := exec.Command(os.Args[0], "-test.run=^TestSLOHelperProcess$", "--",
			"--vllm.url="+sim.URL(), "--vllm.scrape-interval=200ms", "--web.listen-address="+addr,
			"--slo.interval=200ms", "--slo.state-file="+state, "--web.disable-exporter-metrics",
			"--slo.window-events", "--slo.period-window-series") // the period's event count is the measure
		cmd.Env = append(os.Environ(), "VLLM_EXPORTER_SLO_HELPER=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd, addr
	}
	const events = `vllm_slo_events{model="meta-llama/Llama-3.1-8B-Instruct",slo="availability",window="30d"} `

	cmd, addr := start()
	// Baseline before any traffic: the watchdog has seen the model (its
	// events series exists, at 0) and checkpointed.
	waitFor(t, "baseline", func() bool {
		_, err := os.Stat(state)
		return testutil.ScrapeValue(addr, events) == 0 && err == nil
	})
	sim.SetLoadGen(true)
	var before float64
	waitFor(t, "finished requests counted", func() bool {
		before = testutil.ScrapeValue(addr, events)
		return before >= 5
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	atKill := finished(sim)
	// vLLM keeps serving while the exporter is down.
	waitFor(t, "a request to finish while the exporter is down", func() bool { return finished(sim) > atKill })
	sim.SetLoadGen(false)
	waitFor(t, "vLLM to drain", func() bool { return inFlight(sim) == 0 })
	total := finished(sim)

	_, addr = start()
	waitFor(t, "state restored", func() bool {
		return testutil.ScrapeValue(addr, "vllm_exporter_slo_state_restored ") == 1
	})
	var after float64
	waitFor(t, "every finished request counted", func() bool {
		after = testutil.ScrapeValue(addr, events)
		return after == total
	})
	t.Logf("availability events: %v before kill -9 (vLLM had finished %v), %v after restart = vLLM's %v", before, atKill, after, total)
	if got := testutil.ScrapeValue(addr, `vllm_exporter_slo_state_errors_total{reason="corrupt"} `); got != 0 {
		t.Fatalf("state errors: %v", got)
	}
}

// inFlight is how many requests the simulator is running or queueing.
func inFlight(sim *vllmsim.Sim) int {
	n := 0
	for _, e := range sim.Engines() {
		n += e.Running + e.Waiting
	}
	return n
}

func finished(sim *vllmsim.Sim) float64 {
	n := 0
	for _, e := range sim.Engines() {
		for _, v := range e.Finished {
			n += v
		}
	}
	return float64(n)
}
