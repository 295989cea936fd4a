package gpu

import (
	"errors"
	"time"
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
	// OmitSelfMetrics drops vllm_exporter_collector_up{collector="gpu"} and
	// vllm_exporter_collector_duration_seconds{collector="gpu"} from Collect,
	// for a caller whose shared collector wrapper exports them itself (the
	// same Desc registered twice makes Register fail). Sampler.Up and
	// Latest().SampleDuration give the values.
	OmitSelfMetrics bool
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
