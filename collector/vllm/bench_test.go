package vllm

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var benchFixtures = []struct{ name, file string }{
	{"v0-0.7.3", "vllm-0.7.3-v0-multiprocess.txt"},
	{"v1-main", "vllm-main-2026-08-v1.txt"},
}

// BenchmarkScrapeCycle is one full background cycle: HTTP GET over
// loopback, parse, normalize, append to the history, derive the 1m and 5m
// windows, and gather the metric families (which Gather does once per
// scrape: here every scrape is read, as if Prometheus scraped every 5 s). Virtual
// time advances 5s per iteration so the history is at its steady-state
// size.
func BenchmarkScrapeCycle(b *testing.B) {
	for _, f := range benchFixtures {
		b.Run(f.name, func(b *testing.B) {
			srv := newFakeVLLM(b, fixture(b, f.file), "text/plain; version=0.0.4")
			s := newTestScraper(b, srv.URL, nil)
			at := t0
			for range 70 { // fill the 5m history first
				scrapeAt(s, at)
				at = at.Add(5 * time.Second)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				scrapeAt(s, at)
				if _, err := s.Gather(); err != nil {
					b.Fatal(err)
				}
				at = at.Add(5 * time.Second)
			}
			if !s.Latest().Up {
				b.Fatal(s.Latest().Error)
			}
		})
	}
}

// BenchmarkParseNormalize is the CPU part of a cycle without HTTP.
func BenchmarkParseNormalize(b *testing.B) {
	for _, f := range benchFixtures {
		b.Run(f.name, func(b *testing.B) {
			body := fixture(b, f.file)
			n := newNormalizer()
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				e, err := parseBody(body, "text/plain")
				if err != nil {
					b.Fatal(err)
				}
				n.normalize(e)
			}
		})
	}
}

