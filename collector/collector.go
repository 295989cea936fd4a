// Package collector reports the health of the exporter's background loops
// (vLLM scraper, GPU sampler, probe scheduler, SLO watchdog) the way
// node_exporter reports its collectors: one `up` and one duration series per
// named loop. Loops report after each run; /metrics only reads the results.
// Descs and Metrics are what a component needs to render its latest state as
// const metrics in its Collect.
package collector

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reporter is what a background loop needs: report each run's outcome.
type Reporter interface {
	Report(collector string, took time.Duration, err error)
}

// Health remembers the last outcome of every loop that reported.
type Health struct {
	mu     sync.Mutex
	last   map[string]outcome
	absent map[string]string // collector -> why it is not running

	up, duration, absentDesc *prometheus.Desc
}

type outcome struct {
	took time.Duration
	ok   bool
}

// NewHealth returns an empty Health. Register it once.
func NewHealth() *Health {
	return &Health{
		last:   map[string]outcome{},
		absent: map[string]string{},
		absentDesc: prometheus.NewDesc("vllm_exporter_collector_absent",
			"1 for a collector that is enabled in auto mode but found nothing to collect on this host (reason: what is missing); it exports no up series, so nothing alerts on it.",
			[]string{"collector", "reason"}, nil),
		up: prometheus.NewDesc("vllm_exporter_collector_up",
			"1 if the collector's last run succeeded, 0 if it failed.", []string{"collector"}, nil),
		duration: prometheus.NewDesc("vllm_exporter_collector_duration_seconds",
			"Duration of the collector's last run in seconds.", []string{"collector"}, nil),
	}
}

// Report records one run. Safe for concurrent use; a nil *Health ignores it,
// so components can be built without one in tests.
func (h *Health) Report(collector string, took time.Duration, err error) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.last[collector] = outcome{took: took, ok: err == nil}
	delete(h.absent, collector)
	h.mu.Unlock()
}

// Absent records that a collector does not run on this host and why
// (a short, fixed reason such as "no_gpu"): it then exports
// vllm_exporter_collector_absent instead of an up series.
func (h *Health) Absent(collector, reason string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	delete(h.last, collector)
	h.absent[collector] = reason
	h.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (h *Health) Describe(ch chan<- *prometheus.Desc) {
	ch <- h.up
	ch <- h.duration
	ch <- h.absentDesc
}

// Collect implements prometheus.Collector.
func (h *Health) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	last, absent := maps.Clone(h.last), maps.Clone(h.absent)
	h.mu.Unlock()
	m := Metrics(ch)
	for _, n := range slices.Sorted(maps.Keys(absent)) {
		m.Gauge(h.absentDesc, 1, n, absent[n])
	}
	for _, n := range slices.Sorted(maps.Keys(last)) {
		up := 0.0
		if last[n].ok {
			up = 1
		}
		m.Gauge(h.up, up, n)
		m.Gauge(h.duration, last[n].took.Seconds(), n)
	}
}

// Descs is a collector's Descs, gathered as they are made, for its Describe.
type Descs []*prometheus.Desc

// New makes a Desc with variable labels and keeps it in ds.
func (ds *Descs) New(name, help string, labels ...string) *prometheus.Desc {
	d := prometheus.NewDesc(name, help, labels, nil)
	*ds = append(*ds, d)
	return d
}

// Describe sends every Desc of ds.
func (ds Descs) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range ds {
		ch <- d
	}
}

// Metrics is a Collect's channel, sending const metrics made from the
// latest state. A series that cannot be made (a label value that is not
// UTF-8) goes as an invalid metric: the gather reports it and the rest of
// /metrics is still served.
type Metrics chan<- prometheus.Metric

// Send sends one gauge or counter sample.
func (ch Metrics) Send(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}

// Gauge sends one gauge sample.
func (ch Metrics) Gauge(d *prometheus.Desc, v float64, labels ...string) {
	ch.Send(d, prometheus.GaugeValue, v, labels...)
}
