package slo

import (
	"math/rand"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// run drives a watchdog in virtual time: every step it adds the traffic
// that gen returns for [t, t+step) and ticks at t+step. It returns the
// first times page and ticket were set (zero if never) and whether either
// was set in [from, until).
type runResult struct {
	firstPage, firstTicket time.Time
	pages, tickets         int
}

func drive(t *testing.T, w *Watchdog, src *fakeVLLM, tr *traffic, start time.Time, dur, step time.Duration,
	gen func(at time.Time) (good, bad float64)) runResult {
	t.Helper()
	var rr runResult
	for at := start; at.Before(start.Add(dur)); at = at.Add(step) {
		g, b := gen(at)
		tr.add(g, b)
		now := at.Add(step)
		tickAt(w, src, tr, now)
		for _, r := range w.Status() {
			if r.Page {
				rr.pages++
				if rr.firstPage.IsZero() {
					rr.firstPage = now
				}
			}
			if r.Ticket {
				rr.tickets++
				if rr.firstTicket.IsZero() {
					rr.firstTicket = now
				}
			}
		}
	}
	return rr
}

func newScenario(t *testing.T, cfg string) (*Watchdog, *fakeVLLM, *traffic) {
	src := &fakeVLLM{}
	tr := &traffic{}
	w := New(Options{}, holderFor(t, cfg), Sources{VLLM: src}, nil)
	tickAt(w, src, tr, t0)
	return w, src, tr
}

// 5 requests/s; a healthy hour (0.02% bad) then a hard breach (every
// request over the threshold).
func TestScenarioHardBreachPages(t *testing.T) {
	for _, tc := range []struct {
		cfg    string
		within time.Duration
	}{
		// 99%: the 1h window crosses 14.4 x 1% after 8.64 minutes of breach.
		{ttft99, 9*time.Minute + 30*time.Second},
		// 99.9%: 14.4 x 0.1% after 52s: well within the 5m short window.
		{ttft999, 5 * time.Minute},
	} {
		w, src, tr := newScenario(t, tc.cfg)
		step := 10 * time.Second
		healthy := drive(t, w, src, tr, t0, time.Hour, step, func(time.Time) (float64, float64) { return 49.99, 0.01 })
		if healthy.pages != 0 || healthy.tickets != 0 {
			t.Fatalf("healthy hour alerted: %+v", healthy)
		}
		breach := t0.Add(time.Hour)
		rr := drive(t, w, src, tr, breach, 30*time.Minute, step, func(time.Time) (float64, float64) { return 0, 50 })
		if rr.firstPage.IsZero() {
			t.Fatalf("hard breach never paged: %v", w.Status())
		}
		if d := rr.firstPage.Sub(breach); d > tc.within {
			t.Fatalf("paged %v after the breach, want within %v", d, tc.within)
		}
		if rr.firstTicket.IsZero() {
			t.Fatal("hard breach never opened a ticket")
		}
		// Recovery: the page clears once the short windows are clean again.
		rec := drive(t, w, src, tr, breach.Add(30*time.Minute), 2*time.Hour, step, func(time.Time) (float64, float64) { return 50, 0 })
		if r := only(t, w); r.Page {
			t.Fatalf("still paging 2h after recovery: %v (%+v)", r, rec)
		}
	}
}

// A slow leak burning the budget at 2x opens a ticket (1x over 3d and 6h)
// but never pages. For a 99% SLO that is 2% bad; for 99.9% it is 0.2% bad.
// The service runs healthy for a day, then leaks for four days; requests
// are whole numbers (1-2 per second), so bad ones come in random clumps.
func TestScenarioSlowLeakTicketsNoPage(t *testing.T) {
	for _, tc := range []struct {
		cfg     string
		badFrac float64
	}{{ttft99, 0.02}, {ttft999, 0.002}} {
		w, src, tr := newScenario(t, tc.cfg)
		rng := rand.New(rand.NewSource(1))
		frac := 0.0
		gen := func(time.Time) (float64, float64) {
			n := 60 + float64(rng.Intn(60)) // 1-2 req/s
			bad := float64(int(n*frac + rng.Float64()))
			return n - bad, bad
		}
		if rr := drive(t, w, src, tr, t0, 24*time.Hour, time.Minute, gen); rr.pages+rr.tickets != 0 {
			t.Fatalf("healthy day alerted: %+v", rr)
		}
		frac = tc.badFrac
		rr := drive(t, w, src, tr, t0.Add(24*time.Hour), 4*24*time.Hour, time.Minute, gen)
		if rr.pages != 0 {
			t.Fatalf("slow leak %.3f on %s paged %d times (first %v)", tc.badFrac, tc.cfg, rr.pages, rr.firstPage)
		}
		if rr.firstTicket.IsZero() {
			t.Fatalf("slow leak %.3f never opened a ticket: %v", tc.badFrac, w.Status())
		}
		// Budget: 4 of the 5 observed days burnt at 2x: ratio = 0.8 x 2 x budget,
		// remaining = 1 - 1.6 = -0.6 (the period holds only what we observed).
		if r := only(t, w); !r.Ticket || r.BudgetRemaining.V > -0.4 || r.BudgetRemaining.V < -0.8 {
			t.Fatalf("after 4 days of 2x burn: %v, want a ticket and budget about -0.6", r)
		}
	}
}

// 2% bad on a 99.9% SLO is a 20x burn: per the workbook's pairs that is a
// page (14.4x over 1h and 5m), not a slow leak. This pins that arithmetic.
func TestScenarioTwoPercentOnThreeNinesIsAPage(t *testing.T) {
	w, src, tr := newScenario(t, ttft999)
	rr := drive(t, w, src, tr, t0, 3*time.Hour, time.Minute, func(time.Time) (float64, float64) { return 98, 2 })
	if rr.firstPage.IsZero() {
		t.Fatal("20x burn did not page")
	}
}

// Healthy traffic with noise (bursts of bad requests, mean 0.05% bad on a
// 99.9% SLO, idle minutes) never pages and never tickets over three days.
func TestScenarioHealthyNoiseNeverAlerts(t *testing.T) {
	w, src, tr := newScenario(t, ttft999)
	rng := rand.New(rand.NewSource(42))
	rr := drive(t, w, src, tr, t0, 3*24*time.Hour, time.Minute, func(time.Time) (float64, float64) {
		if rng.Intn(50) == 0 {
			return 0, 0 // idle minute
		}
		n := float64(200 + rng.Intn(400))
		bad := 0.0
		if rng.Intn(20) == 0 { // an occasional burst of slow requests
			bad = float64(rng.Intn(8))
		}
		return n - bad, bad
	})
	if rr.pages != 0 || rr.tickets != 0 {
		t.Fatalf("healthy noise alerted: %+v status %v", rr, w.Status())
	}
}

// At low traffic (one request every 10 minutes) a single bad request is
// 100% of the 5m window, but the window holds fewer than min_events, so it
// never pages. Without the guard (min_events: 0) the same input pages,
// which shows the guard is what holds it back.
func TestScenarioSingleBadRequestLowTraffic(t *testing.T) {
	for _, tc := range []struct {
		min      string
		wantPage bool
	}{{"", false}, {"    min_events: 0\n", true}} {
		w, src, tr := newScenario(t, ttft999+tc.min)
		i := 0
		rr := drive(t, w, src, tr, t0, 6*time.Hour, time.Minute, func(time.Time) (float64, float64) {
			i++
			if i%10 != 0 {
				return 0, 0
			}
			if i == 200 {
				return 0, 1
			}
			return 1, 0
		})
		if got := rr.pages > 0; got != tc.wantPage {
			t.Fatalf("min_events %q: paged=%v (%+v), want %v", tc.min, got, rr, tc.wantPage)
		}
	}
}

// A probe SLO works with no user traffic at all: the vLLM source is absent,
// the probes fail, and the probe availability SLO pages.
func TestScenarioProbeSLOWithoutTraffic(t *testing.T) {
	ps := &fakeProbes{}
	w := New(Options{}, holderFor(t, `
probes:
  profiles:
    - name: short
slos:
  - name: probe-avail
    source: probe
    kind: availability
    objective: 0.99
    min_events: 5
  - name: probe-ttft
    source: probe
    kind: latency
    metric: ttft
    threshold: 1
    objective: 0.99
    min_events: 5
    profiles: [short]
`), Sources{Probes: ps}, nil)
	prof := &snapshot.ProbeProfile{Name: "short", Failures: map[string]float64{}}
	other := &snapshot.ProbeProfile{Name: "long", Failures: map[string]float64{}, TTFT: ttftHist(0, 1000)}
	ps.s = &snapshot.Probes{Time: t0, Profiles: map[string]*snapshot.ProbeProfile{"short": prof, "long": other}}
	var good float64
	for i := 0; i <= 90; i++ { // one probe every 10s for 15 min
		now := t0.Add(time.Duration(i) * 10 * time.Second)
		p := *prof
		p.Requests = float64(i)
		if i > 60 { // the engine wedges: every probe fails
			p.Failures = map[string]float64{"timeout": float64(i - 60)}
		} else {
			good = float64(i)
		}
		p.TTFT = ttftHist(good, 0)
		ps.s = &snapshot.Probes{Time: now, Profiles: map[string]*snapshot.ProbeProfile{"short": &p, "long": other}}
		w.Tick(now)
	}
	st := w.Status()
	if len(st) != 2 {
		t.Fatalf("results %v", st)
	}
	for _, r := range st {
		switch r.SLO {
		case "probe-avail":
			if !r.Page || r.Model != "" {
				t.Fatalf("probe availability did not page: %v", r)
			}
		case "probe-ttft":
			// Only profile "short" counts; "long" is all slow but excluded.
			if r.Page || r.Ticket || win(t, r, "1h").Bad != 0 || win(t, r, "1h").Total != 60 {
				t.Fatalf("probe ttft: %v", r)
			}
		}
	}
}
