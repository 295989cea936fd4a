package main

import (
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// TestTuneRuntime: no heap profiling by default, Go's when
// --web.enable-pprof serves it; the GC percent is never touched (GOGC and
// GOMEMLIMIT are the environment's).
func TestTuneRuntime(t *testing.T) {
	gc, rate := debug.SetGCPercent(100), runtime.MemProfileRate
	t.Cleanup(func() { debug.SetGCPercent(gc); runtime.MemProfileRate = rate })

	for _, pct := range []int{100, 37} {
		debug.SetGCPercent(pct)
		runtime.MemProfileRate = 512 * 1024
		tuneRuntime(false)
		if got := debug.SetGCPercent(pct); got != pct {
			t.Errorf("GC percent %d before tuneRuntime, %d after: it must leave GC alone", pct, got)
		}
		if runtime.MemProfileRate != 0 {
			t.Errorf("without --web.enable-pprof: MemProfileRate %d, want 0", runtime.MemProfileRate)
		}
	}

	runtime.MemProfileRate = 512 * 1024
	tuneRuntime(true)
	if runtime.MemProfileRate != 512*1024 {
		t.Errorf("with --web.enable-pprof: MemProfileRate %d, want Go's default", runtime.MemProfileRate)
	}
}

// TestBinaryMemoryDefaults: the served binary runs with Go's GC default
// (GOGC 100) unless the environment says otherwise, and an operator's GOGC
// applies (go_gc_gogc_percent is among the runtime series
// --web.all-runtime-series brings back).
func TestBinaryMemoryDefaults(t *testing.T) {
	vllmSrv := fakeVLLM(t)
	if old, had := os.LookupEnv("GOGC"); had {
		os.Unsetenv("GOGC")
		t.Cleanup(func() { os.Setenv("GOGC", old) })
	}
	p := startBinary(t, "--vllm.url="+vllmSrv.URL, "--no-probe.enabled", "--web.all-runtime-series")
	p.WaitServing("/metrics", 200)
	if got, _ := p.Metrics().Value("go_gc_gogc_percent"); got != 100 {
		t.Errorf("GOGC unset: go_gc_gogc_percent %v, want Go's default 100", got)
	}

	t.Setenv("GOGC", "80")
	p = startBinary(t, "--vllm.url="+vllmSrv.URL, "--no-probe.enabled", "--web.all-runtime-series")
	p.WaitServing("/metrics", 200)
	if got, _ := p.Metrics().Value("go_gc_gogc_percent"); got != 80 {
		t.Errorf("GOGC=80: go_gc_gogc_percent %v, want 80", got)
	}
}

// TestBinaryLinksNoTypeChecker: every pod maps the sidecar's code, so a
// dependency that links Go's type checker and package loader (go/types,
// golang.org/x/tools/go/packages, as the OpenSLO SDK's validation does) costs
// each pod its code and init heap. Tests may use such libraries; the binary
// may not.
func TestBinaryLinksNoTypeChecker(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/prometheus/client_golang/prometheus") {
		t.Fatalf("go list -deps does not list the exporter's dependencies:\n%s", out)
	}
	for _, d := range deps {
		for _, heavy := range []string{"go/types", "golang.org/x/tools/", "github.com/OpenSLO/go-sdk/", "github.com/nobl9/govy/"} {
			if d == heavy || strings.HasPrefix(d, heavy) {
				t.Errorf("the exporter links %s", d)
			}
		}
	}
}
