//go:build cgo && !nonvml

package gpu

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-exporter/vllm_exporter/collector"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	sharedtest "github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// exposition renders the sampler's whole /metrics output as text.
func exposition(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	return sharedtest.Encode(t, sharedtest.GatherAll(t, c))
}

// golden compares the whole output with testdata/<name>.prom, both as text
// and through testutil (which parses and compares metric families), and
// lints it.
func golden(t *testing.T, c prometheus.Collector, name string) {
	t.Helper()
	got := exposition(t, c)
	path := filepath.Join("testdata", name+".prom")
	want := sharedtest.Golden(t, path, []byte(got), *update, "run with -update to create")
	if got != string(want) {
		t.Errorf("%s: output differs from golden\n--- got ---\n%s", path, got)
	}
	if err := testutil.CollectAndCompare(c, bytes.NewReader(want)); err != nil {
		t.Errorf("CollectAndCompare: %v", err)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// series lists "name{labels}" for every sample in the output.
func series(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(exposition(t, c), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		var v float64
		fmt.Sscanf(line[i+1:], "%g", &v)
		out[line[:i]] = v
	}
	return out
}

func names(m map[string]float64) map[string]int {
	out := map[string]int{}
	for k := range m {
		n := k
		if i := strings.IndexByte(k, '{'); i >= 0 {
			n = k[:i]
		}
		out[n]++
	}
	return out
}

// TestGoldenHopperGPM: two H100-like GPUs with GPM, an Xid event, two
// samples one interval apart. Every series the collector has is present
// (GPM NVLink RX is the one metric the fake driver refuses, so it is absent).
func TestGoldenHopperGPM(t *testing.T) {
	d0, d1 := newFakeDev(0, "GPU-00000000-0000-0000-0000-000000000000"), newFakeDev(1, "GPU-11111111-1111-1111-1111-111111111111")
	lib := newFakeLib(t, d0, d1)
	s := newTestSampler(t, lib, nil)
	defer s.Close()

	first := s.SampleOnce(t0)
	if !first.Up || len(first.Devices) != 2 {
		t.Fatalf("first sample: %+v", first)
	}
	if first.Devices[0].DRAMBandwidthUtil.OK {
		t.Fatal("GPM value after a single sample: there is no window yet")
	}
	if d0.registered != 1 || d1.registered != 1 {
		t.Fatalf("RegisterEvents calls: %d, %d", d0.registered, d1.registered)
	}
	// An Xid 79 ("fallen off the bus") event on GPU 1, counted by the event loop.
	lib.pushEvent(nvml.EventData{Device: d1.md, EventType: nvml.EventTypeXidCriticalError, EventData: 79})
	lib.pushEvent(nvml.EventData{Device: d1.md, EventType: nvml.EventTypeXidCriticalError, EventData: 79})
	lib.pushEvent(nvml.EventData{Device: d1.md, EventType: nvml.EventTypeXidCriticalError, EventData: 13})
	for i := 0; i < 3; i++ {
		if !s.waitEvent(time.Millisecond) {
			t.Fatal("waitEvent failed")
		}
	}
	snap := s.SampleOnce(t0.Add(5 * time.Second))
	dev := snap.Devices[0]
	if !dev.GPMSupported || dev.DRAMBandwidthUtil != snapshot.Some(0.835) || dev.TensorActivity != snapshot.Some(0.6225) {
		t.Fatalf("GPM fields: %+v", dev)
	}
	if dev.NVLinkRxBytesPerSecond.OK {
		t.Fatal("NVLink RX should be absent: GPM refused that one metric")
	}
	if got := snap.Devices[1].XidTotal; got[79] != 2 || got[13] != 1 {
		t.Fatalf("xid counts: %v", got)
	}
	// H100 SXM: 2619 MHz x 5120 bit x 2 / 8 = 3.352 TB/s.
	if got := dev.PeakMemBandwidthBytesPerSecond; got != snapshot.Some(3352320000000) {
		t.Fatalf("peak bandwidth: %+v", got)
	}
	golden(t, s, "hopper_gpm")
}

// TestGoldenGPMUnsupported: GPM query says the device is not supported; the
// GPM ratios are absent, vllm_gpu_gpm_supported is 0 with a reason, PCIe
// falls back to nvmlDeviceGetPcieThroughput and NVLink to field counters.
func TestGoldenGPMUnsupported(t *testing.T) {
	d0 := newFakeDev(0, "GPU-00000000-0000-0000-0000-000000000000")
	d0.gpm = false
	d0.name = "NVIDIA A100-SXM4-80GB"
	logs := &logBuffer{}
	s := newTestSampler(t, newFakeLib(t, d0), logs)
	defer s.Close()
	s.SampleOnce(t0)
	d0.nvlinkKiB = 5 * 1000 // 5000 KiB per link more in 5 s on 12 links
	s.SampleOnce(t0.Add(5 * time.Second))
	s.SampleOnce(t0.Add(10 * time.Second)) // same counters: rate 0
	d0.nvlinkKiB = 2 * 5000
	snap := s.SampleOnce(t0.Add(15 * time.Second))
	if got, want := snap.Devices[0].NVLinkTxBytesPerSecond, snapshot.Some(12*5000*1024/5.0); got != want {
		t.Fatalf("nvlink tx = %+v, want %+v", got, want)
	}
	if n := strings.Count(logs.String(), "GPM metrics unavailable"); n != 1 {
		t.Fatalf("GPM unsupported logged %d times, want once:\n%s", n, logs)
	}
	golden(t, s, "gpm_unsupported")
}

// TestGoldenDGXA100 runs the collector over go-nvml's dgxa100 mock server
// (8 A100s), with the readings the mock lacks filled in by fill().
func TestGoldenDGXA100(t *testing.T) {
	srv := dgxa100.New()
	var fakes []*fakeDev
	for i, d := range srv.Devices {
		dd := d.(*dgxa100.Device)
		dd.UUID = fmt.Sprintf("GPU-a100a100-0000-0000-0000-%012d", i)
		// A100 40GB: 1215 MHz HBM2 on a 5120-bit bus (1.555 TB/s peak).
		f := &fakeDev{idx: i, uuid: dd.UUID, unsupported: map[string]bool{}, md: &dd.Device, pciBusID: dd.PciBusID, maxMemMHz: 1215}
		fill(&dd.Device, f, false)
		fakes = append(fakes, f)
	}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return &mock.EventSet{}, nvml.SUCCESS }
	srv.EventSetFreeFunc = func(nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	srv.GpmQueryDeviceSupportFunc = func(nvml.Device) (nvml.GpmSupport, nvml.Return) {
		return nvml.GpmSupport{Version: 1, IsSupportedDevice: 0}, nvml.SUCCESS // Ampere: no GPM
	}
	s := newTestSampler(t, srv, nil)
	defer s.Close()
	s.SampleOnce(t0)
	for _, f := range fakes {
		f.nvlinkKiB = uint64(f.idx+1) * 1000
	}
	snap := s.SampleOnce(t0.Add(5 * time.Second))
	if len(snap.Devices) != 8 {
		t.Fatalf("%d devices", len(snap.Devices))
	}
	for _, d := range snap.Devices {
		if !d.Up || d.GPMSupported || d.DRAMBandwidthUtil.OK {
			t.Fatalf("device %d: %+v", d.Index, d)
		}
		if d.PeakMemBandwidthBytesPerSecond != snapshot.Some(1555200000000) {
			t.Fatalf("peak bandwidth mismatch: %+v", d)
		}
	}
	golden(t, s, "dgxa100")
}

// TestNotSupportedSingleField makes one NVML read return ERROR_NOT_SUPPORTED
// at a time: exactly the series fed by it disappear, everything else stays.
func TestNotSupportedSingleField(t *testing.T) {
	full := func(unsup string) map[string]float64 {
		d0 := newFakeDev(0, "GPU-00000000-0000-0000-0000-000000000000")
		d0.gpm = false // exercise the non-GPM fallbacks (PCIe, NVLink counters)
		if unsup != "" {
			d0.unsupported[unsup] = true
		}
		s := newTestSampler(t, newFakeLib(t, d0), nil)
		defer s.Close()
		s.SampleOnce(t0)
		d0.nvlinkKiB = 1000
		s.SampleOnce(t0.Add(5 * time.Second))
		return series(t, s)
	}
	base := full("")
	cases := map[string][]string{
		"utilization":  {"vllm_gpu_utilization_ratio", "vllm_gpu_memory_controller_utilization_ratio"},
		"memory":       {"vllm_gpu_memory_used_bytes", "vllm_gpu_memory_free_bytes", "vllm_gpu_memory_total_bytes"},
		"power":        {"vllm_gpu_power_watts"},
		"power_limit":  {"vllm_gpu_power_limit_watts"},
		"energy":       {"vllm_gpu_energy_joules_total"},
		"clock":        {"vllm_gpu_sm_clock_hertz", "vllm_gpu_memory_clock_hertz"},
		"max_clock":    {"vllm_gpu_sm_clock_max_hertz", "vllm_gpu_memory_clock_max_hertz", "vllm_gpu_memory_bandwidth_peak_bytes_per_second"},
		"bus_width":    {"vllm_gpu_memory_bandwidth_peak_bytes_per_second"},
		"temperature":  {"vllm_gpu_temperature_celsius"},
		"clocks_event": {"vllm_gpu_clock_event_active"},
		"violation":    {"vllm_gpu_clock_event_seconds_total"},
		"pcie":         {"vllm_gpu_pcie_tx_bytes_per_second", "vllm_gpu_pcie_rx_bytes_per_second"},
		"nvlink":       {"vllm_gpu_nvlink_tx_bytes_per_second", "vllm_gpu_nvlink_rx_bytes_per_second"},
		"ecc":          {"vllm_gpu_ecc_errors_total"},
		"remapped":     {"vllm_gpu_remapped_rows", "vllm_gpu_remapped_rows_pending", "vllm_gpu_remapped_rows_failure"},
		"processes":    {"vllm_gpu_process_memory_used_bytes"},
		"events":       {"vllm_gpu_xid_events_total", "vllm_gpu_last_xid_event_timestamp_seconds"},
	}
	baseNames := names(base)
	for field, gone := range cases {
		t.Run(field, func(t *testing.T) {
			got := names(full(field))
			want := map[string]int{}
			for n, c := range baseNames {
				want[n] = c
			}
			for _, g := range gone {
				if baseNames[g] == 0 && field != "events" {
					t.Fatalf("%s is not in the full output", g)
				}
				delete(want, g)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("series by name with %s unsupported:\n got %v\nwant %v", field, got, want)
			}
		})
	}
	// Labels that only an unsupported field changes: the info series keeps
	// its other labels and leaves bus width/peak bandwidth empty.
	for k := range full("bus_width") {
		if strings.HasPrefix(k, "vllm_gpu_info{") && !strings.Contains(k, `memory_bus_width_bits=""`) {
			t.Errorf("info series with unsupported bus width: %s", k)
		}
	}
}

// TestGPULostAndRecovered: GPU 0 falls off the bus mid-run. It reports
// vllm_gpu_up 0 and nothing else while GPU 1 carries on; when it is back the
// handle is re-acquired by UUID, events are re-registered, and GPM restarts
// its window.
func TestGPULostAndRecovered(t *testing.T) {
	d0, d1 := newFakeDev(0, "GPU-00000000-0000-0000-0000-000000000000"), newFakeDev(1, "GPU-11111111-1111-1111-1111-111111111111")
	lib := newFakeLib(t, d0, d1)
	logs := &logBuffer{}
	s := sampledTwice(t, lib, logs)
	before := series(t, s)

	d0.setLost(true)
	snap := s.SampleOnce(t0.Add(10 * time.Second))
	if !snap.Up || snap.Devices[0].Up || !snap.Devices[1].Up {
		t.Fatalf("after loss: up=%v dev0=%v dev1=%v", snap.Up, snap.Devices[0].Up, snap.Devices[1].Up)
	}
	golden(t, s, "gpu_lost")
	s.SampleOnce(t0.Add(15 * time.Second)) // still lost: re-acquire fails quietly
	if n := strings.Count(logs.String(), "GPU is lost"); n != 1 {
		t.Fatalf("'GPU is lost' logged %d times", n)
	}

	d0.setLost(false)
	snap = s.SampleOnce(t0.Add(20 * time.Second))
	if !snap.Devices[0].Up {
		t.Fatal("GPU 0 did not recover")
	}
	if snap.Devices[0].DRAMBandwidthUtil.OK {
		t.Fatal("GPM value right after recovery: the window must restart")
	}
	if d0.registered != 2 {
		t.Fatalf("RegisterEvents on GPU 0 called %d times, want 2 (again after recovery)", d0.registered)
	}
	if !strings.Contains(logs.String(), "GPU is back") {
		t.Fatalf("no recovery log:\n%s", logs)
	}
	s.SampleOnce(t0.Add(25 * time.Second))
	after := series(t, s)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("after recovery the output differs from before the loss:\nbefore %v\nafter  %v", before, after)
	}
}

// TestLostAtStartup: a GPU that is lost when the sampler starts is listed
// down (no uuid yet) and picked up when it appears.
func TestLostAtStartup(t *testing.T) {
	d0 := newFakeDev(0, "GPU-00000000-0000-0000-0000-000000000000")
	d0.setLost(true)
	s := newTestSampler(t, newFakeLib(t, d0), nil)
	defer s.Close()
	snap := s.SampleOnce(t0)
	if len(snap.Devices) != 1 || snap.Devices[0].Up {
		t.Fatalf("%+v", snap.Devices)
	}
	if got := series(t, s)[`vllm_gpu_up{gpu="0",uuid=""}`]; got != 0 {
		t.Fatalf("vllm_gpu_up = %v", got)
	}
	d0.setLost(false)
	snap = s.SampleOnce(t0.Add(5 * time.Second))
	if !snap.Devices[0].Up || snap.Devices[0].UUID != d0.uuid {
		t.Fatalf("%+v", snap.Devices[0])
	}
}

// failingInterface returns a mock.Interface whose Init returns ret and whose
// every other method fails the test.
func failingInterface(t *testing.T, ret nvml.Return) *mock.Interface {
	m := &mock.Interface{}
	v := reflect.ValueOf(m).Elem()
	for i := 0; i < v.NumField(); i++ {
		f, sf := v.Field(i), v.Type().Field(i)
		if !sf.IsExported() || f.Kind() != reflect.Func {
			continue
		}
		name := strings.TrimSuffix(sf.Name, "Func")
		f.Set(reflect.MakeFunc(f.Type(), func([]reflect.Value) []reflect.Value {
			t.Fatalf("NVML %s called after a failed Init", name)
			return nil
		}))
	}
	m.InitFunc = func() nvml.Return { return ret }
	return m
}

// TestInitFailure: Init fails once, one warning, the collector reports down,
// and no other NVML function is ever called (Run, SampleOnce, Collect, Close).
func TestInitFailure(t *testing.T) {
	for _, ret := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED} {
		t.Run(retName(ret), func(t *testing.T) {
			m := failingInterface(t, ret)
			logs := &logBuffer{}
			s := newTestSampler(t, m, logs)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			s.Run(ctx)
			s.SampleOnce(t0)
			s.SampleOnce(t0.Add(time.Minute))
			golden(t, s, "init_failed")
			if s.Up() || s.Latest().Up || !strings.Contains(s.Latest().Error, retName(ret)) {
				t.Fatalf("latest: %+v", s.Latest())
			}
			s.Close()
			if n := len(m.InitCalls()); n != 1 {
				t.Fatalf("Init called %d times", n)
			}
			if n := strings.Count(logs.String(), "level=warn"); n != 1 {
				t.Fatalf("%d warnings, want exactly one:\n%s", n, logs)
			}
		})
	}
}

