// Package testutil holds small helpers shared by the exporter's tests:
// finding promtool (skip locally, fail under CI=true) and picking a free
// loopback address for a server a test starts, reading one value from a
// /metrics page, and a goroutine-safe buffer for logs.
package testutil

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Promtool returns the path of the promtool binary. When it is not on PATH
// the test is skipped, except under CI=true where that is a failure (CI must
// run every rule and exposition check).
func Promtool(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found (required under CI=true): install Debian's prometheus package")
		}
		t.Skip("promtool not found")
	}
	return p
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
