//go:build cgo && !nonvml

package main

import (
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/collector"
	"github.com/vllm-exporter/vllm_exporter/collector/gpu"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
)

// hardFillMock sets every exported func field of the go-nvml mock struct
// *m to a function that returns zero values and, where the last result is
// an nvml.Return, ret() (e.g. ERROR_NOT_SUPPORTED: that series is absent).
// Tests then override the few calls that must succeed.
func hardFillMock(m any, ret func() nvml.Return) {
	v := reflect.ValueOf(m).Elem()
	retType := reflect.TypeFor[nvml.Return]()
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanSet() || f.Kind() != reflect.Func {
			continue
		}
		ft := f.Type()
		f.Set(reflect.MakeFunc(ft, func([]reflect.Value) []reflect.Value {
			out := make([]reflect.Value, ft.NumOut())
			for k := range out {
				out[k] = reflect.Zero(ft.Out(k))
			}
			if n := ft.NumOut(); n > 0 && ft.Out(n-1) == retType {
				out[n-1] = reflect.ValueOf(ret())
			}
			return out
		}))
	}
}

// hardFakeNVML is an NVML library with n GPUs that answer UUID, name,
// utilization and memory and nothing else (every other read is "not
// supported"); lost[i] makes GPU i fall off the bus (ERROR_GPU_IS_LOST on
// every call, handle lookups included) until it is cleared.
func hardFakeNVML(n int) (nvml.Interface, []*atomic.Bool) {
	lost := make([]*atomic.Bool, n)
	devs := make([]*mock.Device, n)
	or := func(i int, ok nvml.Return) nvml.Return {
		if lost[i].Load() {
			return nvml.ERROR_GPU_IS_LOST
		}
		return ok
	}
	for i := range n {
		lost[i] = &atomic.Bool{}
		d := &mock.Device{}
		hardFillMock(d, func() nvml.Return { return or(i, nvml.ERROR_NOT_SUPPORTED) })
		d.GetUUIDFunc = func() (string, nvml.Return) { return fmt.Sprintf("GPU-fake-%d", i), or(i, nvml.SUCCESS) }
		d.GetNameFunc = func() (string, nvml.Return) { return "Fake GPU", or(i, nvml.SUCCESS) }
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: 50, Memory: 25}, or(i, nvml.SUCCESS)
		}
		d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 80 << 30, Used: 60 << 30, Free: 20 << 30}, or(i, nvml.SUCCESS)
		}
		devs[i] = d
	}
	lib := &mock.Interface{}
	hardFillMock(lib, func() nvml.Return { return nvml.ERROR_NOT_SUPPORTED })
	lib.InitFunc = func() nvml.Return { return nvml.SUCCESS }
	lib.ShutdownFunc = func() nvml.Return { return nvml.SUCCESS }
	lib.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS }
	lib.DeviceGetCountFunc = func() (int, nvml.Return) { return n, nvml.SUCCESS }
	lib.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= n {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		if r := or(i, nvml.SUCCESS); r != nvml.SUCCESS {
			return nil, r
		}
		return devs[i], nvml.SUCCESS
	}
	lib.DeviceGetHandleByUUIDFunc = func(uuid string) (nvml.Device, nvml.Return) {
		for i := range n {
			if uuid == fmt.Sprintf("GPU-fake-%d", i) {
				return lib.DeviceGetHandleByIndex(i)
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	return lib, lost
}

// TestFaultGPULostMidRun: the whole exporter with the GPU collector on a
// fake NVML with two GPUs. GPU 0 falls off the bus mid-run: its
// vllm_gpu_up drops to 0 and its other series go, GPU 1 and the GPU
// collector stay up, vLLM's series and the endpoints are unaffected, the
// loss is logged once; when the GPU is back it is re-acquired and reported
// up again. Shutdown is clean and nothing leaks.
func TestFaultGPULostMidRun(t *testing.T) {
	before := hardSnapshot()
	lib, lost := hardFakeNVML(2)
	newGPUSampler = func(o gpu.Options, l log.Logger) (*gpu.Sampler, error) { return gpu.New(lib, o, l), nil }
	t.Cleanup(func() { newGPUSampler = gpu.NewFromLibrary })
	sim := vllmsimtest.StartLoaded(t, 7)
	h := hardStart(t, nil, append([]string{"--vllm.url=" + sim.URL(), "--collector.gpu.interval=100ms", "--no-probe.enabled"}, hardScrapeArgs...)...)
	if h.x.gpu == nil {
		t.Fatal("the GPU collector did not use the injected sampler")
	}
	up := func(gpu string, v float64) func(hardMetrics) (bool, string) {
		return hardIs("vllm_gpu_up", v, "gpu", gpu)
	}
	h.waitMetric("both GPUs up", hardAll(up("0", 1), up("1", 1), hardIs("vllm_exporter_collector_up", 1, "collector", "gpu"),
		hardIs("vllm_gpu_utilization_ratio", 0.5, "gpu", "0"), hardIs("vllm_gpu_utilization_ratio", 0.5, "gpu", "1"), hardIs("vllm_up", 1)))

	lost[0].Store(true)
	page := h.waitMetric("GPU 0 lost", hardAll(up("0", 0), up("1", 1), hardIs("vllm_exporter_collector_up", 1, "collector", "gpu")))
	if _, ok := page.Value("vllm_gpu_utilization_ratio", "gpu", "0"); ok {
		t.Fatal("a lost GPU still exports its utilization: stale data shown as fresh")
	}
	if v, ok := page.Value("vllm_gpu_memory_used_bytes", "gpu", "1"); !ok || v != 60<<30 {
		t.Fatalf("GPU 1's memory while GPU 0 is lost: %v %v", v, ok)
	}
	if v, _ := page.Value("vllm_up"); v != 1 {
		t.Fatalf("vllm_up = %v while a GPU is lost", v)
	}
	if code, _ := h.get("/-/healthy"); code != 200 {
		t.Fatalf("/-/healthy = %d while a GPU is lost", code)
	}
	// Several more samples while it stays lost: one log line, no crash.
	h.waitMetric("still lost after more scrapes", hardAll(up("0", 0), hardAtLeast("vllm_exporter_scrapes_total", 5)))

	lost[0].Store(false)
	h.waitMetric("GPU 0 back", hardAll(up("0", 1), up("1", 1), hardIs("vllm_gpu_utilization_ratio", 0.5, "gpu", "0")))
	logs := h.logs.String()
	if n := strings.Count(logs, "GPU is lost"); n != 1 {
		t.Fatalf("'GPU is lost' logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs, "GPU is back") {
		t.Fatalf("recovery not logged:\n%s", logs)
	}
	h.stop()
	sim.Close()
	hardCheckLeaks(t, before, 32<<20)
}

// TestGPUAbsenceWarnsOnlyWhenForced: on a host without NVML (Init fails)
// or without a GPU, auto mode says so at info (the absence is expected) and
// writes no warning; --collector.gpu, which asked for GPUs, warns once.
func TestGPUAbsenceWarnsOnlyWhenForced(t *testing.T) {
	noLib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	noGPU, _ := hardFakeNVML(0)
	for name, lib := range map[string]nvml.Interface{"no NVML": noLib, "no GPU": noGPU} {
		newGPUSampler = func(o gpu.Options, l log.Logger) (*gpu.Sampler, error) { return gpu.New(lib, o, l), nil }
		t.Cleanup(func() { newGPUSampler = gpu.NewFromLibrary })
		for _, forced := range []bool{false, true} {
			var logs strings.Builder
			logger := level.NewFilter(log.NewLogfmtLogger(&logs), level.AllowInfo())
			args := []string{}
			if forced {
				args = append(args, "--collector.gpu")
			}
			s, err := setupGPU(parseGPUFlags(t, args...), prometheus.NewRegistry(), collector.NewHealth(), logger)
			if err != nil {
				t.Fatal(err)
			}
			if s != nil {
				s.SampleOnce(time.Now())
				s.Close()
			}
			warns, said := strings.Count(logs.String(), "level=warn"), strings.Count(logs.String(), `level=info msg="no GPU collector on this host`)
			if forced && warns != 1 || !forced && (warns != 0 || said != 1) {
				t.Errorf("%s, forced=%v: %d warnings, %d info lines on the absence; want 1 warning forced, else none and one info line:\n%s", name, forced, warns, said, logs.String())
			}
		}
	}
}