// TestNoGPU: NVML initialises but sees no GPU: the collector reports down
// with one warning and keeps looking.
func TestNoGPU(t *testing.T) {
	lib := newFakeLib(t)
	logs := &logBuffer{}
	s := sampledTwice(t, lib, logs)
	got := series(t, s)
	if len(got) != 2 || got[`vllm_exporter_collector_up{collector="gpu"}`] != 0 {
		t.Fatalf("output: %v", got)
	}
	if n := strings.Count(logs.String(), "level=warn"); n != 1 {
		t.Fatalf("%d warnings:\n%s", n, logs)
	}
	lib.devs = append(lib.devs, newFakeDev(0, "GPU-00000000-0000-0000-0000-000000000000"))
	if snap := s.SampleOnce(t0.Add(10 * time.Second)); !snap.Up || len(snap.Devices) != 1 {
		t.Fatalf("GPU not picked up: %+v", snap)
	}
}

// TestRunAndEvents drives Run with real goroutines in a synctest bubble
// (virtual time): the event loop counts an Xid, Run returns on cancel and
// shuts NVML down, and nothing is called after.
func TestRunAndEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d0 := newFakeDev(0, "GPU-00000000-0000-0000-0000-000000000000")
		lib := newFakeLib(t, d0)
		s := newTestSampler(t, lib, nil)
		lib.pushEvent(nvml.EventData{Device: d0.md, EventType: nvml.EventTypeXidCriticalError, EventData: 48})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		scrapes := make(chan struct{})
		go func() { // scrapes racing the sampler and the event loop (run with -race)
			defer close(scrapes)
			for i := 0; i < 20; i++ {
				testutil.CollectAndCount(s)
				_ = s.Latest()
			}
		}()
		<-scrapes
		// Every goroutine of the bubble now waits (Run on its ticker, the
		// event loop for the next event): the queued Xid has been taken.
		synctest.Wait()
		s.mu.Lock()
		var got float64
		if len(s.devs) == 1 {
			got = s.devs[0].xid[48]
		}
		s.mu.Unlock()
		if got != 1 {
			t.Fatalf("Xid 48 counted %v times, want 1", got)
		}
		cancel()
		<-done
		if len(lib.ShutdownCalls()) != 1 || len(lib.EventSetFreeCalls()) != 1 {
			t.Fatalf("shutdown %d, event set free %d", len(lib.ShutdownCalls()), len(lib.EventSetFreeCalls()))
		}
		calls := len(d0.md.GetPowerUsageCalls())
		if snap := s.SampleOnce(t0); snap.Up {
			t.Fatal("sample after Close reports up")
		}
		if len(d0.md.GetPowerUsageCalls()) != calls {
			t.Fatal("NVML called after Close")
		}
		s.Close() // idempotent
		if len(lib.ShutdownCalls()) != 1 {
			t.Fatal("second Close shut NVML down again")
		}
	})
}

