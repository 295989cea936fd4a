package vllm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

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

// neededLines is a well-formed body of n bytes, all lines of a family the
// exporter parses, of one model (so the model bound does not thin them):
// the worst case for the parser's memory.
func neededLines(n int) []byte {
	var b bytes.Buffer
	b.WriteString("# TYPE vllm:num_requests_running gauge\n")
	for i := 0; ; i++ {
		line := fmt.Sprintf("vllm:num_requests_running{engine=\"%d\",model_name=\"m\"} 1\n", i)
		if b.Len()+len(line) > n {
			return b.Bytes()
		}
		b.WriteString(line)
	}
}

// neededLinesCosting is neededLines up to an estimated parse cost
// (parseCost) of at most budget: a body at the parse budget.
func neededLinesCosting(budget int64) []byte {
	var b bytes.Buffer
	var c parseCost
	head := "# TYPE vllm:num_requests_running gauge\n"
	b.WriteString(head)
	c.add([]byte(head))
	for i := 0; ; i++ {
		line := fmt.Sprintf("vllm:num_requests_running{engine=\"%d\",model_name=\"m\"} 1\n", i)
		if c.add([]byte(line)); c.total > budget {
			return b.Bytes()
		}
		b.WriteString(line)
	}
}

// TestScrapeBufferBetweenScrapes: between scrapes of bodies read whole
// (OpenMetrics, here) the scraper holds no large kept-lines buffer (the
// kept lines are read only during a scrape), and the next scrape of a body
// that size allocates one buffer for it, not the doublings of growing one;
// a small body's buffer is reused. A body that streams into the parse
// cache needs a buffer of its largest part at every scrape: that one is
// held, and a scrape allocates none.
func TestScrapeBufferBetweenScrapes(t *testing.T) {
	body := neededLines(1100 << 10) // growing by doubling would allocate about 4 MiB
	small := neededLines(keepBufferBytes / 4)
	serve := body
	whole := http.Header{"Content-Type": {"application/openmetrics-text; version=1.0.0; charset=utf-8"}}
	header := whole
	s := New(Options{URL: "http://vllm.test", MaxBodyBytes: DefaultMaxBodyBytes, Client: &http.Client{Transport: streamTransport(func() (io.Reader, http.Header) {
		b := serve
		if header.Get("Content-Type") != "text/plain; version=0.0.4" {
			b = append(slices.Clip(b), "# EOF\n"...)
		}
		return bytes.NewReader(b), header
	})}}, nil)
	at := t0
	scrape := func() uint64 {
		at = at.Add(5 * time.Second)
		n := allocatedBy(func() { s.ScrapeOnce(context.Background(), at) })
		if !s.Latest().Up {
			t.Fatal(s.Latest().Error)
		}
		return n
	}
	scrape()
	scrape()
	if c := s.buf.Cap(); c != 0 {
		t.Fatalf("after a %d-byte body read whole the scraper holds a %d-byte buffer between scrapes", len(body), c)
	}
	// What a scrape spends on the buffer: a scrape against the same
	// scrape with a buffer handed to it beforehand, the least of a few
	// tries of each (what else a scrape allocates varies a little, more
	// under -race). One buffer an eighth larger than the kept lines;
	// doubling would spend 2 MiB or more.
	n := len(body)
	var alloc, given uint64 = math.MaxUint64, math.MaxUint64
	for i := range 4 {
		alloc = min(alloc, scrape())
		if c := s.buf.Cap(); c != 0 {
			t.Fatalf("try %d: a %d-byte buffer held between scrapes", i, c)
		}
		s.buf.Grow(2 * n)
		given = min(given, scrape())
	}
	spent := int64(alloc) - int64(given)
	least, most := n, n+n/8+64<<10+8<<10 // 8 KiB: the allocator's rounding
	if raceEnabled {
		least, most = 2*least, 2*most+most/10 // the buffer twice, and -race's own allocations
	}
	t.Logf("scrape of a %d-byte body read whole: %d KiB allocated, %d KiB with a buffer given", n, alloc>>10, given>>10)
	if spent < int64(least) || spent > int64(most) {
		t.Fatalf("the buffer cost a scrape %d bytes, want %d to %d", spent, least, most)
	}

	// The same body as text streams into the parse cache from its second
	// scrape on: one part (the whole body here: one family) at a time.
	header = http.Header{"Content-Type": {"text/plain; version=0.0.4"}}
	scrape() // builds the cache from the text
	scrape()
	held := s.buf.Cap()
	if held < n || held > 2*bufferFor(n) {
		t.Fatalf("after a %d-byte body that streams the scraper holds a %d-byte buffer, want its part's (%d)", n, held, bufferFor(n))
	}
	alloc, given = math.MaxUint64, math.MaxUint64
	for range 4 {
		alloc = min(alloc, scrape())
		if s.buf.Cap() != held {
			t.Fatalf("the buffer changed from %d to %d bytes between scrapes of one body", held, s.buf.Cap())
		}
		s.buf = bytes.Buffer{}
		s.buf.Grow(2 * n)
		given = min(given, scrape())
		s.buf = bytes.Buffer{}
		s.buf.Grow(held)
	}
	t.Logf("scrape of a %d-byte body streamed: %d KiB allocated, %d KiB with a buffer given", n, alloc>>10, given>>10)
	if spent := int64(alloc) - int64(given); spent > 16<<10 {
		t.Fatalf("a streamed scrape with its buffer held allocated %d bytes more than with one given, want no buffer allocated", spent)
	}

	header = whole
	serve = small
	scrape() // sized for the last body
	scrape()
	held = s.buf.Cap()
	if held == 0 || held > keepBufferBytes {
		t.Fatalf("after a %d-byte body the scraper holds a %d-byte buffer, want it kept for reuse", len(small), held)
	}
	scrape()
	if s.buf.Cap() != held {
		t.Fatalf("the same small body again: buffer %d bytes, was %d", s.buf.Cap(), held)
	}
}

