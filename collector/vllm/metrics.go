package vllm

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"

	"github.com/vllm-exporter/vllm_exporter/internal/exposition"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// descs are the scraper's Descs, made once: the family table's, the
// window series' and the scraper's own.
type descs struct {
	up         *prometheus.Desc
	families   []familyDescs // by row of families
	histograms []int         // the rows of histogram families
	window     []*prometheus.Desc
	unexpected *prometheus.Desc

	scrapes, scrapeErrors, scrapeDuration, lastSuccess, schema, missing *prometheus.Desc
	samplesDropped                                                      *prometheus.Desc
	role                                                                *prometheus.Desc
	finishedRate                                                        *prometheus.Desc

	// exposition has every Desc above's name, help and labels, for the
	// Writer that Gather writes with.
	exposition exposition.Descs
}

// windowSeries are the series derived over each window from one or more
// families (derive.go), labelled model and window.
var windowSeries = []struct {
	name, help string
	get        func(*snapshot.Derived) snapshot.Value
}{
	{"vllm_preemptions_per_second", "Preemptions per second over the window; derived from vllm:num_preemptions_total.",
		func(d *snapshot.Derived) snapshot.Value { return d.PreemptionsPerSecond }},
	{"vllm_preemptions_per_request_ratio", "Preemptions per finished request over the window (can exceed 1: a request may be preempted several times), absent when no request finished; from vllm:num_preemptions_total and vllm:request_success_total.",
		func(d *snapshot.Derived) snapshot.Value { return d.PreemptionsPerRequest }},
	{"vllm_prefix_cache_hit_ratio", "Prefix-cache hit ratio 0..1 (hits / queries) over the window, absent without queries; from vllm:prefix_cache_hits_total and vllm:prefix_cache_queries_total (or the gpu_ names).",
		func(d *snapshot.Derived) snapshot.Value { return d.PrefixCacheHitRatio }},
	{"vllm_external_prefix_cache_hit_ratio", "Hit ratio 0..1 of the external cache of a KV connector (offload tier, P/D peer) over the window, in prompt tokens, absent without queries; from vllm:external_prefix_cache_hits_total and vllm:external_prefix_cache_queries_total.",
		func(d *snapshot.Derived) snapshot.Value { return d.ExternalPrefixCacheHitRatio }},
	{"vllm_mm_cache_hit_ratio", "Hit ratio 0..1 of the multimodal cache over the window, in items, absent without queries; from vllm:mm_cache_hits_total and vllm:mm_cache_queries_total.",
		func(d *snapshot.Derived) snapshot.Value { return d.MMCacheHitRatio }},
	{"vllm_kv_transfer_bytes_per_second", "NIXL KV-cache transfer throughput in bytes per second over the window (disaggregated prefill/decode); derived from vllm:nixl_bytes_transferred_sum.",
		func(d *snapshot.Derived) snapshot.Value { return d.KVTransferBytesPerSecond }},
	{"vllm_prompt_tokens_per_second", "Prompt tokens per second over the window; derived from vllm:prompt_tokens_total.",
		func(d *snapshot.Derived) snapshot.Value { return d.PromptTokensPerSecond }},
	{"vllm_generation_tokens_per_second", "Generated tokens per second over the window; derived from vllm:generation_tokens_total.",
		func(d *snapshot.Derived) snapshot.Value { return d.GenerationTokensPerSecond }},
	{"vllm_spec_decode_acceptance_ratio", "Accepted / proposed draft tokens over the window, absent without drafts; from vllm:spec_decode_num_accepted_tokens_total and vllm:spec_decode_num_draft_tokens_total.",
		func(d *snapshot.Derived) snapshot.Value { return d.SpecAcceptanceRatio }},
	{"vllm_spec_decode_mean_acceptance_length", "Mean tokens a stream gains per decode step over the window, 1 + accepted / drafts (the factor between per-step inter-token latency and per-token time); from vllm:spec_decode_num_accepted_tokens_total and vllm:spec_decode_num_drafts_total.",
		func(d *snapshot.Derived) snapshot.Value { return d.SpecMeanAcceptanceLength }},
	{"vllm_prompt_tokens_computed_per_second", "Prompt tokens per second actually computed in prefill (cache and KV-transfer hits excluded) over the window; from vllm:prompt_tokens_by_source_total{source=\"local_compute\"}, else vllm:prompt_tokens_total minus vllm:prompt_tokens_cached_total, else vllm:request_prefill_kv_computed_tokens_sum.",
		func(d *snapshot.Derived) snapshot.Value { return d.PromptTokensComputedPerSecond }},
	{"vllm_prompt_tokens_cached_per_second", "Prompt tokens per second served from a prefix cache over the window; from vllm:prompt_tokens_cached_total, else vllm:prompt_tokens_by_source_total (cache hit + KV transfer).",
		func(d *snapshot.Derived) snapshot.Value { return d.PromptTokensCachedPerSecond }},
	{"vllm_estimated_flops_per_second_per_gpu", "vLLM's estimated floating-point operations per second per GPU over the window, absent while the counter does not move; from vllm:estimated_flops_per_gpu_total.",
		func(d *snapshot.Derived) snapshot.Value { return d.EstimatedFlopsPerSecond }},
	{"vllm_estimated_memory_bytes_per_second_per_gpu", "vLLM's estimated GPU-memory bytes read plus written per second per GPU over the window, absent while the counters do not move; from vllm:estimated_read_bytes_per_gpu_total and vllm:estimated_write_bytes_per_gpu_total.",
		func(d *snapshot.Derived) snapshot.Value { return d.EstimatedBytesPerSecond }},
}