// TestEventFromUnknownHandle: an event whose handle is not the one the
// sampler holds is matched by UUID.
func TestEventFromUnknownHandle(t *testing.T) {
	d0 := newFakeDev(0, "GPU-00000000-0000-0000-0000-000000000000")
	lib := newFakeLib(t, d0)
	s := newTestSampler(t, lib, nil)
	defer s.Close()
	s.SampleOnce(t0)
	other := &mock.Device{GetUUIDFunc: func() (string, nvml.Return) { return d0.uuid, nvml.SUCCESS }}
	lib.pushEvent(nvml.EventData{Device: other, EventType: nvml.EventTypeXidCriticalError, EventData: 31})
	lib.pushEvent(nvml.EventData{Device: other, EventType: 0x1, EventData: 1}) // not an Xid: ignored
	s.waitEvent(time.Millisecond)
	s.waitEvent(time.Millisecond)
	snap := s.SampleOnce(t0.Add(time.Second))
	if got := snap.Devices[0].XidTotal; len(got) != 1 || got[31] != 1 || !snap.Devices[0].LastFatalXidTime.Equal(t0) {
		t.Fatalf("xid: %v at %v", got, snap.Devices[0].LastFatalXidTime)
	}
}

func TestPeakMemoryBandwidth(t *testing.T) {
	for _, c := range []struct {
		name           string
		memMHz, widthB float64
		wantTBs        float64
	}{
		{"A100 40GB HBM2", 1215, 5120, 1.5552},
		{"H100 SXM HBM3", 2619, 5120, 3.35232},
		{"H200 HBM3e", 3201, 6144, 4.917},
		{"RTX 4090 GDDR6X", 10501, 384, 1.008},
	} {
		got := PeakMemoryBandwidth(snapshot.Some(c.memMHz*1e6), snapshot.Some(c.widthB))
		if !got.OK || got.V/1e12 < c.wantTBs*0.999 || got.V/1e12 > c.wantTBs*1.001 {
			t.Errorf("%s: %v TB/s, want %v", c.name, got.V/1e12, c.wantTBs)
		}
	}
	if PeakMemoryBandwidth(snapshot.Value{}, snapshot.Some(5120)).OK || PeakMemoryBandwidth(snapshot.Some(1), snapshot.Some(0)).OK {
		t.Error("peak bandwidth present without both inputs")
	}
}

