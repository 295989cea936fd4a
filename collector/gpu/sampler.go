//go:build cgo && !nonvml

package gpu

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// Available reports whether this binary was built with the NVML collector.
const Available = true

// Sampler reads every visible GPU through an injected nvml.Interface on its
// own interval and publishes an immutable *snapshot.GPU. It implements
// prometheus.Collector by rendering the latest snapshot; Collect never calls
// NVML.
//
// If nvml.Init fails, the Sampler logs one warning, reports itself down and
// never calls NVML again (a call after a failed Init can kill the process).
type Sampler struct {
	lib    nvml.Interface
	opts   Options
	logger log.Logger
	clock  func() time.Time // time.Now; tests replace it

	initErr string // non-empty: Init failed; never touch lib again

	mu       sync.Mutex // guards everything below
	closed   bool
	devs     []*device
	driver   string
	cuda     string
	eventSet nvml.EventSet // nil when Xid events are unavailable
	warned   map[string]bool
	missing  map[string]bool // NVML symbols the loaded driver lacks

	latest atomic.Pointer[snapshot.GPU]
}

// device is the sampler's state for one GPU index.
type device struct {
	index int
	uuid  string
	dev   nvml.Device // nil until acquired
	up    bool

	// static facts, read when the handle is acquired
	name       string
	pciBusID   string
	busWidth   snapshot.Value
	maxSMClock snapshot.Value
	maxMemClk  snapshot.Value
	peakBW     snapshot.Value

	gpm gpmState

	// NVLink throughput field counters (KiB) for the non-GPM rate.
	nvlPrevTx, nvlPrevRx float64
	nvlPrevTime          time.Time
	nvlPrevOK            bool

	xidMonitored bool
	xid          map[uint64]float64
	lastXid      time.Time
}

// NewFromLibrary creates a Sampler on the system's NVML library
// (nvml.New(), libnvidia-ml.so.1). In a build without NVML it returns
// ErrBuiltWithoutNVML instead.
func NewFromLibrary(opts Options, logger log.Logger) (*Sampler, error) {
	return New(nvml.New(), opts, logger), nil
}

// New initialises NVML through lib and enumerates the GPUs. It never fails:
// when Init fails the Sampler is down (Latest().Up == false) for good.
func New(lib nvml.Interface, opts Options, logger log.Logger) *Sampler {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	s := &Sampler{
		lib:    lib,
		opts:   opts.withDefaults(),
		logger: logger,
		clock:  time.Now,
		warned: map[string]bool{},
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		s.initErr = "nvml init: " + retName(ret)
		s.absence().Log("msg", "NVML is unavailable, the GPU collector is disabled", "err", s.initErr)
		s.publish(&snapshot.GPU{Time: s.clock(), Error: s.initErr})
		return s
	}
	s.missing = missingSymbols(lib)
	if len(s.missing) > 0 {
		level.Info(s.logger).Log("msg", "the NVIDIA driver lacks some NVML functions; their series are absent", "missing", strings.Join(slices.Sorted(maps.Keys(s.missing)), ","))
	}
	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		s.driver = v
	}
	if v, ret := lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS && v > 0 {
		s.cuda = fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
	}
	if set, ret := lib.EventSetCreate(); ret == nvml.SUCCESS {
		s.eventSet = set
	} else {
		level.Info(s.logger).Log("msg", "Xid events unavailable", "err", retName(ret))
	}
	return s
}

// Latest returns the most recent published sample; nil before the first one.
func (s *Sampler) Latest() *snapshot.GPU { return s.latest.Load() }

// Up reports whether NVML is initialised and at least one GPU is visible.
func (s *Sampler) Up() bool {
	l := s.Latest()
	return l != nil && l.Up
}

// Describe implements prometheus.Collector.
func (s *Sampler) Describe(ch chan<- *prometheus.Desc) { describe(ch, s.opts.Health == nil) }

// Collect implements prometheus.Collector; it renders the latest sample and
// makes no NVML call.
func (s *Sampler) Collect(ch chan<- prometheus.Metric) {
	render(ch, s.Latest(), s.opts.Health == nil)
}

