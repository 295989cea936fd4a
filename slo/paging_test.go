package slo

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
)

// simRig is the simulated vLLM on a virtual clock, scraped over HTTP by the
// real scraper (collector/vllm), feeding watchdogs: the whole server-side
// path, with time advanced by the test.
type simRig struct {
	t   *testing.T
	sim *vllmsim.Sim
	sc  *vllm.Scraper
	ws  []*Watchdog
}

func newSimRig(t *testing.T, scenario string) *simRig {
	return newSimRigWith(t, vllmsim.Config{VirtualClock: true, LoadGen: true, Seed: 7, Scenario: scenario})
}

// newSimRigWith starts a simulator with cfg (VirtualClock must be set).
func newSimRigWith(t *testing.T, cfg vllmsim.Config) *simRig {
	t.Helper()
	sim := vllmsimtest.Start(t, cfg)
	sc := vllm.New(vllm.Options{URL: sim.URL(), Interval: 10 * time.Second, Windows: []time.Duration{time.Minute}}, log.NewNopLogger())
	return &simRig{t: t, sim: sim, sc: sc}
}

// submit sends one request straight to the simulator's scheduler: a short
// prompt (distinct per seq) and exactly tokens output tokens.
func (r *simRig) submit(seq, tokens int) {
	req := vllmsim.Request{Prompt: make([]int, 64), MaxTokens: tokens, IgnoreEOS: true}
	for k := range req.Prompt {
		req.Prompt[k] = 1000 + k + seq
	}
	if _, err := r.sim.Submit(req); err != nil {
		r.t.Fatal(err)
	}
}

// step advances the virtual clock by d, scrapes once and ticks every
// watchdog at the new time.
func (r *simRig) step(d time.Duration) time.Time {
	r.sim.Advance(d)
	now := r.sim.Now()
	r.sc.ScrapeOnce(context.Background(), now)
	if v := r.sc.Latest(); v == nil || !v.Up {
		r.t.Fatalf("scrape of the simulator failed: %+v", v)
	}
	for _, w := range r.ws {
		w.Tick(now)
	}
	return now
}

// Healthy simulated traffic with its natural noise, through the real
// scraper and the shipped default SLOs, never pages or tickets; a vLLM
// restart in the middle (every counter reset) is absorbed; the
// availability SLO's events match the simulator's ground truth; and a
// watchdog killed and re-created from its checkpoint ends up identical to
// one that ran throughout.
func TestSimHealthyDefaultSLOs(t *testing.T) {
	r := newSimRig(t, "healthy")
	holder := holderFor(t, string(config.DefaultYAML))
	stateFile := filepath.Join(t.TempDir(), "slo.state")
	ref := New(Options{}, holder, Sources{VLLM: r.sc}, nil)
	victim := New(Options{StateFile: stateFile}, holder, Sources{VLLM: r.sc}, nil)
	r.ws = []*Watchdog{ref, victim}
	const step = 10 * time.Second
	base := r.step(step) // baseline scrape
	for i := 0; i < 90; i++ {
		if i == 45 {
			r.sim.Restart() // vLLM restarts: counters go back to zero
		}
		if i == 30 {
			// kill -9 of the exporter: the victim misses one tick and is
			// re-created from its checkpoint.
			r.ws = []*Watchdog{ref}
			r.step(step)
			victim = New(Options{StateFile: stateFile}, holder, Sources{VLLM: r.sc}, nil)
			r.ws = []*Watchdog{ref, victim}
			continue
		}
		r.step(step)
		for _, res := range ref.Status() {
			if res.Page || res.Ticket {
				t.Fatalf("healthy simulated traffic alerted at step %d: %v", i, res)
			}
		}
	}
	end := r.sim.Now()
	if got := stripTime(victim.Status()); !reflect.DeepEqual(got, stripTime(ref.Status())) {
		t.Fatalf("restarted watchdog diverged:\n got %v\nwant %v", got, stripTime(ref.Status()))
	}
	got := map[string]bool{}
	for _, res := range ref.Status() {
		got[res.SLO] = true
	}
	for _, s := range []string{"ttft-p99", "tpot-p99", "e2e-p99", "preemption", "availability"} {
		if !got[s] {
			t.Errorf("no result for default SLO %s: %v", s, ref.Status())
		}
	}
	// Ground truth: every request the simulator finished after the baseline
	// scrape is one availability event, across the vLLM restart.
	var want float64
	for _, rec := range r.sim.Records() {
		if rec.LastToken.After(base) && !rec.LastToken.After(end) {
			want++
		}
	}
	avail := only2(t, ref, "availability")
	if pw := avail.PeriodWindow; pw.Total != want || pw.Bad != 0 || want < 500 {
		t.Fatalf("availability events %v/%v, simulator finished %v requests", pw.Bad, pw.Total, want)
	}
}

