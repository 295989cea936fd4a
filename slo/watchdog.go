// Package slo is the SLO watchdog: on every tick it turns the latest
// cumulative counters of the exporter's sources (vLLM scrape, probes) into
// good/bad event increments, keeps them in compact time-bucket rings, and
// evaluates multi-window multi-burn-rate error budgets (the SRE workbook's
// method) per SLO and model. It exports the results, checkpoints its window
// state to disk so a restart loses at most one tick, and generates the
// equivalent Prometheus rules (GenerateRules).
package slo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/modelset"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// VLLMSource is the read-only view of the vLLM scraper the watchdog needs.
type VLLMSource interface {
	Latest() *snapshot.VLLM
	Window(time.Duration) map[string]*snapshot.Derived
}

// GPUSource is the read-only view of the GPU sampler.
type GPUSource interface{ Latest() *snapshot.GPU }

// ProbeSource is the read-only view of the probe scheduler.
type ProbeSource interface{ Latest() *snapshot.Probes }

// Sources are the snapshot publishers the watchdog reads; any may be nil.
type Sources struct {
	VLLM   VLLMSource
	GPU    GPUSource
	Probes ProbeSource
}

// Hook is run after every watchdog tick with the tick's time (the
// bottleneck classifier plugs in here).
type Hook interface{ Tick(now time.Time) }

// DefaultInterval is the tick interval when Options.Interval is zero.
const DefaultInterval = 10 * time.Second

// Options configure a Watchdog.
type Options struct {
	// Interval is how long Run waits for a new vLLM snapshot before it
	// evaluates anyway (default 10s, --slo.interval); with a publishing
	// source every snapshot is evaluated as it lands.
	Interval time.Duration
	// StateFile is the checkpoint path (--slo.state-file); empty disables
	// checkpointing.
	StateFile string
	// SaveEvery writes the checkpoint every N ticks (default 1: every tick).
	SaveEvery int
	// CheckpointInterval is the least time between two checkpoint writes
	// (--slo.checkpoint-interval; 0: every SaveEvery-th tick). A write
	// encodes every ring (64 KB of JSON per model with the shipped SLOs
	// once 3 days of traffic fill them, 0.43 MB allocated and 2-3 ms with
	// the fsync: BenchmarkCheckpoint; with the single 30 s ring before,
	// 447 KB, 3.2 MB and 10 ms, which at every 5 s tick cost more than the
	// rest of the exporter). After a crash the events since
	// the last write still come from vLLM's counters at the first tick;
	// shutdown always writes.
	CheckpointInterval time.Duration
	// Hooks run after each tick, in order.
	Hooks []Hook
	// Models is the exporter's shared bound on model names
	// (--vllm.max-models, --vllm.model-idle-timeout): at most Max models
	// get series, and a model absent from successful vLLM scrapes for the
	// idle timeout loses them (and its place in the state file). Zero
	// value: the defaults.
	Models modelset.Limits
	// WindowEvents exports vllm_slo_events for each exported window
	// (--slo.window-events). Off by default: no shipped alert, dashboard
	// panel or verdict reads it (min_events is applied in the watchdog).
	WindowEvents bool
	// PeriodWindowSeries exports the per-window series of the period
	// window (30d) as well (--slo.period-window-series). Off by default: no
	// shipped alert uses the period as a burn window, and its error ratio
	// is vllm_slo_error_budget_remaining_ratio's complement.
	PeriodWindowSeries bool
	// ErrorRatioSeries exports vllm_slo_error_ratio beside
	// vllm_slo_burn_rate. Off by default: the burn rate carries the same
	// number (error ratio = burn rate x (1 - objective), and
	// vllm_slo_objective_ratio is exported), and nothing shipped reads it.
	ErrorRatioSeries bool
}

