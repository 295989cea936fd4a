//go:build cgo && !nonvml

package gpu

import (
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-kit/log/level"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// gpmState holds a GPU's two GPM sample buffers. Each SampleOnce fills cur,
// computes the metrics over (prev, cur) -- the sampler's own window -- and
// swaps the two, so NVML never needs a sleep between samples.
type gpmState struct {
	checked   bool
	supported bool
	cause     string
	prev, cur nvml.GpmSample
	prevOK    bool
	prevTime  time.Time
}

func (g *gpmState) reset() {
	g.prevOK = false
	g.checked = false
}

func (g *gpmState) free(lib nvml.Interface) {
	for _, smp := range []nvml.GpmSample{g.prev, g.cur} {
		if smp != nil {
			lib.GpmSampleFree(smp)
		}
	}
	g.prev, g.cur, g.prevOK = nil, nil, false
}

// gpmMetrics are the GPM metrics requested every sample, in this order:
// the field each lands in and the divisor to base units (percent to a
// ratio; MiB/s to bytes per second, dividing by 2^-20 exactly).
var gpmMetrics = []struct {
	id    nvml.GpmMetricId
	div   float64
	field func(*snapshot.GPUDevice) *snapshot.Value
}{
	{nvml.GPM_METRIC_DRAM_BW_UTIL, 100, func(o *snapshot.GPUDevice) *snapshot.Value { return &o.DRAMBandwidthUtil }},
	{nvml.GPM_METRIC_SM_UTIL, 100, func(o *snapshot.GPUDevice) *snapshot.Value { return &o.SMUtil }},
	{nvml.GPM_METRIC_SM_OCCUPANCY, 100, func(o *snapshot.GPUDevice) *snapshot.Value { return &o.SMOccupancy }},
	{nvml.GPM_METRIC_ANY_TENSOR_UTIL, 100, func(o *snapshot.GPUDevice) *snapshot.Value { return &o.TensorActivity }},
	{nvml.GPM_METRIC_PCIE_TX_PER_SEC, 1.0 / (1 << 20), func(o *snapshot.GPUDevice) *snapshot.Value { return &o.PCIeTxBytesPerSecond }},
	{nvml.GPM_METRIC_PCIE_RX_PER_SEC, 1.0 / (1 << 20), func(o *snapshot.GPUDevice) *snapshot.Value { return &o.PCIeRxBytesPerSecond }},
	{nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, 1.0 / (1 << 20), func(o *snapshot.GPUDevice) *snapshot.Value { return &o.NVLinkTxBytesPerSecond }},
	{nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, 1.0 / (1 << 20), func(o *snapshot.GPUDevice) *snapshot.Value { return &o.NVLinkRxBytesPerSecond }},
}

// setupGPM asks NVML once per acquired handle whether the GPU supports GPM
// and allocates the two sample buffers. An unsupported GPU is logged once.
func (s *Sampler) setupGPM(d *device) {
	g := &d.gpm
	g.prevOK = false
	if g.checked {
		return
	}
	if !s.has(symGpmQuery) || !s.has(symGpmAlloc) || !s.has(symGpmGet) || !s.has(symGpmMetrics) {
		g.checked, g.supported, g.cause = true, false, "driver_not_supported"
		s.logOnce(level.Info, "gpm:"+d.uuid, "msg", "GPM metrics unavailable: the NVIDIA driver has no GPM functions (r520 or newer needed)", "gpu", d.index, "uuid", d.uuid)
		return
	}
	sup, ret := s.lib.GpmQueryDeviceSupport(d.dev)
	if ret == nvml.ERROR_GPU_IS_LOST {
		return // ask again once the GPU is back
	}
	g.checked = true
	g.supported = false
	switch {
	case ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND:
		g.cause = "driver_not_supported"
	case ret != nvml.SUCCESS:
		g.cause = "query_failed"
	case sup.IsSupportedDevice == 0:
		g.cause = "device_not_supported"
	}
	if g.cause == "" && g.cur == nil {
		for _, p := range []*nvml.GpmSample{&g.prev, &g.cur} {
			smp, ret := s.lib.GpmSampleAlloc()
			if ret != nvml.SUCCESS {
				g.cause = "sample_alloc_failed"
				g.free(s.lib)
				break
			}
			*p = smp
		}
	}
	if g.cause != "" {
		s.logOnce(level.Info, "gpm:"+d.uuid, "msg", "GPM metrics unavailable on this GPU (they need Hopper or newer and a recent driver); DRAM bandwidth, SM occupancy and tensor activity series are absent",
			"gpu", d.index, "uuid", d.uuid, "reason", g.cause, "nvml", retName(ret))
		return
	}
	g.supported = true
}

// sampleGPM takes this window's GPM sample and, when the previous one is
// valid, fills the GPM fields of out. A metric whose own return is not
// SUCCESS stays absent.
func (s *Sampler) sampleGPM(r *reader, out *snapshot.GPUDevice, now time.Time) {
	d := r.d
	g := &d.gpm
	out.GPMSupported = g.supported
	out.GPMUnsupportedCause = g.cause
	if !g.supported || r.lost {
		return
	}
	ret := s.lib.GpmSampleGet(d.dev, g.cur)
	if ret == nvml.ERROR_NOT_SUPPORTED {
		// The query said yes but sampling says no (seen with MIG): report
		// GPM as unsupported from now on.
		g.supported, g.cause, g.prevOK = false, "sample_not_supported", false
		out.GPMSupported, out.GPMUnsupportedCause = false, g.cause
		s.logOnce(level.Info, "gpm:"+d.uuid, "msg", "GPM sampling not supported on this GPU; GPM series are absent", "gpu", d.index, "uuid", d.uuid)
		return
	}
	if !r.check("gpm_sample", ret) {
		g.prevOK = false
		return
	}
	if g.prevOK {
		req := &nvml.GpmMetricsGetType{
			Version:    nvml.GPM_METRICS_GET_VERSION,
			NumMetrics: uint32(len(gpmMetrics)),
			Sample1:    g.prev,
			Sample2:    g.cur,
		}
		for i, m := range gpmMetrics {
			req.Metrics[i].MetricId = uint32(m.id)
		}
		if r.check("gpm_metrics", s.lib.GpmMetricsGet(req)) {
			for i, m := range gpmMetrics {
				got := req.Metrics[i]
				if i < int(req.NumMetrics) && nvml.GpmMetricId(got.MetricId) == m.id && nvml.Return(got.NvmlReturn) == nvml.SUCCESS {
					*m.field(out) = snapshot.Some(got.Value / m.div)
				}
			}
		}
	}
	g.prev, g.cur = g.cur, g.prev
	g.prevOK, g.prevTime = true, now
}
