package main

import (
	"errors"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestTuneRuntime: GOGC 50 and no heap profiling by default; an operator's
// $GOGC and --web.enable-pprof keep Go's behaviour.
func TestTuneRuntime(t *testing.T) {
	gc, rate := debug.SetGCPercent(100), runtime.MemProfileRate
	t.Cleanup(func() { debug.SetGCPercent(gc); runtime.MemProfileRate = rate })

	if old, had := os.LookupEnv("GOGC"); had {
		os.Unsetenv("GOGC")
		t.Cleanup(func() { os.Setenv("GOGC", old) })
	}
	runtime.MemProfileRate = 512 * 1024
	tuneRuntime(false)
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("GOGC unset: GC percent %d, want %d", got, defaultGCPercent)
	}
	if runtime.MemProfileRate != 0 {
		t.Errorf("without --web.enable-pprof: MemProfileRate %d, want 0", runtime.MemProfileRate)
	}

	t.Setenv("GOGC", "100")
	runtime.MemProfileRate = 512 * 1024
	tuneRuntime(true)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=100 set: GC percent %d, want the operator's 100", got)
	}
	if runtime.MemProfileRate != 512*1024 {
		t.Errorf("with --web.enable-pprof: MemProfileRate %d, want Go's default", runtime.MemProfileRate)
	}
}

// TestReleaseBinaryPages: after MADV_PAGEOUT the test binary's resident
// file-backed memory is lower than before (Linux 5.4+).
func TestReleaseBinaryPages(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("MADV_PAGEOUT is Linux-only")
	}
	before, after, err := releaseBinaryPages()
	if errors.Is(err, syscall.EINVAL) {
		t.Skipf("kernel without MADV_PAGEOUT (before 5.4): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if before <= 0 || after < 0 || after >= before {
		t.Fatalf("RssFile %d KiB before, %d KiB after: want it lower after", before, after)
	}
	t.Logf("RssFile %d KiB -> %d KiB", before, after)
}

// TestBinaryMemoryDefaults: the served binary runs with GOGC 50 unless the
// environment says otherwise, and releases its unused executable pages.
func TestBinaryMemoryDefaults(t *testing.T) {
	vllmSrv := fakeVLLM(t)
	if old, had := os.LookupEnv("GOGC"); had {
		os.Unsetenv("GOGC")
		t.Cleanup(func() { os.Setenv("GOGC", old) })
	}
	p := startBinary(t, "--vllm.url="+vllmSrv.URL, "--no-probe.enabled", "--log.level=debug")
	p.WaitServing("/metrics", 200)
	if got, _ := p.Metrics().Value("go_gc_gogc_percent"); got != defaultGCPercent {
		t.Errorf("go_gc_gogc_percent %v, want %d", got, defaultGCPercent)
	}
	m := regexp.MustCompile(`msg="released unused executable pages" rss_file_kib_before=(\d+) rss_file_kib_after=(\d+)`).
		FindStringSubmatch(p.Logs.String())
	if m == nil {
		t.Fatalf("no page release logged:\n%s", p.Logs.String())
	}
	before, _ := strconv.Atoi(m[1])
	after, _ := strconv.Atoi(m[2])
	if after >= before {
		t.Errorf("RssFile %d KiB before, %d KiB after the release", before, after)
	}

	t.Setenv("GOGC", "80")
	p = startBinary(t, "--vllm.url="+vllmSrv.URL, "--no-probe.enabled", "--log.level=debug")
	p.WaitServing("/metrics", 200)
	if got, _ := p.Metrics().Value("go_gc_gogc_percent"); got != 80 {
		t.Errorf("GOGC=80: go_gc_gogc_percent %v", got)
	}
	// The release does not depend on GOGC; it is logged either way.
	if !strings.Contains(p.Logs.String(), "released unused executable pages") {
		t.Errorf("GOGC=80: no page release logged:\n%s", p.Logs.String())
	}
}