// WindowResult is one alert window of one SLO series.
type WindowResult struct {
	Name     string        // label value, e.g. "5m"
	Duration time.Duration // the window
	Bad      float64       // bad events in the window
	Total    float64       // all events in the window
	// ErrorRatio is Bad/Total; absent when the window holds no events.
	ErrorRatio snapshot.Value
	// BurnRate is ErrorRatio / (1 - objective); absent with ErrorRatio.
	BurnRate snapshot.Value
	// Enough reports Total >= min_events: only then can the window burn.
	Enough bool
}

// Result is the latest evaluation of one SLO for one model.
type Result struct {
	SLO       string
	Model     string // vLLM model_name; "" for probe SLOs
	Source    string
	Kind      string
	Objective float64
	Period    time.Duration
	// Windows are the alert windows, shortest first (5m .. 3d for 30d).
	Windows []WindowResult
	// PeriodWindow is the whole period (the budget's window).
	PeriodWindow WindowResult
	// BudgetRemaining is 1 - (period error ratio / error budget): 1 with no
	// errors, 0 when the budget is spent, negative when overspent.
	BudgetRemaining snapshot.Value
	// PeriodCovered is the share of the period the watchdog has observed
	// (0..1): a young period's budget rests on little traffic, so a short
	// burst can show it overspent many times over.
	PeriodCovered float64
	// Fast are the fast tier's windows (FastWindows: 5m, 1m), read from a
	// finer ring than Windows.
	Fast []WindowResult
	// FastPage reports the fast tier's burn condition (part of Page).
	FastPage bool
	// Page and Ticket are the multi-window multi-burn-rate alert states.
	Page, Ticket bool
	// Time is when this result was computed.
	Time time.Time
}

// Window returns the window result with the given label value.
func (r *Result) Window(name string) (WindowResult, bool) {
	for _, w := range r.Windows {
		if w.Name == name {
			return w, true
		}
	}
	if r.PeriodWindow.Name == name {
		return r.PeriodWindow, true
	}
	return WindowResult{}, false
}

// series is the state of one SLO for one model.
type series struct {
	model    string
	last     cumulative
	hasLast  bool
	lastSeen time.Time
	// since is the first reading of the series: the period's budget covers
	// only what was observed since (checkpointed).
	since time.Time
	// fine and medium hold the alert windows (see firstMediumWindow),
	// coarse the period, fast the fast tier's windows.
	fine, medium, coarse, fast *ring
}

// rings are s's rings, which all record the same events.
func (s *series) rings() [4]*ring { return [4]*ring{s.fine, s.medium, s.coarse, s.fast} }

// sloState is the watchdog's state for one configured SLO.
type sloState struct {
	cfg     config.SLO
	fp      string
	windows []time.Duration
	series  map[string]*series
	lastErr string
	// unmeasurable holds the reasons the last tick could not measure the
	// SLO for some model (vllm_slo_unmeasurable).
	unmeasurable map[string]bool
}

func newSLOState(c config.SLO) *sloState {
	return &sloState{cfg: c, fp: c.Fingerprint(), windows: Windows(c.PeriodDuration()), series: map[string]*series{}}
}

func (st *sloState) newSeries(model string) *series {
	p := st.cfg.PeriodDuration()
	return &series{
		model:  model,
		fine:   newRing(fineWidth(p), st.windows[firstMediumWindow-1]),
		medium: newRing(mediumWidth(p), st.windows[len(st.windows)-1]),
		coarse: newRing(coarseWidth(p), p),
		fast:   newRing(fastWidth, FastWindows[0]),
	}
}

