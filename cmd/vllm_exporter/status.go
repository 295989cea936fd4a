package main

// The status page at /: what the exporter knows now, read from the
// components' latest snapshots (a page load scrapes, probes and evaluates
// nothing): the health verdict, the bottleneck class of each model with its
// evidence, each SLO's alert state, burn rates and budget, the last scrapes
// of vLLM and the recent probes with their outcome, as blackbox_exporter
// lists its recent probes. Free text (error messages) passes the scrubber
// of the connection's credentials first; URLs are redacted.

import (
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/version"

	"github.com/vllm-exporter/vllm_exporter/collector"
	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmhealth"
	"github.com/vllm-exporter/vllm_exporter/probes"
	"github.com/vllm-exporter/vllm_exporter/slo"
	"github.com/vllm-exporter/vllm_exporter/slo/bottleneck"
)

// recentScrapes is how many scrapes of vLLM the status page lists, and
// maxErrorText how much of each one's error (runes).
const recentScrapes, maxErrorText = 20, 300

// scrapeLog keeps the last scrapes of vLLM for the status page: it sits
// between the scraper and the health collector it reports to, and takes
// each scrape's time and reason from the scraper's snapshot of it.
type scrapeLog struct {
	next   collector.Reporter
	latest func() *snapshot.VLLM // the scraper's Latest, set once it is built
	scrub  func(string) string

	mu   sync.Mutex
	last []scrapeEntry // oldest first
}

type scrapeEntry struct {
	Time         time.Time
	Took         time.Duration
	Reason, Text string // empty when the scrape succeeded
}

func (l *scrapeLog) Report(name string, took time.Duration, err error) {
	l.next.Report(name, took, err)
	if name != vllm.CollectorName {
		return
	}
	e := scrapeEntry{Time: time.Now(), Took: took}
	if l.latest != nil {
		if s := l.latest(); s != nil {
			e.Time, e.Reason = s.Time, s.Error
		}
	}
	if err != nil {
		e.Text = l.scrub(err.Error())
		if r := []rune(e.Text); len(r) > maxErrorText {
			e.Text = string(r[:maxErrorText]) + "…"
		}
		if e.Reason == "" {
			e.Reason = "error"
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.last) == recentScrapes {
		l.last = slices.Delete(l.last, 0, 1)
	}
	l.last = append(l.last, e)
}

// entries are the logged scrapes, newest first (none from a nil log).
func (l *scrapeLog) entries() []scrapeEntry {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.last)
	slices.Reverse(out)
	return out
}

type pageLink struct{ Path, Text string }

// statusData is what the page shows: the components' own snapshots.
type statusData struct {
	Version, Target string
	Now             time.Time
	Links           []pageLink
	Scrub           func(string) string
	Verdict         *vllmhealth.Verdict // nil: no tracker (nor below: component off)
	Models          []bottleneck.ModelState
	SLOs            []slo.Result
	HasSLOs         bool
	Scrapes         []scrapeEntry
	Probes          *snapshot.Probes
	Recent          *probes.Recent
}

// status gathers the page's data from the latest snapshots.
func (x *exporter) status(links []pageLink, scrub func(string) string) statusData {
	d := statusData{Version: version.Info(), Target: vllm.RedactedURL(x.vllmURL), Now: time.Now(), Links: links, Scrub: scrub,
		Scrapes: x.scrapes.entries(), HasSLOs: x.slo != nil}
	if x.verdict != nil {
		v := x.verdict.Latest()
		d.Verdict = &v
	}
	if x.classifier != nil {
		d.Models = x.classifier.States()
	}
	if x.slo != nil {
		d.SLOs = x.slo.Status()
	}
	if x.probes != nil {
		d.Probes, d.Recent = x.probes.Latest(), x.probes.Recent()
	}
	return d
}

// statusHandler serves the status page.
func (x *exporter) statusHandler(links []pageLink) http.Handler {
	scrub := x.scrub.Scrub
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := statusTemplate.Execute(w, x.status(links, scrub)); err != nil {
			http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		}
	})
}

// dash stands for a value that is not there.
const dash = "–"

var statusTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"clock": func(t time.Time) string {
		if t.IsZero() {
			return dash
		}
		return t.UTC().Format("15:04:05")
	},
	// ms formats a duration, or seconds (NaN: none), in milliseconds.
	"ms": func(v any) string {
		s, ok := v.(float64)
		if d, isD := v.(time.Duration); isD {
			s, ok = d.Seconds(), d > 0
		}
		if !ok || math.IsNaN(s) {
			return dash
		}
		return fmt.Sprintf("%.1f ms", s*1000)
	},
	"val": func(v snapshot.Value, format string, scale float64) string {
		if !v.OK || math.IsNaN(v.V) {
			return dash
		}
		return fmt.Sprintf(format, v.V*scale)
	},
	"pct":    func(v float64) string { return fmt.Sprintf("%.4g%%", 100*v) },
	"num":    func(v float64) string { return fmt.Sprintf("%.4g", v) },
	"period": func(d time.Duration) string { return model.Duration(d).String() },
	"seen": func(covered float64, d time.Duration) string {
		return model.Duration(time.Duration(covered * float64(d)).Round(time.Second)).String()
	},
	"advice": func(c bottleneck.Class) string { return bottleneck.AdviceFor(c).Summary },
	"sum": func(m map[string]float64) (n float64) {
		for _, v := range m {
			n += v
		}
		return n
	},
}).Parse(statusHTML))

// statusHTML is the page's template.
//
//go:embed status.html
var statusHTML string
