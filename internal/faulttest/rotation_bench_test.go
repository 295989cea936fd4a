package faulttest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// BenchmarkRotationRSS is the model-name rotation drill against the binary,
// as the image runs it (its GOMEMLIMIT, default flags): vLLM's model names
// rotate (84 new names on every scrape, beside one real model) for
// ROTATION_SECONDS (default 60; the drill is 600), then only the
// real model is served again. It reports the peak RSS (VmHWM), the most
// series /metrics held during the rotation, the baseline series count and
// the names rotated. With ROTATION_IDLE_TIMEOUT (a duration) the exporter
// runs with that --vllm.model-idle-timeout instead of the default hour, and
// the drill waits it out after the rotation to report the series count once
// the rotated names are evicted. Run it with scripts/rotation.sh; it is a
// benchmark, not a test, because it takes real minutes.
func BenchmarkRotationRSS(b *testing.B) {
	secs := 60
	if v, err := strconv.Atoi(os.Getenv("ROTATION_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	var idle time.Duration
	if v := os.Getenv("ROTATION_IDLE_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("ROTATION_IDLE_TIMEOUT=%q: want a positive duration", v)
		}
		idle = d
	}
	const real = "meta-llama/Llama-3.1-8B-Instruct"
	var mu sync.Mutex
	models := []string{real}
	next, served := 0, 0.0
	rotate := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if rotate {
			models = models[:1]
			for range 84 {
				models = append(models, fmt.Sprintf("rotating-adapter-%05d", next))
				next++
			}
		} else {
			models = models[:1]
		}
		served += 10
		body := testutil.ModelsBody(models, served)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(body)
	}))
	defer srv.Close()

	for range b.N {
		b.Setenv("GOMEMLIMIT", imageGOMEMLIMIT(b))
		args := []string{"--vllm.url=" + srv.URL}
		if idle > 0 {
			args = append(args, "--vllm.model-idle-timeout="+idle.String())
		}
		p := testutil.StartExporter(b, args...)
		p.WaitServing("/-/healthy", http.StatusOK)
		// seriesSet is /metrics' series (name and labels, no value).
		seriesSet := func() map[string]bool {
			_, text := p.Get("/metrics")
			set := map[string]bool{}
			for _, l := range strings.Split(text, "\n") {
				if l != "" && !strings.HasPrefix(l, "#") {
					set[l[:max(strings.LastIndexByte(l, ' '), 0)]] = true
				}
			}
			return set
		}
		series := func() int { return len(seriesSet()) }
		// A benchmark of the real binary over wall time (the sleeps are what
		// it measures over), opt-in; no clock to inject across a process.
		time.Sleep(30 * time.Second) // windows and SLO series of the real model
		baselineSet := seriesSet()
		baseline := len(baselineSet)
		mu.Lock()
		rotate = true
		mu.Unlock()
		most := 0
		for end := time.Now().Add(time.Duration(secs) * time.Second); time.Now().Before(end); time.Sleep(5 * time.Second) {
			most = max(most, series())
		}
		mu.Lock()
		rotate = false
		rotated := next
		mu.Unlock()
		time.Sleep(10 * time.Second)
		after := series()
		hwm := statusKiB(b, p.Cmd.Process.Pid, "VmHWM")
		b.ReportMetric(float64(hwm)/1024, "peak-RSS-MiB")
		b.ReportMetric(float64(most), "max-series")
		b.ReportMetric(float64(baseline), "baseline-series")
		b.ReportMetric(float64(after), "series-after")
		b.ReportMetric(float64(rotated), "names-rotated")
		b.Logf("%ds of rotation, %d names: peak RSS %.1f MiB, series baseline %d, at most %d, 10 s after %d "+
			"(back to the baseline after --vllm.model-idle-timeout)", secs, rotated, float64(hwm)/1024, baseline, most, after)
		if idle > 0 {
			// Eviction runs on a successful scrape once a name has been
			// absent for the timeout: wait it out plus a few scrapes.
			time.Sleep(idle + 20*time.Second)
			evictedSet := seriesSet()
			evicted := len(evictedSet)
			rotatedLeft := 0
			for k := range evictedSet {
				if strings.Contains(k, "rotating-adapter-") {
					rotatedLeft++
				}
			}
			b.ReportMetric(float64(rotatedLeft), "rotated-name-series-after-idle-timeout")
			// What differs from the baseline, for the reader: the real
			// model's series that appeared since (a window filling), never
			// a rotated name.
			for k := range evictedSet {
				if !baselineSet[k] {
					b.Logf("rotation: new since the baseline: %s", k)
				}
			}
			for k := range baselineSet {
				if !evictedSet[k] {
					b.Logf("rotation: gone since the baseline: %s", k)
				}
			}
			b.ReportMetric(float64(evicted), "series-after-idle-timeout")
			b.Logf("rotation: %s after the rotation (--vllm.model-idle-timeout=%s): %d series (%d of them naming a rotated model), baseline %d, RSS now %.1f MiB",
				idle+30*time.Second, idle, evicted, rotatedLeft, baseline, float64(statusKiB(b, p.Cmd.Process.Pid, "VmRSS"))/1024)
		}
		p.Cmd.Process.Kill()
		p.Wait(time.Minute)
	}
}