// BenchmarkCollect is what a Prometheus scrape of the exporter costs the
// scraper: "gather" is /metrics' path after the first request of a state
// (Scraper.Gather hands the families out again), "write" the first request
// (an exposition.Writer writes them), "registry" a registry gathering the scraper
// as a plain collector (Collect makes const metrics; the first request's
// path before the Writer).
// SCRAPE_BODY=file reads that body instead of the V1 fixture (growth.sh
// saves the simulator's 16 x 8 body).
func BenchmarkCollect(b *testing.B) {
	body := fixture(b, "vllm-main-2026-08-v1.txt")
	if file := os.Getenv("SCRAPE_BODY"); file != "" {
		var err error
		if body, err = os.ReadFile(file); err != nil {
			b.Fatal(err)
		}
	}
	srv := newFakeVLLM(b, body, "text/plain")
	s := newTestScraper(b, srv.URL, nil)
	for i := range 70 {
		scrapeAt(s, t0.Add(time.Duration(i)*5*time.Second))
	}
	if !s.Latest().Up {
		b.Fatal(s.Latest().Error)
	}
	b.Run("gather", func(b *testing.B) {
		if _, err := s.Gather(); err != nil { // the first call after the scrape gathers
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write", func(b *testing.B) {
		// What the first /metrics request after each scrape pays.
		b.ReportAllocs()
		for b.Loop() {
			s.forgetGathered(nil)
			if _, err := s.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lent", func(b *testing.B) {
		// What /metrics pays now (Transactional): the first request after
		// each scrape writes into the families given back.
		tg := s.Transactional()
		b.ReportAllocs()
		for b.Loop() {
			s.forgetGathered(nil)
			_, done, err := tg.Gather()
			if err != nil {
				b.Fatal(err)
			}
			done()
		}
	})
	b.Run("registry", func(b *testing.B) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(s)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkParseKept parses the kept lines of the simulator's body
// (v1-0.33, one model), alternating between two sets of values as
// successive scrapes do: with the text parser alone, and through the
// scraper's parseCache.
func BenchmarkParseKept(b *testing.B) {
	kept := keptLines(b, fixture(b, "sim-v1-0.33-one-model.txt"))
	bodies := [][]byte{kept, withValueTokens(kept, func(i int, old string) string {
		if strings.HasSuffix(old, ".0") {
			return strconv.Itoa(i) + ".0"
		}
		return old + "1"
	})}
	b.Run("textparser", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(kept)))
		i := 0
		for b.Loop() {
			if _, err := textParse(bodies[i%2]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("cache", func(b *testing.B) {
		var c parseCache
		if _, err := c.parse(bodies[1], true); err != nil || c.fams == nil {
			b.Fatal("not cached", err)
		}
		b.ReportAllocs()
		b.SetBytes(int64(len(kept)))
		i := 0
		for b.Loop() {
			if _, err := c.parse(bodies[i%2], true); err != nil {
				b.Fatal(err)
			}
			i++
		}
		if c.fams == nil {
			b.Fatal("fell out of the cache")
		}
	})
}

// BenchmarkReadNeeded streams the simulator's body (v1-0.33, one model)
// through the line filter and parse-cost estimate, as fetch does: every
// line through the filter, and through the line cache (the same body
// again, as a server whose values do not move between scrapes).
func BenchmarkReadNeeded(b *testing.B) {
	body := fixture(b, "sim-v1-0.33-one-model.txt")
	for _, cached := range []bool{false, true} {
		name := "filter"
		var lc *lineCache
		if cached {
			name, lc = "cache", &lineCache{}
		}
		b.Run(name, func(b *testing.B) {
			br := bufio.NewReaderSize(nil, maxLineBytes)
			var dst bytes.Buffer
			models := &modelFilter{admit: func(string) bool { return true }, decided: map[string]bool{}}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				dst.Reset()
				if _, err := readNeeded(br, bytes.NewReader(body), DefaultMaxBodyBytes, &dst, models, lc, nil); err != nil {
					b.Fatal(err)
				}
			}
			if cached && lc.matched == 0 {
				b.Fatal("no line matched the cache")
			}
		})
	}
}

// BenchmarkScrapeBody is a scrape of vLLM (fetch over loopback, line
// filter, parse, normalize, history, windows) of a server whose counters
// move between scrapes: scrape i serves the body with i added to every
// whole-number value (counters, histogram counts), so the lines stay and
// nothing resets. It reports the bytes a scrape allocates against the
// body's size (alloc-per-body-byte; making the next body is left out of
// the count) and the live heap the scraper holds between scrapes
// (retained-bytes). scripts/growth.sh runs it on a body of the simulator at 16
// models x 8 engines through SCRAPE_BODY=file; without it, on the
// one-model fixture.
func BenchmarkScrapeBody(b *testing.B) {
	var base []byte
	if file := os.Getenv("SCRAPE_BODY"); file != "" {
		body, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		base = body
	} else {
		base = fixture(b, "sim-v1-0.33-one-model.txt")
	}
	next := func(i int) []byte {
		return withValueTokens(base, func(_ int, old string) string {
			if n, ok := strings.CutSuffix(old, ".0"); ok {
				if v, err := strconv.Atoi(n); err == nil {
					return strconv.Itoa(v+i) + ".0"
				}
			}
			return old
		})
	}
	srv := newFakeVLLM(b, base, "text/plain; version=0.0.4")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := newTestScraper(b, srv.URL, nil)
	at := t0
	for i := range 70 { // fill the 5m history first
		srv.set(next(i), nil)
		scrapeAt(s, at)
		at = at.Add(5 * time.Second)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(base)))
	var allocated uint64
	var m0, m1 runtime.MemStats
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		srv.set(next(70+i), nil)
		runtime.ReadMemStats(&m0)
		b.StartTimer()
		scrapeAt(s, at)
		b.StopTimer()
		runtime.ReadMemStats(&m1)
		allocated += m1.TotalAlloc - m0.TotalAlloc
		b.StartTimer()
		at = at.Add(5 * time.Second)
	}
	if !s.Latest().Up {
		b.Fatal(s.Latest().Error)
	}
	b.ReportMetric(float64(allocated)/float64(b.N)/float64(len(base)), "alloc-per-body-byte")
	// What the scraper holds between scrapes (the fake server's body is
	// replaced by one of the same size, so it cancels out).
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)), "retained-bytes")
	runtime.KeepAlive(s)
}
