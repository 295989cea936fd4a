package slo

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	sharedtest "github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

func TestCollectorOutput(t *testing.T) {
	src := &fakeVLLM{}
	w := New(Options{}, holderFor(t, ttft99), Sources{VLLM: src}, nil)
	// Before any tick: no SLO series at all, only self-metrics.
	if n := testutil.CollectAndCount(w, "vllm_slo_error_ratio", "vllm_slo_alert_state"); n != 0 {
		t.Fatalf("%d SLO series before the first tick", n)
	}
	tr := &traffic{}
	tickAt(w, src, tr, t0)
	tr.add(95, 5)
	now := t0.Add(time.Minute)
	tickAt(w, src, tr, now)

	want := `
# HELP vllm_slo_alert_state 1 while the SLO watchdog's multi-window multi-burn-rate condition holds (severity critical = page, warning = ticket), else 0.
# TYPE vllm_slo_alert_state gauge
vllm_slo_alert_state{model="m",severity="critical",slo="ttft"} 0
vllm_slo_alert_state{model="m",severity="warning",slo="ttft"} 1
# HELP vllm_slo_error_budget_remaining_ratio Fraction of the SLO period's error budget left (1 = untouched, 0 = spent, negative = overspent) over the part of the period the exporter's SLO watchdog has observed so far (vllm_slo_period_covered_ratio).
# TYPE vllm_slo_error_budget_remaining_ratio gauge
vllm_slo_error_budget_remaining_ratio{model="m",slo="ttft"} -4
# HELP vllm_slo_objective_ratio SLO objective: the fraction of events that must be good over the period, from the SLO config.
# TYPE vllm_slo_objective_ratio gauge
vllm_slo_objective_ratio{model="m",slo="ttft"} 0.99
# HELP vllm_slo_last_evaluation_timestamp_seconds Unix time of the SLO watchdog's last evaluation of this SLO.
# TYPE vllm_slo_last_evaluation_timestamp_seconds gauge
vllm_slo_last_evaluation_timestamp_seconds{model="m",slo="ttft"} 1.77232326e+09
`
	if err := testutil.CollectAndCompare(w, strings.NewReader(want), "vllm_slo_alert_state", "vllm_slo_error_budget_remaining_ratio",
		"vllm_slo_objective_ratio", "vllm_slo_last_evaluation_timestamp_seconds"); err != nil {
		t.Fatal(err)
	}
	// The windows the alerts read: 5m 30m 1h 2h 6h 1d 3d, and the fast
	// tier's 1m (its 5m is the workbook's); not the period (30d) and no
	// event counts unless asked for.
	if got := windowLabels(t, w, "vllm_slo_burn_rate"); got != "1d 1h 1m 2h 30m 3d 5m 6h" {
		t.Errorf("vllm_slo_burn_rate windows: %s", got)
	}
	// The error ratio is the burn rate times 1 - objective: opt-in.
	if n := testutil.CollectAndCount(w, "vllm_slo_error_ratio"); n != 0 {
		t.Errorf("vllm_slo_error_ratio exported by default: %d series", n)
	}
	if n := testutil.CollectAndCount(w, "vllm_slo_events"); n != 0 {
		t.Errorf("vllm_slo_events exported by default: %d series", n)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(w)
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.CollectAndLint(w)
	if err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
}

type countingHook struct{ ticks []time.Time }

func (c *countingHook) Tick(now time.Time) { c.ticks = append(c.ticks, now) }

func TestHooksRunAfterEachTick(t *testing.T) {
	h1, h2 := &countingHook{}, &countingHook{}
	w := New(Options{Hooks: []Hook{h1}}, holderFor(t, ttft99), Sources{}, nil)
	w.Tick(t0)
	w.AddHook(h2)
	w.Tick(t0.Add(time.Second))
	if len(h1.ticks) != 2 || len(h2.ticks) != 1 || !h2.ticks[0].Equal(t0.Add(time.Second)) {
		t.Fatalf("hooks: %v %v", h1.ticks, h2.ticks)
	}
}

// windowLabels are the sorted window label values of name's series.
func windowLabels(t *testing.T, c prometheus.Collector, name string) string {
	t.Helper()
	mfs := sharedtest.GatherAll(t, c)
	var ws []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "window" {
					ws = append(ws, l.GetValue())
				}
			}
		}
	}
	slices.Sort(ws)
	return strings.Join(ws, " ")
}

// TestCollectorOptInWindowSeries: --slo.window-events adds vllm_slo_events
// for every exported window, --slo.period-window-series the period's
// window to all three per-window families, --slo.error-ratio-series
// vllm_slo_error_ratio (burn rate x (1 - objective)).
func TestCollectorOptInWindowSeries(t *testing.T) {
	for _, c := range []struct {
		opts                        Options
		events, ratios, errorRatios string
	}{
		{Options{WindowEvents: true}, "1d 1h 1m 2h 30m 3d 5m 6h", "1d 1h 1m 2h 30m 3d 5m 6h", ""},
		{Options{PeriodWindowSeries: true}, "", "1d 1h 1m 2h 30d 30m 3d 5m 6h", ""},
		{Options{WindowEvents: true, PeriodWindowSeries: true}, "1d 1h 1m 2h 30d 30m 3d 5m 6h", "1d 1h 1m 2h 30d 30m 3d 5m 6h", ""},
		{Options{ErrorRatioSeries: true}, "", "1d 1h 1m 2h 30m 3d 5m 6h", "1d 1h 1m 2h 30m 3d 5m 6h"},
	} {
		src := &fakeVLLM{}
		w := New(c.opts, holderFor(t, ttft99), Sources{VLLM: src}, nil)
		tr := &traffic{}
		tickAt(w, src, tr, t0)
		tr.add(95, 5)
		tickAt(w, src, tr, t0.Add(time.Minute))
		if got := windowLabels(t, w, "vllm_slo_events"); got != c.events {
			t.Errorf("%+v: vllm_slo_events windows %q, want %q", c.opts, got, c.events)
		}
		if got := windowLabels(t, w, "vllm_slo_burn_rate"); got != c.ratios {
			t.Errorf("%+v: vllm_slo_burn_rate windows %q, want %q", c.opts, got, c.ratios)
		}
		if got := windowLabels(t, w, "vllm_slo_error_ratio"); got != c.errorRatios {
			t.Errorf("%+v: vllm_slo_error_ratio windows %q, want %q", c.opts, got, c.errorRatios)
		}
	}
}
