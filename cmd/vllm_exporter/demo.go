package main

import (
	"context"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

// demoScenarios is the tour --demo takes: each preset for a while, then back
// to healthy, so dashboards and alerts show every regime without a GPU.
var demoScenarios = []struct {
	name string
	dur  time.Duration
}{
	{"healthy", 5 * time.Minute},
	{"queueing", 2 * time.Minute},
	{"healthy", 3 * time.Minute},
	{"kv_exhausted", 2 * time.Minute},
	{"healthy", 3 * time.Minute},
	{"throttled", 2 * time.Minute},
	{"healthy", 3 * time.Minute},
	{"stalled", 1 * time.Minute},
}

// demoConfig is the simulated vLLM of --demo (the README's tour runs it on
// a virtual clock).
func demoConfig(seed int64) vllmsim.Config {
	return vllmsim.Config{Addr: "127.0.0.1:0", LoadGen: true, Scenario: demoScenarios[0].name, Seed: seed}
}

// startDemo starts a simulated vLLM (internal/vllmsim) on 127.0.0.1 with its
// built-in load generator, in real time, and returns its base URL. The
// simulator cycles through demoScenarios until ctx ends or stop is called.
func startDemo(ctx context.Context, logger log.Logger) (vllmURL string, stop func(), err error) {
	sim, err := vllmsim.New(demoConfig(time.Now().UnixNano()))
	if err != nil {
		return "", nil, err
	}
	if err := sim.Start(); err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			sim.Close()
		})
	}
	go func() {
		for i := 0; ; i++ {
			sc := demoScenarios[i%len(demoScenarios)]
			if err := sim.SetScenario(sc.name); err != nil {
				level.Error(logger).Log("msg", "demo: switching scenario failed", "scenario", sc.name, "err", err)
			} else {
				level.Info(logger).Log("msg", "demo: simulated vLLM scenario", "scenario", sc.name, "for", sc.dur)
			}
			select {
			case <-ctx.Done():
				stop()
				return
			case <-time.After(sc.dur):
			}
		}
	}()
	level.Info(logger).Log("msg", "demo: simulated vLLM started", "url", sim.URL(),
		"admin", sim.URL()+"/admin/state", "metrics_version", sim.Config().MetricsVersion)
	return sim.URL(), stop, nil
}
