package slo

import (
	"math"
	"time"

	"github.com/prometheus/common/model"
)

// The SRE workbook's alert windows for a 30-day period. For another period
// every window is scaled by period/30d (rounded to whole seconds, at least
// 1s): a 7d SLO pages on 14.4x over 14m AND 1m10s.
var baseWindows = []time.Duration{
	5 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
	6 * time.Hour, 24 * time.Hour, 72 * time.Hour,
}

const basePeriod = 30 * 24 * time.Hour

// Window indexes into Windows(period).
const (
	w5m = iota
	w30m
	w1h
	w2h
	w6h
	w1d
	w3d
)

// AlertPair is one multi-window condition: the burn rate must exceed Factor
// over both the Long and the Short window (indexes into Windows).
type AlertPair struct {
	Long, Short int
	Factor      float64
}

// PagePairs and TicketPairs are the workbook's multi-window multi-burn-rate
// conditions; either pair of a list sets the state.
var (
	PagePairs   = []AlertPair{{w1h, w5m, 14.4}, {w6h, w30m, 6}}
	TicketPairs = []AlertPair{{w1d, w2h, 3}, {w3d, w6h, 1}}
)

// The fast tier pages on a hard breach within minutes, where the workbook's
// 1h/5m pair needs about 9 minutes of total failure (the 1h window must
// reach 14.4x). Its windows do not scale with the period: they are set by
// the pipeline (15s scrapes and 30s evaluations need a 1m window to see a
// rate at all), not by the budget. It fires when the burn rate over both
// FastWindows exceeds FastFactor(budget) (at least FastErrorRatio of the
// events bad, and never below the workbook's slowest page factor), and the
// long fast window holds at least FastMinEvents (or min_events, when
// larger) events: a handful of slow requests at night is not a breach.
var FastWindows = []time.Duration{5 * time.Minute, time.Minute}

const (
	// FastErrorRatio is the bad fraction over both fast windows that pages.
	FastErrorRatio = 0.1
	// FastMinEvents is the fast tier's event guard on its long window.
	FastMinEvents = 30
	// fastFloorFactor: the fast tier never pages below the burn rate of
	// the workbook's slowest page pair.
	fastFloorFactor = 6
)

// FastFactor is the fast tier's burn-rate threshold for an error budget
// (rounded to 9 decimals: 0.1/0.001 is 100, not 100.00000000000001).
func FastFactor(budget float64) float64 {
	return math.Round(math.Max(FastErrorRatio/budget, fastFloorFactor)*1e9) / 1e9
}

// A queue recovering (its length now under half of its peak within
// RecoveryWindow) admits its backlog at once, and preemptions come in a
// burst: while it recovers, a preemption SLO's fast tier pages only when
// its short window has burned for PreemptionPersist. A storm with a
// standing queue is not a recovery and pages at once.
const (
	RecoveryWindow    = 10 * time.Minute
	PreemptionPersist = 5 * time.Minute
)

// StallAftermath bounds how long after an engine stall the SLO pages stay
// suppressed (the stall pages by itself); a breach that outlasts it pages.
const StallAftermath = 10 * time.Minute

// fastWidth resolves the fast tier's short window in 10 buckets.
var fastWidth = FastWindows[1] / fineBucketsPerShortWindow

// FastMin is the fast tier's event guard for an SLO's min_events.
func FastMin(minEvents float64) float64 { return math.Max(FastMinEvents, minEvents) }

// Windows returns the alert windows for an SLO period, shortest first.
func Windows(period time.Duration) []time.Duration {
	out := make([]time.Duration, len(baseWindows))
	for i, b := range baseWindows {
		d := time.Duration(math.Round(float64(b)*float64(period)/float64(basePeriod)/float64(time.Second))) * time.Second
		if d < time.Second {
			d = time.Second
		}
		out[i] = d
	}
	return out
}

// WindowName is the `window` label value of a duration ("5m", "1d", "1m10s").
func WindowName(d time.Duration) string { return model.Duration(d).String() }

