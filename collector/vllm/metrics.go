package vllm

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// descs are the scraper's Descs, made once: the family table's and the
// scraper's own.
type descs struct {
	up         *prometheus.Desc
	rows       []familyDescs // by row of families
	unexpected *prometheus.Desc

	scrapes, scrapeErrors, scrapeDuration, lastSuccess, schema, missing *prometheus.Desc
	samplesDropped, role, endpointUp, supervisor                        *prometheus.Desc
}

func newDescs() *descs {
	g := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	d := &descs{
		up:             g("vllm_up", "1 if the last scrape of vLLM's /metrics was fetched and parsed, else 0."),
		endpointUp:     g("vllm_exporter_endpoint_up", "1 if the last scrape of this API server's /metrics (endpoint: its place among --vllm.url, the data-parallel rank with --vllm.data-parallel-ranks) was fetched and parsed, else 0; only for a server of several.", "endpoint"),
		supervisor:     g("vllm_exporter_supervisor_healthy", "1 if vLLM's data-parallel supervisor (--vllm.supervisor-url) answered /health with 200 at the last scrape (every rank's /health does), else 0."),
		unexpected:     g("vllm_exporter_vllm_unexpected_label_values", "Distinct label values in the last vLLM scrape that the exporter did not understand or had to drop past a bound (an unknown sleep state, more priorities than allowed); their samples are ignored.", "metric", "label"),
		scrapes:        g("vllm_exporter_scrapes_total", "Scrapes of vLLM's /metrics attempted."),
		scrapeErrors:   g("vllm_exporter_scrape_errors_total", "Failed scrapes of vLLM's /metrics by reason.", "reason"),
		samplesDropped: g("vllm_exporter_samples_dropped_total", "Samples of vLLM's /metrics dropped by a bound (model, engine and finished-reason limits, label value length) or as invalid (not a histogram, a duplicate, not finite, a negative counter), by reason.", "reason"),
		scrapeDuration: g("vllm_exporter_scrape_duration_seconds", "Duration of the last scrape of vLLM's /metrics (fetch, parse, derive) in seconds."),
		lastSuccess:    g("vllm_exporter_last_successful_scrape_timestamp_seconds", "Unix time of the last successful scrape of vLLM's /metrics."),
		schema:         g("vllm_exporter_vllm_schema_info", "Detected vLLM metric schema (v0, v1-legacy, v1, none), value 1.", "schema"),
		role:           g("vllm_pod_role_info", "The pod's role in disaggregated prefill/decode serving (role: prefill, decode, or both for aggregated serving) and where the exporter learnt it (source: flag = --vllm.role, detected = from the NIXL families, default = nothing said otherwise), value 1; from vllm:nixl_xfer_time_seconds (a decode pod reads KV), vllm:nixl_num_kv_expired_reqs_total and vllm:generation_tokens_total per finished request (a prefill pod), unless --vllm.role names the role.", "model", "role", "source"),
		missing:        g("vllm_exporter_expected_metric_missing", "1 for each vLLM metric expected for the detected schema that is absent (its derived series are not exported); a present one exports nothing unless --vllm.opt-in=expected-metric-present (then 0).", "metric"),
	}
	for i := range families.Rows {
		d.rows = append(d.rows, descsOf(&families.Rows[i]))
	}
	return d
}

func (d *descs) all() []*prometheus.Desc {
	out := []*prometheus.Desc{d.up, d.unexpected, d.scrapes, d.scrapeErrors, d.scrapeDuration, d.lastSuccess, d.schema, d.missing, d.samplesDropped, d.role, d.endpointUp, d.supervisor, serverDesc}
	for _, fd := range d.rows {
		for _, x := range append([]*prometheus.Desc{fd.series, fd.engine, fd.window, fd.priority}, fd.windows...) {
			if x != nil {
				out = append(out, x)
			}
		}
	}
	return out
}

// Describe implements prometheus.Collector.
func (s *Scraper) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range s.descs.all() {
		ch <- d
	}
}

// Collect implements prometheus.Collector: const metrics of what the last
// scrape left (renderState). It never waits for a scrape in progress.
func (s *Scraper) Collect(ch chan<- prometheus.Metric) {
	s.descs.render(ch, s.state.Load(), s.opts.Windows, s.optIn)
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
	srv             serverState
	endpoints       []bool         // by endpoint, whether it answered (nil for one)
	supervisor      snapshot.Value // the supervisor's /health was 200
}

// WindowLabel formats a window as its `window` label value ("1m", "5m").
func WindowLabel(d time.Duration) string { return model.Duration(d).String() }

// sink sends const metrics. Label values were validated where they came
// from; a metric that still fails costs that series, not the process.
type sink chan<- prometheus.Metric

func (e sink) emit(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	if m, err := prometheus.NewConstMetric(d, t, v, labels...); err == nil {
		e <- m
	}
}

// value sends v if it is known.
func (e sink) value(d *prometheus.Desc, t prometheus.ValueType, v snapshot.Value, labels ...string) {
	if v.OK {
		e.emit(d, t, v.V, labels...)
	}
}

