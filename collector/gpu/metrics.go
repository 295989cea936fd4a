package gpu

import (
	"maps"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/collector"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// Clock-event (throttle) reasons reported by
// nvmlDeviceGetCurrentClocksEventReasons, as `reason` label values, in the
// order of their bit in the mask.
var clockEventReasons = []struct {
	Bit    uint64
	Reason string
}{
	{0x1, "gpu_idle"},
	{0x2, "applications_clocks_setting"},
	{0x4, "sw_power_cap"},
	{0x8, "hw_slowdown"},
	{0x10, "sync_boost"},
	{0x20, "sw_thermal_slowdown"},
	{0x40, "hw_thermal_slowdown"},
	{0x80, "hw_power_brake_slowdown"},
	{0x100, "display_clock_setting"},
}

// Descs are built once; every series carries the gpu index and uuid.
var (
	// descs are the device series' Descs, in the order they are made.
	descs collector.Descs

	// The standalone self-metrics use collector.Health's exact HELP text: a
	// registry refuses one name with two HELP strings.
	collectorUpDesc = prometheus.NewDesc("vllm_exporter_collector_up",
		"1 if the collector's last run succeeded, 0 if it failed.", []string{"collector"}, nil)
	collectorDurationDesc = prometheus.NewDesc("vllm_exporter_collector_duration_seconds",
		"Duration of the collector's last run in seconds.", []string{"collector"}, nil)

	infoDesc = devDesc("vllm_gpu_info",
		"GPU identity from NVML (name, driver, CUDA version, PCI bus id, memory bus width, peak memory bandwidth); value is always 1.",
		"name", "driver_version", "cuda_version", "pci_bus_id", "memory_bus_width_bits", "peak_memory_bandwidth_bytes_per_second")
	upDesc = devDesc("vllm_gpu_up",
		"Whether NVML could read this GPU in the last sample (0 while the GPU is lost).")
	utilDesc = devDesc("vllm_gpu_utilization_ratio",
		"Fraction of NVML's own last sample period (1/6 s to 1 s, by GPU) in which a kernel ran on the GPU, from nvmlDeviceGetUtilizationRates.")
	memUtilDesc = devDesc("vllm_gpu_memory_controller_utilization_ratio",
		"Fraction of NVML's own last sample period (1/6 s to 1 s, by GPU) in which device memory was read or written, from nvmlDeviceGetUtilizationRates.")
	memUsedDesc = devDesc("vllm_gpu_memory_used_bytes",
		"Device memory in use in bytes, from nvmlDeviceGetMemoryInfo.")
	memFreeDesc = devDesc("vllm_gpu_memory_free_bytes",
		"Free device memory in bytes, from nvmlDeviceGetMemoryInfo.")
	memTotalDesc = devDesc("vllm_gpu_memory_total_bytes",
		"Total device memory in bytes, from nvmlDeviceGetMemoryInfo.")
	powerDesc = devDesc("vllm_gpu_power_watts",
		"Power draw in watts, from nvmlDeviceGetPowerUsage.")
	powerLimitDesc = devDesc("vllm_gpu_power_limit_watts",
		"Enforced power limit in watts, from nvmlDeviceGetEnforcedPowerLimit.")
	energyDesc = devDesc("vllm_gpu_energy_joules_total",
		"Energy consumed since the driver was loaded in joules, from nvmlDeviceGetTotalEnergyConsumption.")
	smClockDesc = devDesc("vllm_gpu_sm_clock_hertz",
		"Current SM clock in hertz, from nvmlDeviceGetClockInfo(NVML_CLOCK_SM).")
	memClockDesc = devDesc("vllm_gpu_memory_clock_hertz",
		"Current memory clock in hertz, from nvmlDeviceGetClockInfo(NVML_CLOCK_MEM).")
	smClockMaxDesc = devDesc("vllm_gpu_sm_clock_max_hertz",
		"Maximum SM clock in hertz, from nvmlDeviceGetMaxClockInfo(NVML_CLOCK_SM).")
	memClockMaxDesc = devDesc("vllm_gpu_memory_clock_max_hertz",
		"Maximum memory clock in hertz, from nvmlDeviceGetMaxClockInfo(NVML_CLOCK_MEM).")
	tempDesc = devDesc("vllm_gpu_temperature_celsius",
		"GPU die temperature in degrees Celsius, from nvmlDeviceGetTemperature.")
	clockEventDesc = devDesc("vllm_gpu_clock_event_active",
		"Whether a clock-event (throttle) reason is active now (1) or not (0), from nvmlDeviceGetCurrentClocksEventReasons.",
		"reason")
	clockEventSecondsDesc = devDesc("vllm_gpu_clock_event_seconds_total",
		"Time the clocks were held below target by a policy in seconds, from nvmlDeviceGetViolationStatus.",
		"reason")
	pcieTxDesc = devDesc("vllm_gpu_pcie_tx_bytes_per_second",
		"PCIe bytes per second sent by the GPU, from GPM over the sampler window where supported, else nvmlDeviceGetPcieThroughput.")
	pcieRxDesc = devDesc("vllm_gpu_pcie_rx_bytes_per_second",
		"PCIe bytes per second received by the GPU, from GPM over the sampler window where supported, else nvmlDeviceGetPcieThroughput.")
	nvlinkTxDesc = devDesc("vllm_gpu_nvlink_tx_bytes_per_second",
		"NVLink bytes per second sent over all links, from GPM where supported, else NVLink throughput field counters over the sampler window.")
	nvlinkRxDesc = devDesc("vllm_gpu_nvlink_rx_bytes_per_second",
		"NVLink bytes per second received over all links, from GPM where supported, else NVLink throughput field counters over the sampler window.")
	eccDesc = devDesc("vllm_gpu_ecc_errors_total",
		"Memory ECC errors since the driver was loaded, by type (corrected, uncorrected), from nvmlDeviceGetTotalEccErrors(volatile).",
		"type")
	remappedDesc = devDesc("vllm_gpu_remapped_rows",
		"Memory rows remapped, by type (correctable, uncorrectable), from nvmlDeviceGetRemappedRows.",
		"type")
	remapPendingDesc = devDesc("vllm_gpu_remapped_rows_pending",
		"Whether a row remap is pending and needs a GPU reset (1) or not (0), from nvmlDeviceGetRemappedRows.")
	remapFailureDesc = devDesc("vllm_gpu_remapped_rows_failure",
		"Whether a row remap has failed (1) or not (0), from nvmlDeviceGetRemappedRows.")
	xidDesc = devDesc("vllm_gpu_xid_events_total",
		"Xid critical error events seen since the exporter started, by xid, from an NVML event set.",
		"xid")
	lastXidDesc = devDesc("vllm_gpu_last_xid_event_timestamp_seconds",
		"Unix time of the last Xid critical error event seen by the exporter (0 if none), from an NVML event set.")
	procMemDesc = devDesc("vllm_gpu_process_memory_used_bytes",
		"GPU memory used by a running compute process in bytes, from nvmlDeviceGetComputeRunningProcesses.",
		"pid")
	peakBWDesc = devDesc("vllm_gpu_memory_bandwidth_peak_bytes_per_second",
		"Theoretical peak memory bandwidth in bytes per second: max memory clock x bus width x 2 (double data rate) / 8, from nvmlDeviceGetMaxClockInfo and nvmlDeviceGetMemoryBusWidth.")
	dramBWDesc = devDesc("vllm_gpu_dram_bandwidth_utilization_ratio",
		"Fraction of peak DRAM bandwidth used over the sampler window, from GPM (NVML_GPM_METRIC_DRAM_BW_UTIL).")
	smUtilDesc = devDesc("vllm_gpu_sm_utilization_ratio",
		"Fraction of SMs busy over the sampler window, from GPM (NVML_GPM_METRIC_SM_UTIL).")
	smOccDesc = devDesc("vllm_gpu_sm_occupancy_ratio",
		"Resident warps over the maximum over the sampler window, from GPM (NVML_GPM_METRIC_SM_OCCUPANCY).")
	tensorDesc = devDesc("vllm_gpu_tensor_activity_ratio",
		"Fraction of cycles any tensor pipe was active over the sampler window, from GPM (NVML_GPM_METRIC_ANY_TENSOR_UTIL).")
	gpmSupportedDesc = devDesc("vllm_gpu_gpm_supported",
		"Whether NVML GPM metrics (Hopper and newer) are available on this GPU (1) or not (0, reason says why).",
		"reason")
)

// devDesc makes a device series' Desc: labels gpu, uuid, then extra.
func devDesc(name, help string, extra ...string) *prometheus.Desc {
	return descs.New(name, help, append([]string{"gpu", "uuid"}, extra...)...)
}

func describe(ch chan<- *prometheus.Desc, selfMetrics bool) {
	if selfMetrics {
		ch <- collectorUpDesc
		ch <- collectorDurationDesc
	}
	descs.Describe(ch)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func fmtFloat(v snapshot.Value) string {
	if !v.OK {
		return ""
	}
	return strconv.FormatFloat(v.V, 'f', -1, 64)
}

// render emits the const metrics for one published snapshot. It does no I/O.
// A nil snapshot (no sample yet) renders nothing.
func render(ch chan<- prometheus.Metric, s *snapshot.GPU, selfMetrics bool) {
	if s == nil {
		return
	}
	m := collector.Metrics(ch)
	if selfMetrics {
		m.Gauge(collectorUpDesc, b2f(s.Up), CollectorName)
		m.Gauge(collectorDurationDesc, s.SampleDuration.Seconds(), CollectorName)
	}
	for i := range s.Devices {
		renderDevice(m, s, &s.Devices[i])
	}
}

// renderDevice sends one GPU's series; a label value that is not UTF-8 (a
// name as the driver reports it) spoils that series only, not the gather.
func renderDevice(m collector.Metrics, s *snapshot.GPU, d *snapshot.GPUDevice) {
	idx := strconv.Itoa(d.Index)
	send := func(t prometheus.ValueType, desc *prometheus.Desc, v snapshot.Value, extra ...string) {
		if v.OK {
			m.Send(desc, t, v.V, append([]string{idx, d.UUID}, extra...)...)
		}
	}
	gauge := func(desc *prometheus.Desc, v snapshot.Value, extra ...string) {
		send(prometheus.GaugeValue, desc, v, extra...)
	}
	counter := func(desc *prometheus.Desc, v snapshot.Value, extra ...string) {
		send(prometheus.CounterValue, desc, v, extra...)
	}
	gauge(upDesc, snapshot.Some(b2f(d.Up)))
	if !d.Up {
		return
	}
	gauge(infoDesc, snapshot.Some(1), d.Name, s.DriverVersion, s.CUDAVersion, d.PCIBusID,
		fmtFloat(d.MemoryBusWidthBits), fmtFloat(d.PeakMemBandwidthBytesPerSecond))
	gauge(utilDesc, d.UtilGPU)
	gauge(memUtilDesc, d.UtilMemory)
	gauge(memUsedDesc, d.MemoryUsedBytes)
	gauge(memFreeDesc, d.MemoryFreeBytes)
	gauge(memTotalDesc, d.MemoryTotalBytes)
	gauge(powerDesc, d.PowerWatts)
	gauge(powerLimitDesc, d.PowerLimitWatts)
	counter(energyDesc, d.EnergyJoules)
	gauge(smClockDesc, d.SMClockHz)
	gauge(memClockDesc, d.MemClockHz)
	gauge(smClockMaxDesc, d.MaxSMClockHz)
	gauge(memClockMaxDesc, d.MaxMemClockHz)
	gauge(tempDesc, d.TemperatureCelsius)
	for _, r := range slices.Sorted(maps.Keys(d.ThrottleReasons)) {
		gauge(clockEventDesc, snapshot.Some(b2f(d.ThrottleReasons[r])), r)
	}
	for _, r := range slices.Sorted(maps.Keys(d.ThrottleSeconds)) {
		counter(clockEventSecondsDesc, snapshot.Some(d.ThrottleSeconds[r]), r)
	}
	gauge(pcieTxDesc, d.PCIeTxBytesPerSecond)
	gauge(pcieRxDesc, d.PCIeRxBytesPerSecond)
	gauge(nvlinkTxDesc, d.NVLinkTxBytesPerSecond)
	gauge(nvlinkRxDesc, d.NVLinkRxBytesPerSecond)
	for _, t := range slices.Sorted(maps.Keys(d.ECCErrors)) {
		counter(eccDesc, snapshot.Some(d.ECCErrors[t]), t)
	}
	for _, t := range slices.Sorted(maps.Keys(d.RemappedRows)) {
		gauge(remappedDesc, snapshot.Some(d.RemappedRows[t]), t)
	}
	gauge(remapPendingDesc, d.RowRemapPending)
	gauge(remapFailureDesc, d.RowRemapFailure)
	if d.XidTotal != nil {
		for _, x := range slices.Sorted(maps.Keys(d.XidTotal)) {
			counter(xidDesc, snapshot.Some(d.XidTotal[x]), strconv.FormatUint(x, 10))
		}
		last := 0.0
		if !d.LastFatalXidTime.IsZero() {
			last = float64(d.LastFatalXidTime.UnixNano()) / 1e9
		}
		gauge(lastXidDesc, snapshot.Some(last))
	}
	if d.ProcessMemoryBytes != nil {
		for _, p := range slices.Sorted(maps.Keys(d.ProcessMemoryBytes)) {
			gauge(procMemDesc, snapshot.Some(d.ProcessMemoryBytes[p]), strconv.FormatUint(uint64(p), 10))
		}
	}
	gauge(peakBWDesc, d.PeakMemBandwidthBytesPerSecond)
	gauge(dramBWDesc, d.DRAMBandwidthUtil)
	gauge(smUtilDesc, d.SMUtil)
	gauge(smOccDesc, d.SMOccupancy)
	gauge(tensorDesc, d.TensorActivity)
	gauge(gpmSupportedDesc, snapshot.Some(b2f(d.GPMSupported)), d.GPMUnsupportedCause)
}