// TestScrapeMemoryBounded: the body is streamed, never held whole, and
// only the lines the exporter reads are kept for the parser (at most the
// parse budget's estimate). An endless body, a decompression bomb or a 10 MB label value
// costs a fixed amount whatever the limit; a body at the limit costs a
// bounded multiple of the part that is parsed; and the buffer of a failed
// oversize scrape is not kept.
func TestScrapeMemoryBounded(t *testing.T) {
	const limit = 4 << 20
	plain := http.Header{"Content-Type": {"text/plain; version=0.0.4"}}
	gz := http.Header{"Content-Type": {"text/plain; version=0.0.4"}, "Content-Encoding": {"gzip"}}
	junk := []byte("python_gc_objects_collected_total{generation=\"0\"} 382.0\n")
	bomb := gzipped(t, bytes.Repeat(junk, 4*limit/len(junk))) // 16 MiB compressed to a few KB
	huge := append(append([]byte("vllm:num_requests_running{model_name=\""), bytes.Repeat([]byte("x"), 10<<20)...), "\"} 1\n"...)
	atLimit := neededLinesCosting(parseBudget(limit))
	good := fixture(t, "vllm-main-2026-08-v1.txt")

	type fault struct {
		name   string
		body   func() (io.Reader, http.Header)
		up     bool
		reason string
		// most is the allocation allowed for one scrape.
		most uint64
	}
	// Fixed costs: the line reader's 64 KiB buffer, the gzip state, the
	// failed snapshot and /metrics rendering.
	const fixed = 1 << 20
	faults := []fault{
		{"endless body of families not read", func() (io.Reader, http.Header) { return &repeatReader{line: junk}, plain }, false, ReasonBodyTooLarge, fixed},
		{"gzip bomb", func() (io.Reader, http.Header) { return bytes.NewReader(bomb), gz }, false, ReasonBodyTooLarge, fixed},
		{"10 MB label value", func() (io.Reader, http.Header) {
			return io.MultiReader(bytes.NewReader(huge), bytes.NewReader(good)), plain
		}, false, ReasonBodyTooLarge, fixed},
		{"endless body of families read", func() (io.Reader, http.Header) {
			return &repeatReader{line: []byte("vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1\n")}, plain
		}, false, ReasonParseTooLarge, fixed + uint64(parseBudget(limit))}, // the kept part, grown by doubling
		// Parsing costs about 18 bytes allocated per byte parsed, of which
		// about 5 stay live until the body is normalized.
		{"body at the limit, all parsed", func() (io.Reader, http.Header) { return bytes.NewReader(atLimit), plain }, true, "", fixed + 24*uint64(len(atLimit))},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			s := New(Options{URL: "http://vllm.test", MaxBodyBytes: limit, Client: &http.Client{Transport: streamTransport(f.body)}}, nil)
			s.ScrapeOnce(context.Background(), t0) // warm: first-use allocations
			n := allocatedBy(func() { s.ScrapeOnce(context.Background(), t0.Add(5*time.Second)) })
			l := s.Latest()
			if l.Up != f.up || l.Error != f.reason {
				t.Fatalf("up %v reason %q, want %v %q", l.Up, l.Error, f.up, f.reason)
			}
			t.Logf("allocated %d KiB in one scrape (allowed %d KiB)", n>>10, f.most>>10)
			if n > f.most {
				t.Fatalf("one scrape allocated %d bytes, more than %d", n, f.most)
			}
			if !f.up && s.buf.Cap() > 256<<10 {
				t.Fatalf("a failed scrape keeps a %d-byte buffer", s.buf.Cap())
			}
		})
	}

	// The 10 MB label value within the limit: the line is skipped unread
	// and counted, the rest of the body is served.
	s := New(Options{URL: "http://vllm.test", MaxBodyBytes: 16 << 20, Client: &http.Client{Transport: streamTransport(func() (io.Reader, http.Header) {
		return io.MultiReader(bytes.NewReader(huge), bytes.NewReader(good)), plain
	})}}, nil)
	n := allocatedBy(func() { s.ScrapeOnce(context.Background(), t0) })
	if l := s.Latest(); !l.Up || l.Models["meta-llama/Llama-3.1-8B-Instruct"] == nil {
		t.Fatalf("body with a 10 MB line: %+v", l)
	}
	if s.dropped[DropLineTooLong] != 1 {
		t.Fatalf("line_too_long drops %v, want 1", s.dropped[DropLineTooLong])
	}
	if n > fixed+30*uint64(len(good)) {
		t.Fatalf("a body with a 10 MB line allocated %d bytes", n)
	}
}