func TestFieldValueDecode(t *testing.T) {
	v := nvml.FieldValue{ValueType: uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG), Value: u64Field(1 << 40)}
	if got, ok := fieldValue(v); !ok || got != 1<<40 {
		t.Fatalf("%v %v", got, ok)
	}
	v = nvml.FieldValue{ValueType: uint32(nvml.VALUE_TYPE_SIGNED_INT), Value: u64Field(uint64(0xFFFFFFFE))}
	if got, ok := fieldValue(v); !ok || got != -2 {
		t.Fatalf("%v %v", got, ok)
	}
	if _, ok := fieldValue(nvml.FieldValue{ValueType: 99}); ok {
		t.Fatal("unknown value type decoded")
	}
}

// TestDescribeCoversCollect: every rendered metric uses a described Desc
// (the pedantic registry in golden() checks this too), and names are unique.
func TestDescribeCoversCollect(t *testing.T) {
	seen := map[string]bool{}
	all := append([]*prometheus.Desc{collectorUpDesc, collectorDurationDesc}, descs...)
	for _, d := range all {
		s := d.String()
		if seen[s] {
			t.Fatalf("duplicate desc %s", s)
		}
		seen[s] = true
	}
	var ns []string
	for k := range seen {
		ns = append(ns, k)
	}
	sort.Strings(ns)
	if len(ns) != len(all) || len(ns) != 36 {
		t.Fatalf("%d descs", len(ns))
	}
}

