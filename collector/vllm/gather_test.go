package vllm

import (
	"bytes"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// collected is what a registry of the scraper as a plain collector gathers:
// what Gather must serve.
func collected(t *testing.T, s *Scraper) string {
	t.Helper()
	return testutil.Encode(t, testutil.GatherAll(t, s))
}

func TestScraperGathersEachScrapeOnce(t *testing.T) {
	body := fixture(t, "vllm-main-2026-08-v1.txt")
	srv := newFakeVLLM(t, body, "text/plain; version=0.0.4")
	s := newTestScraper(t, srv.URL, nil)

	before, err := s.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.Encode(t, before); !strings.Contains(got, "vllm_up 0") {
		t.Fatalf("before any scrape, Gather shows no vllm_up 0:\n%s", got)
	}

	scrapeAt(s, t0)
	first, err := s.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := testutil.Encode(t, first), collected(t, s); got != want {
		t.Fatalf("Gather differs from a registry's gathering of Collect:\n--- Gather\n%s\n--- Collect\n%s", got, want)
	}
	if !strings.Contains(testutil.Encode(t, first), "vllm_up 1") {
		t.Fatal("after a scrape, Gather does not show vllm_up 1")
	}

	// Until the next scrape every call hands out the same families, in a
	// slice of the caller's own: changing it changes no later answer.
	first[0] = nil
	again, err := s.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if again[0] == nil {
		t.Fatal("a caller's change to its slice reached the next caller")
	}
	for i := 1; i < len(first); i++ {
		if again[i] != first[i] {
			t.Fatalf("family %s gathered again without a scrape in between", again[i].GetName())
		}
	}
	if n := testing.AllocsPerRun(20, func() { _, _ = s.Gather() }); n > 2 {
		t.Errorf("Gather without a scrape in between allocates %v times; want the slice alone", n)
	}

	// A scrape with new values: gathered anew.
	srv.set(withValues(t, body, map[string]string{
		`vllm:num_requests_running{engine="0",model_name="` + llama + `"}`: "11.0",
	}), nil)
	scrapeAt(s, t0.Add(5*time.Second))
	next, err := s.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := testutil.Encode(t, next)
	if got != collected(t, s) {
		t.Fatal("after a second scrape Gather differs from Collect")
	}
	if !strings.Contains(got, "vllm_exporter_scrapes_total 2") {
		t.Fatalf("Gather after the second scrape does not count two scrapes:\n%s", grepLines(got, "scrapes_total"))
	}
	if !strings.Contains(got, `vllm_requests_running{model="`+llama+`"} 11`) {
		t.Fatalf("Gather after the second scrape does not show its value:\n%s", grepLines(got, "vllm_requests_running"))
	}
}

// grepLines is the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for l := range strings.SplitSeq(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestScraperGathersWhileItScrapes reads Gather from several goroutines
// while scrapes store new states (run with -race).
func TestScraperGathersWhileItScrapes(t *testing.T) {
	srv := newFakeVLLM(t, fixture(t, "vllm-main-2026-08-v1.txt"), "text/plain; version=0.0.4")
	s := newTestScraper(t, srv.URL, nil)
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				mfs, err := s.Gather()
				if err != nil {
					t.Error(err)
					return
				}
				var buf bytes.Buffer
				enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeProtoDelim))
				for _, mf := range mfs {
					if err := enc.Encode(mf); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	for i := range 20 {
		scrapeAt(s, t0.Add(time.Duration(i)*5*time.Second))
	}
	close(done)
	wg.Wait()
	if !s.Latest().Up {
		t.Fatal(s.Latest().Error)
	}
}

// TestScraperLetsGoOfAnEarlierGathering: once a scrape stores a new state,
// the families gathered from the state before it, and that state's
// snapshot, are garbage, whether or not a request gathers again.
func TestScraperLetsGoOfAnEarlierGathering(t *testing.T) {
	srv := newFakeVLLM(t, fixture(t, "vllm-main-2026-08-v1.txt"), "text/plain; version=0.0.4")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	mfs, err := s.Gather()
	if err != nil {
		t.Fatal(err)
	}
	freed := make(chan string, 2)
	runtime.AddCleanup(mfs[0], func(what string) { freed <- what }, "the families gathered")
	runtime.AddCleanup(s.Latest(), func(what string) { freed <- what }, "the snapshot they were gathered from")
	mfs = nil

	scrapeAt(s, t0.Add(5*time.Second))
	if !s.Latest().Up {
		t.Fatal(s.Latest().Error)
	}
	// Collections until both cleanups have run, or a deadline far beyond
	// what they take (a few collections) on a busy machine.
	deadline := time.Now().Add(30 * time.Second)
	for got := 0; got < 2; {
		runtime.GC()
		select {
		case <-freed:
			got++
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatalf("after the next scrape, %d of 2 still reachable: the families gathered from the earlier state, and its snapshot", 2-got)
			}
		}
	}
	runtime.KeepAlive(s) // the scraper itself stays reachable
}

