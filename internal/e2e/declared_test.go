package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/probes"
	"github.com/vllm-exporter/vllm_exporter/slo"
	"github.com/vllm-exporter/vllm_exporter/slo/bottleneck"
)

var descRE = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

// describedNames returns the series a collector declares (Describe), with
// their variable label names: the exporter's full vocabulary, including
// series that appear only after a fault or once a window has filled.
func describedNames(t *testing.T, c prometheus.Collector) map[string]map[string]bool {
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

// gatheredNames registers c and returns the sample names of one Gather
// (histograms expand to _bucket/_sum/_count) with their label names.
func gatheredNames(t *testing.T, c prometheus.Collector) map[string]map[string]bool {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
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

// componentNames builds the exporter's components in-process: the probe
// scheduler runs real probes against the simulator (so its histograms are
// seen with their buckets), and every component's declared series are read
// through Describe.
func componentNames(t *testing.T, s *stack) map[string]map[string]bool {
	t.Helper()
	holder, err := config.NewHolder(s.configPath)
	if err != nil {
		t.Fatal(err)
	}
	logger := log.NewNopLogger()
	out := map[string]map[string]bool{}
	merge := func(m map[string]map[string]bool) {
		for n, ls := range m {
			if out[n] == nil {
				out[n] = map[string]bool{}
			}
			for l := range ls {
				out[n][l] = true
			}
		}
	}
	sched := probes.New(probes.Options{URL: s.simURL}, holder, logger)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range holder.Get().Probes.Profiles {
		if _, err := sched.ProbeOnce(ctx, p.Name); err != nil {
			t.Logf("probe %s: %v", p.Name, err)
		}
	}
	merge(gatheredNames(t, sched))
	merge(describedNames(t, sched))
	merge(describedNames(t, bottleneck.New(bottleneck.Options{}, holder, bottleneck.Sources{}, logger)))
	merge(describedNames(t, slo.New(slo.Options{}, holder, slo.Sources{}, logger)))
	merge(describedNames(t, vllm.New(vllm.Options{URL: s.simURL}, logger)))
	merge(gpuNames(t))
	if len(out) == 0 {
		t.Fatal(fmt.Errorf("no component declared any series"))
	}
	return out
}
