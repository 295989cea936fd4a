// Package interop writes the exporter's SLOs in the formats of the SLO tools
// teams already run: a Sloth prometheus/v1 spec, Pyrra ServiceLevelObjective
// resources and OpenSLO v1 documents. Every format counts the same events as
// the exporter's own rules (slo.GenerateRules): the queries come from
// slo.SLIQueries, the series from slo.EventSeries. What a format cannot say
// (the low-traffic guard, the fast tier, stall hold-back, ...) is listed in
// docs/slo.md ("SLO interop").
package interop

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/slo"
)

// Output formats.
const (
	FormatSloth   = "sloth"
	FormatPyrra   = "pyrra"
	FormatOpenSLO = "openslo"
)

// Formats lists the formats Generate accepts.
var Formats = []string{FormatSloth, FormatPyrra, FormatOpenSLO}

// Options tune the generated documents.
type Options struct {
	// Service names the service the SLOs belong to (Sloth `service`,
	// OpenSLO Service); default "vllm".
	Service string
	// Selector is extra label matchers for every series (as
	// slo.RuleOptions.Selector), e.g. job="vllm".
	Selector string
	// RunbookURL is the runbook the alerts link to (default
	// slo.DefaultRunbookURL); the alert's anchor is appended.
	RunbookURL string
	// Header is a comment written at the top of the output (without "# ").
	Header string
}

// DefaultService is the service name when Options.Service is empty.
const DefaultService = "vllm"

func (o *Options) defaults() {
	if o.Service == "" {
		o.Service = DefaultService
	}
	if o.RunbookURL == "" {
		o.RunbookURL = slo.DefaultRunbookURL
	}
}

// Generate writes slos in format (one of Formats).
func Generate(format string, slos []config.SLO, o Options) ([]byte, error) {
	switch format {
	case FormatSloth:
		return Sloth(slos, o)
	case FormatPyrra:
		return Pyrra(slos, o)
	case FormatOpenSLO:
		return OpenSLO(slos, o)
	}
	return nil, fmt.Errorf("format %q is not one of %s", format, strings.Join(Formats, ", "))
}

// prepared is one validated SLO with its queries and a name every format
// accepts.
type prepared struct {
	s      config.SLO
	q      slo.SLIQueries
	series slo.EventSeries
	// id is the SLO name as a DNS label (Kubernetes and OpenSLO names):
	// '_' becomes '-'.
	id string
}

var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func prepare(slos []config.SLO, o Options) ([]prepared, error) {
	if !dnsLabelRE.MatchString(o.Service) || len(o.Service) > 63 {
		return nil, fmt.Errorf("service %q: want a DNS label (lower case letters, digits and '-', at most 63)", o.Service)
	}
	out := make([]prepared, 0, len(slos))
	ids := map[string]string{}
	for i := range slos {
		s := slos[i]
		q, err := slo.NewSLIQueries(s, o.Selector)
		if err != nil {
			return nil, fmt.Errorf("slos[%d]: %w", i, err)
		}
		es, err := slo.NewEventSeries(s, o.Selector)
		if err != nil {
			return nil, fmt.Errorf("slos[%d]: %w", i, err)
		}
		s.ApplyDefaults()
		id := strings.Trim(strings.ReplaceAll(s.Name, "_", "-"), "-")
		if len(id) > 63 {
			id = strings.TrimRight(id[:63], "-")
		}
		if prev, dup := ids[id]; dup {
			return nil, fmt.Errorf("slos[%d]: %s and %s have the same resource name %q", i, prev, s.Name, id)
		}
		ids[id] = s.Name
		out = append(out, prepared{s: s, q: q, series: es, id: id})
	}
	return out, nil
}

// percent is objective in percent without float noise (0.999 -> 99.9).
func percent(objective float64) float64 { return math.Round(objective*100*1e9) / 1e9 }

// description is the SLO's description, or the one the rules generate.
func description(s config.SLO) string {
	if s.Description != "" {
		return s.Description
	}
	return fmt.Sprintf("SLO %s of the vLLM exporter (objective %v over %s).", s.Name,
		s.Objective, slo.WindowName(s.PeriodDuration()))
}

// shorthand writes d with a single unit among w, d, h, m, rounding to whole
// minutes (OpenSLO's duration shorthand has no seconds). Pyrra and OpenSLO
// take it.
func shorthand(d time.Duration) string {
	m := int64(math.Round(d.Minutes()))
	if m < 1 {
		m = 1
	}
	switch {
	case m%(7*24*60) == 0:
		return fmt.Sprintf("%dw", m/(7*24*60))
	case m%(24*60) == 0:
		return fmt.Sprintf("%dd", m/(24*60))
	case m%60 == 0:
		return fmt.Sprintf("%dh", m/60)
	}
	return fmt.Sprintf("%dm", m)
}

// encodeDocs writes each value as one YAML document, with optional
// comments before each.
func encodeDocs(header string, docs []any, comments []string) ([]byte, error) {
	var buf bytes.Buffer
	writeComment(&buf, header)
	for i, d := range docs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		if i < len(comments) {
			writeComment(&buf, comments[i])
		}
		if err := slo.EncodeYAML(&buf, d); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

func writeComment(buf *bytes.Buffer, c string) {
	if c == "" {
		return
	}
	for _, l := range strings.Split(strings.TrimRight(c, "\n"), "\n") {
		buf.WriteString(strings.TrimRight("# "+l, " ") + "\n")
	}
}