// TestScraperLetsGoOfGatheredFamiliesBeforeItFetches: the families a
// request gathered are garbage as soon as the next scrape begins, before
// it fetches and parses (what it allocates sets off collections, which
// would count them as live), while /metrics still serves the state before.
func TestScraperLetsGoOfGatheredFamiliesBeforeItFetches(t *testing.T) {
	body := fixture(t, "vllm-main-2026-08-v1.txt")
	srv := newFakeVLLM(t, body, "text/plain; version=0.0.4")
	// A scrape timeout beyond the test's deadline: the scrape must not end
	// (and store a state) before the test has looked.
	s := newTestScraper(t, srv.URL, func(o *Options) { o.Interval, o.Timeout = 2*time.Minute, time.Minute })
	scrapeAt(s, t0)
	mfs, err := s.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := testutil.Encode(t, mfs)
	freed := make(chan struct{}, 1)
	runtime.AddCleanup(mfs[0], func(ch chan struct{}) { ch <- struct{}{} }, freed)
	mfs = nil

	// The next scrape's fetch waits in vLLM until the test lets it answer.
	fetching, answer := make(chan struct{}), make(chan struct{})
	srv.set(body, func(w http.ResponseWriter, r *http.Request) {
		close(fetching)
		select {
		case <-answer:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(body)
	})
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		scrapeAt(s, t0.Add(5*time.Second))
	}()
	<-fetching
	// Collections until the cleanup has run, or a deadline far beyond what
	// it takes (a collection or two) on a busy machine.
	deadline := time.Now().Add(30 * time.Second)
	for done := false; !done; {
		runtime.GC()
		select {
		case <-freed:
			done = true
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(deadline) {
				close(answer)
				<-scraped
				t.Fatal("while the next scrape fetched, the families gathered before it were still reachable")
			}
		}
	}
	// A request meanwhile is served the state before the scrape, gathered anew.
	again, err := s.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.Encode(t, again); got != want {
		t.Errorf("during the scrape /metrics served\n%s\nwant the state before it\n%s", got, want)
	}
	close(answer)
	<-scraped
	if !s.Latest().Up {
		t.Fatal(s.Latest().Error)
	}
	runtime.KeepAlive(s)
}

// TestScraperWritesIntoTheFamiliesGivenBack: /metrics gathers the
// scraper's families transactionally; requests of one state share them,
// and once the last has given them back after the next scrape, the next
// state is written into the same families (no new memory per request),
// while the state they were written from is let go.
func TestScraperWritesIntoTheFamiliesGivenBack(t *testing.T) {
	srv := newFakeVLLM(t, fixture(t, "vllm-main-2026-08-v1.txt"), "text/plain; version=0.0.4")
	s := newTestScraper(t, srv.URL, nil)
	tg := s.Transactional()
	scrapeAt(s, t0)
	mfs, done, err := tg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	first := mfs[0]
	again, doneAgain, _ := tg.Gather()
	if again[0] != first {
		t.Fatal("two requests of one state were written two families")
	}
	doneAgain()
	done()
	mfs, again, done, doneAgain = nil, nil, nil, nil
	freed := make(chan struct{}, 1)
	runtime.AddCleanup(s.Latest(), func(ch chan struct{}) { ch <- struct{}{} }, freed)

	scrapeAt(s, t0.Add(5*time.Second))
	if !s.Latest().Up {
		t.Fatal(s.Latest().Error)
	}
	next, done, err := tg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if next[0] != first {
		t.Error("the next state was written into new families, not the ones given back")
	}
	if got, want := testutil.Encode(t, next), testutil.Encode(t, testutil.GatherAll(t, s)); got != want {
		t.Fatalf("written into the families given back:\n%s\nthe registry gathers\n%s", got, want)
	}
	// Collections until the cleanup has run, or a deadline far beyond what
	// it takes (a collection or two) on a busy machine.
	deadline := time.Now().Add(30 * time.Second)
	for {
		runtime.GC()
		select {
		case <-freed:
			return
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the families given back still hold the snapshot they were written from")
			}
		}
	}
}

// TestScraperWritesInBlocks: each write of the families takes its structs
// from blocks sized by the gather before, whether the families are lent
// (/metrics, Transactional) or the caller's (Gather): a few allocations per
// family instead of several per series (about 9 per series unsized); lent,
// next to none.
func TestScraperWritesInBlocks(t *testing.T) {
	srv := newFakeVLLM(t, fixture(t, "vllm-main-2026-08-v1.txt"), "text/plain; version=0.0.4")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	scrapeAt(s, t0.Add(5*time.Second))
	mfs, err := s.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		series += len(mf.Metric)
	}
	written := testing.AllocsPerRun(5, func() {
		s.forgetGathered(nil)
		s.Gather()
	})
	tg := s.Transactional()
	lent := testing.AllocsPerRun(5, func() {
		s.forgetGathered(nil)
		_, done, _ := tg.Gather()
		done()
	})
	t.Logf("%d series: %.0f allocations written anew, %.0f written into the families given back", series, written, lent)
	if written > 4*float64(series) {
		t.Errorf("a gather of %d series made %.0f allocations: its blocks were not sized from the gather before", series, written)
	}
	if lent > float64(series)/4 {
		t.Errorf("a lent gather of %d series made %.0f allocations: not written into the families given back", series, lent)
	}
}
