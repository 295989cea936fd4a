package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

var descRE = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

// DescribedNames returns the series a collector declares (Describe), with
// their variable label names: the exporter's full vocabulary, including
// series that appear only after a fault or once a window has filled.
func DescribedNames(t testing.TB, c prometheus.Collector) map[string]map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	out := map[string]map[string]bool{}
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("unparseable %s", d)
		}
		ls := map[string]bool{}
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
				ls[l] = true
			}
		}
		out[m[1]] = ls
	}
	return out
}

// GatheredNames registers c and returns the sample names of one Gather
// (histograms expand to _bucket/_sum/_count) with their label names.
func GatheredNames(t testing.TB, c prometheus.Collector) map[string]map[string]bool {
	t.Helper()
	mfs := testutil.GatherAll(t, c)
	out := map[string]map[string]bool{}
	add := func(name string, ls map[string]bool) {
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for l := range ls {
			out[name][l] = true
		}
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			ls := map[string]bool{}
			for _, lp := range m.GetLabel() {
				ls[lp.GetName()] = true
			}
			switch {
			case m.GetHistogram() != nil:
				add(mf.GetName()+"_sum", ls)
				add(mf.GetName()+"_count", ls)
				ls["le"] = true
				add(mf.GetName()+"_bucket", ls)
			case m.GetSummary() != nil:
				add(mf.GetName()+"_sum", ls)
				add(mf.GetName()+"_count", ls)
				ls["quantile"] = true
				add(mf.GetName(), ls)
			default:
				add(mf.GetName(), ls)
			}
		}
	}
	return out
}