// Watchdog evaluates the configured SLOs on every tick.
type Watchdog struct {
	opts   Options
	holder *config.Holder
	src    Sources
	logger log.Logger

	mu     sync.Mutex // serialises ticks and guards the fields below
	states map[string]*sloState
	// reconciled is the configuration states was last reconciled with:
	// the holder hands out the same *config.File until a reload, and
	// fingerprinting every SLO at every tick was a tenth of a tick's CPU.
	reconciled *config.File
	ticks      int
	// savedAt is the tick time of the last checkpoint written by a tick;
	// baselined is set when a tick took a new baseline reading (a model's
	// first, or its events now read from other series, as when vLLM's
	// refusal counter appears), which the checkpoint must carry at once:
	// restored with the older reading, the next tick would see another
	// series and take a new baseline, dropping the events in between.
	savedAt   time.Time
	baselined bool
	hooks     []Hook
	models    *modelset.Set
	// admitted caches this tick's admission decisions, so every SLO sees
	// the same answer and a refusal is counted once per tick.
	admitted map[string]bool

	status       atomic.Pointer[[]Result]
	unmeasurable atomic.Pointer[map[string][]string]
	self         selfMetrics
}

// New creates a Watchdog and restores its window state from
// opts.StateFile when that holds a valid checkpoint. A corrupt or foreign
// state file is logged, counted and renamed aside, never trusted.
func New(opts Options, holder *config.Holder, src Sources, logger log.Logger) *Watchdog {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.SaveEvery <= 0 {
		opts.SaveEvery = 1
	}
	if logger == nil {
		logger = log.NewNopLogger()
	}
	w := &Watchdog{
		opts: opts, holder: holder, src: src, logger: logger,
		states: map[string]*sloState{},
		hooks:  append([]Hook(nil), opts.Hooks...),
		self:   newSelfMetrics(),
	}
	w.models = w.newModelSet()
	empty := []Result{}
	w.status.Store(&empty)
	w.reconcile(holder.Get())
	if opts.StateFile != "" {
		w.restore(opts.StateFile)
	}
	return w
}

// AddHook appends a hook run after every later tick.
func (w *Watchdog) AddHook(h Hook) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hooks = append(w.hooks, h)
}

// Run evaluates on every new vLLM snapshot (stamped with the scrape's own
// time, so a verdict's onset is in the interval of the scrape that shows
// it) and, when no snapshot arrives for Interval, on the wall clock, so
// time-based windows still advance while the scraper is stuck. A vLLM source
// that does not publish (a test fake) is evaluated every Interval. On ctx
// done it writes a final checkpoint.
func (w *Watchdog) Run(ctx context.Context) {
	// The start-up evaluation runs once Follow has subscribed, so a scrape
	// landing during it is evaluated too.
	snapshot.FollowVLLM(ctx, w.src.VLLM, w.opts.Interval, func() { w.Tick(time.Now()) }, w.Tick)
	if err := w.SaveState(); err != nil {
		level.Error(w.logger).Log("msg", "final SLO state checkpoint failed", "err", err)
	}
}

// Status returns the latest per-SLO, per-model results, sorted by SLO then
// model. The slice is shared: do not modify it.
func (w *Watchdog) Status() []Result { return *w.status.Load() }

// reconcile makes the SLO states match the configuration: new SLOs start
// empty, SLOs whose definition (fingerprint) changed start over, removed
// ones are dropped, and objective/min_events changes apply in place.
func (w *Watchdog) reconcile(f *config.File) {
	if f == w.reconciled {
		return
	}
	w.reconciled = f
	want := map[string]bool{}
	for _, c := range f.SLOs {
		want[c.Name] = true
		st := w.states[c.Name]
		if st == nil || st.fp != c.Fingerprint() {
			if st != nil {
				level.Info(w.logger).Log("msg", "SLO definition changed; its window state starts over", "slo", c.Name)
			}
			w.states[c.Name] = newSLOState(c)
			continue
		}
		st.cfg = c
	}
	for name := range w.states {
		if !want[name] {
			delete(w.states, name)
		}
	}
}

