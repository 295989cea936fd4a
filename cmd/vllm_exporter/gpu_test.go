package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-exporter/vllm_exporter/collector"
	"github.com/vllm-exporter/vllm_exporter/collector/gpu"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
)

func parseGPUFlags(t *testing.T, args ...string) *gpuFlags {
	t.Helper()
	app := kingpin.New("test", "")
	f := registerGPUFlags(app)
	if _, err := app.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return f
}

func TestGPUFlags(t *testing.T) {
	f := parseGPUFlags(t)
	if !*f.enabled || f.forced || *f.interval != 5*time.Second {
		t.Fatalf("defaults: enabled=%v forced=%v interval=%v", *f.enabled, f.forced, *f.interval)
	}
	if f = parseGPUFlags(t, "--collector.gpu"); !*f.enabled || !f.forced {
		t.Fatalf("--collector.gpu: enabled=%v forced=%v", *f.enabled, f.forced)
	}
	f = parseGPUFlags(t, "--no-collector.gpu", "--collector.gpu.interval=2s")
	if *f.enabled || *f.interval != 2*time.Second {
		t.Fatalf("parsed: enabled=%v interval=%v", *f.enabled, *f.interval)
	}
	reg := prometheus.NewRegistry()
	s, err := setupGPU(f, reg, nil, log.NewNopLogger())
	if s != nil || err != nil {
		t.Fatalf("disabled: %v %v", s, err)
	}
	if _, err := setupGPU(parseGPUFlags(t, "--collector.gpu.interval=0s"), reg, nil, log.NewNopLogger()); err == nil {
		t.Fatal("zero interval accepted")
	}
}

// TestSetupGPUHere runs setupGPU with the real library on this machine,
// in auto mode and forced on. On a host where NVML sees no GPU (no driver,
// or a build without NVML) auto mode registers nothing and reports the
// collector absent with the reason, and forced on reports it down; on a
// GPU host both are up.
func TestSetupGPUHere(t *testing.T) {
	for _, forced := range []bool{false, true} {
		reg := prometheus.NewPedanticRegistry()
		health := collector.NewHealth()
		reg.MustRegister(health)
		args := []string{}
		if forced {
			args = append(args, "--collector.gpu")
		}
		s, err := setupGPU(parseGPUFlags(t, args...), reg, health, log.NewNopLogger())
		if err != nil {
			t.Fatal(err)
		}
		up := false
		if s != nil {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			s.Run(ctx)
			if s.Latest() == nil {
				s.SampleOnce(time.Now())
			}
			up = s.Up()
		}
		var exp string
		switch {
		case up:
			exp = "# HELP vllm_exporter_collector_up 1 if the collector's last run succeeded, 0 if it failed.\n# TYPE vllm_exporter_collector_up gauge\nvllm_exporter_collector_up{collector=\"gpu\"} 1\n"
		case forced:
			exp = "# HELP vllm_exporter_collector_up 1 if the collector's last run succeeded, 0 if it failed.\n# TYPE vllm_exporter_collector_up gauge\nvllm_exporter_collector_up{collector=\"gpu\"} 0\n"
		default:
			if s != nil {
				t.Fatal("auto mode kept a sampler that found no GPU")
			}
			if n := promtestutil.CollectAndCount(health, "vllm_exporter_collector_up"); n != 0 {
				t.Fatalf("auto mode without a GPU exports %d up series, want none", n)
			}
			if n := promtestutil.CollectAndCount(health, "vllm_exporter_collector_absent"); n != 1 {
				t.Fatalf("auto mode without a GPU: %d absent series, want 1", n)
			}
			t.Logf("auto mode here: collector absent")
			continue
		}
		if err := promtestutil.GatherAndCompare(reg, strings.NewReader(exp), "vllm_exporter_collector_up"); err != nil {
			t.Fatalf("forced=%v: %v", forced, err)
		}
	}
}

// The absent reasons are a fixed set, one per way NVML can be missing.
func TestGPUAbsentReason(t *testing.T) {
	for err, want := range map[string]string{
		"nvml init: ERROR_LIBRARY_NOT_FOUND": "nvml_library_not_found",
		"nvml init: ERROR_DRIVER_NOT_LOADED": "driver_not_loaded",
		"nvml init: ERROR_NO_PERMISSION":     "no_permission",
		"nvml init: ERROR_UNKNOWN":           "nvml_init_failed",
		"no GPU visible to NVML":             "no_gpu",
	} {
		if got := gpuAbsentReason(err); got != want {
			t.Errorf("%q: %s, want %s", err, got, want)
		}
	}
}