// Run samples immediately and then every Options.Interval until ctx ends,
// watching for Xid events on a goroutine of its own. On return NVML is shut
// down (Close).
func (s *Sampler) Run(ctx context.Context) {
	if s.initErr != "" {
		<-ctx.Done()
		return
	}
	var wg sync.WaitGroup
	s.mu.Lock()
	watch := s.eventSet != nil && !s.closed
	s.mu.Unlock()
	if watch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.watchEvents(ctx)
		}()
	}
	s.SampleOnce(s.clock())
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			s.Close()
			return
		case <-t.C:
			s.SampleOnce(s.clock())
		}
	}
}

// Close frees the event set and GPM buffers and shuts NVML down. Later
// samples publish a down snapshot without calling NVML. Safe to call twice.
func (s *Sampler) Close() {
	if s.initErr != "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.eventSet != nil {
		s.lib.EventSetFree(s.eventSet)
		s.eventSet = nil
	}
	for _, d := range s.devs {
		d.gpm.free(s.lib)
	}
	s.lib.Shutdown()
}

// SampleOnce reads every GPU once, publishes the result and returns it.
// now stamps the sample and is the end of the GPM/NVLink rate window.
func (s *Sampler) SampleOnce(now time.Time) *snapshot.GPU {
	if s.initErr != "" {
		snap := &snapshot.GPU{Time: now, Error: s.initErr}
		s.publish(snap)
		return snap
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	start := s.clock()
	snap := &snapshot.GPU{Time: now, DriverVersion: s.driver, CUDAVersion: s.cuda}
	switch {
	case s.closed:
		snap.Error = "sampler closed"
	default:
		if len(s.devs) == 0 {
			s.discover()
		}
		if len(s.devs) == 0 {
			snap.Error = "no GPU visible to NVML"
			if !s.warned["no-gpu"] {
				s.warned["no-gpu"] = true
				s.absence().Log("msg", "NVML initialised but no GPU is visible; GPU collector reports down")
			}
			break
		}
		snap.Up = true
		snap.Devices = make([]snapshot.GPUDevice, 0, len(s.devs))
		for _, d := range s.devs {
			snap.Devices = append(snap.Devices, s.sampleDevice(d, now))
		}
	}
	snap.SampleDuration = s.clock().Sub(start)
	s.publish(snap)
	return snap
}

// publish makes snap the latest sample and reports its outcome to Health.
func (s *Sampler) publish(snap *snapshot.GPU) {
	s.latest.Store(snap)
	if s.opts.Health != nil {
		var err error
		if !snap.Up {
			err = errors.New(snap.Error)
		}
		s.opts.Health.Report(CollectorName, snap.SampleDuration, err)
	}
}

// discover enumerates GPU indices and acquires their handles.
func (s *Sampler) discover() {
	n, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		s.warnOnce("count:"+retName(ret), "msg", "cannot count GPUs", "err", retName(ret))
		return
	}
	for i := 0; i < n; i++ {
		d := &device{index: i}
		s.devs = append(s.devs, d)
		s.acquire(d)
	}
}