// Tick runs one evaluation at now: read the sources' latest snapshots,
// add the event increments to the rings, evaluate every window, publish the
// results, checkpoint, then run the hooks.
func (w *Watchdog) Tick(now time.Time) {
	w.mu.Lock()
	w.reconcile(w.holder.Get())
	vl, pr := snapshot.LatestOf(w.src.VLLM), snapshot.LatestOf(w.src.Probes)
	if vl != nil && vl.Up {
		w.evictIdle(vl)
	}
	w.admitted = map[string]bool{}
	var results []Result
	for _, n := range slices.Sorted(maps.Keys(w.states)) {
		st := w.states[n]
		w.observe(st, vl, pr, now)
		for _, m := range slices.Sorted(maps.Keys(st.series)) {
			results = append(results, evaluate(st, st.series[m], now))
		}
	}
	if results == nil {
		results = []Result{}
	}
	w.status.Store(&results)
	w.publishUnmeasurable()
	w.ticks++
	if w.checkpointDue(now) {
		if err := w.saveLocked(now); err != nil {
			level.Error(w.logger).Log("msg", "SLO state checkpoint failed", "file", w.opts.StateFile, "err", err)
		} else {
			w.savedAt, w.baselined = now, false
		}
	}
	w.self.lastEval.Store(now.UnixNano())
	hooks := append([]Hook(nil), w.hooks...)
	w.mu.Unlock()
	for _, h := range hooks {
		h.Tick(now)
	}
}

// checkpointDue says whether the tick at now writes the state file: every
// SaveEvery-th tick, once CheckpointInterval has passed since the last
// write (or the clock went back past it), or at once after a new baseline.
// A failed write is retried at the next due tick.
func (w *Watchdog) checkpointDue(now time.Time) bool {
	if w.opts.StateFile == "" || w.ticks%w.opts.SaveEvery != 0 {
		return false
	}
	iv := w.opts.CheckpointInterval
	// A zero savedAt (nothing written yet) is long enough ago.
	return iv <= 0 || w.baselined || now.Sub(w.savedAt) >= iv || now.Before(w.savedAt)
}

// observe adds the events since the previous reading to st's rings.
func (w *Watchdog) observe(st *sloState, vl *snapshot.VLLM, pr *snapshot.Probes, now time.Time) {
	var cur map[string]cumulative
	var errs []error
	if st.cfg.Source == config.SourceProbe {
		cur, errs = probeEvents(&st.cfg, pr)
	} else {
		cur, errs = serverEvents(&st.cfg, vl)
	}
	msg := ""
	if len(errs) > 0 {
		msg = errs[0].Error()
		w.self.evalErrors.add(st.cfg.Name)
	}
	st.unmeasurable = nil
	for _, err := range errs {
		var u unmeasurable
		if errors.As(err, &u) {
			if st.unmeasurable == nil {
				st.unmeasurable = map[string]bool{}
			}
			st.unmeasurable[u.reason] = true
		}
	}
	asleep := sleepingModels(vl)
	if msg != st.lastErr {
		if msg != "" {
			level.Warn(w.logger).Log("msg", "SLO cannot be measured", "slo", st.cfg.Name, "err", msg, "errors", len(errs))
		} else if st.lastErr != "" {
			level.Info(w.logger).Log("msg", "SLO measurable again", "slo", st.cfg.Name)
		}
		st.lastErr = msg
	}
	for model, c := range cur {
		s := st.series[model]
		if !w.admit(model, now) {
			continue
		}
		if s == nil {
			s = st.newSeries(model)
			st.series[model] = s
		}
		s.lastSeen = now
		if s.since.IsZero() {
			s.since = now
		}
		// A deliberately sleeping engine (vllm_engine_awake 0) serves
		// nothing on purpose: what its counters or the probes record
		// meanwhile (refusals, probe failures) is a new baseline, never
		// bad events. Probe SLOs have no model: any sleeping model counts.
		sleeping := asleep[model] || (model == probeModel && len(asleep) > 0)
		// A different underlying series is a baseline, unless the server
		// restarted (a counter went back) and only what joins the sum
		// changed ("finished" and "finished+refused": http_requests_total
		// is absent until the first request after a restart).
		_, _, reset := increment(s.last, c)
		was, _, _ := strings.Cut(s.last.Series, "+")
		is, _, _ := strings.Cut(c.Series, "+")
		changed := s.hasLast && s.last.Series != c.Series && !(reset && was == is)
		if !s.hasLast || changed || sleeping {
			// First reading (or a different underlying series): a baseline,
			// not events; otherwise a server's whole history would land in
			// the current window.
			if !s.hasLast || changed {
				w.baselined = true
			}
			s.last, s.hasLast = c, true
			for _, r := range s.rings() {
				r.advance(r.index(now))
			}
			continue
		}
		bad, total, _ := increment(s.last, c)
		s.last = c
		for _, r := range s.rings() {
			r.add(now, bad, total)
		}
	}
	// Forget models gone for longer than the period with no events left.
	for model, s := range st.series {
		if _, ok := cur[model]; ok {
			continue
		}
		if now.Sub(s.lastSeen) > st.cfg.PeriodDuration() {
			delete(st.series, model)
		}
	}
}

