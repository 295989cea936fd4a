package main

import (
	"context"
	"errors"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/collector"
	"github.com/vllm-exporter/vllm_exporter/collector/gpu"
)

// The GPU sampler plugs into the exporter as a source (order 10: before the
// SLO watchdog and the bottleneck classifier, which read x.gpu).
func init() {
	var f *gpuFlags
	register(extension{
		name:  "gpu",
		order: 10,
		flags: func(app *kingpin.Application) { f = registerGPUFlags(app) },
		start: func(_ context.Context, x *exporter) error {
			s, err := setupGPU(f, x.registry, x.health, log.With(x.logger, "component", "gpu"))
			if err != nil || s == nil {
				return err
			}
			x.gpu = s
			x.goRun(s.Run)
			return nil
		},
	})
}

// gpuFlags are the GPU collector's command-line flags.
type gpuFlags struct {
	enabled  *bool
	interval *time.Duration
}

// registerGPUFlags adds --collector.gpu and --collector.gpu.interval to app.
func registerGPUFlags(app *kingpin.Application) *gpuFlags {
	return &gpuFlags{
		enabled: app.Flag("collector.gpu",
			"Enable the NVML GPU collector (--no-collector.gpu to disable).").Default("true").Bool(),
		interval: app.Flag("collector.gpu.interval",
			"How often to sample the GPUs through NVML; GPM rates are computed over this window.").
			Default(gpu.DefaultInterval.String()).Duration(),
	}
}

// setupGPU creates the GPU sampler on the system NVML library (nvml.New())
// and registers it with reg; its outcome per sample goes to health (which
// exports vllm_exporter_collector_up{collector="gpu"}). It returns (nil, nil)
// when the collector is disabled or the binary was built without NVML
// (logged once); nothing is registered then. When NVML is present but cannot
// initialise (no driver, no GPU) the sampler is still returned and
// registered: it reports itself down and never calls NVML again. The caller
// runs it with s.Run(ctx), which shuts NVML down on return.
func setupGPU(f *gpuFlags, reg prometheus.Registerer, health collector.Reporter, logger log.Logger) (*gpu.Sampler, error) {
	if f == nil || !*f.enabled {
		level.Info(logger).Log("msg", "GPU collector disabled by --no-collector.gpu")
		return nil, nil
	}
	if *f.interval <= 0 {
		return nil, errors.New("--collector.gpu.interval must be positive")
	}
	s, err := gpu.NewFromLibrary(gpu.Options{Interval: *f.interval, Health: health}, logger)
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