// acquire gets (or re-gets after a loss) the handle of d, by UUID when known
// so a renumbered GPU keeps its identity, else by index, and reads its
// static facts. It leaves d.up false when the GPU cannot be reached.
func (s *Sampler) acquire(d *device) {
	var dev nvml.Device
	ret := nvml.ERROR_NOT_FOUND
	if d.uuid != "" {
		dev, ret = s.lib.DeviceGetHandleByUUID(d.uuid)
	}
	if ret != nvml.SUCCESS {
		dev, ret = s.lib.DeviceGetHandleByIndex(d.index)
	}
	if ret != nvml.SUCCESS {
		s.warnOnce(fmt.Sprintf("handle:%d:%s", d.index, retName(ret)), "msg", "cannot get GPU handle", "gpu", d.index, "err", retName(ret))
		return
	}
	uuid, ret := dev.GetUUID()
	if ret != nvml.SUCCESS {
		s.warnOnce(fmt.Sprintf("uuid:%d:%s", d.index, retName(ret)), "msg", "cannot read GPU UUID", "gpu", d.index, "err", retName(ret))
		return
	}
	if d.uuid != "" && uuid != d.uuid {
		// A different GPU now sits at this index; it is a new device.
		level.Warn(s.logger).Log("msg", "GPU at index changed identity", "gpu", d.index, "old_uuid", d.uuid, "uuid", uuid)
		d.xid, d.lastXid = nil, time.Time{}
		d.gpm.reset()
		d.nvlPrevOK = false
	}
	wasLost := d.uuid != "" && !d.up
	d.uuid = uuid
	r := &reader{s: s, d: d}
	if v, ok := read(r, "name", dev.GetName); ok {
		d.name = v
	}
	if p, ok := read(r, "pci_info", dev.GetPciInfo); ok {
		d.pciBusID = cString(p.BusId[:])
	}
	d.busWidth, d.maxSMClock, d.maxMemClk, d.peakBW = snapshot.Value{}, snapshot.Value{}, snapshot.Value{}, snapshot.Value{}
	if s.has(symMemoryBusWidth) {
		if w, ok := read(r, "memory_bus_width", dev.GetMemoryBusWidth); ok {
			d.busWidth = snapshot.Some(float64(w))
		}
	}
	if c, ok := read1(r, "max_sm_clock", dev.GetMaxClockInfo, nvml.CLOCK_SM); ok {
		d.maxSMClock = snapshot.Some(float64(c) * 1e6)
	}
	if c, ok := read1(r, "max_mem_clock", dev.GetMaxClockInfo, nvml.CLOCK_MEM); ok {
		d.maxMemClk = snapshot.Some(float64(c) * 1e6)
	}
	d.peakBW = PeakMemoryBandwidth(d.maxMemClk, d.busWidth)
	if r.lost {
		return
	}
	d.dev = dev
	d.up = true
	s.setupGPM(d)
	if s.eventSet != nil && !d.xidMonitored {
		ret := dev.RegisterEvents(nvml.EventTypeXidCriticalError, s.eventSet)
		switch ret {
		case nvml.SUCCESS:
			d.xidMonitored = true
			if d.xid == nil {
				d.xid = map[uint64]float64{}
			}
		default:
			s.warnOnce(fmt.Sprintf("events:%d:%s", d.index, retName(ret)), "msg", "Xid events unavailable for GPU", "gpu", d.index, "err", retName(ret))
		}
	}
	if wasLost {
		level.Info(s.logger).Log("msg", "GPU is back", "gpu", d.index, "uuid", d.uuid)
	}
}

// PeakMemoryBandwidth is the theoretical peak DRAM bandwidth in bytes per
// second: max memory clock (Hz) x bus width (bits) x 2 (double data rate) / 8.
// NVML reports the memory clock such that the x2 holds for HBM2/HBM2e/HBM3
// (A100: 1215 MHz x 5120 bit -> 1.555 TB/s; H100 SXM: 2619 MHz x 5120 bit ->
// 3.35 TB/s) and for GDDR6/6X, whose reported clock is already half the data
// rate (RTX 4090: 10501 MHz x 384 bit -> 1.008 TB/s). Absent if either input is.
func PeakMemoryBandwidth(maxMemClockHz, busWidthBits snapshot.Value) snapshot.Value {
	if !maxMemClockHz.OK || !busWidthBits.OK || maxMemClockHz.V <= 0 || busWidthBits.V <= 0 {
		return snapshot.Value{}
	}
	return snapshot.Some(maxMemClockHz.V * busWidthBits.V * 2 / 8)
}

// markLost records that d's GPU fell off the bus; the next sample tries to
// re-acquire it.
func (s *Sampler) markLost(d *device) {
	if d.up {
		level.Warn(s.logger).Log("msg", "GPU is lost", "gpu", d.index, "uuid", d.uuid)
	}
	d.up = false
	d.dev = nil
	d.xidMonitored = false // a new handle must be registered again
	d.gpm.prevOK = false
	d.nvlPrevOK = false
}