// admit applies the model bound to a model with events this tick; probe
// SLOs (model "") are not a vLLM model name and always pass.
func (w *Watchdog) admit(model string, now time.Time) bool {
	if model == probeModel {
		return true
	}
	ok, decided := w.admitted[model]
	if !decided {
		ok = w.models.Admit(model, now)
		w.admitted[model] = ok
		if !ok {
			level.Debug(w.logger).Log("msg", "model gets no SLO series: --vllm.max-models already tracked", "model", model)
		}
	}
	return ok
}

// evictIdle reports the successful snapshot vl to the model set (each
// snapshot once, by its scrape time) and drops every SLO series of the
// models absent from successful scrapes for the idle timeout. Called only
// with a successful snapshot: time while vLLM is down or restarting is not
// absence, so an outage alone never wipes the error budgets it should be
// recording.
func (w *Watchdog) evictIdle(vl *snapshot.VLLM) {
	w.models.Scraped(vl.Time, func(name string) bool { _, ok := vl.Models[name]; return ok })
	for _, gone := range w.models.Expire() {
		w.dropModel(gone)
		level.Info(w.logger).Log("msg", "model absent from successful scrapes for --vllm.model-idle-timeout; its SLO series and state are dropped", "model", gone)
	}
}

// newModelSet is the watchdog's bounded set of model names: a name that
// gives its place to a new one loses its SLO series with it.
func (w *Watchdog) newModelSet() *modelset.Set {
	s := w.opts.Models.NewSet("slo")
	s.OnEvict(func(name string) {
		w.dropModel(name)
		level.Info(w.logger).Log("msg", "model absent from successful scrapes for --vllm.model-grace gives its place to a new name; its SLO series and state are dropped", "model", name)
	})
	return s
}

// dropModel forgets every SLO series of model. Called with w.mu held.
func (w *Watchdog) dropModel(model string) {
	for _, st := range w.states {
		delete(st.series, model)
	}
}

// sleepingModels are the models of the latest scrape whose engine says it
// is asleep.
func sleepingModels(v *snapshot.VLLM) map[string]bool {
	if v == nil || !v.Up {
		return nil
	}
	var out map[string]bool
	for name, m := range v.Models {
		if m.Asleep() {
			if out == nil {
				out = map[string]bool{}
			}
			out[name] = true
		}
	}
	return out
}

// Unmeasurable returns, per SLO name, the reasons the last tick could not
// measure it (for some model). The map is shared: do not modify it.
func (w *Watchdog) Unmeasurable() map[string][]string {
	if p := w.unmeasurable.Load(); p != nil {
		return *p
	}
	return nil
}

// publishUnmeasurable stores the reasons of the tick. Called with w.mu held.
func (w *Watchdog) publishUnmeasurable() {
	out := map[string][]string{}
	for name, st := range w.states {
		if len(st.unmeasurable) > 0 {
			out[name] = slices.Sorted(maps.Keys(st.unmeasurable))
		}
	}
	w.unmeasurable.Store(&out)
}

