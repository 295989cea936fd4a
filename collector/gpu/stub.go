//go:build !cgo || nonvml

package gpu

import (
	"context"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// Available reports whether this binary was built with the NVML collector.
const Available = false

// Sampler is an inert placeholder in a build without NVML; NewFromLibrary
// never returns one.
type Sampler struct{}

// NewFromLibrary always fails in a build without NVML.
func NewFromLibrary(Options, log.Logger) (*Sampler, error) { return nil, ErrBuiltWithoutNVML }

// Latest returns nil: there is never a GPU sample.
func (*Sampler) Latest() *snapshot.GPU { return nil }

// SampleOnce does nothing and returns nil.
func (*Sampler) SampleOnce(time.Time) *snapshot.GPU { return nil }

// Up is always false.
func (*Sampler) Up() bool { return false }

// Run returns when ctx ends.
func (*Sampler) Run(ctx context.Context) { <-ctx.Done() }

// Close does nothing.
func (*Sampler) Close() {}

// Describe implements prometheus.Collector (no series).
func (*Sampler) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector (no series).
func (*Sampler) Collect(chan<- prometheus.Metric) {}
