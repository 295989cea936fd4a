package vllm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

// simBody is the simulated vLLM's body for models x engines, after a few
// seconds of traffic (every family, histogram and bucket is present from
// the start; the traffic only fills values).
func simBody(t testing.TB, models, engines int) []byte {
	t.Helper()
	var names []string
	for i := range models {
		names = append(names, fmt.Sprintf("model-%d", i))
	}
	sim, err := vllmsim.New(vllmsim.Config{VirtualClock: true, LoadGen: true, Seed: 5, Models: names, DataParallelSize: engines})
	if err != nil {
		t.Fatal(err)
	}
	sim.Advance(10 * time.Second)
	return sim.Metrics()
}

// streamTransport answers every request with a fresh body from newBody,
// in-process, so that what a scrape allocates is the scraper's alone.
type streamTransport func() (io.Reader, http.Header)

func (f streamTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	b, h := f()
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(b), Header: h, Request: r, ContentLength: -1}, nil
}

// repeatReader repeats line forever: an endless body.
type repeatReader struct {
	line []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.line[r.off:])
		n += c
		r.off = (r.off + c) % len(r.line)
	}
	return n, nil
}

// readSeries is a body of n distinct series of a family the exporter
// reads, all of one model: each costs a place in the series cache.
func readSeries(n int) []byte {
	var b bytes.Buffer
	b.WriteString("# TYPE vllm:num_requests_running gauge\n")
	for i := range n {
		fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"%d\",model_name=\"m\"} 1\n", i)
	}
	return b.Bytes()
}

// TestTwiceTheLargestBodyScrapes: the body of 16 models x 16 engines
// scrapes at the default limits with every model and engine, its series
// leaving more than a third of --vllm.max-series free.
func TestTwiceTheLargestBodyScrapes(t *testing.T) {
	base, double := simBody(t, 16, 8), simBody(t, 16, 16)
	if r := float64(len(double)) / float64(len(base)); r < 1.9 {
		t.Fatalf("16x16 body %d bytes is only %.2fx the 16x8 body", len(double), r)
	}
	s := New(Options{URL: "http://vllm.test", Client: &http.Client{Transport: streamTransport(func() (io.Reader, http.Header) {
		return bytes.NewReader(double), http.Header{"Content-Type": {"text/plain; version=0.0.4"}}
	})}}, nil)
	s.ScrapeOnce(context.Background(), t0)
	l := s.Latest()
	if !l.Up {
		t.Fatalf("a %d-byte body (16 models x 16 engines) failed at the default limits: %s", len(double), l.Error)
	}
	if len(l.Models) != 16 {
		t.Fatalf("%d models, want 16", len(l.Models))
	}
	for name, m := range l.Models {
		if len(m.PerEngine) != 16 {
			t.Fatalf("model %s: %d engines, want 16", name, len(m.PerEngine))
		}
	}
	n := len(s.scan.series)
	t.Logf("16x16 body %.1f MB: %d series read of the %d allowed", float64(len(double))/1e6, n, DefaultMaxSeries)
	if n > DefaultMaxSeries*2/3 {
		t.Fatalf("the 16x16 body's %d series take more than two thirds of --vllm.max-series (%d)", n, DefaultMaxSeries)
	}
}

// TestScrapeOverALimitNamesIt: a body over --vllm.max-body-bytes fails with
// reason body_too_large, one with more series than --vllm.max-series with
// too_many_series; each error says which limit, and the next good body
// scrapes again. A line over the line bound is skipped and counted.
func TestScrapeOverALimitNamesIt(t *testing.T) {
	const limit = 4 << 20
	good := fixture(t, "vllm-main-2026-08-v1.txt")
	srv := newFakeVLLM(t, nil, "text/plain")
	var logs bytes.Buffer
	s := New(Options{URL: srv.URL, MaxBodyBytes: limit, MaxSeries: 1000}, log.NewLogfmtLogger(&logs))
	long := append([]byte(`vllm:num_requests_running{model_name="m",x="`), bytes.Repeat([]byte("y"), maxLineBytes)...)
	for i, c := range []struct {
		body   []byte
		reason string
		says   string
	}{
		{bytes.Repeat(good, limit/len(good)+1), ReasonBodyTooLarge, "body exceeds --vllm.max-body-bytes (4194304 bytes)"},
		{readSeries(1001), ReasonTooManySeries, "more series of the families the exporter reads than --vllm.max-series (1000)"},
		{append(append(long, "\"} 1\n"...), good...), "", ""},
		{good, "", ""},
	} {
		srv.set(c.body, nil)
		s.ScrapeOnce(context.Background(), t0.Add(time.Duration(i)*5*time.Second))
		if l := s.Latest(); l.Error != c.reason || l.Up != (c.reason == "") {
			t.Fatalf("body %d (%d bytes): up %v reason %q, want %q", i, len(c.body), l.Up, l.Error, c.reason)
		}
		if c.says != "" && !strings.Contains(logs.String(), c.says) {
			t.Fatalf("body %d: the log does not say %q:\n%s", i, c.says, logs.String())
		}
		if c.reason != "" && s.errors[c.reason] != 1 {
			t.Fatalf("scrape errors %v, want one %s", s.errors, c.reason)
		}
	}
	if s.dropped[DropLineTooLong] != 1 || s.Latest().Models[llama] == nil {
		t.Fatalf("line_too_long drops %v, models %v: the long line is skipped, the rest read", s.dropped, s.Latest().Models)
	}
}

