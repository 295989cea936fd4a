// Package histq writes PromQL over a histogram that reads it however
// Prometheus stores it: as classic series (x_bucket with an `le` label,
// x_sum, x_count), as a native histogram (x; scrape_native_histograms), or
// as a native histogram with custom buckets (x; NHCB,
// convert_classic_histograms_to_nhcb). Each function returns
// `<classic form> or <native form>`: the classic form where the _bucket or
// _count series exist (also when always_scrape_classic_histograms keeps
// both), the native form otherwise. Both forms carry the same labels, so
// `or` never doubles a series.
//
// Exactness: the classic form and NHCB are exact at a bucket boundary (the
// SLO thresholds are validated to be one). An exponential native histogram
// has no boundary at an arbitrary threshold: Below interpolates within the
// bucket holding it (see docs/compatibility.md).
package histq

import (
	"fmt"
	"strconv"
	"strings"
)

// H is one histogram read over a range.
type H struct {
	// Name is the histogram's base name (without _bucket/_sum/_count).
	Name string
	// Matchers are the label matchers, comma-separated, without braces
	// ("" for none).
	Matchers string
	// Window is the range, e.g. "5m" or "$__rate_interval".
	Window string
	// Unless, when set, drops series before they are summed: each
	// fn(x[w]) becomes `fn(x[w]) unless <Unless>` (e.g. `on (job,
	// instance, model) (vllm_pod_role_info{role="prefill"})`).
	Unless string
}

func (h H) sel(suffix string, extra ...string) string {
	ms := []string{}
	if strings.TrimSpace(h.Matchers) != "" {
		ms = append(ms, strings.TrimSpace(h.Matchers))
	}
	ms = append(ms, extra...)
	s := h.Name + suffix
	if len(ms) > 0 {
		s += "{" + strings.Join(ms, ",") + "}"
	}
	return s + "[" + h.Window + "]"
}

// fn is fn(x<suffix>{matchers, extra}[w]), less the series Unless drops.
func (h H) fn(fn, suffix string, extra ...string) string {
	e := fn + "(" + h.sel(suffix, extra...) + ")"
	if h.Unless != "" {
		e += " unless " + h.Unless
	}
	return e
}

// by writes `sum by (labels) (inner)`; no labels: `sum (inner)`.
func by(labels []string, inner string) string {
	return fmt.Sprintf("sum by (%s) (%s)", strings.Join(labels, ", "), inner)
}

// Either is one quantity in both representations.
type Either struct {
	// Classic reads the _bucket/_sum/_count series, Native the histogram.
	Classic, Native string
}

// String is `classic or native`.
func (e Either) String() string { return e.Classic + " or " + e.Native }

func or(classic, native string) Either { return Either{Classic: classic, Native: native} }

// Native is `sum by (labels) (fn(x[w]))`: the histogram summed, for the
// histogram_* functions.
func (h H) Native(fn string, labels ...string) string {
	return by(labels, h.fn(fn, ""))
}

// Quantile is the q-quantile of rate(x[w]) summed by labels.
func (h H) Quantile(q string, labels ...string) Either {
	return or(
		fmt.Sprintf("histogram_quantile(%s, %s)", q, by(append(append([]string{}, labels...), "le"), h.fn("rate", "_bucket"))),
		fmt.Sprintf("histogram_quantile(%s, %s)", q, h.Native("rate", labels...)))
}

// Count is the number of observations, fn ("rate" or "increase") over the
// window, summed by labels.
func (h H) Count(fn string, labels ...string) Either {
	return or(by(labels, h.fn(fn, "_count")),
		"histogram_count("+h.Native(fn, labels...)+")")
}

// Mean is the mean observation over the window (sum / count), by labels.
func (h H) Mean(labels ...string) Either {
	return or(
		fmt.Sprintf("%s / %s", by(labels, h.fn("rate", "_sum")), by(labels, h.fn("rate", "_count"))),
		"histogram_avg("+h.Native("rate", labels...)+")")
}

// Sum is the sum of the observations, fn ("rate" or "increase") over the
// window, summed by labels (e.g. bytes per second of a size histogram).
func (h H) Sum(fn string, labels ...string) Either {
	return or(by(labels, h.fn(fn, "_sum")),
		"histogram_sum("+h.Native(fn, labels...)+")")
}

// Below is the number of observations at or below the bucket boundary
// threshold (fn over the window, summed by labels): the classic bucket whose
// `le` matches leRegex (every spelling of threshold), or
// histogram_fraction(0, threshold) times the count (0, not NaN, while the
// native histogram counted nothing).
func (h H) Below(fn string, threshold float64, leRegex string, labels ...string) Either {
	n := h.Native(fn, labels...)
	return or(by(labels, h.fn(fn, "_bucket", `le=~"`+leRegex+`"`)),
		fmt.Sprintf("histogram_fraction(0, %s, %s) * (histogram_count(%s) > 0) or histogram_count(%s)", fmtFloat(threshold), n, n, n))
}

// Above is the number of observations above threshold: Count minus Below,
// per representation (0, not NaN, while the native histogram is empty).
func (h H) Above(fn string, threshold float64, leRegex string, labels ...string) Either {
	n := h.Native(fn, labels...)
	return or(
		fmt.Sprintf("%s - %s", by(labels, h.fn(fn, "_count")),
			by(labels, h.fn(fn, "_bucket", `le=~"`+leRegex+`"`))),
		fmt.Sprintf("(histogram_count(%s) > 0) * (1 - histogram_fraction(0, %s, %s)) or histogram_count(%s)", n, fmtFloat(threshold), n, n))
}

// AboveRatio is the fraction of observations above threshold (NaN while
// none were made, in both representations).
func (h H) AboveRatio(threshold float64, leRegex string, labels ...string) Either {
	c := by(labels, h.fn("rate", "_count"))
	return or(
		fmt.Sprintf("(%s - %s) / %s", c, by(labels, h.fn("rate", "_bucket", `le=~"`+leRegex+`"`)), c),
		fmt.Sprintf("1 - histogram_fraction(0, %s, %s)", fmtFloat(threshold), h.Native("rate", labels...)))
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