// TestHealthReporter: with Options.Health the outcome goes to the shared
// collector.Health (which exports vllm_exporter_collector_up{collector="gpu"})
// and the Sampler does not export it too, so both register side by side.
func TestHealthReporter(t *testing.T) {
	for _, c := range []struct {
		name string
		lib  func() nvml.Interface
		up   float64
	}{
		{"up", func() nvml.Interface { return newFakeLib(t, newFakeDev(0, "GPU-00000000-0000-0000-0000-000000000000")) }, 1},
		{"no_gpu", func() nvml.Interface { return newFakeLib(t) }, 0},
		{"init_failed", func() nvml.Interface { return failingInterface(t, nvml.ERROR_LIBRARY_NOT_FOUND) }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			health := collector.NewHealth()
			s := New(c.lib(), Options{Health: health}, nil)
			defer s.Close()
			s.SampleOnce(t0)
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(health)
			if err := reg.Register(s); err != nil {
				t.Fatalf("register beside collector.Health: %v", err)
			}
			got := series(t, s)
			if _, ok := got[`vllm_exporter_collector_up{collector="gpu"}`]; ok {
				t.Fatalf("sampler exported collector_up itself: %v", got)
			}
			if got := series(t, health)[`vllm_exporter_collector_up{collector="gpu"}`]; got != c.up {
				t.Fatalf("health collector_up = %v, want %v", got, c.up)
			}
		})
	}
}

