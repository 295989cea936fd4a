package vllm

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// bodyScraper scrapes whatever *body holds when it fetches.
func bodyScraper(body *[]byte, mod func(*Options)) *Scraper {
	opts := Options{URL: "http://vllm.test", Interval: 5 * time.Second, Client: &http.Client{Transport: streamTransport(func() (io.Reader, http.Header) {
		return bytes.NewReader(*body), http.Header{"Content-Type": {"text/plain"}}
	})}}
	if mod != nil {
		mod(&opts)
	}
	return New(opts, nil)
}

// pastEntries is every entry the store holds, in the history or free.
func pastEntries(s *Scraper) map[*pastEntry]bool {
	s.histMu.RLock()
	defer s.histMu.RUnlock()
	all := map[*pastEntry]bool{}
	for _, e := range s.past.owned {
		all[e] = true
	}
	for _, e := range s.past.free {
		all[e] = true
	}
	return all
}

// TestHistoryTakesItsRoomAtOnce: the second successful scrape takes the
// room of the whole full-resolution history (the default windows' 5
// minutes 10 s), sized from what it scraped, so the live heap is level from
// then on instead of rising a snapshot per scrape for five minutes; later
// scrapes of a server of the same size reuse that room and allocate nothing
// for the history.
func TestHistoryTakesItsRoomAtOnce(t *testing.T) {
	body := simBody(t, 4, 2)
	s := bodyScraper(&body, nil)
	span := int((5*time.Minute + 10*time.Second) / (5 * time.Second))
	if s.past.span != span {
		t.Fatalf("store span %d, want %d (the full-resolution history of the default windows)", s.past.span, span)
	}
	scrapeAt(s, t0)
	if n := len(pastEntries(s)); n != 0 {
		t.Fatalf("after one scrape the store holds %d entries: nothing is slimmed yet", n)
	}
	scrapeAt(s, t0.Add(5*time.Second))
	first := pastEntries(s)
	if len(first) != span {
		t.Fatalf("after the second scrape the store holds %d entries, want the span's %d", len(first), span)
	}
	latest := s.Latest()
	counts := 0
	for _, m := range latest.Models {
		for _, h := range m.Histograms.All() {
			counts += len(h.Counts)
		}
	}
	if counts == 0 {
		t.Fatal("the simulated body has no histogram buckets")
	}
	for e := range first {
		if cap(e.models) < len(latest.Models) || cap(e.counts) < counts {
			t.Fatalf("an entry has room for %d models and %d counts, the scrape has %d and %d", cap(e.models), cap(e.counts), len(latest.Models), counts)
		}
	}
	for i := 2; i < 3*span; i++ {
		scrapeAt(s, t0.Add(time.Duration(i)*5*time.Second))
		for e := range pastEntries(s) {
			if !first[e] {
				t.Fatalf("scrape %d took a new history entry although the server's size did not change", i)
			}
		}
	}
	if w := s.Window(5 * time.Minute); w == nil || len(w) != len(latest.Models) {
		t.Fatalf("5m window over the reused history: %v", w)
	}

	// Slimming a snapshot into a reused entry allocates nothing.
	s.histMu.Lock()
	defer s.histMu.Unlock()
	if allocs := testing.AllocsPerRun(20, func() { s.past.release(s.past.slim(latest)) }); allocs != 0 {
		t.Fatalf("slimming into a reused entry allocated %v times", allocs)
	}
	if kept := s.history[len(s.history)-2]; s.past.slim(kept) != kept {
		t.Fatal("slimming a snapshot the history already slimmed made another copy")
	}
}

// TestHistoryRoomFollowsTheServer: an entry reused for a server that has
// grown takes the room it needs, and one reused for a server that shrank
// is taken anew at its size, so the history does not keep the room of its
// largest moment; a history that shrinks keeps no more free entries than
// the full-resolution span.
func TestHistoryRoomFollowsTheServer(t *testing.T) {
	small, large := simBody(t, 1, 1), simBody(t, 8, 2)
	body := small
	s := bodyScraper(&body, func(o *Options) { o.Readers = []time.Duration{30 * time.Minute} })
	span := s.past.span
	at := 0
	scrapeFor := func(d time.Duration) {
		for range int(d / (5 * time.Second)) {
			scrapeAt(s, t0.Add(time.Duration(at)*5*time.Second))
			at++
		}
	}
	room := func() (models, counts int) {
		for e := range pastEntries(s) {
			models, counts = max(models, cap(e.models)), max(counts, cap(e.counts))
		}
		return models, counts
	}
	scrapeFor(6 * time.Minute)
	smallModels, smallCounts := room()
	body = large
	scrapeFor(6 * time.Minute)
	largeModels, largeCounts := room()
	if largeModels < 8 || largeCounts <= smallCounts {
		t.Fatalf("after the server grew the entries have room for %d models, %d counts (before: %d, %d)", largeModels, largeCounts, smallModels, smallCounts)
	}
	body = small
	scrapeFor(40 * time.Minute) // past the 30m reader's thinned history too
	if m, c := room(); m > 2*smallModels || c > 2*smallCounts {
		t.Fatalf("after the server shrank back the entries keep room for %d models, %d counts (it needs %d, %d)", m, c, smallModels, smallCounts)
	}

	s.SetReaders() // the thinned history is no longer needed
	scrapeFor(time.Minute)
	s.histMu.RLock()
	free, owned := len(s.past.free), len(s.past.owned)
	s.histMu.RUnlock()
	if free > span {
		t.Fatalf("the store keeps %d free entries, more than the span's %d", free, span)
	}
	if owned > span+1 {
		t.Fatalf("the store owns %d entries for a history of the full-resolution span (%d)", owned, span)
	}
	if w := s.Window(5 * time.Minute); w == nil {
		t.Fatal("no 5m window after the history shrank")
	}
}

// TestHistoryOwnsItsCounts: the history copies the histogram counts it keeps
// rather than sharing them with the scraped snapshot, whose readers (the
// SLO watchdog, /metrics) may hold it while the history reuses its room.
func TestHistoryOwnsItsCounts(t *testing.T) {
	body := simBody(t, 2, 1)
	s := bodyScraper(&body, nil)
	scrapeAt(s, t0)
	scraped := s.Latest()
	scrapeAt(s, t0.Add(5*time.Second))
	s.histMu.RLock()
	kept := s.history[0]
	s.histMu.RUnlock()
	if kept == scraped {
		t.Fatal("the history keeps the scraped snapshot itself")
	}
	for name, m := range scraped.Models {
		for hn, h := range m.Histograms.All() {
			k := kept.Models[name].Histograms.Get(hn)
			if len(h.Counts) == 0 {
				continue
			}
			if &k.Counts[0] == &h.Counts[0] {
				t.Fatalf("%s %s: the history shares the scraped snapshot's counts", name, hn)
			}
			if fmt.Sprint(k) != fmt.Sprint(h) {
				t.Fatalf("%s %s: kept %v, scraped %v", name, hn, k, h)
			}
		}
	}
}
