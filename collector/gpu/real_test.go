//go:build cgo && !nonvml

package gpu

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// TestRealNVMLWithoutDriver uses the real library loader (nvml.New()). On a
// machine without the NVIDIA driver Init fails with ERROR_LIBRARY_NOT_FOUND:
// one warning, the collector says it is down, nothing crashes, and Run,
// SampleOnce, Collect and Close stay harmless. Skipped where a driver works.
func TestRealNVMLWithoutDriver(t *testing.T) {
	logs := &logBuffer{}
	s := New(nvml.New(), Options{}, logs.logger())
	if s.initErr == "" {
		s.Close()
		t.Skip("NVML initialised: this machine has an NVIDIA driver (see TestRealGPU)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Run(ctx)
	s.SampleOnce(time.Now())
	s.Close()
	got := series(t, s)
	if len(got) != 2 || got[`vllm_exporter_collector_up{collector="gpu"}`] != 0 {
		t.Fatalf("output without a driver: %v", got)
	}
	if s.Up() || !strings.Contains(s.Latest().Error, "ERROR_") {
		t.Fatalf("latest: %+v", s.Latest())
	}
	if n := strings.Count(logs.String(), "level=warn"); n != 1 {
		t.Fatalf("%d warnings, want one:\n%s", n, logs)
	}
	t.Logf("without a driver: %s", strings.TrimSpace(logs.String()))
}

// TestRealGPU samples the real GPUs and prints every reading. It runs only
// with VLLM_EXPORTER_REAL_GPU=1 (on a GPU machine):
//
//	VLLM_EXPORTER_REAL_GPU=1 go test -v -count=1 -run TestRealGPU ./collector/gpu
//
// VLLM_EXPORTER_REAL_GPU_SAMPLES (default 6) and
// VLLM_EXPORTER_REAL_GPU_INTERVAL (default 1s) set how many samples over
// which window; run a load beside it to see utilization, DRAM bandwidth,
// clocks and power move.
func TestRealGPU(t *testing.T) {
	if os.Getenv("VLLM_EXPORTER_REAL_GPU") != "1" {
		t.Skip("set VLLM_EXPORTER_REAL_GPU=1 to sample the real GPUs")
	}
	samples := 6
	if v, err := strconv.Atoi(os.Getenv("VLLM_EXPORTER_REAL_GPU_SAMPLES")); err == nil && v > 1 {
		samples = v
	}
	interval := time.Second
	if v, err := time.ParseDuration(os.Getenv("VLLM_EXPORTER_REAL_GPU_INTERVAL")); err == nil && v > 0 {
		interval = v
	}
	logs := &logBuffer{}
	s := New(nvml.New(), Options{Interval: interval, EventWait: 200 * time.Millisecond}, logs.logger())
	if s.initErr != "" {
		t.Fatalf("NVML init failed: %s", s.initErr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.watchEvents(ctx) }()
	defer func() {
		cancel()
		wg.Wait()
		s.Close()
		t.Logf("log:\n%s", logs)
	}()
	for i := 0; i < samples; i++ {
		if i > 0 {
			// A real driver's counters move in real time only: a real sleep.
			time.Sleep(interval)
		}
		snap := s.SampleOnce(time.Now())
		if !snap.Up {
			t.Fatalf("sample %d down: %s", i, snap.Error)
		}
		t.Logf("sample %d: driver %s cuda %s, %d GPU(s), took %v", i, snap.DriverVersion, snap.CUDAVersion, len(snap.Devices), snap.SampleDuration)
		for _, d := range snap.Devices {
			t.Log(describeDevice(d))
		}
	}
	t.Logf("/metrics:\n%s", exposition(t, s))
}

func describeDevice(d snapshot.GPUDevice) string {
	v := func(x snapshot.Value, scale float64, unit string) string {
		if !x.OK {
			return "absent"
		}
		return strconv.FormatFloat(x.V/scale, 'f', 3, 64) + unit
	}
	var b strings.Builder
	fmt.Fprintf(&b, "GPU %d %s %q bus %s up=%v\n", d.Index, d.UUID, d.Name, d.PCIBusID, d.Up)
	fmt.Fprintf(&b, "  util gpu %s mem-ctrl %s | memory used %s free %s total %s\n",
		v(d.UtilGPU, 0.01, "%"), v(d.UtilMemory, 0.01, "%"), v(d.MemoryUsedBytes, 1<<30, "GiB"), v(d.MemoryFreeBytes, 1<<30, "GiB"), v(d.MemoryTotalBytes, 1<<30, "GiB"))
	fmt.Fprintf(&b, "  power %s limit %s energy %s | temp %s\n",
		v(d.PowerWatts, 1, "W"), v(d.PowerLimitWatts, 1, "W"), v(d.EnergyJoules, 1, "J"), v(d.TemperatureCelsius, 1, "C"))
	fmt.Fprintf(&b, "  clocks sm %s (max %s) mem %s (max %s) | bus %s bits, peak BW %s\n",
		v(d.SMClockHz, 1e6, "MHz"), v(d.MaxSMClockHz, 1e6, "MHz"), v(d.MemClockHz, 1e6, "MHz"), v(d.MaxMemClockHz, 1e6, "MHz"),
		v(d.MemoryBusWidthBits, 1, ""), v(d.PeakMemBandwidthBytesPerSecond, 1e9, "GB/s"))
	fmt.Fprintf(&b, "  GPM supported=%v %s | DRAM BW util %s SM util %s SM occupancy %s tensor %s\n",
		d.GPMSupported, d.GPMUnsupportedCause, v(d.DRAMBandwidthUtil, 0.01, "%"), v(d.SMUtil, 0.01, "%"), v(d.SMOccupancy, 0.01, "%"), v(d.TensorActivity, 0.01, "%"))
	if d.DRAMBandwidthUtil.OK && d.PeakMemBandwidthBytesPerSecond.OK {
		fmt.Fprintf(&b, "  => DRAM bandwidth used %.1f GB/s\n", d.DRAMBandwidthUtil.V*d.PeakMemBandwidthBytesPerSecond.V/1e9)
	}
	fmt.Fprintf(&b, "  PCIe tx %s rx %s | NVLink tx %s rx %s\n",
		v(d.PCIeTxBytesPerSecond, 1e6, "MB/s"), v(d.PCIeRxBytesPerSecond, 1e6, "MB/s"), v(d.NVLinkTxBytesPerSecond, 1e6, "MB/s"), v(d.NVLinkRxBytesPerSecond, 1e6, "MB/s"))
	fmt.Fprintf(&b, "  clock events %v\n  throttle seconds %v\n  ECC %v remapped %v pending %s failure %s\n  processes %v xid %v (last %v)",
		d.ThrottleReasons, d.ThrottleSeconds, d.ECCErrors, d.RemappedRows, v(d.RowRemapPending, 1, ""), v(d.RowRemapFailure, 1, ""),
		d.ProcessMemoryBytes, d.XidTotal, d.LastFatalXidTime)
	return b.String()
}
