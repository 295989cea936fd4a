package slo

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// cumulative is one SLO's cumulative event counters for one model, as read
// from the latest source snapshot. Series names the counters it came from;
// when it changes (e.g. vLLM was upgraded and tpot moved from
// inter_token_latency to request_time_per_output_token) the next tick only
// takes a new baseline.
type cumulative struct {
	Bad    float64 `json:"bad"`
	Total  float64 `json:"total"`
	Series string  `json:"series"`
}

// increment returns the events between two cumulative readings. A counter
// that went down was reset (the server restarted): its new value is the
// increment, for both counters together.
func increment(prev, cur cumulative) (bad, total float64, reset bool) {
	if cur.Bad < prev.Bad || cur.Total < prev.Total {
		return cur.Bad, cur.Total, true
	}
	return cur.Bad - prev.Bad, cur.Total - prev.Total, false
}

// serverHistogram resolves a latency metric to the snapshot histogram that
// backs it: tpot is vLLM's per-request request_time_per_output_token where
// the server exposes it (>= 0.11) and the inter-token latency otherwise.
func serverHistogram(m *snapshot.Model, metric string) (snapshot.HistogramName, bool) {
	if metric == "tpot" && m.Histograms.Has(snapshot.RequestTPOT) {
		return snapshot.RequestTPOT, true
	}
	name, known := snapshotHistograms[metric]
	return name, known && m.Histograms.Has(name)
}

var snapshotHistograms = map[string]snapshot.HistogramName{"ttft": snapshot.TTFT, "itl": snapshot.InterTokenLatency,
	"tpot": snapshot.InterTokenLatency, "e2e": snapshot.E2E, "queue": snapshot.QueueTime}

// decodeMetric reports whether a latency metric measures decode (owned by
// the decode pod of a disaggregated pair).
func decodeMetric(metric string) bool { return metric == "tpot" || metric == "itl" }

// countAtOrBelow is the cumulative count of observations <= bound, which
// must be one of h's boundaries (1 and 1.0 are the same boundary).
func countAtOrBelow(h snapshot.Histogram, bound float64) (float64, bool) {
	if len(h.Bounds) == 0 && h.Count == 0 {
		return 0, true // never observed: no buckets yet, no events
	}
	for i, b := range h.Bounds {
		if math.Abs(b-bound) <= 1e-9*math.Max(1, math.Abs(bound)) && i < len(h.Counts) {
			return h.Counts[i], true
		}
	}
	return 0, false
}

// Reasons an SLO cannot be measured (the `reason` label of
// vllm_slo_unmeasurable).
const (
	// UnmeasurableNoBound: the histogram in the scrape has no bucket bound
	// at the threshold (vLLM --custom-histogram-buckets without it, or an
	// old vLLM's shorter default list). Until a scrape shows the bound the
	// SLO counts nothing.
	UnmeasurableNoBound = "no_bucket_bound"
	// UnmeasurableNoSeries: the histogram or counter is not in the scrape.
	UnmeasurableNoSeries = "series_missing"
)

// unmeasurable is an error that says why an SLO was not measured.
type unmeasurable struct {
	reason string
	err    error
}

func (u unmeasurable) Error() string { return u.err.Error() }
func (u unmeasurable) Unwrap() error { return u.err }

func latencyEvents(h snapshot.Histogram, threshold float64, series string) (cumulative, error) {
	good, ok := countAtOrBelow(h, threshold)
	if !ok {
		return cumulative{}, unmeasurable{UnmeasurableNoBound, fmt.Errorf("%s has no bucket boundary %v (boundaries: %v); the SLO counts nothing until a scrape shows that bound (vLLM --custom-histogram-buckets must include it)", series, threshold, h.Bounds)}
	}
	bad := h.Count - good
	if bad < 0 {
		bad = 0
	}
	return cumulative{Bad: bad, Total: h.Count, Series: series}, nil
}

func sumReasons(m map[string]float64, only ...string) float64 {
	var s float64
	if len(only) == 0 {
		for _, v := range m {
			s += v
		}
		return s
	}
	for _, k := range only {
		s += m[k]
	}
	return s
}

// badFinishReasons are the finished_reason values an availability SLO
// counts as failures.
var badFinishReasons = []string{"abort", "error"}

