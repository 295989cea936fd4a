package probes

import (
	"math"
	"slices"
	"time"
)

// QuantileWindow is the trailing window of the probes' exact quantiles
// (vllm_probe_*_window_seconds, Recent).
const QuantileWindow = 5 * time.Minute

// RecentProbes is how many finished probes Recent lists.
const RecentProbes = 50

// maxWindowSamples bounds one latency's samples of one profile: past it
// the oldest go, and the window covers less than QuantileWindow (a profile
// streaming thousands of chunks a minute).
const maxWindowSamples = 8192

// The probe latencies, in the order of Recent.Windows' arrays.
const (
	latencyTTFT = iota
	latencyTPOT
	latencyITL
	latencyE2E
	numLatencies
)

// ProbeRecord is one finished probe, as blackbox_exporter lists its
// recent probes.
type ProbeRecord struct {
	Time           time.Time // sent
	Duration       time.Duration
	Profile, Model string
	RequestID      string
	Reason         string // "" on success, else one of Reasons
	Detail         string // what failed, as Result.Detail (credentials scrubbed)
	StatusCode     int
	// TTFT and E2E are 0 without a content chunk, TPOT without usage.
	TTFT, E2E, TPOT time.Duration
	Chunks, Tokens  int // content chunks, usage.completion_tokens
}

// LatencyWindow is one latency's exact quantiles over QuantileWindow
// (linear interpolation between the closest observations, as numpy's
// percentiles in vllm bench serve), and its cumulative count and sum.
type LatencyWindow struct {
	N          int // observations in the window; P50 and P99 are NaN without
	P50, P99   float64
	Count, Sum float64 // since start
}

// Recent is what the scheduler keeps of its latest probes.
type Recent struct {
	Probes  []ProbeRecord // newest first, at most RecentProbes
	Windows map[string][numLatencies]LatencyWindow
}

// window holds one latency's observations over QuantileWindow, oldest
// first, and their quantiles as of the last change.
type window struct {
	t        []time.Time
	v        []float64
	p50, p99 float64
}

// slide adds vs (observed at t), drops what is older than cut or past
// maxWindowSamples, and recomputes the quantiles when anything changed.
func (w *window) slide(cut, t time.Time, vs []float64) {
	for _, v := range vs {
		w.t, w.v = append(w.t, t), append(w.v, v)
	}
	old := max(len(w.v)-maxWindowSamples, 0)
	for old < len(w.t) && w.t[old].Before(cut) {
		old++
	}
	if old == 0 && len(vs) == 0 {
		return
	}
	w.t, w.v = slices.Delete(w.t, 0, old), slices.Delete(w.v, 0, old)
	sorted := slices.Sorted(slices.Values(w.v))
	w.p50, w.p99 = quantile(sorted, 0.5), quantile(sorted, 0.99)
}

// quantile is the q-quantile of sorted values with linear interpolation
// between the closest ranks (numpy's default, PromQL's quantile); NaN for
// none.
func quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	pos := q * float64(n-1)
	i := int(pos)
	if i+1 >= n {
		return sorted[n-1]
	}
	return sorted[i] + (pos-float64(i))*(sorted[i+1]-sorted[i])
}

// slideWindows folds a successful probe's latencies (res; nil for none)
// into the profile's windows and slides them to now.
func (st *profileState) slideWindows(now time.Time, res *Result) {
	var add [numLatencies][]float64
	var at time.Time
	if res != nil {
		at = res.Start
		add[latencyTTFT], add[latencyE2E] = []float64{res.TTFT.Seconds()}, []float64{res.E2E.Seconds()}
		if res.HasTPOT {
			add[latencyTPOT] = []float64{res.TPOT.Seconds()}
		}
		for _, g := range res.ITL {
			add[latencyITL] = append(add[latencyITL], g.Seconds())
		}
	}
	for i := range st.windows {
		st.windows[i].slide(now.Add(-QuantileWindow), at, add[i])
	}
}

// remember adds a finished probe to the ring of recent ones; mu held.
func (s *Scheduler) remember(j *job, res *Result, end time.Time) {
	r := ProbeRecord{
		Time: res.Start, Duration: end.Sub(res.Start), Profile: j.cfg.Name, Model: j.model, RequestID: j.reqID,
		Reason: res.Reason, Detail: res.Detail, StatusCode: res.StatusCode, Chunks: res.Chunks, Tokens: res.CompletionTokens,
	}
	if res.FirstToken() {
		r.TTFT, r.E2E = res.TTFT, res.E2E
	}
	if res.HasTPOT {
		r.TPOT = res.TPOT
	}
	if len(s.recent) == RecentProbes {
		s.recent = slices.Delete(s.recent, 0, 1)
	}
	s.recent = append(s.recent, r)
}

// publishRecentLocked slides every profile's windows to now and stores
// the view Recent returns.
func (s *Scheduler) publishRecentLocked(now time.Time) {
	r := &Recent{Probes: slices.Clone(s.recent), Windows: make(map[string][numLatencies]LatencyWindow, len(s.profiles))}
	slices.Reverse(r.Probes)
	for name, st := range s.profiles {
		st.slideWindows(now, nil)
		var lw [numLatencies]LatencyWindow
		for i, c := range [numLatencies]*classic{&st.ttft, &st.tpot, &st.itl, &st.e2e} {
			w := &st.windows[i]
			lw[i] = LatencyWindow{N: len(w.v), P50: math.NaN(), P99: math.NaN(), Count: c.count, Sum: c.sum}
			if lw[i].N > 0 {
				lw[i].P50, lw[i].P99 = w.p50, w.p99
			}
		}
		r.Windows[name] = lw
	}
	s.recentView.Store(r)
}

// Recent returns the latest probes (newest first) and each profile's
// window quantiles as of the scheduler's last step; never nil. Lock-free.
func (s *Scheduler) Recent() *Recent { return s.recentView.Load() }
