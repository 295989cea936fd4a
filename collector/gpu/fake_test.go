//go:build cgo && !nonvml

package gpu

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/go-kit/log"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// t0 is the fixed clock of every mock test.
var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// fakeDev is a fixed-value GPU behind go-nvml's mock.Device. Every read
// goes through ret(field), so a test can make one field ERROR_NOT_SUPPORTED
// or the whole GPU lost.
type fakeDev struct {
	mu          sync.Mutex
	idx         int
	uuid        string
	name        string
	lost        bool
	unsupported map[string]bool
	gpm         bool // GpmQueryDeviceSupport says supported
	registered  int  // RegisterEvents calls
	nvlinkKiB   uint64
	pciBusID    string
	maxMemMHz   uint32
	md          *mock.Device
}

func (f *fakeDev) ret(field string) nvml.Return {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lost {
		return nvml.ERROR_GPU_IS_LOST
	}
	if f.unsupported[field] {
		return nvml.ERROR_NOT_SUPPORTED
	}
	return nvml.SUCCESS
}

func (f *fakeDev) setLost(v bool) {
	f.mu.Lock()
	f.lost = v
	f.mu.Unlock()
}

func busID(s string) [32]int8 {
	var b [32]int8
	for i := 0; i < len(s) && i < 31; i++ {
		b[i] = int8(s[i])
	}
	return b
}

func u64Field(v uint64) [8]byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return b
}

// newFakeDev builds an H100-like GPU with values derived from idx.
func newFakeDev(idx int, uuid string) *fakeDev {
	f := &fakeDev{idx: idx, uuid: uuid, name: "NVIDIA H100 80GB HBM3", unsupported: map[string]bool{}, gpm: true, md: &mock.Device{},
		pciBusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+0x10*idx), maxMemMHz: 2619}
	fill(f.md, f, true)
	return f
}

// fill sets every mock.Device method the sampler uses. identity=false keeps
// the UUID/name/memory funcs a caller (dgxa100) already set.
func fill(md *mock.Device, f *fakeDev, identity bool) {
	i := uint32(f.idx)
	if identity {
		md.GetUUIDFunc = func() (string, nvml.Return) { return f.uuid, f.ret("uuid") }
		md.GetNameFunc = func() (string, nvml.Return) { return f.name, f.ret("name") }
		md.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			used := uint64(70+i) << 30
			return nvml.Memory{Total: 80 << 30, Used: used, Free: 80<<30 - used}, f.ret("memory")
		}
	}
	md.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		return nvml.PciInfo{BusId: busID(f.pciBusID)}, f.ret("pci")
	}
	md.GetMemoryBusWidthFunc = func() (uint32, nvml.Return) { return 5120, f.ret("bus_width") }
	md.GetMaxClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		if c == nvml.CLOCK_MEM {
			return f.maxMemMHz, f.ret("max_clock")
		}
		return 1980, f.ret("max_clock")
	}
	md.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		if c == nvml.CLOCK_MEM {
			return f.maxMemMHz, f.ret("clock")
		}
		return 1755 - 10*i, f.ret("clock")
	}
	md.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: 97 - i, Memory: 41 + i}, f.ret("utilization")
	}
	md.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 612500 + 1000*i, f.ret("power") }
	md.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 700000, f.ret("power_limit") }
	md.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 123456789 + uint64(i), f.ret("energy") }
	md.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 61 + i, f.ret("temperature") }
	md.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
		return nvml.ClocksEventReasonSwPowerCap | uint64(i)*nvml.ClocksThrottleReasonHwThermalSlowdown, f.ret("clocks_event")
	}
	md.GetCurrentClocksThrottleReasonsFunc = md.GetCurrentClocksEventReasonsFunc // the older name
	md.GetViolationStatusFunc = func(p nvml.PerfPolicyType) (nvml.ViolationTime, nvml.Return) {
		if p == nvml.PERF_POLICY_RELIABILITY {
			return nvml.ViolationTime{}, nvml.ERROR_NOT_SUPPORTED
		}
		return nvml.ViolationTime{ReferenceTime: 1, ViolationTime: uint64(p+1) * 1500000000}, f.ret("violation")
	}
	md.GetPcieThroughputFunc = func(c nvml.PcieUtilCounter) (uint32, nvml.Return) {
		if c == nvml.PCIE_UTIL_TX_BYTES {
			return 1000 + i, f.ret("pcie")
		}
		return 2000 + i, f.ret("pcie")
	}
	md.GetFieldValuesFunc = func(vals []nvml.FieldValue) nvml.Return {
		if r := f.ret("nvlink"); r != nvml.SUCCESS {
			return r
		}
		f.mu.Lock()
		base := f.nvlinkKiB
		f.mu.Unlock()
		for k := range vals {
			v := &vals[k]
			if v.ScopeId >= 12 { // 12 links, like an A100
				v.NvmlReturn = uint32(nvml.ERROR_INVALID_ARGUMENT)
				continue
			}
			v.NvmlReturn = uint32(nvml.SUCCESS)
			v.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
			n := base
			if v.FieldId == nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX {
				n = 2 * base
			}
			v.Value = u64Field(n)
		}
		return nvml.SUCCESS
	}
	md.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, _ nvml.EccCounterType) (uint64, nvml.Return) {
		if t == nvml.MEMORY_ERROR_TYPE_CORRECTED {
			return 3 + uint64(i), f.ret("ecc")
		}
		return uint64(i), f.ret("ecc")
	}
	md.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		return 2, int(i), i == 1, false, f.ret("remapped")
	}
	md.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{
			{Pid: 4242 + i, UsedGpuMemory: 70 << 30},
			{Pid: 99, UsedGpuMemory: ^uint64(0)}, // not visible from this container
		}, f.ret("processes")
	}
	md.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return {
		f.mu.Lock()
		f.registered++
		f.mu.Unlock()
		return f.ret("events")
	}
}