func newDescs() *descs {
	ds := exposition.Descs{}
	g := ds.New
	d := &descs{
		exposition: ds,
		// the one window series with a label of its own
		finishedRate: g("vllm_requests_finished_per_second",
			"Finished requests per second over the window by finish reason; derived from vllm:request_success_total.", "model", "window", "finished_reason"),
		up:             g("vllm_up", "1 if the last scrape of vLLM's /metrics was fetched and parsed, else 0."),
		unexpected:     g("vllm_exporter_vllm_unexpected_label_values", "Distinct label values in the last vLLM scrape that the exporter did not understand or had to drop past a bound (an unknown sleep state, more priorities than allowed); their samples are ignored.", "metric", "label"),
		scrapes:        g("vllm_exporter_scrapes_total", "Scrapes of vLLM's /metrics attempted."),
		scrapeErrors:   g("vllm_exporter_scrape_errors_total", "Failed scrapes of vLLM's /metrics by reason.", "reason"),
		samplesDropped: g("vllm_exporter_samples_dropped_total", "Samples of vLLM's /metrics dropped by a bound (model, engine and finished-reason limits, label value length) or as invalid, by reason.", "reason"),
		scrapeDuration: g("vllm_exporter_scrape_duration_seconds", "Duration of the last scrape of vLLM's /metrics (fetch, parse, derive) in seconds."),
		lastSuccess:    g("vllm_exporter_last_successful_scrape_timestamp_seconds", "Unix time of the last successful scrape of vLLM's /metrics."),
		schema:         g("vllm_exporter_vllm_schema_info", "Detected vLLM metric schema (v0, v1-legacy, v1, none), value 1.", "schema"),
		role:           g("vllm_pod_role_info", "The pod's role in disaggregated prefill/decode serving (role: prefill, decode, or both for aggregated serving) and where the exporter learnt it (source: flag = --vllm.role, detected = from the NIXL families, default = nothing said otherwise), value 1; from vllm:nixl_xfer_time_seconds (a decode pod reads KV), vllm:nixl_num_kv_expired_reqs_total and vllm:generation_tokens_total per finished request (a prefill pod), unless --vllm.role names the role.", "model", "role", "source"),
		missing:        g("vllm_exporter_expected_metric_missing", "1 for each vLLM metric expected for the detected schema that is absent (its derived series are not exported); a present one exports nothing unless --vllm.opt-in=expected-metric-present (then 0).", "metric"),
	}
	for i := range families {
		d.families = append(d.families, families[i].descs(ds))
		if families[i].Hist != "" {
			d.histograms = append(d.histograms, i)
		}
	}
	for _, w := range windowSeries {
		d.window = append(d.window, g(w.name, w.help, "model", "window"))
	}
	return d
}

func (d *descs) all() []*prometheus.Desc {
	out := []*prometheus.Desc{d.up, d.unexpected, d.scrapes, d.scrapeErrors, d.scrapeDuration, d.lastSuccess, d.schema, d.missing, d.samplesDropped, d.role, d.finishedRate}
	for _, fd := range d.families {
		for _, x := range []*prometheus.Desc{fd.series, fd.engine, fd.window, fd.priority} {
			if x != nil {
				out = append(out, x)
			}
		}
	}
	return append(out, d.window...)
}

