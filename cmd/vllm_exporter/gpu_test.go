package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-exporter/vllm_exporter/collector"
	"github.com/vllm-exporter/vllm_exporter/collector/gpu"
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
	if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "vllm_exporter_collector_up"); err != nil {
		t.Fatal(err)
	}
}
