package vllm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
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

// TestTwiceTheLargestBodyScrapes: the body of 16 models x 16 engines, twice
// the 16 x 8 body whose parsed lines used to sit 4 % under the parsed-lines
// cap (a cliff: a slightly larger server failed every scrape), scrapes at
// the default limits with every model and engine, and its parse estimate
// leaves a fifth of the budget free.
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
	var dst bytes.Buffer
	st, err := readNeeded(bufio.NewReaderSize(nil, maxLineBytes), bytes.NewReader(double), DefaultMaxBodyBytes, &dst, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	budget := parseBudget(DefaultMaxBodyBytes)
	t.Logf("16x16 body %.1f MB (16x8: %.1f MB), kept %.1f MB, parse estimate %.1f MB of the %.1f MB budget",
		float64(len(double))/1e6, float64(len(base))/1e6, float64(dst.Len())/1e6, float64(st.cost)/1e6, float64(budget)/1e6)
	if st.cost > budget*4/5 {
		t.Fatalf("the 16x16 body takes %d of the %d parse budget: less than a fifth left", st.cost, budget)
	}
}

// TestScrapeOverALimitNamesIt: a body over --vllm.max-body-bytes fails with
// reason body_too_large, one within it whose lines would cost more than
// the parse budget with parse_too_large; each error says which limit and
// by how much, and the next good body scrapes again.
func TestScrapeOverALimitNamesIt(t *testing.T) {
	const limit = 4 << 20 // parse budget 6 MiB
	good := fixture(t, "vllm-main-2026-08-v1.txt")
	// Short single-model samples: the costliest lines to parse per byte.
	short := neededLines(3 << 20)
	srv := newFakeVLLM(t, nil, "text/plain")
	var logs bytes.Buffer
	s := New(Options{URL: srv.URL, MaxBodyBytes: limit}, log.NewLogfmtLogger(&logs))
	for i, c := range []struct {
		body   []byte
		reason string
		says   string
	}{
		{bytes.Repeat(good, limit/len(good)+1), ReasonBodyTooLarge, "body exceeds --vllm.max-body-bytes (4194304 bytes)"},
		{short, ReasonParseTooLarge, "would take more memory to parse than the parse budget (1.5 x --vllm.max-body-bytes)"},
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
}

// TestParseCostBoundsParseMemory: for bodies of every shape a hostile or
// large server can send (short samples of one model, many labels per
// sample, long label values, histograms with many buckets, a real 16 x 8
// body), the streaming estimate is at least the memory the parse holds
// (the kept lines plus the parsed families, measured as live heap), so the
// parse budget bounds memory; for a real body it is within 1.5 times of
// it, so the budget does not refuse real servers for nothing. (The
// constants were calibrated on these shapes with a margin of 10-20 %.)
func TestParseCostBoundsParseMemory(t *testing.T) {
	lines := func(n int, f func(i int) string) []byte {
		var b bytes.Buffer
		for i := range n {
			b.WriteString(f(i))
		}
		return b.Bytes()
	}
	long := strings.Repeat("x", 500)
	var many strings.Builder
	for i := range 40 {
		fmt.Fprintf(&many, ",l%d=\"v\"", i)
	}
	shapes := []struct {
		name string
		body []byte
		real bool
	}{
		{"short samples of one model", neededLines(1 << 20), false},
		{"many labels per sample", append([]byte("# TYPE vllm:num_requests_running gauge\n"), lines(4000, func(i int) string {
			return fmt.Sprintf("vllm:num_requests_running{engine=\"%d\",model_name=\"m\"%s} 1\n", i, many.String())
		})...), false},
		{"long label values", append([]byte("# TYPE vllm:num_requests_waiting gauge\n"), lines(2000, func(i int) string {
			return fmt.Sprintf("vllm:num_requests_waiting{engine=\"%d\",model_name=\"%s%d\"} 1\n", i, long, i)
		})...), false},
		{"histogram of many buckets", append([]byte("# TYPE vllm:time_to_first_token_seconds histogram\n"), lines(20000, func(i int) string {
			return fmt.Sprintf("vllm:time_to_first_token_seconds_bucket{engine=\"%d\",le=\"%d\",model_name=\"m\"} %d\n", i/500, i%500, i)
		})...), false},
		{"simulator, 16 models x 8 engines", simBody(t, 16, 8), true},
	}
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			var dst bytes.Buffer
			st, err := readNeeded(bufio.NewReaderSize(nil, maxLineBytes), bytes.NewReader(sh.body), 1<<30, &dst, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if e := EstimateParseCost(sh.body); e != st.cost {
				t.Fatalf("EstimateParseCost %d, the scraper's estimate %d", e, st.cost)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			e, err := parseFiltered(dst.Bytes(), "text/plain", &st, nil)
			if err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			held := int64(after.HeapAlloc) - int64(before.HeapAlloc) + int64(dst.Len())
			runtime.KeepAlive(e)
			t.Logf("kept %d bytes, estimate %d, held %d (estimate/held %.2f)", dst.Len(), st.cost, held, float64(st.cost)/float64(held))
			if st.cost < held {
				t.Fatalf("estimate %d below the %d bytes the parse holds", st.cost, held)
			}
			if sh.real && float64(st.cost) > 1.5*float64(held) {
				t.Fatalf("estimate %d over 1.5x the %d bytes a real body's parse holds", st.cost, held)
			}
		})
	}
}
