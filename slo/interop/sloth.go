package interop

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/slo"
)

// Sloth's prometheus/v1 spec (github.com/slok/sloth/pkg/prometheus/api/v1).
type slothSpec struct {
	Version string     `yaml:"version"`
	Service string     `yaml:"service"`
	Labels  labels     `yaml:"labels,omitempty"`
	SLOs    []slothSLO `yaml:"slos"`
}

type labels map[string]string

type slothSLO struct {
	Name        string        `yaml:"name"`
	Objective   float64       `yaml:"objective"`
	Description string        `yaml:"description,omitempty"`
	Labels      labels        `yaml:"labels,omitempty"`
	SLI         slothSLI      `yaml:"sli"`
	Alerting    slothAlerting `yaml:"alerting"`
}

type slothSLI struct {
	Events slothEvents `yaml:"events"`
}

type slothEvents struct {
	ErrorQuery string `yaml:"error_query"`
	TotalQuery string `yaml:"total_query"`
}

type slothAlerting struct {
	Name        string     `yaml:"name"`
	Labels      labels     `yaml:"labels,omitempty"`
	Annotations labels     `yaml:"annotations,omitempty"`
	PageAlert   slothAlert `yaml:"page_alert"`
	TicketAlert slothAlert `yaml:"ticket_alert"`
}

type slothAlert struct {
	Labels      labels `yaml:"labels,omitempty"`
	Annotations labels `yaml:"annotations,omitempty"`
}

// SlothWindow is the placeholder Sloth replaces with each alert window.
const SlothWindow = "{{.window}}"

// SlothAlertName is the alert Sloth generates for every SLO (its page and
// ticket variants carry severity critical and warning).
const SlothAlertName = "VLLMSLOBurnRate"

// Sloth writes slos as Sloth prometheus/v1 specs: one YAML document per SLO
// period (Sloth takes the period from `sloth generate --default-slo-period`,
// not from the spec), 30d first. Queries are the exporter's bad and total
// event counts with Sloth's {{.window}} placeholder, summed by model, so
// Sloth's records and alerts are per model as the exporter's are.
func Sloth(slos []config.SLO, o Options) ([]byte, error) {
	o.defaults()
	ps, err := prepare(slos, o)
	if err != nil {
		return nil, err
	}
	var periods []time.Duration
	byPeriod := map[time.Duration][]slothSLO{}
	for _, p := range ps {
		d := p.s.PeriodDuration()
		if _, ok := byPeriod[d]; !ok {
			periods = append(periods, d)
		}
		byPeriod[d] = append(byPeriod[d], slothSLOOf(p, o))
	}
	// The default period's document first: `sloth generate` without flags.
	for i, d := range periods {
		if d == config.DefaultSLOPeriod && i > 0 {
			copy(periods[1:i+1], periods[:i])
			periods[0] = d
		}
	}
	docs := make([]any, 0, len(periods))
	comments := make([]string, 0, len(periods))
	for _, d := range periods {
		docs = append(docs, slothSpec{Version: "prometheus/v1", Service: o.Service, SLOs: byPeriod[d]})
		comments = append(comments, slothPeriodNote(d))
	}
	if len(docs) == 0 {
		docs = append(docs, slothSpec{Version: "prometheus/v1", Service: o.Service, SLOs: []slothSLO{}})
	}
	return encodeDocs(o.Header, docs, comments)
}

// slothPeriodNote heads each document: how to run Sloth on it. Sloth's
// built-in alert windows equal the exporter's for 30d only (the SRE
// workbook's); for any other period the exporter scales the windows with
// the period, so the note carries a Sloth AlertWindows file with them.
func slothPeriodNote(d time.Duration) string {
	p := periodName(d)
	if d == config.DefaultSLOPeriod {
		return "SLO period 30d: sloth generate -i <file> (Sloth's default period and alert windows)."
	}
	return fmt.Sprintf("SLO period %s: save the AlertWindows below (without the leading \"# \") as <dir>/%s.yml, then\n"+
		"  sloth generate --default-slo-period=%s --slo-period-windows-path=<dir> -i <this document>\n"+
		"(the exporter's alert windows for %s; Sloth's own exist for 28d and 30d only and differ for 28d).\n", p, p, p, p) +
		SlothAlertWindows(d)
}

// SlothAlertWindows is a Sloth AlertWindows file (sloth.slok.dev/v1) with
// the exporter's page and ticket windows for an SLO period: the budget
// share each pair consumes (factor x long window / period).
func SlothAlertWindows(period time.Duration) string {
	ws := slo.Windows(period)
	pct := func(p slo.AlertPair) string {
		return fmt.Sprint(math.Round(p.Factor*float64(ws[p.Long])/float64(period)*100*1e9) / 1e9)
	}
	win := func(name string, p slo.AlertPair) string {
		return fmt.Sprintf("    %s:\n      errorBudgetPercent: %s\n      shortWindow: %s\n      longWindow: %s\n",
			name, pct(p), slo.WindowName(ws[p.Short]), slo.WindowName(ws[p.Long]))
	}
	return "apiVersion: sloth.slok.dev/v1\nkind: AlertWindows\nspec:\n  sloPeriod: " + periodName(period) + "\n" +
		"  page:\n" + win("quick", slo.PagePairs[0]) + win("slow", slo.PagePairs[1]) +
		"  ticket:\n" + win("quick", slo.TicketPairs[0]) + win("slow", slo.TicketPairs[1])
}

func slothSLOOf(p prepared, o Options) slothSLO {
	s := p.s
	return slothSLO{
		Name:        s.Name,
		Objective:   percent(s.Objective),
		Description: strings.TrimSpace(description(s)),
		SLI: slothSLI{Events: slothEvents{
			ErrorQuery: p.q.Bad(SlothWindow),
			TotalQuery: p.q.Total(SlothWindow),
		}},
		Alerting: slothAlerting{
			Name:   SlothAlertName,
			Labels: labels{"slo": s.Name},
			Annotations: labels{
				"summary": "SLO " + s.Name + " is burning its error budget{{ with $labels.model }} on model {{ . }}{{ end }}",
			},
			PageAlert: slothAlert{
				Labels:      labels{"severity": "critical"},
				Annotations: labels{"runbook_url": o.RunbookURL + "#" + strings.ToLower(slo.PageAlert)},
			},
			TicketAlert: slothAlert{
				Labels:      labels{"severity": "warning"},
				Annotations: labels{"runbook_url": o.RunbookURL + "#" + strings.ToLower(slo.TicketAlert)},
			},
		},
	}
}

// periodName writes a period in days when it is whole days ("7d", not
// "1w"): the spelling Sloth's --default-slo-period examples use.
func periodName(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return slo.WindowName(d)
}