// TestGPMSampleNotSupported: GpmQueryDeviceSupport says yes but
// GpmSampleGet says ERROR_NOT_SUPPORTED: GPM is reported unsupported with a
// reason, and the non-GPM fallbacks keep PCIe present.
func TestGPMSampleNotSupported(t *testing.T) {
	d0 := newFakeDev(0, "GPU-00000000-0000-0000-0000-000000000000")
	d0.unsupported["gpm_sample"] = true
	s := newTestSampler(t, newFakeLib(t, d0), nil)
	defer s.Close()
	s.SampleOnce(t0)
	s.SampleOnce(t0.Add(5 * time.Second))
	got := series(t, s)
	if v, ok := got[`vllm_gpu_gpm_supported{gpu="0",reason="sample_not_supported",uuid="GPU-00000000-0000-0000-0000-000000000000"}`]; !ok || v != 0 {
		t.Fatalf("gpm_supported: %v", got)
	}
	n := names(got)
	if n["vllm_gpu_dram_bandwidth_utilization_ratio"] != 0 || n["vllm_gpu_pcie_tx_bytes_per_second"] != 1 {
		t.Fatalf("series: %v", n)
	}
}

// TestOldDriver: a driver without the newer NVML functions (looked up once
// after Init) is never asked for them (calling a missing symbol aborts the
// process): clock events come from the older throttle-reasons call, and bus
// width, peak bandwidth, remapped rows and GPM are absent.
func TestOldDriver(t *testing.T) {
	d0 := newFakeDev(0, "GPU-00000000-0000-0000-0000-000000000000")
	never := func(name string) { t.Errorf("%s called on a driver without it", name) }
	d0.md.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { never("GetCurrentClocksEventReasons"); return 0, nvml.ERROR_UNKNOWN }
	d0.md.GetMemoryBusWidthFunc = func() (uint32, nvml.Return) { never("GetMemoryBusWidth"); return 0, nvml.ERROR_UNKNOWN }
	d0.md.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		never("GetRemappedRows")
		return 0, 0, false, false, nvml.ERROR_UNKNOWN
	}
	lib := newFakeLib(t, d0)
	lib.GpmQueryDeviceSupportFunc = func(nvml.Device) (nvml.GpmSupport, nvml.Return) {
		never("GpmQueryDeviceSupport")
		return nvml.GpmSupport{}, nvml.ERROR_UNKNOWN
	}
	for _, sym := range []string{symClocksEventReasons, symMemoryBusWidth, symRemappedRows, symGpmQuery, symGpmAlloc, symGpmGet, symGpmMetrics} {
		lib.noSymbol[sym] = true
	}
	s := sampledTwice(t, lib, nil)
	got := series(t, s)
	n := names(got)
	for _, gone := range []string{"vllm_gpu_memory_bandwidth_peak_bytes_per_second", "vllm_gpu_remapped_rows", "vllm_gpu_dram_bandwidth_utilization_ratio"} {
		if n[gone] != 0 {
			t.Errorf("%s present on an old driver", gone)
		}
	}
	if n["vllm_gpu_clock_event_active"] != len(clockEventReasons) || n["vllm_gpu_utilization_ratio"] != 1 {
		t.Errorf("series: %v", n)
	}
	if _, ok := got[`vllm_gpu_gpm_supported{gpu="0",reason="driver_not_supported",uuid="GPU-00000000-0000-0000-0000-000000000000"}`]; !ok {
		t.Errorf("gpm_supported reason: %v", got)
	}
}