// sampleDevice reads one GPU; fields that fail are absent. The reads go in
// a fixed order (core gauges, throttling, memory health, processes,
// interconnect), each group in a function of its own.
func (s *Sampler) sampleDevice(d *device, now time.Time) snapshot.GPUDevice {
	if !d.up {
		s.acquire(d)
	}
	out := snapshot.GPUDevice{Index: d.index, UUID: d.uuid}
	if !d.up {
		return out
	}
	r := &reader{s: s, d: d}
	out.Name, out.PCIBusID = d.name, d.pciBusID
	out.MemoryBusWidthBits, out.MaxSMClockHz, out.MaxMemClockHz = d.busWidth, d.maxSMClock, d.maxMemClk
	out.PeakMemBandwidthBytesPerSecond = d.peakBW

	s.sampleCore(r, d.dev, &out)
	s.sampleThrottling(r, d.dev, &out)
	s.sampleMemoryHealth(r, d.dev, &out)
	sampleProcesses(r, d.dev, &out)
	s.sampleInterconnect(r, d.dev, &out, now)

	if d.xid != nil {
		out.XidTotal, out.LastFatalXidTime = maps.Clone(d.xid), d.lastXid
	}

	if r.lost {
		s.markLost(d)
		return snapshot.GPUDevice{Index: d.index, UUID: d.uuid}
	}
	out.Up = true
	return out
}

// sampleCore reads utilization, memory, power, energy, clocks and
// temperature.
func (s *Sampler) sampleCore(r *reader, dev nvml.Device, out *snapshot.GPUDevice) {
	if u, ok := read(r, "utilization", dev.GetUtilizationRates); ok {
		out.UtilGPU = snapshot.Some(float64(u.Gpu) / 100)
		out.UtilMemory = snapshot.Some(float64(u.Memory) / 100)
	}
	if m, ok := read(r, "memory_info", dev.GetMemoryInfo); ok {
		out.MemoryUsedBytes = snapshot.Some(float64(m.Used))
		out.MemoryFreeBytes = snapshot.Some(float64(m.Free))
		out.MemoryTotalBytes = snapshot.Some(float64(m.Total))
	}
	if p, ok := read(r, "power_usage", dev.GetPowerUsage); ok {
		out.PowerWatts = snapshot.Some(float64(p) / 1000)
	}
	if p, ok := read(r, "enforced_power_limit", dev.GetEnforcedPowerLimit); ok {
		out.PowerLimitWatts = snapshot.Some(float64(p) / 1000)
	}
	if s.has(symTotalEnergy) {
		if e, ok := read(r, "total_energy", dev.GetTotalEnergyConsumption); ok {
			out.EnergyJoules = snapshot.Some(float64(e) / 1000)
		}
	}
	if c, ok := read1(r, "sm_clock", dev.GetClockInfo, nvml.CLOCK_SM); ok {
		out.SMClockHz = snapshot.Some(float64(c) * 1e6)
	}
	if c, ok := read1(r, "mem_clock", dev.GetClockInfo, nvml.CLOCK_MEM); ok {
		out.MemClockHz = snapshot.Some(float64(c) * 1e6)
	}
	if t, ok := read1(r, "temperature", dev.GetTemperature, nvml.TEMPERATURE_GPU); ok {
		out.TemperatureCelsius = snapshot.Some(float64(t))
	}
}

// sampleThrottling reads the clock event (throttle) reasons now and the
// time spent throttled per policy.
func (s *Sampler) sampleThrottling(r *reader, dev nvml.Device, out *snapshot.GPUDevice) {
	// Drivers before r535 only have the older name of the same call; a
	// symbol the driver lacks is never called.
	reasons := dev.GetCurrentClocksEventReasons
	if !s.has(symClocksEventReasons) {
		reasons = dev.GetCurrentClocksThrottleReasons
	}
	if s.has(symClocksEventReasons) || s.has(symClocksThrottleReasons) {
		if mask, ok := read(r, "clocks_event_reasons", reasons); ok {
			out.ThrottleReasons = make(map[string]bool, len(clockEventReasons))
			for _, ce := range clockEventReasons {
				out.ThrottleReasons[ce.Reason] = mask&ce.Bit != 0
			}
		}
	}
	for _, p := range violationPolicies {
		if v, ok := read1(r, "violation_status:"+p.Reason, dev.GetViolationStatus, p.Policy); ok {
			if out.ThrottleSeconds == nil {
				out.ThrottleSeconds = map[string]float64{}
			}
			out.ThrottleSeconds[p.Reason] = float64(v.ViolationTime) / 1e9
		}
	}
}