// windowResult turns event sums into ratios for one window.
func windowResult(name string, d time.Duration, bad, total, budget, minEvents float64) WindowResult {
	r := WindowResult{Name: name, Duration: d, Bad: bad, Total: total}
	if total > 0 {
		r.ErrorRatio = snapshot.Some(bad / total)
		r.BurnRate = snapshot.Some(bad / total / budget)
	}
	r.Enough = total > 0 && total >= minEvents
	return r
}

// burning reports whether a window counts as burning faster than factor.
func burning(r WindowResult, factor float64) bool {
	return r.Enough && r.BurnRate.OK && r.BurnRate.V > factor
}

// alerting evaluates a list of window pairs.
func alerting(ws []WindowResult, pairs []AlertPair) bool {
	for _, p := range pairs {
		if burning(ws[p.Long], p.Factor) && burning(ws[p.Short], p.Factor) {
			return true
		}
	}
	return false
}

func evaluate(st *sloState, s *series, now time.Time) Result {
	c := st.cfg
	budget := c.ErrorBudget()
	minEv := c.MinEventsValue()
	res := Result{SLO: c.Name, Model: s.model, Source: c.Source, Kind: c.Kind,
		Objective: c.Objective, Period: c.PeriodDuration(), Time: now}
	bad, total := s.fine.sums(now, st.windows[:firstMediumWindow])
	mb, mt := s.medium.sums(now, st.windows[firstMediumWindow:])
	bad, total = append(bad, mb...), append(total, mt...)
	res.Windows = make([]WindowResult, len(st.windows))
	for i, d := range st.windows {
		res.Windows[i] = windowResult(WindowName(d), d, bad[i], total[i], budget, minEv)
	}
	pb, pt := s.coarse.sums(now, []time.Duration{c.PeriodDuration()})
	res.PeriodWindow = windowResult(WindowName(c.PeriodDuration()), c.PeriodDuration(), pb[0], pt[0], budget, minEv)
	if res.PeriodWindow.ErrorRatio.OK {
		res.BudgetRemaining = snapshot.Some(1 - res.PeriodWindow.ErrorRatio.V/budget)
	} else {
		res.BudgetRemaining = snapshot.Some(1) // no events: nothing spent
	}
	// sums wants ascending spans; FastWindows is long, short
	fb, ft := s.fast.sums(now, []time.Duration{FastWindows[1], FastWindows[0]})
	fb[0], fb[1], ft[0], ft[1] = fb[1], fb[0], ft[1], ft[0]
	fastF := FastFactor(budget)
	res.Fast = make([]WindowResult, len(FastWindows))
	for i, d := range FastWindows {
		res.Fast[i] = windowResult(WindowName(d), d, fb[i], ft[i], budget, minEv)
	}
	long := windowResult(res.Fast[0].Name, FastWindows[0], fb[0], ft[0], budget, FastMin(minEv))
	// The burn condition only: the shipped rules also hold SLO pages
	// back after an engine stall and during a queue's recovery, context
	// the watchdog does not see.
	res.FastPage = burning(long, fastF) && burning(res.Fast[1], fastF)
	if !s.since.IsZero() {
		res.PeriodCovered = min(1, max(0, now.Sub(s.since).Seconds()/c.PeriodDuration().Seconds()))
	}
	res.Page = alerting(res.Windows, PagePairs) || res.FastPage
	res.Ticket = alerting(res.Windows, TicketPairs)
	return res
}

// String is a compact description for logs and test failures.
func (r Result) String() string {
	s := fmt.Sprintf("%s{model=%q} page=%v ticket=%v budget=%.4f", r.SLO, r.Model, r.Page, r.Ticket, r.BudgetRemaining.V)
	for _, w := range r.Windows {
		s += fmt.Sprintf(" %s=%g/%g", w.Name, w.Bad, w.Total)
	}
	return s
}
