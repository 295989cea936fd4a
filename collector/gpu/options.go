package gpu

import (
	"errors"
	"time"

	"github.com/vllm-exporter/vllm_exporter/collector"
)

// CollectorName is the value of the `collector` label on the exporter's
// self-metrics for this collector.
const CollectorName = "gpu"

// DefaultInterval is the default sampling interval (--collector.gpu.interval).
const DefaultInterval = 5 * time.Second

// ErrBuiltWithoutNVML is returned by NewFromLibrary in a binary built without
// cgo or with the `nonvml` build tag.
var ErrBuiltWithoutNVML = errors.New("gpu collector unavailable: vllm_exporter was built without NVML (CGO_ENABLED=0 or -tags nonvml)")

// Options configure a Sampler.
type Options struct {
	// Interval between NVML samples; GPM rates are computed over it.
	// Zero means DefaultInterval.
	Interval time.Duration
	// EventWait bounds one wait for an Xid event, which is how long Run takes
	// to notice a cancelled context. Zero means one second.
	EventWait time.Duration
	// Health receives every sample's outcome (collector "gpu"): an error
	// when NVML is unavailable or no GPU is visible. When set, the exporter's
	// shared collector.Health exports vllm_exporter_collector_up and
	// _duration_seconds for "gpu" and the Sampler does not; when nil (a
	// standalone Sampler) the Sampler exports those two series itself.
	Health collector.Reporter
	// AbsenceExpected: a host without NVML or without a GPU is no news (the
	// exporter's auto mode, which reports the collector absent instead), so
	// saying so is logged at debug, not as a warning.
	AbsenceExpected bool
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.EventWait <= 0 {
		o.EventWait = time.Second
	}
	return o
}