// A hard breach in the simulator (arrivals far above capacity: the queue
// grows and every TTFT exceeds 1s) pages within the short window.
func TestSimHardBreachPages(t *testing.T) {
	r := newSimRig(t, "healthy")
	w := New(Options{}, holderFor(t, ttft99), Sources{VLLM: r.sc}, nil)
	r.ws = []*Watchdog{w}
	r.step(10 * time.Second)
	for i := 0; i < 60; i++ {
		r.step(10 * time.Second)
		if res := only(t, w); res.Page || res.Ticket {
			t.Fatalf("healthy phase alerted: %v", res)
		}
	}
	if err := r.sim.SetScenario("queueing"); err != nil {
		t.Fatal(err)
	}
	breach := r.sim.Now()
	for {
		now := r.step(10 * time.Second)
		if only(t, w).Page {
			if d := now.Sub(breach); d > 5*time.Minute {
				t.Fatalf("paged %v after the breach began, want within the 5m short window", d)
			}
			break
		}
		if now.Sub(breach) > 5*time.Minute {
			t.Fatalf("no page 5m into the breach: %v", w.Status())
		}
	}
}

// e2e10s is an e2e SLO with a 10s threshold; tests append its objective.
const e2e10s = `
slos:
  - name: e2e
    kind: latency
    metric: e2e
    threshold: 10
`

// At low traffic on the simulator (one request every 10 minutes, submitted
// straight to its scheduler; its virtual clock scraped by the real scraper
// every minute), one slow request (e2e about 25s against a 10s threshold)
// does not page with the default min_events. The same run with
// min_events: 0 pages, which shows the request was seen and the guard is
// what holds the page back.
func TestSimSingleBadRequestLowTrafficDoesNotPage(t *testing.T) {
	for _, tc := range []struct {
		min      string
		wantPage bool
	}{{"", false}, {"    min_events: 0\n", true}} {
		r := newSimRigWith(t, vllmsim.Config{VirtualClock: true, Seed: 11, Scenario: "healthy"})
		w := New(Options{}, holderFor(t, e2e10s+"    objective: 0.999\n"+tc.min), Sources{VLLM: r.sc}, nil)
		r.ws = []*Watchdog{w}
		r.step(time.Minute) // baseline
		paged, bad := false, 0.0
		for i := 1; i <= 180; i++ { // three hours
			if i%10 == 0 {
				tokens := 20
				if i == 90 { // the one slow request: 4000 decode steps
					tokens = 4000
				}
				r.submit(i, tokens)
			}
			r.step(time.Minute)
			res := only(t, w)
			paged = paged || res.Page
			bad = res.PeriodWindow.Bad
		}
		if res := only(t, w); res.PeriodWindow.Total != 18 || bad != 1 {
			t.Fatalf("min_events %q: the simulator's requests were not all seen: %v", tc.min, res)
		}
		if paged != tc.wantPage {
			t.Fatalf("min_events %q: paged=%v, want %v", tc.min, paged, tc.wantPage)
		}
	}
}

// A slow leak on the simulator: 20 requests a minute submitted straight to
// its scheduler, every 50th one slow (e2e about 25s against a 10s
// threshold), so 2% bad on a 99% SLO: a 2x burn. Over a 1d period (windows
// 10s .. 2h24m) half an hour of clean traffic then two hours of leak open a
// ticket (1x over 2h24m and 12m) and never page (14.4x over 2m and 10s, 6x
// over 12m and 1m).
func TestSimSlowLeakTicketsNoPage(t *testing.T) {
	r := newSimRigWith(t, vllmsim.Config{VirtualClock: true, Seed: 13, Scenario: "healthy"})
	w := New(Options{}, holderFor(t, e2e10s+"    objective: 0.99\n    period: 1d\n"), Sources{VLLM: r.sc}, nil)
	r.ws = []*Watchdog{w}
	r.step(30 * time.Second) // baseline
	seq := 0
	var firstTicket time.Time
	for i := 1; i <= 5*60; i++ { // two and a half hours in 30s steps
		for k := 0; k < 10; k++ {
			seq++
			tokens := 20
			if i > 60 && seq%50 == 0 { // the leak starts after half an hour
				tokens = 4000
			}
			r.submit(seq, tokens)
		}
		now := r.step(30 * time.Second)
		res := only(t, w)
		if res.Page {
			t.Fatalf("a 2x leak paged at step %d: %v", i, res)
		}
		if res.Ticket && firstTicket.IsZero() {
			firstTicket = now
			if i <= 60 {
				t.Fatalf("ticket before the leak began: %v", res)
			}
		}
	}
	res := only(t, w)
	if firstTicket.IsZero() || !res.Ticket {
		t.Fatalf("a 2x leak for 2h of a 1d period opened no ticket: %v", res)
	}
	if b := win(t, res, "2h24m"); b.Bad == 0 || b.BurnRate.V < 1.5 || b.BurnRate.V > 2.5 {
		t.Fatalf("2h24m burn %v, want about 2 x 120/144: %+v", b.BurnRate.V, b)
	}
}