// allocatedBy returns the bytes f allocates, with the collector off so that
// the figure is exact: an upper bound of the heap f can need at its peak.
func allocatedBy(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.GC()
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestHostileBodiesCostBoundedMemory: an endless body, a gzip bomb and a
// 10 MB label value each cost a scrape the reading of --vllm.max-body-bytes
// and little memory; a body of series up to --vllm.max-series costs about
// its series.
func TestHostileBodiesCostBoundedMemory(t *testing.T) {
	const limit = 4 << 20
	plain := http.Header{"Content-Type": {"text/plain; version=0.0.4"}}
	gz := http.Header{"Content-Type": {"text/plain; version=0.0.4"}, "Content-Encoding": {"gzip"}}
	junk := []byte("python_gc_objects_collected_total{generation=\"0\"} 382.0\n")
	bomb := gzipped(t, bytes.Repeat(junk, 4*limit/len(junk))) // 16 MiB compressed to a few KB
	huge := append(append([]byte("vllm:num_requests_running{model_name=\""), bytes.Repeat([]byte("x"), 10<<20)...), "\"} 1\n"...)
	full := readSeries(10_000)
	// Fixed costs: the gzip state, the failed snapshot.
	const fixed = 256 << 10
	for _, f := range []struct {
		name   string
		body   func() (io.Reader, http.Header)
		reason string
		most   uint64 // the allocation allowed for one scrape
	}{
		{"endless body of families not read", func() (io.Reader, http.Header) { return &repeatReader{line: junk}, plain }, ReasonBodyTooLarge, fixed},
		{"gzip bomb", func() (io.Reader, http.Header) { return bytes.NewReader(bomb), gz }, ReasonBodyTooLarge, fixed},
		{"10 MB label value", func() (io.Reader, http.Header) { return bytes.NewReader(huge), plain }, ReasonBodyTooLarge, fixed},
		{"endless body of one series", func() (io.Reader, http.Header) {
			return &repeatReader{line: []byte("vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1\n")}, plain
		}, ReasonBodyTooLarge, fixed},
		// New series each scrape: each is parsed and cached once.
		{"10,000 series, new at each scrape", func() (io.Reader, http.Header) {
			return bytes.NewReader(bytes.ReplaceAll(full, []byte(`engine="`), []byte(fmt.Sprintf(`engine="%d-`, time.Now().UnixNano())))), plain
		}, "", fixed + 1024*10_000},
	} {
		t.Run(f.name, func(t *testing.T) {
			s := New(Options{URL: "http://vllm.test", MaxBodyBytes: limit, Client: &http.Client{Transport: streamTransport(f.body)}}, nil)
			s.ScrapeOnce(context.Background(), t0) // warm: first-use allocations
			n := allocatedBy(func() { s.ScrapeOnce(context.Background(), t0.Add(5*time.Second)) })
			if l := s.Latest(); l.Up != (f.reason == "") || l.Error != f.reason {
				t.Fatalf("up %v reason %q, want %q", l.Up, l.Error, f.reason)
			}
			t.Logf("allocated %d KiB in one scrape (allowed %d KiB)", n>>10, f.most>>10)
			if n > f.most {
				t.Fatalf("one scrape allocated %d bytes, more than %d", n, f.most)
			}
		})
	}
}
