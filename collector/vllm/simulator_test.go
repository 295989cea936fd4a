package vllm

import (
	"math"
	"regexp"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
)

// TestAgainstSimulator scrapes the simulated vLLM (internal/vllmsim) in
// virtual time, in each of its exposition versions, and checks the scraper's
// normalized and windowed values against the simulator's ground truth: the
// engines' state at the scrape and the records of every finished request.
func TestAgainstSimulator(t *testing.T) {
	cases := []struct {
		version, schema string
		dp              int
	}{
		{vllmsim.MetricsV0, SchemaV0, 1},
		{vllmsim.MetricsV1_0_10, SchemaV1, 2},
		{vllmsim.MetricsV1, SchemaV1, 2},
	}
	for _, c := range cases {
		t.Run(c.version, func(t *testing.T) {
			sim := vllmsimtest.Start(t, vllmsim.Config{VirtualClock: true, LoadGen: true, Seed: 7,
				MetricsVersion: c.version, DataParallelSize: c.dp})
			s := newTestScraper(t, sim.URL(), nil)
			model := sim.Config().Models[0]
			step := func(n int) {
				for range n {
					sim.Advance(5 * time.Second)
					scrapeAt(s, sim.Now())
				}
			}
			scrapeAt(s, sim.Now())
			step(24) // two minutes

			l := s.Latest()
			if !l.Up || l.Schema != c.schema {
				t.Fatalf("up %v schema %q (want %q), error %q", l.Up, l.Schema, c.schema, l.Error)
			}
			if len(l.Missing) != 0 {
				t.Errorf("missing under load: %v", l.Missing)
			}
			checkGauges(t, sim, l.Models[model], c.dp)

			d := s.Window(time.Minute)[model]
			if d == nil {
				t.Fatal("no 1m window")
			}
			checkWindow(t, d, sim.Records(), d.Start)

			// vLLM restarts 20s before the window's end, right after a
			// scrape: as with PromQL's increase(), the window holds what
			// finished before the restart plus everything since.
			step(8)
			sim.Restart()
			restart := sim.Now()
			step(4)
			d = s.Window(time.Minute)[model]
			if d == nil || !d.Start.Before(restart) {
				t.Fatalf("window %+v does not span the restart at %v", d, restart)
			}
			checkWindow(t, d, sim.Records(), d.Start)
		})
	}
}

// checkGauges compares the scraped model with the engines right now (the
// virtual clock stands still between Advance calls).
func checkGauges(t *testing.T, sim *vllmsim.Sim, m *snapshot.Model, dp int) {
	t.Helper()
	var running, waiting, maxKV float64
	for _, e := range sim.Engines() {
		running += float64(e.Running)
		waiting += float64(e.Waiting)
		maxKV = math.Max(maxKV, e.KVUsage)
	}
	wantValue(t, "running", m.Running, running)
	wantValue(t, "waiting", m.Waiting, waiting)
	if !m.KVUsage.OK || math.Abs(m.KVUsage.V-maxKV) > 1e-9 {
		t.Errorf("kv usage %+v, want max over engines %v", m.KVUsage, maxKV)
	}
	if (dp > 1) != (m.PerEngine != nil) || (m.PerEngine != nil && len(m.PerEngine) != dp) {
		t.Errorf("per-engine gauges %v with %d engines", m.PerEngine, dp)
	}
}

// checkWindow: requests finished in (from, End] by reason, and the e2e
// quantiles, which must fall in the bucket of the true order statistic.
func checkWindow(t *testing.T, d *snapshot.Derived, records []vllmsim.RequestRecord, from time.Time) {
	t.Helper()
	elapsed := d.End.Sub(d.Start).Seconds()
	byReason := map[string]int{}
	var e2e []float64
	for _, r := range records {
		if r.LastToken.After(from) && !r.LastToken.After(d.End) {
			byReason[r.FinishReason]++
			e2e = append(e2e, r.E2E.Seconds())
		}
	}
	if len(e2e) < 10 {
		t.Fatalf("only %d requests finished in the window: load generator too slow for a meaningful check", len(e2e))
	}
	for reason, n := range byReason {
		if got := d.FinishedPerSecondByReason[reason] * elapsed; math.Abs(got-float64(n)) > 1e-6 {
			t.Errorf("finished %s: %v in the window, ground truth %d", reason, got, n)
		}
	}
	delta := d.Deltas[snapshot.E2E]
	if delta.Count != float64(len(e2e)) {
		t.Fatalf("e2e observations in the window %v, ground truth %d", delta.Count, len(e2e))
	}
	sort.Float64s(e2e)
	for _, q := range Quantiles {
		k := int(math.Ceil(q * float64(len(e2e)))) // the order statistic PromQL's rank lands on
		truth := e2e[k-1]
		i := sort.SearchFloat64s(delta.Bounds, truth) // bucket holding the truth
		lo, hi := 0.0, math.Inf(1)
		if i > 0 {
			lo = delta.Bounds[i-1]
		}
		if i < len(delta.Bounds) {
			hi = delta.Bounds[i]
		} else {
			lo, hi = delta.Bounds[len(delta.Bounds)-1], delta.Bounds[len(delta.Bounds)-1]
		}
		est := d.Quantiles[snapshot.E2E][q]
		if !est.OK || est.V < lo || est.V > hi {
			t.Errorf("e2e q%v = %+v, true %v lies in bucket (%v, %v]", q, est, truth, lo, hi)
		}
	}
}

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
func TestSimulatorFixtures(t *testing.T) {
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
	if want := sumLines(t, body, "vllm:time_to_first_token_seconds_count", ""); m.Histograms.Get(snapshot.TTFT).Count != want || want == 0 {
		t.Errorf("priority: TTFT count %v, want %v", m.Histograms.Get(snapshot.TTFT).Count, want)
	}
	if n := len(m.ByPriority); n < 2 || n > MaxPriorities {
		t.Errorf("priority: per-priority view has %d values", n)
	}

	m = scrape("sim-latest-custom-buckets.txt", nil)
	if b := m.Histograms.Get(snapshot.TTFT).Bounds; len(b) == 0 || b[0] != 0.02 {
		t.Errorf("custom buckets: TTFT bounds %v, want the scrape's (first 0.02)", b)
	}
}