// histogram re-exports a cumulative histogram; vLLM's counts are whole
// numbers carried as floats.
func (e sink) histogram(d *prometheus.Desc, h snapshot.Histogram, labels ...string) {
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b] = uint64(math.Round(h.Counts[i]))
	}
	if m, err := prometheus.NewConstHistogram(d, uint64(math.Round(h.Count)), h.Sum, buckets, labels...); err == nil {
		e <- m
	}
}

// summary exports a window's quantiles with the cumulative count and sum:
// the quantile label is reserved for summaries (promtool rejects it
// elsewhere), and a summary is "quantiles over a recent window plus
// cumulative count and sum".
func (e sink) summary(d *prometheus.Desc, qs map[float64]snapshot.Value, cum snapshot.Histogram, labels ...string) {
	present := make(map[float64]float64, len(qs))
	for q, v := range qs {
		if v.OK {
			present[q] = v.V
		}
	}
	if m, err := prometheus.NewConstSummary(d, uint64(math.Round(cum.Count)), cum.Sum, present, labels...); err == nil {
		e <- m
	}
}

// render sends the const metrics of a state. A failed scrape renders only
// the self-metrics and vllm_up 0: nothing from vLLM is shown as if it were
// fresh.
func (d *descs) render(ch chan<- prometheus.Metric, st *renderState, windows []time.Duration, optIn map[string]bool) {
	e := sink(ch)
	snap := st.snap
	up := snap != nil && snap.Up
	e.emit(d.up, prometheus.GaugeValue, b2f(up))
	e.emit(d.scrapes, prometheus.CounterValue, st.scrapes)
	for _, r := range reasons {
		e.emit(d.scrapeErrors, prometheus.CounterValue, st.errors[r], r)
	}
	for _, r := range dropReasons {
		e.emit(d.samplesDropped, prometheus.CounterValue, st.dropped[r], r)
	}
	if snap != nil {
		e.emit(d.scrapeDuration, prometheus.GaugeValue, st.took.Seconds())
	}
	if !st.lastOK.IsZero() {
		e.emit(d.lastSuccess, prometheus.GaugeValue, float64(st.lastOK.UnixNano())/1e9)
	}
	renderServer(e, st.srv)
	for i, ok := range st.endpoints {
		e.emit(d.endpointUp, prometheus.GaugeValue, b2f(ok), strconv.Itoa(i))
	}
	e.value(d.supervisor, prometheus.GaugeValue, st.supervisor)
	if !up {
		return
	}
	d.renderScrape(e, snap, st.res, optIn)
	if optIn[OptInWindowSeries] {
		for _, w := range windows {
			d.renderWindow(e, snap, WindowLabel(w), st.windows[w], optIn)
		}
	}
}

// renderScrape sends what one successful scrape read: schema, missing and
// unexpected families, and every row's series for every model.
func (d *descs) renderScrape(e sink, snap *snapshot.VLLM, res *result, optIn map[string]bool) {
	e.emit(d.schema, prometheus.GaugeValue, 1, snap.Schema)
	for _, x := range res.expected {
		missing := slices.Contains(snap.Missing, x)
		if missing || optIn[OptInExpectedPresent] {
			e.emit(d.missing, prometheus.GaugeValue, b2f(missing), x)
		}
	}
	for k, n := range res.unexpected {
		e.emit(d.unexpected, prometheus.GaugeValue, float64(n), k.Metric, k.Label)
	}
	for _, name := range sortedKeys(snap.Models) {
		m := snap.Models[name]
		if m.Role != "" {
			e.emit(d.role, prometheus.GaugeValue, 1, name, m.Role, m.RoleSource)
		}
		for i := range families.Rows {
			if exported(&families.Rows[i], optIn) {
				render(&families.Rows[i], d.rows[i], e, snap, m)
			}
		}
	}
}

// renderWindow sends the series derived over one window: each row's
// Windows, and a histogram's quantiles (when the histogram is exported).
func (d *descs) renderWindow(e sink, snap *snapshot.VLLM, wl string, byModel map[string]*snapshot.Derived, optIn map[string]bool) {
	for _, name := range sortedKeys(byModel) {
		dv := byModel[name]
		for i := range families.Rows {
			f, fd := &families.Rows[i], d.rows[i]
			for j, w := range f.Windows {
				switch {
				case fd.windows[j] == nil:
				case w.ByLabel != nil:
					by := *w.ByLabel(dv)
					for _, k := range sortedKeys(by) {
						e.emit(fd.windows[j], prometheus.GaugeValue, by[k], name, wl, k)
					}
				case w.Field != nil:
					e.value(fd.windows[j], prometheus.GaugeValue, *w.Field(dv), name, wl)
				default:
					e.value(fd.windows[j], prometheus.GaugeValue, dv.Series[w.Series], name, wl)
				}
			}
			if f.Hist == "" || !exported(f, optIn) {
				continue
			}
			qs, ok := dv.Quantiles[f.Hist]
			cum, ok2 := snap.Models[name].Histograms.Lookup(f.Hist)
			if ok && ok2 {
				e.summary(fd.window, qs, cum, name, wl)
			}
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
