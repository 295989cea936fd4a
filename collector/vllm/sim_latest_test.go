package vllm

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// sumLines sums the values of every sample line of family in body whose
// labels match re (an independent reading of the fixture).
func sumLines(t *testing.T, body []byte, family, labels string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(family) + `\{([^}]*)\} (\S+)$`)
	lre := regexp.MustCompile(labels)
	sum := 0.0
	for _, m := range re.FindAllSubmatch(body, -1) {
		if !lre.Match(m[1]) {
			continue
		}
		v, err := strconv.ParseFloat(string(m[2]), 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	return sum
}

// The simulator's newest layout (internal/vllmsim --metrics-version
// latest), one rendered body per /admin control: every control shows in
// the snapshot the way the exporter's rules read it.
func TestSimLatestFixtures(t *testing.T) {
	scrape := func(name string, mod func(*Options)) *snapshot.Model {
		t.Helper()
		srv := newFakeVLLM(t, fixture(t, name), "text/plain; version=1.0.0; charset=utf-8")
		s := newTestScraper(t, srv.URL, mod)
		scrapeAt(s, t0)
		m := s.Latest().Models[llama]
		if m == nil {
			t.Fatalf("%s: no model %s", name, llama)
		}
		return m
	}
	if m := scrape("sim-latest-healthy.txt", nil); !m.Sleep.Known || !m.Sleep.Awake || m.WaitingDeferred().V != 0 {
		t.Errorf("healthy: sleep %+v, deferred %+v", m.Sleep, m.WaitingDeferred())
	}

	m := scrape("sim-latest-sleeping.txt", nil)
	if !m.Asleep() || m.Sleep.Level.V != 1 || m.Sleep.Resources["weights"] != "offloaded" || m.Sleep.Resources["scheduler"] != "paused" {
		t.Errorf("sleeping: %+v, want asleep at level 1, weights offloaded, scheduler paused", m.Sleep)
	}

	m = scrape("sim-latest-livelock.txt", nil)
	if m.WaitingDeferred().V != 568 || m.WaitingForCapacity().V != 26 {
		t.Errorf("livelock: deferred %v capacity %v, want 568 and 26", m.WaitingDeferred(), m.WaitingForCapacity())
	}

	body := fixture(t, "sim-latest-spec-decode.txt")
	m = scrape("sim-latest-spec-decode.txt", nil)
	wantValue(t, "spec drafts", m.SpecDrafts, sumLines(t, body, "vllm:spec_decode_num_drafts_total", ""))
	wantValue(t, "spec accepted", m.SpecAcceptedTokens, sumLines(t, body, "vllm:spec_decode_num_accepted_tokens_total", ""))

	body = fixture(t, "sim-latest-priority.txt")
	m = scrape("sim-latest-priority.txt", func(o *Options) { o.PerPriority = true })
	for _, reason := range []string{"stop", "length", "abort"} {
		want := sumLines(t, body, "vllm:request_success_total", `finished_reason="`+reason+`"`)
		if got := m.FinishedByReason[reason]; got != want {
			t.Errorf("priority: %s finishes %v, want %v (summed over priority)", reason, got, want)
		}
	}
	if want := sumLines(t, body, "vllm:time_to_first_token_seconds_count", ""); m.Histograms[snapshot.TTFT].Count != want || want == 0 {
		t.Errorf("priority: TTFT count %v, want %v", m.Histograms[snapshot.TTFT].Count, want)
	}
	if n := len(m.ByPriority); n < 2 || n > MaxPriorities {
		t.Errorf("priority: per-priority view has %d values", n)
	}

	m = scrape("sim-latest-custom-buckets.txt", nil)
	if b := m.Histograms[snapshot.TTFT].Bounds; len(b) == 0 || b[0] != 0.02 {
		t.Errorf("custom buckets: TTFT bounds %v, want the scrape's (first 0.02)", b)
	}
}
