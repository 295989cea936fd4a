package bottleneck

import (
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// Inputs is everything one model's evaluation reads. Any pointer may be nil.
type Inputs struct {
	Now   time.Time
	Model *snapshot.Model // latest scrape for this model
	// KVUsage is the sustained KV-cache usage (the classifier passes the
	// larger of the latest and the mean of the readings over the window);
	// absent: Model.KVUsage is used.
	KVUsage snapshot.Value
	// KVUsagePeak is the highest KV-usage reading over the window.
	KVUsagePeak snapshot.Value
	// NoProgress is how long (scrape time) the prompt+generation token
	// counters have not moved; RecentHitRatio is the prefix-cache hit ratio
	// since the previous tick. The classifier fills both from its state.
	NoProgress     snapshot.Value
	RecentHitRatio snapshot.Value
	// RecentCachedTokensPerRequest is the prefix-cache hits since the
	// previous tick per request finished in that time; with
	// CachedTokensPerRequestReference (the best windowed value over the
	// baseline window) it tells a cache that stopped hitting from traffic
	// that merely gained uncached tokens (long unique documents).
	RecentCachedTokensPerRequest, CachedTokensPerRequestReference snapshot.Value
	// WaitingScrapes is the requests waiting for capacity at the latest
	// scrapes (up to recentScrapes), oldest first: whether a queue drains.
	WaitingScrapes []float64
	// ProbeOutcomes are the latest probes' outcomes (see recentOutcomes).
	ProbeOutcomes ProbeOutcomes
	// RecentTTFTMedian is the median TTFT of the requests of the latest
	// recentScrapes scrape intervals.
	RecentTTFTMedian snapshot.Value
	// RecentGenerationTokensPerSecond is the generation rate since the
	// previous tick (the classifier fills it from its state): a livelock
	// stops generation at once, and the window's mean would remember the
	// tokens from before it for a whole window.
	RecentGenerationTokensPerSecond snapshot.Value
	// HitRatioReference is the best windowed prefix-cache hit ratio seen
	// over the baseline window before this tick; PrefillSpeedReference the
	// best prefill speed (see PrefillSpeed) over the capacity horizon. The
	// classifier keeps both; absent until a window has shown one.
	HitRatioReference     snapshot.Value
	PrefillSpeedReference snapshot.Value
	// DecodeStepReference is the fastest windowed median decode step seen
	// over the capacity horizon (seconds).
	DecodeStepReference snapshot.Value
	Window              *snapshot.Derived // over config Window
	GPU                 *snapshot.GPU
	Probes              *snapshot.Probes
	Roofline            Roofline
}

// Evidence is one measured signal behind a rule, with the threshold it was
// compared to. Signal names are a fixed set (the `signal` label).
type Evidence struct {
	Signal    string  `json:"signal"`
	Value     float64 `json:"value"`
	Op        string  `json:"op,omitempty"` // ">", ">=", "<", "<=", "==" ; empty: context only
	Threshold float64 `json:"threshold"`
	Unit      string  `json:"unit,omitempty"`
	// Bucket is set in reports when Value is a quantile interpolated inside
	// a wide histogram bucket: [lower, upper] bound, the precision there is.
	Bucket []float64 `json:"bucket,omitempty"`
}

// Holds reports whether the evidence meets its threshold.
func (e Evidence) Holds() bool {
	switch e.Op {
	case ">":
		return e.Value > e.Threshold
	case ">=":
		return e.Value >= e.Threshold
	case "<":
		return e.Value < e.Threshold
	case "<=":
		return e.Value <= e.Threshold
	case "==":
		return e.Value == e.Threshold
	}
	return true
}

// Finding is one rule's outcome on one tick.
type Finding struct {
	Class    Class      `json:"class"`
	Holds    bool       `json:"holds"`
	Evidence []Evidence `json:"evidence,omitempty"`
}

// ruleOrder is every rule in priority order (the order of Classes): when
// several hold on one tick the earliest wins. A new class adds its rule here
// and its name to Classes at the same position.
var ruleOrder = []func(rules) Finding{
	rules.gpuFault, rules.deferredLivelock, rules.engineStalled, rules.throttled, rules.kvExhausted,
	rules.tooManySequences, rules.admissionLimited, rules.kvTransferBound, rules.loraQueueing,
	rules.queueing, rules.probesFailing, rules.prefixCacheMiss, rules.prefillBound,
	rules.communicationBound, rules.memoryBoundDecode, rules.decodeOverhead,
	rules.batchTooSmall,
}

// Evaluate runs every rule in priority order and returns the first class
// whose rule holds (near_optimal when none does) with every finding, so a
// report can show which other rules also held.
func Evaluate(in Inputs, th config.Bottleneck) (Class, []Finding) {
	r := rules{in: in, th: th}
	findings := make([]Finding, 0, len(ruleOrder)+1)
	for _, rule := range ruleOrder {
		f := rule(r)
		if f.Holds && prefillPodSkips(in.Model, f.Class) {
			// A prefill pod hands decode to another pod: it has no TPOT
			// and no decode batch to judge.
			f.Holds = false
			f.Evidence = append(f.Evidence, note("prefill_pod", 1, ""))
		}
		findings = append(findings, f)
	}
	findings = append(findings, Finding{Class: NearOptimal, Holds: true})
	for _, f := range findings {
		if f.Holds {
			return f.Class, findings
		}
	}
	return NearOptimal, findings // unreachable: near_optimal always holds
}

type rules struct {
	in Inputs
	th config.Bottleneck
}

// all builds a finding that holds when every gating evidence holds; context
// evidence (Op "") is reported but does not gate. A rule with no gating
// evidence does not hold.
func all(c Class, ev ...Evidence) Finding {
	gates := 0
	holds := true
	for _, e := range ev {
		if e.Op != "" {
			gates++
			holds = holds && e.Holds()
		}
	}
	return Finding{Class: c, Holds: holds && gates > 0, Evidence: ev}
}

func gate(signal string, v float64, op string, th float64, unit string) Evidence {
	return Evidence{Signal: signal, Value: v, Op: op, Threshold: th, Unit: unit}
}

// note is context evidence: reported, never gating.
func note(signal string, v float64, unit string) Evidence {
	return Evidence{Signal: signal, Value: v, Unit: unit}
}

// slo is a window quantile of h; TPOT is read from inter-token latency first
// (see decodeStepSeconds).
func (r rules) slo(h snapshot.HistogramName, q float64) snapshot.Value {
	if h == snapshot.RequestTPOT {
		return decodeStepSeconds(r.in.Window, q)
	}
	return quantile(r.in.Window, h, q)
}

// tpotOver is the shared "TPOT degraded" gate of the decode-side classes;
// ok is false when TPOT is not measurable.
func (r rules) tpotOver() (Evidence, bool) {
	if r.in.Model.Prefill() {
		return Evidence{}, false // a prefill pod has no TPOT of its own
	}
	v := r.slo(snapshot.RequestTPOT, r.th.SLOQuantile)
	return gate("tpot_seconds", v.V, ">", r.th.TPOTTargetSeconds, "seconds"), v.OK
}

func (r rules) gpuFault() Finding {
	devs := r.in.GPU
	if devs == nil || !devs.Up {
		return Finding{Class: GPUFault}
	}
	lost, newest := 0.0, time.Time{}
	for _, d := range devs.Devices {
		if !d.Up {
			lost++
		}
		if d.LastFatalXidTime.After(newest) {
			newest = d.LastFatalXidTime
		}
	}
	if lost > 0 {
		return all(GPUFault, gate("gpus_lost", lost, ">", 0, "gpus"))
	}
	if !newest.IsZero() {
		age := r.in.Now.Sub(newest).Seconds()
		return all(GPUFault, gate("fatal_xid_age_seconds", age, "<=", r.th.XidLookback.Seconds(), "seconds"))
	}
	return Finding{Class: GPUFault}
}

func (r rules) engineStalled() Finding {
	if r.in.Model.Asleep() {
		// A deliberately sleeping engine makes no tokens on purpose.
		return Finding{Class: EngineStalled, Evidence: []Evidence{note("engine_asleep", 1, "")}}
	}
	if p := r.in.Probes; p != nil && p.EngineStalled {
		return all(EngineStalled, gate("probe_engine_stalled", 1, "==", 1, ""))
	}
	// Scrape side: requests present, yet the token counters have not
	// moved for stall_after (a healthy engine moves them every step; a
	// server that counts at completion does not, and only probes tell).
	m := r.in.Model
	if m != nil && m.TokensAtCompletion {
		return Finding{Class: EngineStalled, Evidence: []Evidence{note("token_counters_at_completion", 1, "")}}
	}
	if m == nil || !m.Running.OK || !m.Waiting.OK {
		return Finding{Class: EngineStalled}
	}
	present := gate("requests_running_or_waiting", m.Running.V+m.Waiting.V, ">=", 1, "requests")
	if np := r.in.NoProgress; np.OK {
		return all(EngineStalled, present, gate("no_token_progress_seconds", np.V, ">=", r.th.StallAfter.Seconds(), "seconds"))
	}
	w := r.in.Window
	if w == nil || !w.GenerationTokensPerSecond.OK || !w.PromptTokensPerSecond.OK {
		return Finding{Class: EngineStalled}
	}
	return all(EngineStalled, present,
		gate("generation_tokens_per_second", w.GenerationTokensPerSecond.V, "==", 0, "tokens/s"),
		gate("prompt_tokens_per_second", w.PromptTokensPerSecond.V, "==", 0, "tokens/s"))
}

// deferredLivelock is vllm #53130: deferred requests pile up, few wait for
// capacity, the KV cache has room and generation all but stopped. Only a
// server that splits its queue by reason (≈0.20+) can show it. It is
// checked before engine_stalled: a livelocked engine makes no tokens with
// requests present, which is also what the generic stall check sees, but
// the livelock has its own cause and advice. KV usage and generation are
// read as they are now (the latest scrape, the rate since the previous
// tick), not as window means, which remember the traffic before the
// scheduler stopped admitting for a whole window.
func (r rules) deferredLivelock() Finding {
	m, w := r.in.Model, r.in.Window
	if m == nil || m.Asleep() {
		return Finding{Class: DeferredLivelock}
	}
	deferred, capacity, kv := m.WaitingDeferred(), m.WaitingForCapacity(), m.KVUsage
	gen := r.in.RecentGenerationTokensPerSecond
	if !gen.OK && w != nil {
		gen = w.GenerationTokensPerSecond
	}
	if !deferred.OK || !capacity.OK || !kv.OK || !gen.OK {
		return Finding{Class: DeferredLivelock}
	}
	ev := []Evidence{
		gate("requests_waiting_deferred", deferred.V, ">=", r.th.DeferredLivelockMinDeferred, "requests"),
		gate("deferred_over_capacity_waiting_ratio", deferred.V/math.Max(capacity.V, 1), ">=", r.th.DeferredLivelockDeferredOverCapacity, "ratio"),
		gate("kv_cache_usage_ratio", kv.V, "<", r.th.DeferredLivelockKVMax, "ratio"),
		gate("generation_tokens_per_second", gen.V, "<=", r.th.DeferredLivelockMaxGenerationTokensPerSecond, "tokens/s"),
		note("requests_waiting_capacity", capacity.V, "requests"),
	}
	if m.Running.OK {
		ev = append(ev, note("requests_running", m.Running.V, "requests"))
	}
	return all(DeferredLivelock, ev...)
}

// capped reports whether a GPU's clocks are held down enough to slow decode:
// any thermal, hardware-slowdown or power-brake reason, or the software
// power cap with SM clocks below ratio x their maximum. A busy GPU sits at
// its power cap routinely, trimming SM clocks a little, which memory-bound
// decode barely notices; a lowered power limit or failing cooling cuts
// them deeply. Without clock readings the power cap counts. smRatio is the
// SM clock / max ratio when known.
func capped(d snapshot.GPUDevice, ratio float64) (on bool, smRatio snapshot.Value) {
	if d.SMClockHz.OK && d.MaxSMClockHz.OK && d.MaxSMClockHz.V > 0 {
		smRatio = snapshot.Some(d.SMClockHz.V / d.MaxSMClockHz.V)
	}
	power := false
	for reason, active := range d.ThrottleReasons {
		r := strings.ToLower(reason)
		switch {
		case !active:
		case strings.Contains(r, "thermal") || strings.Contains(r, "power_brake") || r == "hw_slowdown":
			return true, smRatio
		case strings.Contains(r, "power"):
			power = true
		}
	}
	if !power {
		return false, smRatio
	}
	return !smRatio.OK || smRatio.V < ratio, smRatio
}

func (r rules) throttled() Finding {
	devs := upDevices(r.in.GPU)
	if len(devs) == 0 {
		return Finding{Class: Throttled}
	}
	active, minRatio := 0.0, snapshot.Value{}
	for _, d := range devs {
		on, sm := capped(d, r.th.PowerCapSMClockRatioMax)
		if on {
			active++
		}
		if sm.OK && (!minRatio.OK || sm.V < minRatio.V) {
			minRatio = sm
		}
	}
	tp, ok := r.tpotOver()
	if !ok {
		return Finding{Class: Throttled}
	}
	ev := []Evidence{gate("gpus_power_or_thermal_capped", active, ">", 0, "gpus"), tp}
	if minRatio.OK {
		ev = append(ev, note("sm_clock_over_max_ratio", minRatio.V, "ratio"))
	}
	return all(Throttled, ev...)
}

func (r rules) tooManySequences() Finding {
	w := r.in.Window
	if w == nil || !w.PreemptionsPerRequest.OK {
		return Finding{Class: TooManySequences}
	}
	ev := []Evidence{gate("preemptions_per_request_ratio", w.PreemptionsPerRequest.V, ">", r.th.PreemptionsPerRequestHigh, "ratio")}
	if w.PreemptionsPerSecond.OK {
		ev = append(ev, note("preemptions_per_second", w.PreemptionsPerSecond.V, "1/s"))
	}
	return all(TooManySequences, ev...)
}

// kv is the sustained KV usage when known, else the latest reading.
func (r rules) kv() snapshot.Value {
	if r.in.KVUsage.OK {
		return r.in.KVUsage
	}
	if r.in.Model != nil {
		return r.in.Model.KVUsage
	}
	return snapshot.Value{}
}

// kvExhausted: the KV cache is full for a sustained period, or it was full
// at a scrape of the window while requests were preempted: vLLM preempts
// only when a running request finds no free block, and each preemption
// frees blocks for a moment, so between scrapes a preempting cache dips
// below full and the sustained reading hovers at the line.
func (r rules) kvExhausted() Finding {
	m, kv := r.in.Model, r.kv()
	if m == nil || !kv.OK {
		return Finding{Class: KVCacheExhausted}
	}
	ev := []Evidence{gate("kv_cache_usage_ratio", kv.V, ">", r.th.KVCacheUsageHigh, "ratio")}
	if w, peak := r.in.Window, r.in.KVUsagePeak; kv.V <= r.th.KVCacheUsageHigh && peak.OK && w != nil &&
		w.PreemptionsPerRequest.OK && w.PreemptionsPerRequest.V > r.th.PreemptionsPerRequestHigh {
		ev = []Evidence{note("kv_cache_usage_ratio", kv.V, "ratio"),
			gate("kv_cache_usage_peak_ratio", peak.V, ">", r.th.KVCacheUsageHigh, "ratio"),
			gate("preemptions_per_request_ratio", w.PreemptionsPerRequest.V, ">", r.th.PreemptionsPerRequestHigh, "ratio")}
	}
	if wc := m.WaitingForCapacity(); wc.OK {
		ev = append(ev, note("requests_waiting", wc.V, "requests"))
	}
	return all(KVCacheExhausted, ev...)
}

// queueing: requests wait for capacity, p99 TTFT is over its target and
// many times the prefill time (the wait, not the work), and the queue is
// not draining: it did not shrink since the previous scrape, or it has held
// requests on each of the latest recentScrapes scrapes. A burst the server
// absorbs (a client fanning a batch out) shrinks from the scrape after it
// arrived; sustained overload grows or stays.
func (r rules) queueing() Finding {
	// Only requests waiting for capacity are a queue the knobs act on:
	// deferred ones wait on LoRA budget or KV transfer (≈0.20+ splits them).
	m := r.in.Model
	ttft, waiting := r.slo(snapshot.TTFT, 0.99), m.WaitingForCapacity()
	if m == nil || !waiting.OK || !ttft.OK {
		return Finding{Class: Queueing}
	}
	ev := []Evidence{
		gate("requests_waiting", waiting.V, ">=", r.th.QueueingMinWaiting, "requests"),
		gate("ttft_p99_seconds", ttft.V, ">", r.th.TTFTTargetSeconds, "seconds"),
	}
	if pf := r.slo(snapshot.PrefillTime, 0.99); pf.OK && pf.V > 0 {
		ev = append(ev, note("prefill_p99_seconds", pf.V, "seconds"),
			gate("ttft_over_prefill_ratio", ttft.V/pf.V, ">=", r.th.QueueingTTFTOverPrefill, "ratio"))
	}
	if qt := r.slo(snapshot.QueueTime, 0.99); qt.OK {
		ev = append(ev, note("queue_time_p99_seconds", qt.V, "seconds"))
	}
	if h := r.in.WaitingScrapes; len(h) >= 2 {
		held := 0.0
		for i := len(h) - 1; i >= 0 && h[i] >= r.th.QueueingMinWaiting; i-- {
			held++
		}
		draining := h[len(h)-1] < h[len(h)-2] && held < recentScrapes
		ev = append(ev, note("requests_waiting_previous_scrape", h[len(h)-2], "requests"),
			note("scrapes_with_requests_waiting", held, "scrapes"),
			gate("queue_draining", b2f(draining), "==", 0, ""))
	}
	return all(Queueing, ev...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (r rules) prefixCacheMiss() Finding {
	// Probe pair: warm-prefix TTFT no better than cold.
	if cold, warm, ok := probePair(r.in.Probes); ok {
		f := all(PrefixCacheMiss,
			gate("warm_over_cold_ttft_ratio", warm/cold, ">=", r.th.WarmColdTTFTRatioMax, "ratio"),
			note("probe_cold_ttft_seconds", cold, "seconds"), note("probe_warm_ttft_seconds", warm, "seconds"))
		if f.Holds {
			return f
		}
	}
	// Scrape side: the hit ratio since the last tick (else over the
	// window) collapsed against the best this server showed recently, and
	// so did the cached tokens per request: long unique prompts (documents
	// among chat) dilute the token ratio while every request still hits
	// as much as before.
	cur, perReq := r.in.RecentHitRatio, r.in.RecentCachedTokensPerRequest
	if !cur.OK || !perReq.OK {
		cur, perReq = HitRatio(r.in.Window), CachedTokensPerRequest(r.in.Window)
	}
	ref, perReqRef := r.in.HitRatioReference, r.in.CachedTokensPerRequestReference
	if !cur.OK || !ref.OK || !perReq.OK || !perReqRef.OK {
		return r.prefixThrash()
	}
	f := all(PrefixCacheMiss, append([]Evidence{
		gate("prefix_cache_hit_ratio_reference", ref.V, ">=", r.th.PrefixHitRatioBaselineMin, "ratio"),
		gate("prefix_cache_hit_ratio", cur.V, "<", r.th.PrefixHitRatioCollapse*ref.V, "ratio"),
		gate("prefix_cached_tokens_per_request", perReq.V, "<", r.th.PrefixHitRatioCollapse*perReqRef.V, "tokens"),
		note("prefix_cached_tokens_per_request_reference", perReqRef.V, "tokens")},
		residencyNotes(r.in.Window)...)...)
	if f.Holds {
		return f
	}
	// No collapse against a better past: a cache that evicts blocks
	// before they are reused (KV block residency) thrashes all the same.
	if t := r.prefixThrash(); t.Holds {
		return t
	}
	return f
}

// ProbeOutcomes counts the latest probes of every profile and their
// failures by reason.
type ProbeOutcomes struct {
	Sent   float64
	Failed map[string]float64
	// LatestFailed: the newest probe of any profile failed.
	LatestFailed bool
}

// probesFailing: at least probe_failure_ratio_min of the latest probes
// (at least minProbeSamples of them) failed, the newest among them too (a
// prober whose probes succeed again is over it, whatever the share).
func (r rules) probesFailing() Finding {
	o := r.in.ProbeOutcomes
	if o.Sent < minProbeSamples {
		return Finding{Class: ProbesFailing}
	}
	failed := 0.0
	for _, n := range o.Failed {
		failed += n
	}
	ev := []Evidence{
		gate("probe_failure_ratio", math.Min(failed/o.Sent, 1), ">=", r.th.ProbeFailureRatioMin, "ratio"),
		gate("latest_probe_failed", b2f(o.LatestFailed), "==", 1, ""),
		note("probes_sent", o.Sent, "probes"),
	}
	for _, reason := range slices.Sorted(maps.Keys(o.Failed)) {
		if o.Failed[reason] > 0 {
			ev = append(ev, note("probe_failures_"+reason, o.Failed[reason], "probes"))
		}
	}
	return all(ProbesFailing, ev...)
}

// reportsCachedTokens: the server counts cached and computed prompt tokens
// (vllm:prompt_tokens_cached_total and prompt_tokens_by_source_total, ≈0.16+).
func reportsCachedTokens(m *snapshot.Model) bool {
	if m == nil || !m.PromptTokensCached.OK {
		return false
	}
	_, ok := m.PromptTokensBySource["local_compute"]
	return ok
}

// HitRatio is the share of prompt tokens a prefix cache served over a
// window: cached / (cached + computed) where vLLM reports both (≈0.16+:
// local and external hits, what prefill was spared), else the prefix
// cache's hits / queries.
func HitRatio(w *snapshot.Derived) snapshot.Value {
	if w == nil {
		return snapshot.Value{}
	}
	if w.PromptTokensCachedPerSecond.OK && w.PromptTokensComputedPerSecond.OK {
		if total := w.PromptTokensCachedPerSecond.V + w.PromptTokensComputedPerSecond.V; total > 0 {
			return snapshot.Some(w.PromptTokensCachedPerSecond.V / total)
		}
	}
	return w.PrefixCacheHitRatio
}

// CachedTokensPerRequest is the prompt tokens a prefix cache served per
// request finished over the window.
func CachedTokensPerRequest(w *snapshot.Derived) snapshot.Value {
	if w == nil || !w.RequestsPerSecond.OK || !(w.RequestsPerSecond.V > 0) {
		return snapshot.Value{}
	}
	if w.PromptTokensCachedPerSecond.OK {
		return snapshot.Some(w.PromptTokensCachedPerSecond.V / w.RequestsPerSecond.V)
	}
	if h := HitRatio(w); h.OK && w.PromptTokensPerSecond.OK {
		return snapshot.Some(h.V * w.PromptTokensPerSecond.V / w.RequestsPerSecond.V)
	}
	return snapshot.Value{}
}

// minProbeSamples is how many probes each side of the cold/warm pair needs
// before its medians are compared.
const minProbeSamples = 3

// probePair returns the median TTFT of the cold and warm probe profiles.
func probePair(p *snapshot.Probes) (cold, warm float64, ok bool) {
	if p == nil {
		return 0, 0, false
	}
	var haveCold, haveWarm bool
	for _, pr := range p.Profiles {
		if pr == nil || pr.TTFT.Count < minProbeSamples {
			continue
		}
		med := pr.TTFT.Quantile(0.5)
		if !med.OK || !(med.V > 0) {
			continue
		}
		switch pr.Prefix {
		case "cold":
			cold, haveCold = med.V, true
		case "warm":
			warm, haveWarm = med.V, true
		}
	}
	return cold, warm, haveCold && haveWarm
}

// minPrefillSamples is how many prefills a window needs before its prefill
// speed is trusted.
const minPrefillSamples = 3

// PrefillSpeed is the prompt tokens the engine computed per second of
// prefill over the window: prompt tokens less the prefix-cache hits, over
// the prefill time (vllm:request_prefill_time_seconds) its requests spent.
// It is per request, as TTFT is, and does not depend on prompt length the
// way TTFT does, so long prompts alone do not make it low.
func PrefillSpeed(w *snapshot.Derived) snapshot.Value {
	if w == nil || !w.PromptTokensPerSecond.OK {
		return snapshot.Value{}
	}
	d, ok := w.Deltas[snapshot.PrefillTime]
	span := w.End.Sub(w.Start).Seconds()
	if !ok || d.Count < minPrefillSamples || !(d.Sum > 0) || !(span > 0) {
		return snapshot.Value{}
	}
	computed := w.PromptTokensPerSecond.V * span
	switch {
	case w.PromptTokensComputedPerSecond.OK:
		// vLLM counts the computed tokens itself (≈0.16+; local and
		// external cache hits excluded).
		computed = w.PromptTokensComputedPerSecond.V * span
	case w.PrefixCacheHitRatio.OK:
		computed *= 1 - w.PrefixCacheHitRatio.V
	}
	if !(computed > 0) {
		return snapshot.Value{}
	}
	return snapshot.Some(computed / d.Sum)
}

// prefillBound: TTFT over target and spent in prefill (not in the queue),
// in one of two ways: slow prefill (prefillSlow) or the prefill tail
// (prefillTail). When neither holds, the tail's finding is the one kept for
// reports: a tail is the likelier near miss.
func (r rules) prefillBound() Finding {
	if slow := r.prefillSlow(); slow.Holds {
		return slow
	}
	return r.prefillTail()
}

// prefillSlow: TTFT over its target and spent in prefill, which runs at
// under half the speed this server has shown, and has slowed at least
// twice as much as its median decode step: a regression of prefill itself
// (a kernel, the attention backend). A slower GPU (clocks, a degraded
// part) slows both alike and is named by throttled or the decode classes.
// The median decode step, not the SLO quantile: the slow prefill chunks
// share steps with decode and lengthen its slowest gaps.
func (r rules) prefillSlow() Finding {
	ttft := r.slo(snapshot.TTFT, r.th.SLOQuantile)
	ttft99, pf99 := r.slo(snapshot.TTFT, 0.99), r.slo(snapshot.PrefillTime, 0.99)
	speed, ref := PrefillSpeed(r.in.Window), r.in.PrefillSpeedReference
	if !ttft.OK || !ttft99.OK || !pf99.OK || !(ttft99.V > 0) || !speed.OK || !ref.OK || !(speed.V > 0) {
		return Finding{Class: PrefillBound}
	}
	ev := []Evidence{
		gate("ttft_seconds", ttft.V, ">", r.th.TTFTTargetSeconds, "seconds"),
		gate("prefill_share_of_ttft_ratio", math.Min(pf99.V/ttft99.V, 1), ">=", r.th.PrefillShareMin, "ratio"),
		gate("prefill_tokens_per_second", speed.V, "<", r.th.PrefillSlowRatio*ref.V, "tokens/s"),
		note("prefill_tokens_per_second_reference", ref.V, "tokens/s"),
	}
	step, stepRef := r.slo(snapshot.RequestTPOT, 0.5), r.in.DecodeStepReference
	if step.OK && stepRef.OK && stepRef.V > 0 && !r.in.Model.Prefill() {
		ev = append(ev, note("decode_step_p50_seconds", step.V, "seconds"), note("decode_step_p50_reference_seconds", stepRef.V, "seconds"),
			gate("prefill_slowdown_over_decode_slowdown_ratio", (ref.V/speed.V)/math.Max(step.V/stepRef.V, 1), ">=", 2, "ratio"))
	}
	return all(PrefillBound, append(ev, r.promptTokensPerRequest()...)...)
}

// prefillTail: a population of long prompts among short ones (documents
// among chat) makes the p99 TTFT miss its target. Their own prefill takes
// at least prefill_tail_over_target times the target (a chat workload's
// long tail of lengths misses it only where two long prompts meet), p99
// TTFT is prefill_tail_ratio times the median or more (one population's
// spread of lengths is less), the median is within the target over the
// window and over the latest scrapes (traffic that has just turned to long
// prompts still has short ones in the window), p99 prefill is most of p99
// TTFT (the short requests that wait behind a long prompt's prefill steps
// are part of the tail) and the median decode step is within the TPOT
// target: the long prompts' chunks lengthen the slowest inter-token gaps,
// while a server whose every step is slow has a slow median.
func (r rules) prefillTail() Finding {
	ttft50, ttft90, ttft99 := r.slo(snapshot.TTFT, 0.5), r.slo(snapshot.TTFT, 0.9), r.slo(snapshot.TTFT, 0.99)
	pf99, q99 := r.slo(snapshot.PrefillTime, 0.99), r.slo(snapshot.QueueTime, 0.99)
	tpot50 := r.slo(snapshot.RequestTPOT, 0.5)
	prefillPod := r.in.Model.Prefill() // no decode steps of its own to compare
	// A tail is a population: minPrefillSamples prefills or more beyond
	// twice the target (counted above the bucket bound at or past it), not
	// the one or two where long chat prompts happened to meet.
	longPrefills := 0.0
	if w := r.in.Window; w != nil {
		longPrefills = countAbove(w.Deltas[snapshot.PrefillTime], r.th.PrefillTailOverTarget*r.th.TTFTTargetSeconds)
	}
	if !ttft50.OK || !ttft90.OK || !ttft99.OK || !pf99.OK || !q99.OK || (!tpot50.OK && !prefillPod) || !(ttft50.V > 0) || !(ttft99.V > 0) {
		return Finding{Class: PrefillBound}
	}
	ev := []Evidence{
		gate("ttft_p99_seconds", ttft99.V, ">", r.th.TTFTTargetSeconds, "seconds"),
		gate("prefill_p99_seconds", pf99.V, ">=", r.th.PrefillTailOverTarget*r.th.TTFTTargetSeconds, "seconds"),
		gate("prefills_over_tail_target", longPrefills, ">=", minPrefillSamples, "requests"),
		gate("ttft_p99_over_p50_ratio", ttft99.V/ttft50.V, ">=", r.th.PrefillTailRatio, "ratio"),
		gate("ttft_p50_seconds", ttft50.V, "<=", r.th.TTFTTargetSeconds, "seconds"),
		note("ttft_p90_seconds", ttft90.V, "seconds"),
		gate("prefill_share_of_ttft_ratio", math.Min(pf99.V/ttft99.V, 1), ">=", r.th.PrefillShareMin, "ratio"),
		note("queue_time_p99_seconds", q99.V, "seconds"),
	}
	// The body is fast now too: right after traffic turns to long prompts
	// the window still holds the short ones, a tail in appearance only.
	if m := r.in.RecentTTFTMedian; m.OK {
		ev = append(ev, gate("ttft_p50_recent_seconds", m.V, "<=", r.th.TTFTTargetSeconds, "seconds"))
	}
	if !prefillPod {
		ev = append(ev, gate("tpot_p50_seconds", tpot50.V, "<=", r.th.TPOTTargetSeconds, "seconds"))
	}
	return all(PrefillBound, append(ev, r.promptTokensPerRequest()...)...)
}

// countAbove is how many of h's observations exceed the smallest bucket
// bound at or above x (a count the buckets know exactly).
func countAbove(h snapshot.Histogram, x float64) float64 {
	for i, b := range h.Bounds {
		if b >= x && i < len(h.Counts) {
			return h.Count - h.Counts[i]
		}
	}
	return 0
}

// promptTokensPerRequest is the window's mean prompt length, as context.
func (r rules) promptTokensPerRequest() []Evidence {
	if w := r.in.Window; w != nil && w.PromptTokensPerSecond.OK && w.RequestsPerSecond.OK && w.RequestsPerSecond.V > 0 {
		return []Evidence{note("prompt_tokens_per_request", w.PromptTokensPerSecond.V/w.RequestsPerSecond.V, "tokens")}
	}
	return nil
}

func (r rules) communicationBound() Finding {
	devs := upDevices(r.in.GPU)
	var nvl float64
	n := 0
	for _, d := range devs {
		if d.NVLinkTxBytesPerSecond.OK || d.NVLinkRxBytesPerSecond.OK {
			nvl += d.NVLinkTxBytesPerSecond.V + d.NVLinkRxBytesPerSecond.V
			n++
		}
	}
	tp, ok := r.tpotOver()
	if n == 0 || !ok {
		return Finding{Class: CommunicationBound}
	}
	return all(CommunicationBound,
		gate("gpus", float64(len(devs)), ">=", 2, "gpus"),
		gate("nvlink_bytes_per_second_per_gpu", nvl/float64(n), ">=", r.th.NVLinkHighBytesPerSecond, "bytes/s"),
		tp)
}

// deviceMean is the mean of one reading over the up GPUs that report it.
func deviceMean(g *snapshot.GPU, field func(d *snapshot.GPUDevice) snapshot.Value) snapshot.Value {
	var sum float64
	n := 0
	for _, d := range upDevices(g) {
		if v := field(&d); v.OK {
			sum += v.V
			n++
		}
	}
	if n == 0 {
		return snapshot.Value{}
	}
	return snapshot.Some(sum / float64(n))
}

// dram is the mean GPM DRAM-bandwidth utilisation over the GPUs reporting
// it; on hosts without GPM, vLLM's own bandwidth estimate against the peak
// (MBU, --enable-mfu-metrics) stands in.
func (r rules) dram() snapshot.Value {
	if v := deviceMean(r.in.GPU, func(d *snapshot.GPUDevice) snapshot.Value { return d.DRAMBandwidthUtil }); v.OK {
		return v
	}
	return r.in.Roofline.MBU
}

// decodeClass is memory_bound_decode (near=true) or decode_overhead: TPOT
// over target, and the GPU's DRAM-bandwidth utilisation on the matching side
// when GPM reports it (the direct measurement), else the roofline efficiency
// (which rests on the weight and bandwidth flags). The other is context.
func (r rules) decodeClass(c Class, near bool) Finding {
	tp, ok := r.tpotOver()
	eff, dram := r.in.Roofline.Efficiency, r.dram()
	if !ok || (!eff.OK && !dram.OK) {
		return Finding{Class: c}
	}
	ev := []Evidence{tp}
	if dram.OK {
		if near {
			ev = append(ev, gate("dram_bandwidth_utilization_ratio", dram.V, ">=", r.th.DRAMBandwidthHighRatio, "ratio"))
		} else {
			ev = append(ev, gate("dram_bandwidth_utilization_ratio", dram.V, "<", r.th.DRAMBandwidthLowRatio, "ratio"))
		}
	}
	if eff.OK {
		switch {
		case dram.OK:
			ev = append(ev, note("decode_efficiency_ratio", eff.V, "ratio"))
		case near:
			ev = append(ev, gate("decode_efficiency_ratio", eff.V, ">=", r.th.RooflineNearRatio, "ratio"))
		default:
			ev = append(ev, gate("decode_efficiency_ratio", eff.V, "<", r.th.RooflineFarRatio, "ratio"))
		}
		ev = append(ev, note("decode_roofline_tokens_per_second", r.in.Roofline.Predicted.V, "tokens/s"),
			note("decode_measured_tokens_per_second", r.in.Roofline.Measured.V, "tokens/s"))
	}
	return all(c, ev...)
}

func (r rules) memoryBoundDecode() Finding { return r.decodeClass(MemoryBoundDecode, true) }
func (r rules) decodeOverhead() Finding    { return r.decodeClass(DecodeOverhead, false) }

func (r rules) batchTooSmall() Finding {
	m := r.in.Model
	wc := m.WaitingForCapacity()
	if m == nil || !wc.OK {
		return Finding{Class: BatchTooSmall}
	}
	waiting := gate("requests_waiting", wc.V, "<", r.th.QueueingMinWaiting, "requests")
	if util := deviceMean(r.in.GPU, func(d *snapshot.GPUDevice) snapshot.Value { return d.UtilGPU }); util.OK {
		return all(BatchTooSmall, waiting, gate("gpu_utilization_ratio", util.V, "<", r.th.GPUUtilizationLow, "ratio"))
	}
	// Without a GPU: the mean number of requests in flight over the window
	// (Little's law: the end-to-end seconds of the requests that finished
	// in it, per second). Underused is a mean over time: a momentary
	// running count flips around the threshold from scrape to scrape, so
	// without a window there is no verdict.
	if c := meanConcurrency(r.in.Window); c.OK {
		return all(BatchTooSmall, waiting, gate("requests_in_flight_mean", c.V, "<=", r.th.BatchSmallMaxRunning, "requests"))
	}
	return Finding{Class: BatchTooSmall}
}

// meanConcurrency is the mean number of requests in flight over the
// window: the summed end-to-end latency of the requests that finished in
// it over its span.
func meanConcurrency(w *snapshot.Derived) snapshot.Value {
	if w == nil {
		return snapshot.Value{}
	}
	d, ok := w.Deltas[snapshot.E2E]
	span := w.End.Sub(w.Start).Seconds()
	if !ok || d.Count < 1 || !(span > 0) || d.Sum < 0 {
		return snapshot.Value{}
	}
	return snapshot.Some(d.Sum / span)
}
