package main

import (
	"errors"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/collector"
	"github.com/vllm-exporter/vllm_exporter/collector/gpu"
)

// startGPU is the GPU sampler of the serving exporter (nil when disabled or
// absent on this host), registered and scheduled.
func startGPU(f *gpuFlags, x *exporter) (*gpu.Sampler, error) {
	s, err := setupGPU(f, x.registry, x.health, log.With(x.logger, "component", "gpu"))
	if err != nil || s == nil {
		return nil, err
	}
	x.goRun(s.Run)
	return s, nil
}

// newGPUSampler creates the sampler on the system's NVML library. Tests of
// the whole exporter replace it with gpu.New on a fake nvml.Interface.
var newGPUSampler = gpu.NewFromLibrary

// gpuFlags are the GPU collector's command-line flags.
type gpuFlags struct {
	enabled *bool
	// forced: --collector.gpu given explicitly. Without it the collector
	// runs in auto mode: a host without NVML or without a GPU (a CPU or
	// AMD host, a dev box, --demo) reports the collector absent instead
	// of down, so it raises no alert.
	forced   bool
	interval *time.Duration
}

// registerGPUFlags adds --collector.gpu and --collector.gpu.interval to app.
func registerGPUFlags(app *kingpin.Application) *gpuFlags {
	f := &gpuFlags{}
	f.enabled = app.Flag("collector.gpu",
		"NVML GPU collector. Default auto: on where NVML finds a GPU, otherwise reported absent (vllm_exporter_collector_absent, no alert). --collector.gpu forces it on: a missing NVML or GPU is then down (vllm_exporter_collector_up 0) and tickets. --no-collector.gpu disables it.").
		Default("true").IsSetByUser(&f.forced).Bool()
	f.interval = app.Flag("collector.gpu.interval",
		"How often to sample the GPUs through NVML; GPM rates are computed over this window.").
		Default(gpu.DefaultInterval.String()).Duration()
	return f
}

// absentReporter is the part of collector.Health that records a collector
// that does not run on this host.
type absentReporter interface {
	Absent(collector, reason string)
}

// gpuAbsentReason maps why the sampler found nothing to a fixed
// `reason` label value.
func gpuAbsentReason(err string) string {
	switch {
	case strings.Contains(err, "LIBRARY_NOT_FOUND"):
		return "nvml_library_not_found"
	case strings.Contains(err, "DRIVER_NOT_LOADED"):
		return "driver_not_loaded"
	case strings.Contains(err, "NO_PERMISSION"):
		return "no_permission"
	case strings.HasPrefix(err, "nvml init:"):
		return "nvml_init_failed"
	default:
		return "no_gpu"
	}
}

// setupGPU creates the GPU sampler on the system NVML library (nvml.New())
// and registers it with reg; its outcome per sample goes to health (which
// exports vllm_exporter_collector_up{collector="gpu"}). It returns (nil, nil)
// when the collector is disabled, and in auto mode (no explicit
// --collector.gpu) when the binary was built without NVML, NVML cannot
// initialise or sees no GPU: the collector is then reported absent with the
// reason, and nothing else is registered. Forced on, those cases keep a
// registered sampler that reports itself down (never calling NVML again
// after a failed Init), or, without NVML in the build, a down report. The
// caller runs the sampler with s.Run(ctx), which shuts NVML down on return.
func setupGPU(f *gpuFlags, reg prometheus.Registerer, health collector.Reporter, logger log.Logger) (*gpu.Sampler, error) {
	if f == nil || !*f.enabled {
		level.Info(logger).Log("msg", "GPU collector disabled by --no-collector.gpu")
		return nil, nil
	}
	if *f.interval <= 0 {
		return nil, errors.New("--collector.gpu.interval must be positive")
	}
	absent := func(reason, detail string) {
		level.Info(logger).Log("msg", "no GPU collector on this host (auto mode; --collector.gpu forces it on and alerts when it is down)", "reason", reason, "detail", detail)
		if a, ok := health.(absentReporter); ok {
			a.Absent(gpu.CollectorName, reason)
		}
	}
	s, err := newGPUSampler(gpu.Options{Interval: *f.interval, Health: health, AbsenceExpected: !f.forced}, logger)
	if errors.Is(err, gpu.ErrBuiltWithoutNVML) {
		if !f.forced {
			absent("built_without_nvml", err.Error())
			return nil, nil
		}
		level.Warn(logger).Log("msg", "--collector.gpu is forced on but this build has no NVML; the GPU collector reports down", "err", err)
		if health != nil {
			health.Report(gpu.CollectorName, 0, err)
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !f.forced {
		snap := s.Latest()
		if snap == nil || (snap.Error == "" && !snap.Up) {
			snap = s.SampleOnce(time.Now()) // discovers the GPUs
		}
		if !snap.Up {
			s.Close()
			absent(gpuAbsentReason(snap.Error), snap.Error)
			return nil, nil
		}
	}
	if err := reg.Register(s); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}
