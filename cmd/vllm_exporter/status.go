package main

// The status page at /: what the exporter knows now, read from the
// components' latest snapshots (a page load scrapes, probes and evaluates
// nothing): the health verdict, the bottleneck class of each model with its
// evidence, each SLO's alert state, burn rates and budget, the last scrapes
// of vLLM and the recent probes with their outcome, as blackbox_exporter
// lists its recent probes. Free text (error messages) passes the scrubber
// of the connection's credentials first; URLs are redacted.

import (
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/version"

	"github.com/vllm-exporter/vllm_exporter/collector"
	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
	"github.com/vllm-exporter/vllm_exporter/probes"
	"github.com/vllm-exporter/vllm_exporter/slo/bottleneck"
)

// recentScrapes is how many scrapes of vLLM the status page lists.
const recentScrapes = 20

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

// scrubber replaces the connection's credentials (inline, from files, and
// the password of the URL) in text about to be shown.
func scrubber(up *upstream.Upstream, vllmURL string) func(string) string {
	return func(s string) string {
		var secrets []string
		if up != nil {
			secrets = up.Secrets()
		}
		if u, err := url.Parse(vllmURL); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok {
				secrets = append(secrets, pw, url.PathEscape(pw), url.QueryEscape(pw))
			}
		}
		return upstream.Scrub(s, secrets...)
	}
}

type pageLink struct{ Path, Text string }

// statusData is what the page shows.
type statusData struct {
	Version, Target string
	Now             time.Time
	Links           []pageLink
	HasVerdict      bool
	Verdict         string
	VerdictReason   string
	VerdictTime     time.Time
	Models          []modelRow
	HasSLOs         bool
	SLOs            []sloRow
	Scrapes         []scrapeEntry
	HasProbes       bool
	Profiles        []profileRow
	Probes          []probes.ProbeRecord
}

type modelRow struct {
	Model, Class, Summary, Candidate string
	Since                            time.Time
	Evidence                         []bottleneck.Evidence
}

type sloRow struct {
	SLO, Model, Source, Kind string
	Objective                float64
	State                    string // page, ticket or ok
	Burn                     []burn
	Budget                   snapshot.Value
	Covered                  float64
	Period                   time.Duration
}

type burn struct {
	Window string
	Rate   snapshot.Value
}

type profileRow struct {
	Name               string
	Requests, Failures float64
	LastSuccess        bool
	LastError          string
	Windows            [4]probes.LatencyWindow // TTFT, TPOT, ITL, E2E
}

// status gathers the page's data from the latest snapshots.
func (x *exporter) status(links []pageLink, scrub func(string) string) statusData {
	d := statusData{Version: version.Info(), Target: vllm.RedactedURL(x.vllmURL), Now: time.Now(), Links: links,
		Scrapes: x.scrapes.entries(), HasVerdict: x.verdict != nil, HasSLOs: x.slo != nil, HasProbes: x.probes != nil}
	if x.verdict != nil {
		v := x.verdict.Latest()
		d.Verdict, d.VerdictReason, d.VerdictTime = string(v.State), scrub(v.Reason), v.Time
	}
	if x.classifier != nil {
		for _, st := range x.classifier.States() {
			r := modelRow{Model: st.Model, Class: string(st.Class), Since: st.Since, Summary: bottleneck.AdviceFor(st.Class).Summary, Evidence: st.Evidence()}
			if st.Candidate != "" && st.Candidate != st.Class {
				r.Candidate = fmt.Sprintf("%s (%d ticks)", st.Candidate, st.CandidateTicks)
			}
			d.Models = append(d.Models, r)
		}
	}
	if x.slo != nil {
		for _, res := range x.slo.Status() {
			r := sloRow{SLO: res.SLO, Model: res.Model, Source: res.Source, Kind: res.Kind, Objective: res.Objective,
				State: "ok", Budget: res.BudgetRemaining, Covered: res.PeriodCovered, Period: res.Period}
			switch {
			case res.Page:
				r.State = "page"
			case res.Ticket:
				r.State = "ticket"
			}
			for _, w := range res.Windows {
				r.Burn = append(r.Burn, burn{w.Name, w.BurnRate})
			}
			d.SLOs = append(d.SLOs, r)
		}
	}
	if x.probes != nil {
		latest, recent := x.probes.Latest(), x.probes.Recent()
		for _, name := range slices.Sorted(mapsKeys(latest.Profiles)) {
			p := latest.Profiles[name]
			var fails float64
			for _, n := range p.Failures {
				fails += n
			}
			d.Profiles = append(d.Profiles, profileRow{Name: name, Requests: p.Requests, Failures: fails, LastSuccess: p.LastSuccess,
				LastError: scrub(p.LastError), Windows: recent.Windows[name]})
		}
		for _, r := range recent.Probes {
			r.Detail = scrub(r.Detail)
			d.Probes = append(d.Probes, r)
		}
	}
	return d
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// statusHandler serves the status page.
func (x *exporter) statusHandler(links []pageLink) http.Handler {
	scrub := scrubber(x.upstream, x.vllmURL)
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := statusTemplate.Execute(w, x.status(links, scrub)); err != nil {
			http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		}
	})
}

var statusTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"clock": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("15:04:05")
	},
	"ago": func(now, t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return now.Sub(t).Round(time.Second).String() + " ago"
	},
	"ms": func(d time.Duration) string {
		if d == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	},
	"sec": func(v float64) string {
		if math.IsNaN(v) {
			return "–"
		}
		return fmt.Sprintf("%.1f ms", v*1000)
	},
	"val": func(v snapshot.Value, format string) string {
		if !v.OK || math.IsNaN(v.V) {
			return "–"
		}
		return fmt.Sprintf(format, v.V)
	},
	"pct":    func(v float64) string { return fmt.Sprintf("%.4g%%", 100*v) },
	"num":    func(v float64) string { return fmt.Sprintf("%.4g", v) },
	"period": func(d time.Duration) string { return model.Duration(d).String() },
	"seen": func(covered float64, d time.Duration) string {
		return model.Duration(time.Duration(covered * float64(d)).Round(time.Second)).String()
	},
	"budget": func(v snapshot.Value) string {
		if !v.OK || math.IsNaN(v.V) {
			return "–"
		}
		return fmt.Sprintf("%.1f%%", 100*v.V)
	},
	"young": func(covered float64) bool { return covered < 1 },
}).Parse(statusHTML))

const statusHTML = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>vLLM Exporter</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.2em 2em;color:#1f2328;font-size:14px}
h1{font-size:1.5em;margin:0 0 .2em}
h2{font-size:1.15em;margin:1.4em 0 .4em;border-bottom:1px solid #d0d7de;padding-bottom:.2em}
table{border-collapse:collapse;margin:.3em 0}
th,td{border:1px solid #d0d7de;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.ok{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:600}.warn{color:#9a6700;font-weight:600}
.note{color:#656d76;font-size:.92em}nav a{margin-right:1.2em}code{font-size:.9em}td code{white-space:nowrap}
</style></head><body>
<h1>vLLM Exporter</h1>
<p>Prometheus exporter for vLLM, scraping <code>{{.Target}}</code>; version {{.Version}}.<br>
<span class="note">Rendered {{clock .Now}} UTC from the components' latest state (loading this page measures nothing).</span></p>
<nav>{{range .Links}}<a href="{{.Path}}">{{.Text}}</a>{{end}}</nav>

<h2>Verdict</h2>
{{if .HasVerdict}}<table id="health"><tr><th>vLLM health</th><th>reason</th><th>as of</th></tr>
<tr><td class="{{if eq .Verdict "serving"}}ok{{else}}bad{{end}}">{{.Verdict}}</td><td>{{.VerdictReason}}</td><td>{{clock .VerdictTime}}</td></tr></table>{{end}}
{{if .Models}}<table id="bottleneck"><tr><th>model</th><th>bottleneck class</th><th>since</th><th>what it means</th><th>evidence</th></tr>
{{range .Models}}<tr><td>{{.Model}}</td><td class="{{if eq .Class "near_optimal"}}ok{{else}}warn{{end}}">{{.Class}}</td><td>{{clock .Since}}</td>
<td>{{.Summary}}{{if .Candidate}}<br><span class="note">becoming {{.Candidate}}</span>{{end}}</td>
<td>{{range .Evidence}}<div>{{.Signal}} = {{num .Value}}{{with .Unit}} {{.}}{{end}}{{if .Op}} {{.Op}} {{num .Threshold}}{{end}}</div>{{else}}<span class="note">none: no bottleneck rule holds</span>{{end}}</td></tr>
{{end}}</table>
{{else}}<p class="note">No classification yet: the classifier runs on the SLO watchdog's tick.</p>{{end}}

<h2>SLOs</h2>
{{if .SLOs}}<table id="slos"><tr><th>SLO</th><th>model</th><th>source / kind</th><th>objective</th><th>alert</th><th>burn rate by window</th><th>error budget left</th></tr>
{{range .SLOs}}<tr><td>{{.SLO}}</td><td>{{.Model}}</td><td>{{.Source}} / {{.Kind}}</td><td class="n">{{pct .Objective}}</td>
<td class="{{if eq .State "ok"}}ok{{else}}bad{{end}}">{{.State}}</td>
<td>{{range .Burn}}<span class="burn">{{.Window}}&nbsp;{{val .Rate "%.2f×"}}</span> {{end}}</td>
<td><span class="budget">{{budget .Budget}}</span>{{if young .Covered}}<br><span class="note">over the {{seen .Covered .Period}} seen of the {{period .Period}} period: until a whole period is seen, the budget covers only the part seen</span>{{end}}</td></tr>
{{end}}</table>
<p class="note">Error budget left: 100% untouched, 0% spent, below 0 overspent. Alert: page (critical) or ticket (warning) from the multi-window burn rates (1× spends the budget exactly over the period).</p>
{{else if .HasSLOs}}<p class="note">No SLO evaluated yet.</p>{{else}}<p class="note">The SLO watchdog is off.</p>{{end}}

<h2>Last scrapes of vLLM</h2>
{{if .Scrapes}}<table id="scrapes"><tr><th>time</th><th>outcome</th><th>reason</th><th>duration</th><th>error</th></tr>
{{range .Scrapes}}<tr><td>{{clock .Time}}</td><td class="{{if .Reason}}bad">failed{{else}}ok">ok{{end}}</td><td>{{.Reason}}</td><td class="n">{{ms .Took}}</td><td>{{.Text}}</td></tr>
{{end}}</table>{{else}}<p class="note">No scrape yet.</p>{{end}}

<h2>Probes</h2>
{{if .HasProbes}}{{if .Profiles}}<table id="probe-profiles"><tr><th>profile</th><th>sent</th><th>failed</th><th>last</th>
<th>TTFT p50 / p99</th><th>TPOT p50 / p99</th><th>ITL p50 / p99</th><th>e2e p50 / p99</th><th>last failure</th></tr>
{{range .Profiles}}<tr><td>{{.Name}}</td><td class="n">{{num .Requests}}</td><td class="n">{{num .Failures}}</td><td class="{{if .LastSuccess}}ok">success{{else}}bad">failed{{end}}</td>
{{range .Windows}}<td class="n">{{sec .P50}} / {{sec .P99}}</td>{{end}}<td>{{.LastError}}</td></tr>
{{end}}</table><p class="note">Quantiles: exact, over each profile's successful probes of the last 5 minutes.</p>{{end}}
{{if .Probes}}<table id="probes"><tr><th>sent</th><th>profile</th><th>model</th><th>outcome</th><th>status</th><th>TTFT</th><th>TPOT</th><th>e2e</th><th>tokens</th><th>took</th><th>request id</th><th>detail</th></tr>
{{range .Probes}}<tr><td>{{clock .Time}}</td><td>{{.Profile}}</td><td>{{.Model}}</td><td class="{{if .Reason}}bad">{{.Reason}}{{else}}ok">success{{end}}</td>
<td class="n">{{with .StatusCode}}{{.}}{{end}}</td><td class="n">{{ms .TTFT}}</td><td class="n">{{ms .TPOT}}</td><td class="n">{{ms .E2E}}</td><td class="n">{{.Tokens}}</td><td class="n">{{ms .Duration}}</td>
<td><code>{{.RequestID}}</code></td><td>{{.Detail}}</td></tr>
{{end}}</table>{{else}}<p class="note">No probe finished yet.</p>{{end}}
{{else}}<p class="note">Probes are off (--no-probe.enabled).</p>{{end}}
</body></html>
`