// serverEvents reads one SLO's cumulative counters per model from a vLLM
// snapshot. Models whose data is unusable are reported in errs.
func serverEvents(s *config.SLO, v *snapshot.VLLM) (out map[string]cumulative, errs []error) {
	out = map[string]cumulative{}
	if v == nil || !v.Up {
		return out, nil
	}
	for _, name := range slices.Sorted(maps.Keys(v.Models)) {
		m := v.Models[name]
		if m == nil {
			continue
		}
		switch s.Kind {
		case config.KindLatency:
			if m.Prefill() && decodeMetric(s.Metric) {
				// A prefill pod (disaggregated serving) hands each
				// request to a decode pod after its first token: it has
				// no TPOT or inter-token latency of its own to judge.
				continue
			}
			hn, ok := serverHistogram(m, s.Metric)
			if !ok {
				errs = append(errs, unmeasurable{UnmeasurableNoSeries, fmt.Errorf("model %q: histogram vllm_%s_seconds not exposed", name, hn)})
				continue
			}
			c, err := latencyEvents(m.Histograms.Get(hn), s.Threshold, "vllm_"+string(hn)+"_seconds")
			if err != nil {
				errs = append(errs, fmt.Errorf("model %q: %w", name, err))
				continue
			}
			out[name] = c
		case config.KindPreemption:
			if !m.Preemptions.OK {
				errs = append(errs, unmeasurable{UnmeasurableNoSeries, fmt.Errorf("model %q: preemption counter not exposed", name)})
				continue
			}
			out[name] = cumulative{Bad: m.Preemptions.V, Total: sumReasons(m.FinishedByReason), Series: "preemptions/finished"}
		case config.KindAvailability:
			c := cumulative{Bad: sumReasons(m.FinishedByReason, badFinishReasons...),
				Total: sumReasons(m.FinishedByReason), Series: "finished"}
			// Requests the server refused before the engine (5xx, 429)
			// never reach request_success_total: they are failed events
			// too. vLLM serves one model per process, so the server-wide
			// count belongs to it.
			//
			// Requests refused at admission (the waiting queue at
			// --max-num-queued-requests / -tokens) are answered 503, so
			// the 5xx count holds them already; only a server without
			// http_requests_total needs them added from
			// vllm:admission_rejections_total.
			if refused, ok := v.Refused(); ok {
				c.Bad += refused
				c.Total += refused
				c.Series = "finished+refused"
			} else if m.RejectedByReason != nil {
				rejected := sumReasons(m.RejectedByReason)
				c.Bad += rejected
				c.Total += rejected
				c.Series = "finished+rejected"
			}
			out[name] = c
		}
	}
	return out, errs
}

// probeModel is the model label of probe SLO results: probes measure the
// one vLLM server this exporter sits beside, whatever it serves.
const probeModel = ""

// probeEvents sums one SLO's cumulative counters over the selected probe
// profiles.
func probeEvents(s *config.SLO, p *snapshot.Probes) (out map[string]cumulative, errs []error) {
	out = map[string]cumulative{}
	if p == nil {
		return out, nil
	}
	want := map[string]bool{}
	for _, n := range s.Profiles {
		want[n] = true
	}
	names := make([]string, 0, len(p.Profiles))
	for n := range p.Profiles {
		if len(want) == 0 || want[n] {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return out, nil
	}
	sort.Strings(names)
	var acc cumulative
	// The profile set is part of the series: adding a profile must not count
	// its whole history as new events.
	acc.Series = "probe:" + s.Kind + ":" + s.Metric + ":" + strings.Join(names, ",")
	for _, n := range names {
		pr := p.Profiles[n]
		if pr == nil {
			continue
		}
		switch s.Kind {
		case config.KindLatency:
			h := map[string]snapshot.Histogram{"ttft": pr.TTFT, "tpot": pr.TPOT, "itl": pr.ITL, "e2e": pr.E2E}[s.Metric]
			c, err := latencyEvents(h, s.Threshold, "probe profile "+n+" "+s.Metric)
			if err != nil {
				errs = append(errs, err)
				return map[string]cumulative{}, errs
			}
			acc.Bad += c.Bad
			acc.Total += c.Total
		case config.KindAvailability:
			acc.Bad += sumReasons(pr.Failures)
			acc.Total += pr.Requests
		}
	}
	out[probeModel] = acc
	return out, errs
}
