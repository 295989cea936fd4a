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
	if !*f.enabled || *f.interval != 5*time.Second {
		t.Fatalf("defaults: enabled=%v interval=%v", *f.enabled, *f.interval)
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

// TestSetupGPUHere runs setupGPU with the real library on this machine. In
// a build without NVML there is no collector; with NVML and no driver the
// collector is registered and reports itself down; on a GPU host it is up.
func TestSetupGPUHere(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	health := collector.NewHealth()
	reg.MustRegister(health)
	s, err := setupGPU(parseGPUFlags(t), reg, health, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	if !gpu.Available {
		if s != nil {
			t.Fatal("sampler in a build without NVML")
		}
		return
	}
	if s == nil {
		t.Fatal("no sampler in an NVML build")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Run(ctx)
	if s.Latest() == nil {
		s.SampleOnce(time.Now())
	}
	want := "0"
	if s.Up() {
		want = "1"
	}
	exp := `
# HELP vllm_exporter_collector_up 1 if the collector's last run succeeded, 0 if it failed.
# TYPE vllm_exporter_collector_up gauge
vllm_exporter_collector_up{collector="gpu"} ` + want + "\n"
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(exp), "vllm_exporter_collector_up"); err != nil {
		t.Fatal(err)
	}
}

// TestBinaryWithoutNVIDIADriver builds the real vllm_exporter binary twice
// and starts each beside a simulated vLLM on this machine, which has no
// NVIDIA driver:
//   - the NVML build, GPU collector on (the default): it serves the vLLM
//     series, says the GPU collector is down, logs one NVML warning and
//     keeps running through many sampler intervals;
//   - the -tags nonvml build (no cgo needed): it has no GPU collector at all
//     (no collector="gpu" series) and serves the same vLLM series.
//
// Neither exports a vllm_gpu_* series, and both exit cleanly on SIGTERM.
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
	sim, err := vllmsim.New(vllmsim.Config{Seed: 5, Scenario: "healthy", LoadGen: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(); err != nil {
		t.Fatal(err)
	}
	defer sim.Close()

	for _, b := range []struct {
		name    string
		tags    []string
		gpuUp   float64 // vllm_exporter_collector_up{collector="gpu"}; -1: absent
		wantLog string
	}{
		{"nvml", nil, 0, "NVML is unavailable"},
		{"nonvml", []string{"-tags", "nonvml"}, -1, "no GPU collector in this build"},
	} {
		t.Run(b.name, func(t *testing.T) {
			if b.name == "nvml" && !gpu.Available {
				t.Skip("this toolchain builds without cgo")
			}
			bin := filepath.Join(t.TempDir(), "vllm_exporter")
			args := append(append([]string{"build"}, b.tags...), "-o", bin, ".")
			if out, err := exec.Command(goBin, args...).CombinedOutput(); err != nil {
				t.Fatalf("go %v: %v\n%s", args, err, out)
			}
			addr := testutil.FreeAddr(t)
			cmd := exec.Command(bin, "--vllm.url="+sim.URL(), "--vllm.scrape-interval=200ms",
				"--collector.gpu.interval=50ms", "--web.listen-address="+addr)
			var stderr testutil.SyncBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			stopped := false
			defer func() {
				if !stopped {
					cmd.Process.Kill()
					<-exited
				}
			}()
			waitFor := func(what string, cond func() bool) {
				t.Helper()
				deadline := time.Now().Add(60 * time.Second)
				for !cond() {
					select {
					case err := <-exited:
						stopped = true
						t.Fatalf("exporter exited while waiting for %s: %v\n%s", what, err, stderr.String())
					default:
					}
					if time.Now().After(deadline) {
						t.Fatalf("timed out waiting for %s\n%s", what, stderr.String())
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			serving := func() bool {
				return testutil.ScrapeValue(addr, "vllm_up ") == 1 &&
					testutil.ScrapeValue(addr, `vllm_exporter_collector_up{collector="vllm"} `) == 1 &&
					testutil.ScrapeValue(addr, "vllm_requests_running{") >= 0 &&
					testutil.ScrapeValue(addr, `vllm_exporter_collector_up{collector="gpu"} `) == b.gpuUp
			}
			waitFor("vLLM series and the GPU collector's state", serving)
			// Many GPU sampler intervals later it still serves and says the same.
			time.Sleep(time.Second)
			waitFor("a later scrape", serving)
			for _, name := range []string{"vllm_gpu_up{", "vllm_gpu_info{", "vllm_gpu_gpm_supported{"} {
				if v := testutil.ScrapeValue(addr, name); v != -1 {
					t.Errorf("%s exported without a driver: %v", name, v)
				}
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				stopped = true
				if err != nil {
					t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no exit 30s after SIGTERM")
			}
			logs := stderr.String()
			if n := strings.Count(logs, b.wantLog); n != 1 {
				t.Fatalf("%q logged %d times, want once:\n%s", b.wantLog, n, logs)
			}
		})
	}
}