// sampleMemoryHealth reads the ECC error counts and the row remapper.
func (s *Sampler) sampleMemoryHealth(r *reader, dev nvml.Device, out *snapshot.GPUDevice) {
	for _, e := range []struct {
		name string
		typ  nvml.MemoryErrorType
	}{{"corrected", nvml.MEMORY_ERROR_TYPE_CORRECTED}, {"uncorrected", nvml.MEMORY_ERROR_TYPE_UNCORRECTED}} {
		if n, ok := read2(r, "ecc_errors:"+e.name, dev.GetTotalEccErrors, e.typ, nvml.VOLATILE_ECC); ok {
			if out.ECCErrors == nil {
				out.ECCErrors = map[string]float64{}
			}
			out.ECCErrors[e.name] = float64(n)
		}
	}
	if !r.lost && s.has(symRemappedRows) {
		corr, unc, pending, failed, ret := dev.GetRemappedRows()
		if r.check("remapped_rows", ret) {
			out.RemappedRows = map[string]float64{"correctable": float64(corr), "uncorrectable": float64(unc)}
			out.RowRemapPending = snapshot.Some(b2f(pending))
			out.RowRemapFailure = snapshot.Some(b2f(failed))
		}
	}
}

// sampleProcesses reads the GPU memory each compute process holds.
func sampleProcesses(r *reader, dev nvml.Device, out *snapshot.GPUDevice) {
	if procs, ok := read(r, "compute_processes", dev.GetComputeRunningProcesses); ok {
		out.ProcessMemoryBytes = make(map[uint32]float64, len(procs))
		for _, p := range procs {
			// NVML_VALUE_NOT_AVAILABLE (all ones) without permission, e.g. in
			// a container that cannot see the process.
			if p.UsedGpuMemory == ^uint64(0) {
				continue
			}
			out.ProcessMemoryBytes[p.Pid] += float64(p.UsedGpuMemory)
		}
	}
}

// sampleInterconnect reads GPM metrics, then PCIe and NVLink throughput
// from the older calls where GPM gave none.
func (s *Sampler) sampleInterconnect(r *reader, dev nvml.Device, out *snapshot.GPUDevice, now time.Time) {
	s.sampleGPM(r, out, now)
	if !out.PCIeTxBytesPerSecond.OK && !out.PCIeRxBytesPerSecond.OK {
		// NVML samples PCIe throughput over 20 ms and reports KB/s (1024 B).
		if v, ok := read1(r, "pcie_tx", dev.GetPcieThroughput, nvml.PCIE_UTIL_TX_BYTES); ok {
			out.PCIeTxBytesPerSecond = snapshot.Some(float64(v) * 1024)
		}
		if v, ok := read1(r, "pcie_rx", dev.GetPcieThroughput, nvml.PCIE_UTIL_RX_BYTES); ok {
			out.PCIeRxBytesPerSecond = snapshot.Some(float64(v) * 1024)
		}
	}
	if !out.NVLinkTxBytesPerSecond.OK && !out.NVLinkRxBytesPerSecond.OK {
		s.sampleNVLinkCounters(r, out, now)
	}
}

// violationPolicies are the nvmlDeviceGetViolationStatus policies exported as
// vllm_gpu_clock_event_seconds_total{reason}.
var violationPolicies = []struct {
	Policy nvml.PerfPolicyType
	Reason string
}{
	{nvml.PERF_POLICY_POWER, "power"},
	{nvml.PERF_POLICY_THERMAL, "thermal"},
	{nvml.PERF_POLICY_SYNC_BOOST, "sync_boost"},
	{nvml.PERF_POLICY_BOARD_LIMIT, "board_limit"},
	{nvml.PERF_POLICY_LOW_UTILIZATION, "low_utilization"},
	{nvml.PERF_POLICY_RELIABILITY, "reliability"},
	{nvml.PERF_POLICY_TOTAL_APP_CLOCKS, "app_clocks"},
	{nvml.PERF_POLICY_TOTAL_BASE_CLOCKS, "base_clocks"},
}