// TestBinaryWithoutNVIDIADriver builds the real vllm_exporter binary twice
// (NVML, and -tags nonvml) and starts each beside a simulated vLLM on this
// machine, which has no NVIDIA driver, with the GPU collector in auto mode
// (the default) and forced on (--collector.gpu):
//   - auto: it serves the vLLM series, reports the GPU collector absent
//     with the reason (vllm_exporter_collector_absent{collector="gpu"}) and
//     no up series for it, so VLLMExporterCollectorDown cannot fire;
//   - forced: the collector is down (vllm_exporter_collector_up 0), which
//     tickets, and one warning says why (auto mode warns of nothing).
//
// None exports a vllm_gpu_* series, and all exit cleanly on SIGTERM.
// Skipped with -short, and where NVML initialises (a driver is installed).
func TestBinaryWithoutNVIDIADriver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the exporter binary")
	}
	if gpu.Available {
		// Only a failed Init is "no driver"; a driver without a visible GPU
		// logs differently.
		if s, _ := gpu.NewFromLibrary(gpu.Options{}, nil); s != nil && !strings.HasPrefix(s.Latest().Error, "nvml init:") {
			s.Close()
			t.Skip("NVML initialises here: this machine has an NVIDIA driver")
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the binary")
	}
	sim := vllmsimtest.Start(t, vllmsim.Config{Seed: 5, Scenario: "healthy", LoadGen: true})

	for _, b := range []struct {
		name   string
		tags   []string
		forced bool
		gpuUp  float64 // vllm_exporter_collector_up{collector="gpu"}; -1: absent
		// vllm_exporter_collector_absent{collector="gpu",reason=...} 1, or ""
		absent  string
		wantLog string
	}{
		{"nvml", nil, false, -1, "nvml_library_not_found", "no GPU collector on this host"},
		{"nvml-forced", nil, true, 0, "", "NVML is unavailable"},
		{"nonvml", []string{"-tags", "nonvml"}, false, -1, "built_without_nvml", "no GPU collector on this host"},
		{"nonvml-forced", []string{"-tags", "nonvml"}, true, 0, "", "this build has no NVML"},
	} {
		t.Run(b.name, func(t *testing.T) {
			if strings.HasPrefix(b.name, "nvml") && !gpu.Available {
				t.Skip("this toolchain builds without cgo")
			}
			bin := testutil.ExporterBinary(t) // the shared build: cgo, NVML
			if b.tags != nil {
				bin = filepath.Join(t.TempDir(), "vllm_exporter")
				args := append(append([]string{"build"}, b.tags...), "-o", bin, ".")
				if out, err := exec.Command(goBin, args...).CombinedOutput(); err != nil {
					t.Fatalf("go %v: %v\n%s", args, err, out)
				}
			}
			args := []string{"--vllm.url=" + sim.URL(), "--vllm.scrape-interval=200ms", "--collector.gpu.interval=50ms"}
			if b.forced {
				args = append(args, "--collector.gpu")
			}
			p := testutil.StartBinary(t, bin, args...)
			addr := p.Addr
			// 60 s bounds a broken run on a loaded machine, no timing assertion.
			waitFor := func(what string, cond func() bool) {
				t.Helper()
				p.Await(60*time.Second, what, func() (bool, string) { return cond(), "not yet" })
			}
			serving := func() bool {
				return testutil.ScrapeValue(addr, "vllm_up ") == 1 &&
					testutil.ScrapeValue(addr, `vllm_exporter_collector_up{collector="vllm"} `) == 1 &&
					testutil.ScrapeValue(addr, "vllm_requests_running{") >= 0 &&
					testutil.ScrapeValue(addr, `vllm_exporter_collector_up{collector="gpu"} `) == b.gpuUp &&
					(b.absent == "" && testutil.ScrapeValue(addr, `vllm_exporter_collector_absent{`) == -1 ||
						b.absent != "" && testutil.ScrapeValue(addr, `vllm_exporter_collector_absent{collector="gpu",reason="`+b.absent+`"} `) == 1)
			}
			waitFor("vLLM series and the GPU collector's state", serving)
			// Many GPU sampler intervals later (five scrapes of 200ms, twenty
			// sampler intervals) it still serves and says the same.
			scrapes := testutil.ScrapeValue(addr, "vllm_exporter_scrapes_total ")
			waitFor("five more scrapes", func() bool { return testutil.ScrapeValue(addr, "vllm_exporter_scrapes_total ") >= scrapes+5 })
			waitFor("a later scrape", serving)
			for _, name := range []string{"vllm_gpu_up{", "vllm_gpu_info{", "vllm_gpu_gpm_supported{"} {
				if v := testutil.ScrapeValue(addr, name); v != -1 {
					t.Errorf("%s exported without a driver: %v", name, v)
				}
			}
			p.Signal(syscall.SIGTERM) // waits for the exit; a non-zero one fails
			logs := p.Logs.String()
			if n := strings.Count(logs, b.wantLog); n != 1 {
				t.Fatalf("%q logged %d times, want once:\n%s", b.wantLog, n, logs)
			}
			for line := range strings.Lines(logs) {
				if !b.forced && strings.Contains(line, "level=warn") && strings.Contains(line, "component=gpu") {
					t.Errorf("auto mode warns about an absence it expects: %s", line)
				}
			}
		})
	}
}
