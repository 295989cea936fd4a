// Package gpu is the exporter's NVML collector: a Sampler that reads every
// visible NVIDIA GPU on its own interval through an injected nvml.Interface,
// publishes an immutable *snapshot.GPU, and renders const metrics from the
// latest sample (a Prometheus scrape never calls NVML).
//
// The NVML implementation needs cgo. A cgo-free build (CGO_ENABLED=0) or a
// build with the `nonvml` tag compiles a stub whose NewFromLibrary returns
// ErrBuiltWithoutNVML, so the binary simply has no GPU collector.
package gpu