// bucket widths: the fine ring resolves the shortest window in 10 buckets
// and spans the windows up to 2h (30-day period: 30 s buckets, 241 of
// them); the medium ring's buckets are 10 fine ones (5 minutes) and span
// the windows from 6h to 3d (865); the coarse ring covers the whole period
// in 720 buckets, so the long windows need no fine buckets. A medium
// window's oldest edge moves in 5-minute steps (the 6h window sums between
// 5h55m and 6h of events).
const (
	fineBucketsPerShortWindow = 10
	mediumPerFine             = 10
	coarseBuckets             = 720
	// firstMediumWindow is the first window summed from the medium ring.
	firstMediumWindow = w6h
)

func fineWidth(period time.Duration) time.Duration {
	w := Windows(period)[0] / fineBucketsPerShortWindow
	w = w.Truncate(time.Millisecond)
	if w < time.Millisecond {
		w = time.Millisecond
	}
	return w
}

// mediumWidth is a whole number of fine buckets, so a fine ring from an
// older checkpoint re-buckets into the medium ring exactly.
func mediumWidth(period time.Duration) time.Duration {
	return fineWidth(period) * mediumPerFine
}

func coarseWidth(period time.Duration) time.Duration {
	w := (period / coarseBuckets).Truncate(time.Millisecond)
	if w < time.Millisecond {
		w = time.Millisecond
	}
	return w
}

// ring is a fixed array of time buckets holding bad and total event counts;
// bucket i (an absolute index, unix time / width) lives at i mod len.
// Counts are float32: a bucket holds whole events (exact below 2^24 = 16.7
// million per bucket: 4,600 requests/s in a 30-day SLO's 1-hour coarse
// bucket, far above one vLLM server's rate), sums are taken in float64, and
// a ring takes half the memory of float64 counts.
type ring struct {
	width time.Duration
	bad   []float32
	total []float32
	head  int64 // absolute index of the newest bucket
	init  bool
}

func newRing(width, span time.Duration) *ring {
	n := int((span+width-1)/width) + 1
	return &ring{width: width, bad: make([]float32, n), total: make([]float32, n)}
}

func (r *ring) index(t time.Time) int64 {
	return floorDiv(t.UnixNano(), int64(r.width))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func (r *ring) slot(i int64) int {
	n := int64(len(r.bad))
	return int(((i % n) + n) % n)
}

// advance moves head forward to i, clearing the buckets it passes.
func (r *ring) advance(i int64) {
	if !r.init {
		r.head, r.init = i, true
		s := r.slot(i)
		r.bad[s], r.total[s] = 0, 0
		return
	}
	if i <= r.head {
		return
	}
	n := int64(len(r.bad))
	from := r.head + 1
	if i-from >= n {
		from = i - n + 1
	}
	for j := from; j <= i; j++ {
		s := r.slot(j)
		r.bad[s], r.total[s] = 0, 0
	}
	r.head = i
}

// add records events at time t. Events older than the ring are dropped.
func (r *ring) add(t time.Time, bad, total float64) {
	i := r.index(t)
	r.advance(i)
	if i <= r.head-int64(len(r.bad)) {
		return
	}
	s := r.slot(i)
	r.bad[s] = float32(float64(r.bad[s]) + bad)
	r.total[s] = float32(float64(r.total[s]) + total)
}

// sums returns, for each span in spans (ascending), the events in the
// buckets covering (now-span, now]: ceil(span/width) buckets ending at now's.
// Counts are whole events, so the sums are exact in any order.
func (r *ring) sums(now time.Time, spans []time.Duration) (bad, total []float64) {
	bad = make([]float64, len(spans))
	total = make([]float64, len(spans))
	if !r.init {
		return
	}
	end, n := r.index(now), int64(len(r.bad))
	var b, t float64
	k := int64(0)
	for wi, sp := range spans {
		for cnt := min(int64((sp+r.width-1)/r.width), n); k < cnt; k++ {
			if i := end - k; i <= r.head && i > r.head-n {
				b += float64(r.bad[r.slot(i)])
				t += float64(r.total[r.slot(i)])
			}
		}
		bad[wi], total[wi] = b, t
	}
	return
}

func (r *ring) empty() bool {
	for _, v := range r.total {
		if v != 0 {
			return false
		}
	}
	for _, v := range r.bad {
		if v != 0 {
			return false
		}
	}
	return true
}
