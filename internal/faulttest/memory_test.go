package faulttest

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

// containerLimit is the memory limit the exporter must live in (the Helm
// chart's default); the image's GOMEMLIMIT is set for it.
const containerLimit = 64 << 20

// imageGOMEMLIMIT reads the GOMEMLIMIT the Dockerfile ships, so that the
// test runs the binary as the image does.
func imageGOMEMLIMIT(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(f, "GOMEMLIMIT="); ok {
			return v
		}
	}
	t.Fatal("the Dockerfile sets no GOMEMLIMIT")
	return ""
}

// statusKiB reads a field (VmHWM, VmRSS) of /proc/pid/status in KiB.
func statusKiB(t testing.TB, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestFaultMatrixPeakRSS runs the binary as the image runs it (its
// GOMEMLIMIT, default --vllm.max-body-bytes and --vllm.max-series) through
// the hostile-input matrix: an endless body, a gzip bomb, bodies of as many
// series the exporter reads as --vllm.max-series allows (of one model, of
// ever new names), one more than that, a 16 MiB label value, 500-byte label
// values on every sample up to the body limit, a config file at the size
// cap and one far above it. The kernel's high-water mark of the process's
// RSS (VmHWM) must stay under the 64 MiB container limit, and above the
// healthy baseline measured first in the same run by no more than
// cacheMargin (what the series cache may hold at the limits, plus the
// garbage the collector has not caught up with).
func TestFaultMatrixPeakRSS(t *testing.T) {
	const cacheMargin = 40 << 20
	sim, err := vllmsim.New(vllmsim.Config{VirtualClock: true, LoadGen: true, Seed: 5, DataParallelSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	sim.Advance(2 * time.Minute)
	healthy := sim.Metrics()

	junk := bytes.Repeat([]byte("python_gc_objects_collected_total{generation=\"0\"} 382.0\n"), 1<<10)
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	for range 64 << 20 / len(junk) {
		zw.Write(junk)
	}
	zw.Close()
	// Bodies whose every line is a series the exporter reads, n of them: of
	// one model (the worst case) and of ever new names.
	series := func(format string, n int) []byte {
		var b bytes.Buffer
		b.WriteString("# TYPE vllm:num_requests_running gauge\n")
		for i := range n {
			fmt.Fprintf(&b, format, i%64, i)
		}
		return b.Bytes()
	}
	oneModel := series("vllm:num_requests_running{engine=\"%d\",model_name=\"m\",replica=\"%d\"} 1\n", vllm.DefaultMaxSeries)
	rotating := series("vllm:num_requests_running{engine=\"%d\",model_name=\"m%d\"} 1\n", vllm.DefaultMaxSeries)
	tooMany := series("vllm:num_requests_running{engine=\"%d\",model_name=\"m\",replica=\"%d\"} 1\n", vllm.DefaultMaxSeries+1)
	var longLabels bytes.Buffer
	long := strings.Repeat("x", 500)
	longLabels.Write(healthy)
	for i := 0; longLabels.Len() < vllm.DefaultMaxBodyBytes-1<<20; i++ {
		for j := range 200 {
			fmt.Fprintf(&longLabels, "vllm:num_requests_waiting{engine=\"%d\",model_name=\"%s%d\"} 1\n", j, long, i*200+j)
		}
	}
	huge := append(append([]byte("vllm:num_requests_running{model_name=\""), bytes.Repeat([]byte("y"), 16<<20)...), "\"} 1\n"...)

	var mode atomic.Value
	mode.Store("healthy")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		switch mode.Load().(string) {
		case "healthy":
			w.Write(healthy)
		case "endless":
			for r.Context().Err() == nil {
				if _, err := w.Write(junk); err != nil {
					return
				}
			}
		case "gzip bomb":
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(bomb.Bytes())
		case "at limit, one model":
			w.Write(oneModel)
		case "at limit, rotating names":
			w.Write(rotating)
		case "over the series limit":
			w.Write(tooMany)
		case "long labels":
			w.Write(longLabels.Bytes())
		case "huge label":
			w.Write(huge)
			w.Write(healthy)
		}
	}))
	defer srv.Close()

	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfg, []byte("slos: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gomemlimit := imageGOMEMLIMIT(t)
	t.Setenv("GOMEMLIMIT", gomemlimit)
	// Info-level logs, as deployed: debug logging of 10 scrapes a second
	// would be the largest allocation of the run.
	p := &proc{Process: testutil.StartExporter(t, "--vllm.url="+srv.URL, "--vllm.scrape-interval=500ms",
		"--config.file="+cfg, "--web.enable-lifecycle"), t: t}
	p.WaitServing("/-/healthy", http.StatusOK)
	pid := p.Cmd.Process.Pid
	scrapes := func() float64 { v, _ := p.value("vllm_exporter_scrapes_total"); return v }
	waitScrapes := func(n float64) {
		from := scrapes()
		eventually(t, p, fmt.Sprintf("%v more scrapes", n), func() (bool, string) {
			v := scrapes()
			return v >= from+n, fmt.Sprint(v - from)
		})
	}
	p.waitValue("vllm_up", 1)
	waitScrapes(50)
	baseline := statusKiB(t, pid, "VmHWM")
	allowed := baseline + cacheMargin>>10
	t.Logf("GOMEMLIMIT=%s; healthy baseline peak RSS %.1f MiB, allowed %.1f MiB, container limit %d MiB",
		gomemlimit, float64(baseline)/1024, float64(allowed)/1024, containerLimit>>20)

	check := func(fault string) {
		t.Helper()
		hwm := statusKiB(t, pid, "VmHWM")
		t.Logf("%-24s peak RSS %.1f MiB (RSS now %.1f MiB)", fault, float64(hwm)/1024, float64(statusKiB(t, pid, "VmRSS"))/1024)
		if hwm > allowed || hwm<<10 >= containerLimit {
			t.Fatalf("%s: peak RSS %d KiB, over the baseline %d KiB + margin (%d KiB) or the %d MiB limit\n%s",
				fault, hwm, baseline, allowed, containerLimit>>20, p.Logs)
		}
		if code, _ := p.Get("/metrics"); code != http.StatusOK {
			t.Fatalf("%s: /metrics answered %d", fault, code)
		}
	}
	for _, c := range []struct {
		mode, reason string
	}{
		{"endless", "body_too_large"}, {"gzip bomb", "body_too_large"}, {"huge label", "body_too_large"},
		{"over the series limit", "too_many_series"},
		{"at limit, one model", ""}, {"at limit, rotating names", ""}, {"long labels", ""},
	} {
		mode.Store(c.mode)
		if c.reason != "" {
			before, _ := p.Metrics().Value("vllm_exporter_scrape_errors_total", "reason", c.reason)
			eventually(t, p, c.mode+" cut", func() (bool, string) {
				v, _ := p.Metrics().Value("vllm_exporter_scrape_errors_total", "reason", c.reason)
				return v >= before+5, fmt.Sprint(v - before)
			})
		} else {
			// Served, and never refused for its size (a scrape of a few MB
			// may time out on a loaded machine: the timeout is the interval).
			var size [2]float64
			for i, r := range []string{"body_too_large", "too_many_series"} {
				size[i], _ = p.Metrics().Value("vllm_exporter_scrape_errors_total", "reason", r)
			}
			waitScrapes(5)
			eventually(t, p, c.mode+" served", func() (bool, string) {
				v, _ := p.value("vllm_up")
				return v == 1, fmt.Sprint("vllm_up ", v)
			})
			for i, r := range []string{"body_too_large", "too_many_series"} {
				if v, _ := p.Metrics().Value("vllm_exporter_scrape_errors_total", "reason", r); v != size[i] {
					t.Fatalf("%s: a body within the limits failed %v times with %s\n%s", c.mode, v-size[i], r, p.Logs)
				}
			}
		}
		check(c.mode)
	}

	// Config files: one at the 1 MiB cap (valid, reloaded), one of 64 MiB
	// (refused without being read past the cap).
	mode.Store("healthy")
	big := []byte("slos: []\n")
	pad := "# " + strings.Repeat("padding ", 12) + "\n"
	for len(big)+len(pad) <= 1<<20 {
		big = append(big, pad...)
	}
	reload := func(content []byte, want int) {
		t.Helper()
		if err := os.WriteFile(cfg+".tmp", content, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(cfg+".tmp", cfg); err != nil {
			t.Fatal(err)
		}
		resp, err := client.Post(p.Base+"/-/reload", "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("reload of a %d-byte config: %d, want %d", len(content), resp.StatusCode, want)
		}
	}
	reload(big, http.StatusOK)
	check("config 1 MiB")
	huge64 := bytes.Repeat([]byte(pad), 64<<20/len(pad))
	reload(append([]byte("slos: []\n"), huge64...), http.StatusInternalServerError)
	check("config 64MiB")
	if !strings.Contains(p.Logs.String(), "cap") {
		t.Fatalf("the oversize config's error does not mention the cap:\n%s", p.Logs)
	}
}
