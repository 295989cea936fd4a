// Package testutil holds small helpers shared by the exporter's tests:
// the pinned promtool, writing and running promtool rule tests and picking a free
// loopback address for a server a test starts, reading one value from a
// /metrics page, and a goroutine-safe buffer for logs.
package testutil

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/toolbuild"
)

// Promtool returns promtool of the default pinned Prometheus (3.16), built
// by the test setup from internal/tools and cached (toolbuild.Require:
// skipped locally when it cannot be built, a failure under CI=true).
func Promtool(t testing.TB) string {
	t.Helper()
	return toolbuild.Require(t, "promtool", "")
}

// FreeAddr returns a loopback "127.0.0.1:port" that was free a moment ago,
// for a server started by another process (a server in the test process
// should listen on 127.0.0.1:0 itself).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// ScrapeValue fetches http://addr/metrics and returns the value of the first
// sample line that starts with prefix (a metric name with its labels as the
// text exposition writes them, followed by a space), or -1 when the scrape
// fails or no line matches.
func ScrapeValue(addr, prefix string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, prefix) {
			v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers, e.g. the log of
// a component under test that logs from several goroutines, or a child
// process's stderr read while it runs.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ModelsBody is a V1 /metrics body of the families the shipped SLOs read,
// one series set per model name, n requests finished per model: for tests
// that rotate model names (a fake vLLM whose names change per scrape). Each
// model has a TTFT histogram (one request in ten over 1 s) and finished
// requests (one in a hundred aborted).
func ModelsBody(models []string, n float64) []byte {
	var b strings.Builder
	family := func(name, typ string, line func(m string)) {
		fmt.Fprintf(&b, "# TYPE %s %s\n", name, typ)
		for _, m := range models {
			line(m)
		}
	}
	family("vllm:num_requests_running", "gauge", func(m string) {
		fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"0\",model_name=%q} 3\n", m)
	})
	family("vllm:kv_cache_usage_perc", "gauge", func(m string) {
		fmt.Fprintf(&b, "vllm:kv_cache_usage_perc{engine=\"0\",model_name=%q} 0.25\n", m)
	})
	family("vllm:request_success_total", "counter", func(m string) {
		fmt.Fprintf(&b, "vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=%q} %g\n", m, n*0.99)
		fmt.Fprintf(&b, "vllm:request_success_total{engine=\"0\",finished_reason=\"abort\",model_name=%q} %g\n", m, n*0.01)
	})
	family("vllm:time_to_first_token_seconds", "histogram", func(m string) {
		for _, le := range []struct {
			le   string
			frac float64
		}{{"0.25", 0.5}, {"1.0", 0.9}, {"2.5", 1}, {"+Inf", 1}} {
			fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=%q,model_name=%q} %g\n", le.le, m, n*le.frac)
		}
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=%q} %g\n", m, n)
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=%q} %g\n", m, n*0.4)
	})
	return []byte(b.String())
}

// Log is a list that a test server's handlers append to while the test
// reads it; safe for concurrent use. The zero value is empty.
type Log[T any] struct {
	mu    sync.Mutex
	items []T
}

// Add appends v.
func (l *Log[T]) Add(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, v)
}

// All is a copy of what was added, in order.
func (l *Log[T]) All() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]T(nil), l.items...)
}