// TestHistoryKeepsWhatWindowsNeed: the history levels off (full resolution
// over the largest window, at most coarseSnapshots beyond it, back to the
// retention), and only the newest snapshot keeps per-engine gauges and the
// cache config; the windows are unchanged by the slimming.
func TestHistoryKeepsWhatWindowsNeed(t *testing.T) {
	sim, err := vllmsim.New(vllmsim.Config{DataParallelSize: 2, VirtualClock: true, Seed: 1, LoadGen: true})
	if err != nil {
		t.Fatal(err)
	}
	sim.Advance(time.Minute)
	body := sim.Metrics()
	s := New(Options{URL: "http://vllm.test", Interval: 5 * time.Second, Readers: []time.Duration{time.Hour},
		Client: &http.Client{Transport: streamTransport(func() (io.Reader, http.Header) {
			return bytes.NewReader(body), http.Header{"Content-Type": {"text/plain"}}
		})}}, nil)
	fine := int((5*time.Minute+10*time.Second)/(5*time.Second)) + 1
	most := 0
	for i := range int(2 * time.Hour / (5 * time.Second)) {
		s.ScrapeOnce(context.Background(), t0.Add(time.Duration(i)*5*time.Second))
		s.histMu.RLock()
		n := len(s.history)
		for j, h := range s.history[:n-1] {
			for name, m := range h.Models {
				if m.PerEngine != nil || m.CacheConfig != nil {
					t.Fatalf("scrape %d: history[%d] model %s keeps per-engine gauges or cache config", i, j, name)
				}
			}
		}
		s.histMu.RUnlock()
		most = max(most, n)
	}
	if l := s.Latest(); l.Models["meta-llama/Llama-3.1-8B-Instruct"] == nil || l.Models["meta-llama/Llama-3.1-8B-Instruct"].PerEngine == nil {
		t.Fatalf("the newest snapshot lost its per-engine gauges: %+v", l)
	}
	if most > fine+coarseSnapshots+2 {
		t.Fatalf("history reached %d snapshots, want at most %d full-resolution + %d coarse", most, fine, coarseSnapshots)
	}
	for _, d := range []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour} {
		if w := s.Window(d); w == nil {
			t.Fatalf("no %v window after 2h", d)
		}
	}
}

// TestModelNameOf: the model_name value the streaming filter keys the model
// bound on, and nothing else (a label merely ending in model_name, a value
// with escapes, a line without labels).
func TestModelNameOf(t *testing.T) {
	for line, want := range map[string]string{
		`vllm:x{engine="0",model_name="m/a"} 1`:              "m/a",
		`vllm:x{served_model_name="s",model_name="m"} 1`:     "m",
		`vllm:x{model_name="a\"b",engine="0"} 1`:             `a\"b`,
		`vllm:x{served_model_name="s"} 1`:                    "",
		`vllm:x 1`:                                           "",
		`vllm:x{engine="model_name=\"q\"",model_name="r"} 1`: "r",
	} {
		got, ok := modelNameOf([]byte(line), labelSetEnd([]byte(line)))
		if string(got) != want || ok != (want != "") {
			t.Errorf("modelNameOf(%s) = %q %v, want %q", line, got, ok, want)
		}
	}
}