// Describe implements prometheus.Collector.
func (s *Scraper) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range s.descs.all() {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the const metrics of what the
// last scrape left (renderState), made at each call and sent as made.
// /metrics does not come this way: it reads Gather, which writes the same
// families once per state (exposition.Writer); tests hold the two equal.
func (s *Scraper) Collect(ch chan<- prometheus.Metric) {
	s.descs.render(exposition.ToChannel(ch), s.state.Load(), s.opts.Windows, s.optIn)
}

// renderState is what render reads: the last scrape's snapshot, result and
// windows, and copies of the scraper's counters at its end. Immutable.
type renderState struct {
	snap            *snapshot.VLLM
	res             *result
	windows         map[time.Duration]map[string]*snapshot.Derived
	took            time.Duration
	scrapes         float64
	errors, dropped map[string]float64
	lastOK          time.Time
}

// gathering is one renderState's metric families, as a registry would
// gather them (sorted, checked for consistency), the error it gave, and
// the Writer they are in, lent for as long as anything reads them: the
// scraper until the next scrape, and each request encoding them (refs).
// A plain Gather pins it: its caller may keep the families.
type gathering struct {
	from   *renderState
	mfs    []*dto.MetricFamily
	err    error
	w      *exposition.Writer
	refs   int
	pinned bool
}

// keepState stores the state /metrics shows until the next scrape. The
// scrape let go of the families gathered before it as it began; a request
// during the scrape gathered the state before it again, and no request will
// read those families now: they go too, and with them that state (its whole
// snapshot, per-engine gauges included, and derived windows). Called with
// s.mu held (or from New).
func (s *Scraper) keepState(snap *snapshot.VLLM, res *result, windows map[time.Duration]map[string]*snapshot.Derived, took time.Duration) {
	st := &renderState{snap: snap, res: res, windows: windows, took: took, scrapes: s.scrapes,
		errors: maps.Clone(s.errors), dropped: maps.Clone(s.dropped), lastOK: s.lastOK}
	s.state.Store(st)
	s.forgetGathered(st)
}

// forgetGathered lets go of the families gathered for /metrics, unless
// they are keep's. A scrape calls it before it fetches (keep nil), and
// keepState once the next state is stored (a request may have gathered the
// old one again meanwhile, or the new one already). A Gather in progress
// finishes first (renderMu; Gather never takes s.mu).
func (s *Scraper) forgetGathered(keep *renderState) {
	s.renderMu.Lock()
	defer s.renderMu.Unlock()
	if g := s.gathered; g != nil && g.from != keep {
		s.gathered = nil
		s.release(g)
	}
}

// release drops one reader of g; the last gives its Writer back (unless a
// plain Gather pinned it). Called with renderMu held.
func (s *Scraper) release(g *gathering) {
	if g.refs--; g.refs == 0 && !g.pinned {
		s.writers.Put(g.w)
		// A done func kept past its call holds nothing of the state.
		*g = gathering{}
	}
}

// gather returns the families of the latest state, written by the first
// call after it, and counts the caller as a reader (release). Called with
// renderMu held.
func (s *Scraper) gather() *gathering {
	st := s.state.Load()
	if g := s.gathered; g != nil && g.from == st {
		g.refs++
		return g
	}
	if g := s.gathered; g != nil {
		s.gathered = nil
		s.release(g)
	}
	g := &gathering{from: st, w: s.writers.Get(), refs: 2} // the scraper's and the caller's
	s.descs.render(exposition.ToWriter(g.w), st, s.opts.Windows, s.optIn)
	g.mfs, g.err = g.w.Done()
	s.writers.Sized(g.w.Sizes()) // for a Writer made anew (a pinned one is never given back)
	s.gathered = g
	return g
}

// metrics renders the const metrics of the latest state.
func (s *Scraper) metrics() []prometheus.Metric {
	var out []prometheus.Metric
	s.descs.render(exposition.ToSlice(&out), s.state.Load(), s.opts.Windows, s.optIn)
	return out
}

// Gather implements prometheus.Gatherer: the metric families of what the
// last scrape left, written by the first call after it (exposition.Writer: what
// a registry gathering Collect would give, without the const metrics, the
// hashing and most allocations) and handed out again until the next
// scrape; a second Prometheus replica, a federating or debugging client
// scraping the same state gets a slice.
//
// The families are shared by every caller: read them, never modify them
// (the returned slice is the caller's own). It never waits for a scrape in
// progress (s.mu).
func (s *Scraper) Gather() ([]*dto.MetricFamily, error) {
	s.renderMu.Lock()
	defer s.renderMu.Unlock()
	g := s.gather()
	g.pinned = true
	s.release(g)
	return slices.Clone(g.mfs), g.err
}

// Transactional is s as a prometheus.TransactionalGatherer
// (promhttp.HandlerForTransactional), what /metrics serves: Gather's
// families, given back when the request has encoded them. The Writer they
// were written into is then written into again after the next scrape
// (exposition.Writers) rather than made anew: the families take the same
// memory at every collection of the heap (0.8 MB at 16 models x 8
// engines), not new memory a collection that begins in a request counts
// as live and one that begins elsewhere does not.
func (s *Scraper) Transactional() prometheus.TransactionalGatherer { return scraperLending{s} }

type scraperLending struct{ s *Scraper }

func (l scraperLending) Gather() ([]*dto.MetricFamily, func(), error) {
	s := l.s
	s.renderMu.Lock()
	defer s.renderMu.Unlock()
	g := s.gather()
	done := func() {
		s.renderMu.Lock()
		defer s.renderMu.Unlock()
		s.release(g)
	}
	return slices.Clone(g.mfs), done, g.err
}

// WindowLabel formats a window as its `window` label value ("1m", "5m").
func WindowLabel(d time.Duration) string { return model.Duration(d).String() }

// render makes the const metrics of a state into e. A failed scrape
// renders only the self-metrics and vllm_up 0: nothing from vLLM is shown
// as if it were fresh.
func (d *descs) render(e exposition.Sink, st *renderState, windows []time.Duration, optIn map[string]bool) {
	snap := st.snap
	up := snap != nil && snap.Up
	e.Emit(d.up, prometheus.GaugeValue, b2f(up))
	e.Emit(d.scrapes, prometheus.CounterValue, st.scrapes)
	for _, r := range reasons {
		e.Emit(d.scrapeErrors, prometheus.CounterValue, st.errors[r], r)
	}
	for _, r := range dropReasons {
		e.Emit(d.samplesDropped, prometheus.CounterValue, st.dropped[r], r)
	}
	if snap != nil {
		e.Emit(d.scrapeDuration, prometheus.GaugeValue, st.took.Seconds())
	}
	if !st.lastOK.IsZero() {
		e.Emit(d.lastSuccess, prometheus.GaugeValue, float64(st.lastOK.UnixNano())/1e9)
	}
	if up {
		d.renderScrape(e, snap, st.res, optIn)
		if optIn[OptInWindowSeries] {
			for _, w := range windows {
				d.renderWindow(e, snap, WindowLabel(w), st.windows[w], optIn)
			}
		}
	}
}

// renderScrape appends what one successful scrape read: schema, missing
// and unexpected families, and every row's series for every model.
func (d *descs) renderScrape(e exposition.Sink, snap *snapshot.VLLM, res *result, optIn map[string]bool) {
	e.Emit(d.schema, prometheus.GaugeValue, 1, snap.Schema)
	for _, x := range res.expected {
		missing := slices.Contains(snap.Missing, x)
		if missing || optIn[OptInExpectedPresent] {
			e.Emit(d.missing, prometheus.GaugeValue, b2f(missing), x)
		}
	}
	for k, n := range res.unexpected {
		e.Emit(d.unexpected, prometheus.GaugeValue, float64(n), k.Metric, k.Label)
	}
	for _, name := range sortedKeys(snap.Models) {
		m := snap.Models[name]
		if m.Role != "" {
			e.Emit(d.role, prometheus.GaugeValue, 1, name, m.Role, m.RoleSource)
		}
		for i := range families {
			if families[i].exported(optIn) {
				families[i].render(d.families[i], e, snap, m)
			}
		}
	}
}

// renderWindow appends the series derived over one window.
func (d *descs) renderWindow(e exposition.Sink, snap *snapshot.VLLM, wl string, byModel map[string]*snapshot.Derived, optIn map[string]bool) {
	for _, name := range sortedKeys(byModel) {
		dv := byModel[name]
		for i, w := range windowSeries {
			e.Value(d.window[i], prometheus.GaugeValue, w.get(dv), name, wl)
		}
		for _, r := range sortedKeys(dv.FinishedPerSecondByReason) {
			e.Emit(d.finishedRate, prometheus.GaugeValue, dv.FinishedPerSecondByReason[r], name, wl, r)
		}
		for _, i := range d.histograms {
			if !families[i].exported(optIn) {
				continue
			}
			hn := families[i].Hist
			qs, ok := dv.Quantiles[hn]
			cum, ok2 := snap.Models[name].Histograms.Lookup(hn)
			if !ok || !ok2 {
				continue
			}
			e.Summary(d.families[i].window, qs, cum, name, wl)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