// TestStandaloneSelfMetricsBesideHealth: a standalone Sampler (no
// Options.Health) exports vllm_exporter_collector_up itself, with the same
// HELP text as collector.Health, so the two can be gathered together (e.g.
// two registries behind prometheus.Gatherers, which rejects one metric name
// with two HELP strings).
func TestStandaloneSelfMetricsBesideHealth(t *testing.T) {
	health := collector.NewHealth()
	health.Report("vllm", time.Millisecond, nil)
	s := newTestSampler(t, newFakeLib(t, newFakeDev(0, "GPU-00000000-0000-0000-0000-000000000000")), nil)
	defer s.Close()
	s.SampleOnce(t0)
	r1, r2 := prometheus.NewPedanticRegistry(), prometheus.NewPedanticRegistry()
	r1.MustRegister(health)
	r2.MustRegister(s)
	mfs, err := prometheus.Gatherers{r1, r2}.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	n := 0
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "vllm_exporter_collector_") {
			n += len(mf.GetMetric())
		}
	}
	if n != 4 {
		t.Fatalf("%d collector self-metric series, want 4 (up and duration for vllm and gpu)", n)
	}
}

// TestNonUTF8NameSpoilsOnlyItsSeries: a GPU name that is not UTF-8 (the
// driver's bytes as they are) makes vllm_gpu_info an invalid metric the
// gather reports, while the GPU's other series are still served: Collect
// never panics on a label value.
func TestNonUTF8NameSpoilsOnlyItsSeries(t *testing.T) {
	dev := newFakeDev(0, "GPU-00000000-0000-0000-0000-000000000000")
	dev.name = "NVIDIA \xff"
	s := sampledTwice(t, newFakeLib(t, dev), nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	mfs, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), "vllm_gpu_info") {
		t.Fatalf("gather error %v, want one naming vllm_gpu_info", err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	if names["vllm_gpu_info"] || !names["vllm_gpu_up"] || !names["vllm_gpu_power_watts"] {
		t.Fatalf("families %v: want the GPU's series without vllm_gpu_info", names)
	}
}
