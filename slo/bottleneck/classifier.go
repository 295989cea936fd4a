package bottleneck

import (
	"context"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// VLLMSource is the scraper's read-only view (collector/vllm.Scraper).
type VLLMSource interface {
	Latest() *snapshot.VLLM
	Window(d time.Duration) map[string]*snapshot.Derived
}

// GPUSource is the NVML sampler's read-only view (collector/gpu.Sampler).
type GPUSource interface{ Latest() *snapshot.GPU }

// ProbeSource is the probe scheduler's read-only view (probes.Scheduler).
type ProbeSource interface{ Latest() *snapshot.Probes }

// Sources are the classifier's inputs. GPU and Probes may be nil (pass a nil
// interface, not a typed nil pointer); VLLM may be nil too, in which case
// Tick does nothing.
type Sources struct {
	VLLM   VLLMSource
	GPU    GPUSource
	Probes ProbeSource
}

// CostSpec prices a GPU (flags --cost.*).
type CostSpec struct {
	GPUHour float64 // price of one GPU-hour; 0 disables the cost series
	GPUs    int     // GPUs serving this vLLM; 0 = count from the GPU snapshot, else 1
}

// Options configure a Classifier.
type Options struct {
	Model ModelSpec
	Cost  CostSpec
	// SLOHolds optionally reports whether every SLO of model currently
	// holds (the slo watchdog's verdict); known=false falls back to the
	// classifier's own TTFT/TPOT targets. It gates the capacity maximum.
	SLOHolds func(model string, now time.Time) (holds, known bool)
	// Thresholds, when set, are used instead of the config holder's
	// bottleneck section (diagnose shortens the window to fit its watch).
	Thresholds *config.Bottleneck
}

// Classifier evaluates the rules per model on each Tick, applies hysteresis
// and renders the result as Prometheus series. Collect does no work beyond
// copying the last Tick's state.
type Classifier struct {
	opts   Options
	cfg    *config.Holder
	src    Sources
	logger log.Logger

	mu        sync.Mutex
	models    map[string]*modelState
	probeHist []probeTick // cumulative probe results per tick, oldest first
}

// probeTick is one tick's cumulative probe results: the TTFT histograms by
// profile, and the probes sent and failed by reason summed over profiles.
type probeTick struct {
	at     time.Time
	ttft   map[string]snapshot.Histogram
	sent   float64
	failed map[string]float64
}

// probeFailureProbes is how many of the latest probes the failure share
// is taken over (more when the window holds more).
const probeFailureProbes = 4

// recentProbes records p and returns it with each profile's TTFT histogram
// reduced to its increase over the last baseline_window, so the cold/warm
// medians describe recent probes (the prober's cumulative histograms would
// remember hours of a working prefix cache long after it stopped hitting;
// until the history spans the window, p is returned as it is), and the
// outcomes of the probes since the newest tick at least probeFailureProbes
// probes and a window ago, so a failing prober shows within a few probes.
// Called with c.mu held.
func (c *Classifier) recentProbes(now time.Time, p *snapshot.Probes, th config.Bottleneck) (*snapshot.Probes, ProbeOutcomes) {
	if p == nil {
		c.probeHist = nil
		return nil, ProbeOutcomes{}
	}
	cur := probeTick{at: now, ttft: make(map[string]snapshot.Histogram, len(p.Profiles)), failed: map[string]float64{}}
	out := ProbeOutcomes{Failed: map[string]float64{}}
	var newest time.Time
	for name, pr := range p.Profiles {
		if pr == nil {
			continue
		}
		cur.ttft[name], cur.sent = pr.TTFT, cur.sent+pr.Requests
		for reason, n := range pr.Failures {
			cur.failed[reason] += n
		}
		if pr.Requests > 0 && pr.LastTime.After(newest) {
			newest, out.LatestFailed = pr.LastTime, !pr.LastSuccess
		}
	}
	// The newest tick at or before now-baseline_window is the TTFT base;
	// older ones go.
	cut := now.Add(-th.BaselineWindow)
	i := 0
	for i < len(c.probeHist) && !c.probeHist[i].at.After(cut) {
		i++
	}
	var base *probeTick
	if i > 0 {
		b := c.probeHist[i-1]
		base = &b
		c.probeHist = append([]probeTick(nil), c.probeHist[i-1:]...)
	}
	c.probeHist = append(c.probeHist, cur)
	from := probeTick{}
	for j := len(c.probeHist) - 2; j >= 0; j-- {
		o := c.probeHist[j]
		if o.sent > cur.sent {
			break // the prober restarted: count everything since
		}
		if from = o; cur.sent-o.sent >= probeFailureProbes && now.Sub(o.at) >= th.Window {
			break
		}
	}
	out.Sent = cur.sent - from.sent
	for reason, n := range cur.failed {
		if d := n - from.failed[reason]; d > 0 {
			out.Failed[reason] = d
		}
	}
	if base == nil {
		return p, out
	}
	recent := &snapshot.Probes{Time: p.Time, EngineStalled: p.EngineStalled, Profiles: make(map[string]*snapshot.ProbeProfile, len(p.Profiles))}
	for name, pr := range p.Profiles {
		if pr == nil {
			continue
		}
		cp := *pr
		if old, ok := base.ttft[name]; ok {
			cp.TTFT, _ = pr.TTFT.Sub(old) // a prober restart: the newer histogram is the increase
		}
		recent.Profiles[name] = &cp
	}
	return recent, out
}

// ModelState is one model's published classification.
type ModelState struct {
	Model string
	Class Class
	Since time.Time // when Class became current
	// Candidate is the class that would replace Class if the raw verdict
	// keeps disagreeing with it; CandidateTicks is how many consecutive
	// ticks it has (0 and empty when the raw verdict equals Class).
	Candidate      Class
	CandidateTicks int
	// Raw is this tick's verdict before hysteresis.
	Raw         Class
	Findings    []Finding
	Roofline    Roofline
	Unavailable map[Class]string
	// SLOHolds (known when SLOKnown) gates the capacity maximum: the SLO
	// watchdog's verdict, else the classifier's own TTFT and TPOT targets.
	SLOHolds, SLOKnown bool
	Capacity           Capacity
	Window             *snapshot.Derived
	Latest             *snapshot.Model
	Ticks              int
}

// Evidence returns the current class's evidence.
func (s ModelState) Evidence() []Evidence {
	for _, f := range s.Findings {
		if f.Class == s.Class {
			return f.Evidence
		}
	}
	return nil
}

// Capacity is sustained throughput while the SLOs held, and its cost.
type Capacity struct {
	RequestsPerSecond     snapshot.Value
	OutputTokensPerSecond snapshot.Value
	GPUs                  int
	CostPerMillionOutput  snapshot.Value
	// Saturated: the request-rate maximum was measured while the server
	// was at capacity (requests waiting, KV full or preemptions); else it
	// is offered load. KVUsage is the KV usage then.
	Saturated bool
	KVUsage   snapshot.Value
	Plan      *GPUPlan // daily_requests configured and Saturated
}

type modelState struct {
	ModelState
	samples []capSample // per-bucket maxima while SLOs held, oldest first
	pending []Class     // raw verdicts since the last one that agreed with Class
	kv      []kvReading // KV usage readings over the window, oldest first

	// progress: the token counters' last value and the scrape time it
	// was first seen; prefix: the prefix counters at the previous tick.
	tokens       float64
	tokensSince  time.Time
	prevQueries  float64
	prevHits     float64
	prevFinished float64
	prevPrompt   float64
	scrapes      []scrapeReading // the latest recentScrapes+1 scrapes, oldest first
	scrapedAt    time.Time       // the newest of them
	havePrefix   bool
	haveProgress bool
	// gen: the generation-token counter at the previous tick's scrape.
	prevGen     float64
	prevGenAt   time.Time
	havePrevGen bool
	genRate     snapshot.Value // the rate computed at prevGenAt
	lastUp      time.Time      // scrape time of the last successful scrape

	// The references the relative rules compare with: the best windowed
	// prefix-cache hit ratio, cached tokens per request and decode step,
	// and the typical prefill speed.
	hitRef, perRequestRef, prefillRef, decodeRef highWater
}

// noProgress returns how long (scrape time) the prompt+generation token
// counters have stood still.
func (st *modelState) noProgress(m *snapshot.Model, at time.Time) snapshot.Value {
	if !m.PromptTokens.OK || !m.GenerationTokens.OK {
		st.haveProgress = false
		return snapshot.Value{}
	}
	tok := m.PromptTokens.V + m.GenerationTokens.V
	if !st.haveProgress || tok != st.tokens {
		st.tokens, st.tokensSince, st.haveProgress = tok, at, true
	}
	return snapshot.Some(at.Sub(st.tokensSince).Seconds())
}

// recentGeneration is the generation rate (tokens/s, scrape time) since the
// previous tick's scrape; absent on the first tick and after a counter
// reset. A tick without a newer scrape keeps the last rate.
func (st *modelState) recentGeneration(m *snapshot.Model, at time.Time) snapshot.Value {
	if !m.GenerationTokens.OK {
		st.havePrevGen = false
		return snapshot.Value{}
	}
	prev, prevAt, ok := st.prevGen, st.prevGenAt, st.havePrevGen
	if ok && !at.After(prevAt) {
		return st.genRate // the same scrape again
	}
	st.prevGen, st.prevGenAt, st.havePrevGen = m.GenerationTokens.V, at, true
	st.genRate = snapshot.Value{}
	if d := m.GenerationTokens.V - prev; ok && d >= 0 {
		st.genRate = snapshot.Some(d / at.Sub(prevAt).Seconds())
	}
	return st.genRate
}

// minRecentRequests is how many requests must have finished since the
// previous tick for its prefix-cache ratios to stand for the traffic.
const minRecentRequests = 3

// recentPrefix is the prefix-cache hit ratio since the previous tick and
// the cached prompt tokens per request finished in that time (absent when
// fewer than minRecentRequests finished, or a counter reset).
// Where the server counts cached and computed prompt tokens (≈0.16+) the
// ratio is the cached share of prompt tokens instead (see
// reportsCachedTokens).
func (st *modelState) recentPrefix(m *snapshot.Model) (ratio, perRequest snapshot.Value) {
	q, h := m.PrefixQueries.V, m.PrefixHits.V
	if reportsCachedTokens(m) {
		h = m.PromptTokensCached.V
		q = h + m.PromptTokensBySource["local_compute"]
	} else if !m.PrefixQueries.OK || !m.PrefixHits.OK {
		st.havePrefix = false
		return ratio, perRequest
	}
	n, p := finished(m), m.PromptTokens.V
	dq, dh, dn, dp := q-st.prevQueries, h-st.prevHits, n-st.prevFinished, p-st.prevPrompt
	ok := st.havePrefix && dq > 0 && dh >= 0 && dh <= dq
	st.prevQueries, st.prevHits, st.prevFinished, st.prevPrompt, st.havePrefix = q, h, n, p, true
	if !ok {
		return ratio, perRequest
	}
	if dn < minRecentRequests {
		return ratio, perRequest // too few requests for a rate: the rules read the window
	}
	ratio = snapshot.Some(dh / dq)
	// In prompt tokens, as CachedTokensPerRequest (older servers count
	// prefix lookups in blocks).
	if dp >= 0 && m.PromptTokens.OK {
		perRequest = snapshot.Some(ratio.V * dp / dn)
	}
	return ratio, perRequest
}

// recentScrapes is how many of the latest scrape intervals stand for the
// traffic as it is now (the queue that held, the median TTFT).
const recentScrapes = 3

// scrapeReading is what the rules of the traffic as it is now keep of one
// scrape.
type scrapeReading struct {
	waiting snapshot.Value // requests waiting for capacity
	ttft    snapshot.Histogram
	hasTTFT bool
}

// recent records this scrape's readings (a tick without a newer scrape
// repeats them) and returns the capacity queue at the latest recentScrapes
// scrapes, oldest first, and the median TTFT of the requests whose first
// token came over the latest recentScrapes scrape intervals (absent without
// any, or after a reset): the traffic as it is now, which a window that
// still holds older traffic does not show.
func (st *modelState) recent(m *snapshot.Model, at time.Time) (waiting []float64, ttft50 snapshot.Value) {
	if len(st.scrapes) == 0 || at.After(st.scrapedAt) {
		h, ok := m.Histograms.Lookup(snapshot.TTFT)
		st.scrapes = append(st.scrapes, scrapeReading{waiting: m.WaitingForCapacity(), ttft: h, hasTTFT: ok})
		if len(st.scrapes) > recentScrapes+1 {
			st.scrapes = st.scrapes[1:]
		}
		st.scrapedAt = at
	}
	rs := st.scrapes
	for _, r := range rs[max(len(rs)-recentScrapes, 0):] {
		if waiting = append(waiting, r.waiting.V); !r.waiting.OK {
			waiting = nil // a gap: the queue's history starts again
		}
	}
	if first, last := rs[0], rs[len(rs)-1]; len(rs) > 1 && first.hasTTFT && last.hasTTFT {
		if d, reset := last.ttft.Sub(first.ttft); !reset && d.Count > 0 {
			ttft50 = d.Quantile(0.5)
		}
	}
	return waiting, ttft50
}

// finished is the requests the server has finished, by any reason.
func finished(m *snapshot.Model) float64 {
	n := 0.0
	for _, v := range m.FinishedByReason {
		n += v
	}
	return n
}

// references fills in's references from before this tick, then records
// this window's values in them.
func (st *modelState) references(now time.Time, th config.Bottleneck, in *Inputs) {
	ref := func(h *highWater, horizon time.Duration, v snapshot.Value) snapshot.Value {
		best, ok := h.max(now, horizon)
		if h == &st.prefillRef {
			// A window's prefill speed swings with its mix of prompt
			// lengths (each prefill costs a step whatever its length):
			// the typical speed, not the best window's.
			best, ok = h.typical(now, horizon)
		}
		if v.OK {
			h.add(now, horizon, v.V)
		}
		if !ok {
			return snapshot.Value{}
		}
		return snapshot.Some(best)
	}
	in.HitRatioReference = ref(&st.hitRef, th.BaselineWindow, HitRatio(in.Window))
	in.CachedTokensPerRequestReference = ref(&st.perRequestRef, th.BaselineWindow, CachedTokensPerRequest(in.Window))
	in.PrefillSpeedReference = ref(&st.prefillRef, th.CapacityHorizon, PrefillSpeed(in.Window))
	// The decode reference is kept as a rate so the highest is the best.
	rate := snapshot.Value{}
	if d := decodeStepSeconds(in.Window, 0.5); d.OK && d.V > 0 {
		rate = snapshot.Some(1 / d.V)
	}
	if v := ref(&st.decodeRef, th.CapacityHorizon, rate); v.OK {
		in.DecodeStepReference = snapshot.Some(1 / v.V)
	}
}

// kvReading is one KV-usage reading and its tick time.
type kvReading struct {
	at time.Time
	v  float64
}

// sustainedKV records a KV-usage reading and returns the larger of it and
// the mean of the readings over the window: a rise shows at once (the class
// switch still waits hold_ticks), and the dips of a cache that preempts to
// make room (each preemption frees a request's blocks for a moment) do not
// drop a cache that is full on average, nor flip the verdict to the
// preemptions that are its symptom. peak is the highest reading over the
// window.
func (st *modelState) sustainedKV(v snapshot.Value, now time.Time, window time.Duration) (sustained, peak snapshot.Value) {
	if !v.OK {
		st.kv = nil
		return v, v
	}
	st.kv = append(st.kv, kvReading{at: now, v: v.V})
	i := 0
	for i < len(st.kv)-1 && now.Sub(st.kv[i].at) >= window {
		i++
	}
	st.kv = st.kv[i:]
	sum, top := 0.0, 0.0
	for _, x := range st.kv {
		sum, top = sum+x.v, max(top, x.v)
	}
	return snapshot.Some(max(v.V, sum/float64(len(st.kv)))), snapshot.Some(top)
}

type capSample struct {
	bucket   time.Time
	rps, tps float64
	load     capLoad // at the rps maximum
}

// New returns a Classifier. holder may be nil (shipped defaults).
func New(opts Options, holder *config.Holder, src Sources, logger log.Logger) *Classifier {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	return &Classifier{opts: opts, cfg: holder, src: src, logger: logger, models: map[string]*modelState{}}
}

func (c *Classifier) thresholds() config.Bottleneck {
	if c.opts.Thresholds != nil {
		return *c.opts.Thresholds
	}
	if c.cfg == nil {
		return config.DefaultBottleneck()
	}
	return c.cfg.Get().Bottleneck
}

// Run evaluates on every new vLLM snapshot (at the scrape's time), and on
// the wall clock when none arrives for interval, until ctx ends. The
// exporter uses it when the classifier is not wired as an SLO-watchdog hook.
func (c *Classifier) Run(ctx context.Context, interval time.Duration) {
	snapshot.FollowVLLM(ctx, c.src.VLLM, interval, nil, c.Tick)
}

// Tick evaluates every model in the latest scrape. Before the first scrape
// it does nothing; while vLLM cannot be scraped every known model's verdict
// is unavailable and its scrape-derived state is withdrawn (tickDown).
// Models that disappear from a successful scrape are dropped.
func (c *Classifier) Tick(now time.Time) {
	if c.src.VLLM == nil {
		return
	}
	latest := c.src.VLLM.Latest()
	if latest == nil {
		return
	}
	th := c.thresholds()
	if !latest.Up {
		c.tickDown(now, latest, th)
		return
	}
	win := c.src.VLLM.Window(th.Window)
	var gpu *snapshot.GPU
	if c.src.GPU != nil {
		gpu = c.src.GPU.Latest()
	}
	var probes *snapshot.Probes
	if c.src.Probes != nil {
		probes = c.src.Probes.Latest()
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	probes, outcomes := c.recentProbes(now, probes, th)
	for name := range c.models {
		if _, ok := latest.Models[name]; !ok {
			delete(c.models, name)
		}
	}
	for name, m := range latest.Models {
		st := c.models[name]
		if st != nil {
			st.lastUp = latest.Time
		}
		if st == nil {
			st = &modelState{ModelState: ModelState{Model: name}, lastUp: latest.Time}
			c.models[name] = st
		}
		in := Inputs{Now: now, Model: m, Window: win[name], GPU: gpu, Probes: probes, ProbeOutcomes: outcomes, NoProgress: st.noProgress(m, latest.Time),
			RecentGenerationTokensPerSecond: st.recentGeneration(m, latest.Time)}
		in.WaitingScrapes, in.RecentTTFTMedian = st.recent(m, latest.Time)
		in.RecentHitRatio, in.RecentCachedTokensPerRequest = st.recentPrefix(m)
		in.KVUsage, in.KVUsagePeak = st.sustainedKV(m.KVUsage, now, th.Window)
		st.references(now, th, &in)
		in.Roofline = ComputeRoofline(c.opts.Model, m, in.Window, gpu, th.BandwidthEfficiency)
		raw, findings := Evaluate(in, th)
		prev := st.Class
		st.advance(raw, now, th.HoldTicks)
		if st.Class != prev && prev != "" {
			level.Info(c.logger).Log("msg", "bottleneck class changed", "model", name, "from", prev, "to", st.Class)
		}
		st.Findings, st.Roofline, st.Window, st.Latest = findings, in.Roofline, in.Window, m
		st.Unavailable = Unavailable(len(upDevices(gpu)) > 0, in.Roofline.Predicted.OK, rules{in: in}.dram().OK)
		maps.Copy(st.Unavailable, MissingInputs(latest.Schema)) // the server's lack first: no flag cures it
		st.SLOHolds, st.SLOKnown = c.sloHolds(name, in, th, now)
		st.trackCapacity(now, th, in.Window, saturation(m, in.Window, in.KVUsage, th), c.gpuCount(gpu), c.opts.Cost.GPUHour)
	}
}

// tickDown is a tick while vLLM cannot be scraped: every known model's raw
// verdict is unavailable (gpu_fault when a GPU reports a fatal error: that
// is the likelier cause of the outage), and everything derived from the
// scrape (windows, roofline, capacity) is withdrawn, not frozen at its last
// value. The per-model histories restart when the server is back, since
// its counters may have reset.
func (c *Classifier) tickDown(now time.Time, latest *snapshot.VLLM, th config.Bottleneck) {
	var gpu *snapshot.GPU
	if c.src.GPU != nil {
		gpu = c.src.GPU.Latest()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, st := range c.models {
		fault := rules{in: Inputs{Now: now, GPU: gpu}, th: th}.gpuFault()
		down := all(ServerUnavailable,
			gate("seconds_since_last_scrape_success", latest.Time.Sub(st.lastUp).Seconds(), ">", 0, "seconds"),
			note("scrape_failure_"+scrapeFailureSignal(latest.Error), 1, ""))
		raw := ServerUnavailable
		if fault.Holds {
			raw = fault.Class
		}
		prev := st.Class
		st.advance(raw, now, th.HoldTicks)
		if st.Class != prev && prev != "" {
			level.Info(c.logger).Log("msg", "bottleneck class changed", "model", name, "from", prev, "to", st.Class, "scrape_error", latest.Error)
		}
		st.Findings = []Finding{fault, down, {Class: NearOptimal, Holds: true}}
		st.Roofline, st.Window, st.Latest = Roofline{}, nil, nil
		st.Unavailable = nil
		st.SLOHolds, st.SLOKnown = false, false
		st.Capacity = Capacity{}
		st.kv, st.scrapes, st.haveProgress, st.havePrefix, st.havePrevGen = nil, nil, false, false, false
	}
}

// scrapeFailureSignal bounds the scrape error reason used in a signal name.
func scrapeFailureSignal(reason string) string {
	switch reason {
	case "connect", "tls", "timeout", "http_4xx", "http_5xx", "http_status", "body_too_large", "too_many_series", "parse":
		return reason
	}
	return "other"
}

// advance applies hysteresis. The first verdict is adopted at once. After
// that the current class is replaced only once the raw verdict has disagreed
// with it on holdTicks consecutive ticks; the replacement is the verdict seen
// most often among those ticks (ties go to the higher-priority class), so two
// symptoms of one regime alternating tick to tick still settle.
func (st *modelState) advance(raw Class, now time.Time, holdTicks int) {
	st.Raw = raw
	st.Ticks++
	switch {
	case st.Class == "":
		st.Class, st.Since, st.pending = raw, now, nil
	case raw == st.Class:
		st.pending = nil
	default:
		st.pending = append(st.pending, raw)
	}
	st.Candidate, st.CandidateTicks = mode(st.pending), len(st.pending)
	if st.CandidateTicks >= holdTicks {
		st.Class, st.Since = st.Candidate, now
		st.pending, st.Candidate, st.CandidateTicks = nil, "", 0
	}
}

// mode is the most frequent class in cs, ties to the higher priority.
func mode(cs []Class) Class {
	best, bestN := Class(""), 0
	for _, c := range Classes {
		n := 0
		for _, x := range cs {
			if x == c {
				n++
			}
		}
		if n > bestN {
			best, bestN = c, n
		}
	}
	return best
}

// sloHolds is the watchdog's verdict on model's SLOs when it has one, else
// the classifier's own: TTFT and TPOT at slo_quantile within their targets.
func (c *Classifier) sloHolds(model string, in Inputs, th config.Bottleneck, now time.Time) (holds, known bool) {
	if c.opts.SLOHolds != nil {
		if holds, known := c.opts.SLOHolds(model, now); known {
			return holds, true
		}
	}
	r := rules{in: in, th: th}
	ttft, tpot := r.slo(snapshot.TTFT, th.SLOQuantile), r.slo(snapshot.RequestTPOT, th.SLOQuantile)
	return ttft.V <= th.TTFTTargetSeconds && tpot.V <= th.TPOTTargetSeconds, ttft.OK && tpot.OK
}

func (c *Classifier) gpuCount(g *snapshot.GPU) int {
	if c.opts.Cost.GPUs > 0 {
		return c.opts.Cost.GPUs
	}
	if n := len(upDevices(g)); n > 0 {
		return n
	}
	return 1
}

// capacityBuckets bounds the samples kept over the capacity horizon.
const capacityBuckets = 1440

// saturation reports whether the server is at its capacity on this tick
// (requests waiting for capacity, the KV cache full, or preemptions), and
// the KV usage: throughput measured on an unsaturated server is its offered
// load, not what it can serve. Deferred requests (≈0.20+: LoRA budget, KV
// transfer) wait on something other than capacity and do not count.
func saturation(m *snapshot.Model, w *snapshot.Derived, kv snapshot.Value, th config.Bottleneck) capLoad {
	l := capLoad{kv: kv}
	waiting := m.WaitingForCapacity()
	switch {
	case waiting.OK && waiting.V >= th.QueueingMinWaiting,
		kv.OK && kv.V > th.KVCacheUsageHigh,
		w != nil && w.PreemptionsPerSecond.OK && w.PreemptionsPerSecond.V > 0:
		l.saturated = true
	}
	return l
}

type capLoad struct {
	saturated bool
	kv        snapshot.Value
}

// trackCapacity records the window's throughput while the SLOs hold and
// keeps the maximum over the horizon: the highest throughput observed that
// still met the latency contract (a lower bound on true capacity), and
// whether the server was saturated when it was measured.
func (st *modelState) trackCapacity(now time.Time, th config.Bottleneck, w *snapshot.Derived, load capLoad, gpus int, gpuHour float64) {
	bucketLen := th.CapacityHorizon / capacityBuckets
	if bucketLen <= 0 {
		bucketLen = time.Second
	}
	if st.SLOKnown && st.SLOHolds && w != nil && w.RequestsPerSecond.OK && w.GenerationTokensPerSecond.OK {
		b := now.Truncate(bucketLen)
		cur := capSample{bucket: b, rps: w.RequestsPerSecond.V, tps: w.GenerationTokensPerSecond.V, load: load}
		if n := len(st.samples); n > 0 && st.samples[n-1].bucket.Equal(b) {
			last := &st.samples[n-1]
			if cur.rps > last.rps {
				last.rps, last.load = cur.rps, cur.load
			}
			last.tps = max(last.tps, cur.tps)
		} else {
			st.samples = append(st.samples, cur)
		}
	}
	cut := now.Add(-th.CapacityHorizon)
	i := 0
	for i < len(st.samples) && st.samples[i].bucket.Before(cut) {
		i++
	}
	st.samples = st.samples[i:]

	capy := Capacity{GPUs: gpus}
	for _, s := range st.samples {
		if !capy.RequestsPerSecond.OK || s.rps > capy.RequestsPerSecond.V {
			capy.RequestsPerSecond = snapshot.Some(s.rps)
			capy.Saturated, capy.KVUsage = s.load.saturated, s.load.kv
		}
		if !capy.OutputTokensPerSecond.OK || s.tps > capy.OutputTokensPerSecond.V {
			capy.OutputTokensPerSecond = snapshot.Some(s.tps)
		}
	}
	if gpuHour > 0 && capy.OutputTokensPerSecond.OK {
		if v, err := CostPerMillionOutputTokens(gpuHour, gpus, capy.OutputTokensPerSecond.V); err == nil {
			capy.CostPerMillionOutput = snapshot.Some(v)
		}
	}
	// A plan from an unsaturated server would size the fleet for the load
	// it happened to get: only a saturated measurement plans.
	if th.DailyRequests > 0 && capy.RequestsPerSecond.OK && capy.Saturated {
		if p, err := PlanGPUs(th.DailyRequests, capy.RequestsPerSecond.V/float64(gpus), th.Headroom); err == nil {
			capy.Plan = &p
		}
	}
	st.Capacity = capy
}

// maxExtrapolation bounds how far a measurement is extrapolated: beyond
// 10x the offered load the guess says more about the model than the server.
const maxExtrapolation = 10

// KVExtrapolation is the request rate at which the KV cache would be full
// if throughput grew in proportion to KV occupancy from a measurement at
// kvUsage (the KV-capacity bound); absent below 10% usage (more than 10x
// out). Latency rises before the cache fills, so it is an upper estimate,
// to be confirmed under load.
func KVExtrapolation(rps float64, kvUsage snapshot.Value) snapshot.Value {
	if !kvUsage.OK || kvUsage.V < 1.0/maxExtrapolation || kvUsage.V > 1 || !(rps > 0) {
		return snapshot.Value{}
	}
	return snapshot.Some(rps / kvUsage.V)
}

// States returns a copy of every model's state, sorted by model.
func (c *Classifier) States() []ModelState {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ModelState, 0, len(c.models))
	for _, st := range c.models {
		out = append(out, st.ModelState)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

// State returns one model's state.
func (c *Classifier) State(model string) (ModelState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.models[model]
	if !ok {
		return ModelState{}, false
	}
	return st.ModelState, true
}