// fakeLib is an nvml.Interface over fakeDevs with GPM and an event queue.
type fakeLib struct {
	*mock.Interface
	t    testing.TB
	devs []*fakeDev

	mu      sync.Mutex
	events  []nvml.EventData
	pushed  chan struct{}          // signalled by pushEvent, wakes EventSetWait
	tick    int                    // GpmSampleGet calls
	sampled map[nvml.GpmSample]int // sample -> tick it was filled at
	// noSymbol lists NVML functions this fake "driver" lacks.
	noSymbol map[string]bool
}

func newFakeLib(t testing.TB, devs ...*fakeDev) *fakeLib {
	l := &fakeLib{Interface: &mock.Interface{}, t: t, devs: devs, sampled: map[nvml.GpmSample]int{}, noSymbol: map[string]bool{},
		pushed: make(chan struct{}, 1)}
	m := l.Interface
	m.InitFunc = func() nvml.Return { return nvml.SUCCESS }
	m.ExtensionsFunc = func() nvml.ExtendedInterface {
		return &mock.ExtendedInterface{LookupSymbolFunc: func(sym string) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.noSymbol[sym] {
				return fmt.Errorf("%s: undefined symbol", sym)
			}
			return nil
		}}
	}
	m.ShutdownFunc = func() nvml.Return { return nvml.SUCCESS }
	m.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS }
	m.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) { return 12040, nvml.SUCCESS }
	m.DeviceGetCountFunc = func() (int, nvml.Return) { return len(l.devs), nvml.SUCCESS }
	m.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(l.devs) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		if r := l.devs[i].ret("handle"); r != nvml.SUCCESS {
			return nil, r
		}
		return l.devs[i].md, nvml.SUCCESS
	}
	m.DeviceGetHandleByUUIDFunc = func(u string) (nvml.Device, nvml.Return) {
		for _, d := range l.devs {
			if d.uuid == u {
				if r := d.ret("handle"); r != nvml.SUCCESS {
					return nil, r
				}
				return d.md, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	m.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return &mock.EventSet{}, nvml.SUCCESS }
	m.EventSetFreeFunc = func(nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	// Like NVML's, the wait returns as soon as an event is queued, or
	// ERROR_TIMEOUT after ms.
	m.EventSetWaitFunc = func(_ nvml.EventSet, ms uint32) (nvml.EventData, nvml.Return) {
		timeout := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer timeout.Stop()
		for {
			l.mu.Lock()
			if len(l.events) > 0 {
				e := l.events[0]
				l.events = l.events[1:]
				l.mu.Unlock()
				return e, nvml.SUCCESS
			}
			l.mu.Unlock()
			select {
			case <-l.pushed:
			case <-timeout.C:
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
		}
	}
	m.GpmQueryDeviceSupportFunc = func(dev nvml.Device) (nvml.GpmSupport, nvml.Return) {
		f := l.byDevice(dev)
		if r := f.ret("gpm"); r != nvml.SUCCESS {
			return nvml.GpmSupport{}, r
		}
		return nvml.GpmSupport{Version: nvml.GPM_SUPPORT_VERSION, IsSupportedDevice: uint32(b2f(f.gpm))}, nvml.SUCCESS
	}
	m.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) { return &mock.GpmSample{}, nvml.SUCCESS }
	m.GpmSampleFreeFunc = func(nvml.GpmSample) nvml.Return { return nvml.SUCCESS }
	m.GpmSampleGetFunc = func(dev nvml.Device, smp nvml.GpmSample) nvml.Return {
		if r := l.byDevice(dev).ret("gpm_sample"); r != nvml.SUCCESS {
			return r
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.tick++
		l.sampled[smp] = l.tick
		return nvml.SUCCESS
	}
	m.GpmMetricsGetFunc = func(req *nvml.GpmMetricsGetType) nvml.Return {
		l.mu.Lock()
		t1, ok1 := l.sampled[req.Sample1]
		t2, ok2 := l.sampled[req.Sample2]
		l.mu.Unlock()
		if !ok1 || !ok2 || t1 >= t2 || req.Sample1 == req.Sample2 {
			l.t.Errorf("GpmMetricsGet over a bad window: sample1 tick %d (%v), sample2 tick %d (%v)", t1, ok1, t2, ok2)
			return nvml.ERROR_INVALID_ARGUMENT
		}
		if req.Version != nvml.GPM_METRICS_GET_VERSION {
			l.t.Errorf("GpmMetricsGet version %d", req.Version)
		}
		for k := 0; k < int(req.NumMetrics); k++ {
			m := &req.Metrics[k]
			m.NvmlReturn = uint32(nvml.SUCCESS)
			id := nvml.GpmMetricId(m.MetricId)
			v, ok := fakeGPMValues[id]
			switch {
			case id == nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC:
				// An NVLink counter the driver cannot read: only this series is absent.
				m.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			case ok:
				m.Value = v
			default:
				m.NvmlReturn = uint32(nvml.ERROR_INVALID_ARGUMENT)
			}
		}
		return nvml.SUCCESS
	}
	return l
}

// fakeGPMValues are the GPM metrics the fake driver reports.
var fakeGPMValues = map[nvml.GpmMetricId]float64{
	nvml.GPM_METRIC_DRAM_BW_UTIL:            83.5,
	nvml.GPM_METRIC_SM_UTIL:                 91,
	nvml.GPM_METRIC_SM_OCCUPANCY:            37.5,
	nvml.GPM_METRIC_ANY_TENSOR_UTIL:         62.25,
	nvml.GPM_METRIC_PCIE_TX_PER_SEC:         10,
	nvml.GPM_METRIC_PCIE_RX_PER_SEC:         20,
	nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: 1000,
}

func (l *fakeLib) byDevice(dev nvml.Device) *fakeDev {
	for _, d := range l.devs {
		if nvml.Device(d.md) == dev {
			return d
		}
	}
	l.t.Fatalf("unknown device %v", dev)
	return nil
}

func (l *fakeLib) pushEvent(e nvml.EventData) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
	select {
	case l.pushed <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// logBuffer is a goroutine-safe go-kit logfmt logger into a buffer.
type logBuffer struct{ testutil.SyncBuffer }

func (b *logBuffer) logger() log.Logger { return log.NewLogfmtLogger(b) }

// newTestSampler builds a Sampler on lib with the fixed clock t0.
func newTestSampler(t *testing.T, lib nvml.Interface, logs *logBuffer) *Sampler {
	t.Helper()
	var l log.Logger = log.NewNopLogger()
	if logs != nil {
		l = logs.logger()
	}
	s := New(lib, Options{Interval: 5 * time.Second, EventWait: 10 * time.Millisecond}, l)
	s.clock = func() time.Time { return t0 }
	return s
}

// sampledTwice is newTestSampler after two samples 5 s apart (a window for
// GPM and the throughput counters); the sampler closes when the test ends.
func sampledTwice(t *testing.T, lib nvml.Interface, logs *logBuffer) *Sampler {
	t.Helper()
	s := newTestSampler(t, lib, logs)
	t.Cleanup(s.Close)
	s.SampleOnce(t0)
	s.SampleOnce(t0.Add(5 * time.Second))
	return s
}
