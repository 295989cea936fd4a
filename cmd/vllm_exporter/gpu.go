package main

import (
	"errors"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/collector/gpu"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// gpuFlags are the GPU collector's command-line flags.
type gpuFlags struct {
	enabled  *bool
	interval *time.Duration
}

// registerGPUFlags adds --collector.gpu and --collector.gpu.interval to app
// (pass kingpin.CommandLine for the global application). Call before Parse.
func registerGPUFlags(app *kingpin.Application) *gpuFlags {
	return &gpuFlags{
		enabled: app.Flag("collector.gpu",
			"Enable the NVML GPU collector (--no-collector.gpu to disable).").Default("true").Bool(),
		interval: app.Flag("collector.gpu.interval",
			"How often to sample the GPUs through NVML; GPM rates are computed over this window.").
			Default(gpu.DefaultInterval.String()).Duration(),
	}
}

// setupGPU creates the GPU sampler on the system NVML library and registers
// it with reg. It returns (nil, nil) when the collector is disabled or the
// binary was built without NVML (logged once); nothing is registered then.
// When NVML is present but cannot initialise (no driver, no GPU) the sampler
// is still returned and registered: it reports
// vllm_exporter_collector_up{collector="gpu"} 0 and never calls NVML again.
// The caller starts it with `go s.Run(ctx)`; Run shuts NVML down on return.
func setupGPU(f *gpuFlags, reg prometheus.Registerer, logger log.Logger) (*gpu.Sampler, error) {
	if f == nil || !*f.enabled {
		level.Info(logger).Log("msg", "GPU collector disabled by --no-collector.gpu")
		return nil, nil
	}
	if *f.interval <= 0 {
		return nil, errors.New("--collector.gpu.interval must be positive")
	}
	s, err := gpu.NewFromLibrary(gpu.Options{Interval: *f.interval}, logger)
	if errors.Is(err, gpu.ErrBuiltWithoutNVML) {
		level.Info(logger).Log("msg", "no GPU collector in this build", "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := reg.Register(s); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// gpuSource adapts a possibly nil sampler to the small interface the SLO and
// bottleneck sides take, returning a nil interface (not a typed nil) when
// there is no GPU collector.
func gpuSource(s *gpu.Sampler) interface{ Latest() *snapshot.GPU } {
	if s == nil {
		return nil
	}
	return s
}