// sampleNVLinkCounters turns the NVLink data throughput field counters
// (KiB, one per link) into bytes per second over the sampler window. The
// first sample after start or recovery has no rate.
func (s *Sampler) sampleNVLinkCounters(r *reader, out *snapshot.GPUDevice, now time.Time) {
	if r.lost {
		return
	}
	d := r.d
	vals := make([]nvml.FieldValue, 0, 2*nvml.NVLINK_MAX_LINKS)
	for link := 0; link < nvml.NVLINK_MAX_LINKS; link++ {
		vals = append(vals,
			nvml.FieldValue{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ScopeId: uint32(link)},
			nvml.FieldValue{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ScopeId: uint32(link)})
	}
	if !r.check("nvlink_throughput", d.dev.GetFieldValues(vals)) {
		d.nvlPrevOK = false
		return
	}
	var tx, rx float64
	n := 0
	for _, v := range vals {
		if nvml.Return(v.NvmlReturn) != nvml.SUCCESS {
			continue
		}
		n++
		kib, ok := fieldValue(v)
		if !ok {
			continue
		}
		if v.FieldId == nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX {
			tx += kib
		} else {
			rx += kib
		}
	}
	if n == 0 {
		d.nvlPrevOK = false
		return
	}
	if d.nvlPrevOK && now.After(d.nvlPrevTime) && tx >= d.nvlPrevTx && rx >= d.nvlPrevRx {
		dt := now.Sub(d.nvlPrevTime).Seconds()
		out.NVLinkTxBytesPerSecond = snapshot.Some((tx - d.nvlPrevTx) * 1024 / dt)
		out.NVLinkRxBytesPerSecond = snapshot.Some((rx - d.nvlPrevRx) * 1024 / dt)
	}
	d.nvlPrevTx, d.nvlPrevRx, d.nvlPrevTime, d.nvlPrevOK = tx, rx, now, true
}

// absence is where a missing NVML or GPU is logged (Options.AbsenceExpected).
func (s *Sampler) absence() log.Logger {
	if s.opts.AbsenceExpected {
		return level.Debug(s.logger)
	}
	return level.Warn(s.logger)
}

// warnOnce logs a warning the first time key is seen.
func (s *Sampler) warnOnce(key string, kv ...any) { s.logOnce(level.Warn, key, kv...) }

// logOnce logs at lvl the first time key is seen.
func (s *Sampler) logOnce(lvl func(log.Logger) log.Logger, key string, kv ...any) {
	if !s.warned[key] {
		s.warned[key] = true
		lvl(s.logger).Log(kv...)
	}
}

// reader collects one device's reads: ERROR_GPU_IS_LOST stops further reads,
// ERROR_NOT_SUPPORTED just leaves the field absent, anything else is logged
// once per field and code.
type reader struct {
	s    *Sampler
	d    *device
	lost bool
}

func (r *reader) check(field string, ret nvml.Return) bool {
	switch ret {
	case nvml.SUCCESS:
		return true
	case nvml.ERROR_GPU_IS_LOST:
		r.lost = true
	case nvml.ERROR_NOT_SUPPORTED:
	default:
		r.s.warnOnce(fmt.Sprintf("read:%d:%s:%s", r.d.index, field, retName(ret)),
			"msg", "NVML read failed; series absent", "gpu", r.d.index, "field", field, "err", retName(ret))
	}
	return false
}

func read[T any](r *reader, field string, f func() (T, nvml.Return)) (T, bool) {
	var zero T
	if r.lost {
		return zero, false
	}
	v, ret := f()
	return v, r.check(field, ret)
}

func read1[A, T any](r *reader, field string, f func(A) (T, nvml.Return), a A) (T, bool) {
	return read(r, field, func() (T, nvml.Return) { return f(a) })
}

func read2[A, B, T any](r *reader, field string, f func(A, B) (T, nvml.Return), a A, b B) (T, bool) {
	return read(r, field, func() (T, nvml.Return) { return f(a, b) })
}

// cString converts a NUL-terminated C char array.
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
