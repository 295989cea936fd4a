package slo

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/collector"
)

// descs are the Descs of the watchdog's series.
var descs collector.Descs

var (
	sloLabels = []string{"slo", "model"}

	descObjective = descs.New("vllm_slo_objective_ratio",
		"SLO objective: the fraction of events that must be good over the period, from the SLO config.", sloLabels...)
	descErrorRatio = descs.New("vllm_slo_error_ratio",
		"Fraction of the SLO's events in the window that were bad, computed by the exporter's SLO watchdog; absent for windows without events. Opt-in (--slo.error-ratio-series): vllm_slo_burn_rate x (1 - vllm_slo_objective_ratio) is the same number.",
		append(sloLabels, "window")...)
	descBurnRate = descs.New("vllm_slo_burn_rate",
		"Error-budget burn rate over the window (error ratio divided by 1 - objective), computed by the exporter's SLO watchdog.",
		append(sloLabels, "window")...)
	descBudget = descs.New("vllm_slo_error_budget_remaining_ratio",
		"Fraction of the SLO period's error budget left (1 = untouched, 0 = spent, negative = overspent) over the part of the period the exporter's SLO watchdog has observed so far (vllm_slo_period_covered_ratio).", sloLabels...)
	descAlert = descs.New("vllm_slo_alert_state",
		"1 while the SLO watchdog's multi-window multi-burn-rate condition holds (severity critical = page, warning = ticket), else 0.",
		append(sloLabels, "severity")...)
	descCovered = descs.New("vllm_slo_period_covered_ratio",
		"Share of the SLO period the exporter's SLO watchdog has observed (0..1, checkpointed with --slo.state-file): below 1 the error budget rests on less than a full period of traffic.", sloLabels...)
	descLastEval = descs.New("vllm_slo_last_evaluation_timestamp_seconds",
		"Unix time of the SLO watchdog's last evaluation of this SLO.", sloLabels...)
	descEvents = descs.New("vllm_slo_events",
		"Events (good and bad) in the window, counted by the exporter's SLO watchdog; a window with fewer than min_events never burns.",
		append(sloLabels, "window")...)

	descStateErrors = descs.New("vllm_exporter_slo_state_errors_total",
		"SLO state checkpoint problems by reason (corrupt, foreign, version, read, write); a bad file is set aside, not trusted.", "reason")
	descStateSaved = descs.New("vllm_exporter_slo_state_last_save_timestamp_seconds",
		"Unix time of the last successful SLO state checkpoint write.")
	descStateRestored = descs.New("vllm_exporter_slo_state_restored",
		"1 if the SLO window state was restored from the state file at start, else 0.")
	descUnmeasurable = descs.New("vllm_slo_unmeasurable",
		"1 while the SLO's last evaluation could not measure it for some model, by reason: no_bucket_bound (the scrape's histogram has no bucket bound at the threshold, e.g. vLLM --custom-histogram-buckets without it) or series_missing; the SLO counts no events for that model until it is measurable.", "slo", "reason")
	descEvalErrors = descs.New("vllm_exporter_slo_evaluation_errors_total",
		"SLO watchdog ticks on which an SLO could not be measured for some model (its histogram or bucket boundary missing from the vLLM scrape).", "slo")
)

// counterVec is a tiny label->count map read by Collect.
type counterVec struct {
	mu sync.Mutex
	m  map[string]float64
}

func (c *counterVec) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]float64{}
	}
	c.m[k]++
}

func (c *counterVec) snapshot() map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]float64, len(c.m))
	for k, v := range c.m {
		out[k] = v
	}
	return out
}

type selfMetrics struct {
	stateErrors counterVec
	evalErrors  counterVec
	lastSave    atomic.Int64 // unix nanoseconds, 0 = never
	lastEval    atomic.Int64
	restored    atomic.Bool
}

func newSelfMetrics() selfMetrics { return selfMetrics{} }

// Describe implements prometheus.Collector.
func (w *Watchdog) Describe(ch chan<- *prometheus.Desc) { descs.Describe(ch) }

// Collect implements prometheus.Collector: the const metrics of the latest
// tick's results and the watchdog's own counters. It does no work besides.
func (w *Watchdog) Collect(ch chan<- prometheus.Metric) {
	e := collector.Metrics(ch)
	gauge := e.Gauge
	for _, r := range w.Status() {
		gauge(descObjective, r.Objective, r.SLO, r.Model)
		// The windows the alerts read (the workbook's pairs and the fast
		// tier's 1m); the period window and the event counts only on request.
		ws := append(make([]WindowResult, 0, len(r.Windows)+len(r.Fast)+1), r.Windows...)
		if w.opts.PeriodWindowSeries {
			ws = append(ws, r.PeriodWindow)
		}
		for _, f := range r.Fast {
			// the fast tier's windows not already exported (1m for 30d)
			if _, dup := r.Window(f.Name); !dup {
				ws = append(ws, f)
			}
		}
		for _, wr := range ws {
			if w.opts.WindowEvents {
				gauge(descEvents, wr.Total, r.SLO, r.Model, wr.Name)
			}
			if wr.ErrorRatio.OK {
				if w.opts.ErrorRatioSeries {
					gauge(descErrorRatio, wr.ErrorRatio.V, r.SLO, r.Model, wr.Name)
				}
				gauge(descBurnRate, wr.BurnRate.V, r.SLO, r.Model, wr.Name)
			}
		}
		if r.BudgetRemaining.OK {
			gauge(descBudget, r.BudgetRemaining.V, r.SLO, r.Model)
		}
		gauge(descCovered, r.PeriodCovered, r.SLO, r.Model)
		gauge(descAlert, b2f(r.Page), r.SLO, r.Model, "critical")
		gauge(descAlert, b2f(r.Ticket), r.SLO, r.Model, "warning")
		gauge(descLastEval, float64(r.Time.UnixNano())/1e9, r.SLO, r.Model)
	}
	errs := w.self.stateErrors.snapshot()
	for _, reason := range stateErrorReasons {
		e.Send(descStateErrors, prometheus.CounterValue, errs[reason], reason)
	}
	if ns := w.self.lastSave.Load(); ns != 0 {
		gauge(descStateSaved, float64(ns)/1e9)
	}
	gauge(descStateRestored, b2f(w.self.restored.Load()))
	um := w.Unmeasurable()
	for _, name := range slices.Sorted(maps.Keys(um)) {
		for _, reason := range um[name] {
			gauge(descUnmeasurable, 1, name, reason)
		}
	}
	ev := w.self.evalErrors.snapshot()
	for _, k := range slices.Sorted(maps.Keys(ev)) {
		e.Send(descEvalErrors, prometheus.CounterValue, ev[k], k)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
