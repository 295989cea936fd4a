package vllm

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// sameAsRegistry fails unless Gather (an exposition.Writer) gives what a registry
// gathering the scraper's Collect (const metrics) gives: the same families,
// series and values in the same order, and no error from either.
func sameAsRegistry(t *testing.T, s *Scraper, what string) {
	t.Helper()
	s.forgetGathered(nil)
	got, err := s.Gather()
	if err != nil {
		t.Fatalf("%s: Gather: %v", what, err)
	}
	want := testutil.GatherAll(t, s)
	if len(got) != len(want) {
		t.Fatalf("%s: %d families written, the registry gathers %d:\n--- written\n%s\n--- registry\n%s", what, len(got), len(want), testutil.Encode(t, got), testutil.Encode(t, want))
	}
	for i := range got {
		if proto.Equal(got[i], want[i]) {
			continue
		}
		// NaN is not equal to itself: then the text must still agree.
		if g, w := testutil.Encode(t, got[i:i+1]), testutil.Encode(t, want[i:i+1]); g != w {
			t.Fatalf("%s: family %s differs from the registry's:\n--- written\n%s\n--- registry\n%s", what, want[i].GetName(), g, w)
		}
	}
}

// TestGatherIsTheRegistrys writes every fixture's families, with
// every opt-in and with none, before a scrape, after scrapes whose
// counters move (windows, quantiles, rates) and after a failed one.
func TestGatherIsTheRegistrys(t *testing.T) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".txt") {
			continue
		}
		body := fixture(t, e.Name())
		for _, optIn := range []bool{true, false} {
			name := e.Name() + map[bool]string{true: " all opt-ins", false: " defaults"}[optIn]
			t.Run(name, func(t *testing.T) {
				srv := newFakeVLLM(t, body, "text/plain; version=0.0.4")
				s := newTestScraper(t, srv.URL, func(o *Options) {
					if !optIn {
						o.OptIn = nil
					}
				})
				sameAsRegistry(t, s, "before a scrape")
				at := t0
				for i := range 8 {
					// Counters and bucket counts move by i per scrape.
					srv.set(withValueTokens(body, func(_ int, old string) string {
						if n, ok := strings.CutSuffix(old, ".0"); ok {
							if v, err := strconv.Atoi(n); err == nil {
								return strconv.Itoa(v+i*(1+v%3)) + ".0"
							}
						}
						return old
					}), nil)
					scrapeAt(s, at)
					at = at.Add(15 * time.Second)
				}
				if !s.Latest().Up {
					t.Fatalf("scrape failed: %s", s.Latest().Error)
				}
				sameAsRegistry(t, s, "after 8 scrapes")
				srv.set(nil, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
				scrapeAt(s, at)
				sameAsRegistry(t, s, "after a failed scrape")
			})
		}
	}
}
