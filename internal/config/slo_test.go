package config

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultSLOs(t *testing.T) {
	f := Default()
	want := map[string]string{"ttft-p99": "latency", "tpot-p99": "latency", "e2e-p99": "latency", "preemption": "preemption", "availability": "availability"}
	if len(f.SLOs) != len(want) {
		t.Fatalf("default SLOs: %+v", f.SLOs)
	}
	for _, s := range f.SLOs {
		if want[s.Name] != s.Kind {
			t.Errorf("unexpected default SLO %s kind %s", s.Name, s.Kind)
		}
		if s.PeriodDuration() != 30*24*time.Hour || s.MinEventsValue() != 10 || s.Source != SourceServer {
			t.Errorf("%s defaults: period %v min %v source %s", s.Name, s.PeriodDuration(), s.MinEventsValue(), s.Source)
		}
	}
	if p := f.SLOs[3]; p.Objective != 0.99 || p.ErrorBudget() != 0.01 {
		t.Errorf("preemption objective derived from threshold: %v budget %v", p.Objective, p.ErrorBudget())
	}
}

func TestSLOSectionAbsentKeepsDefaultsEmptyListMeansNone(t *testing.T) {
	f, err := Parse([]byte("probes: {}\n"), "x")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.SLOs) != 5 {
		t.Fatalf("absent slos: got %d SLOs, want the 5 defaults", len(f.SLOs))
	}
	f, err = Parse([]byte("slos: []\n"), "x")
	if err != nil || len(f.SLOs) != 0 {
		t.Fatalf("slos: [] -> %v %v", f, err)
	}
}

func TestSLOValidationErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"- {kind: latency, metric: ttft, threshold: 1, objective: 0.99}", "name: required"},
		{"- {name: Bad Name, kind: availability, objective: 0.99}", "name:"},
		{"- {name: a, kind: latency, metric: ttft, threshold: 1.2, objective: 0.99}", "threshold: 1.2 is not a bucket boundary of the ttft histogram; boundaries are 0.001, 0.005"},
		{"- {name: a, kind: latency, metric: e2e, threshold: 0.1, objective: 0.99}", "boundaries are 0.3, 0.5, 0.8, 1, 1.5"},
		{"- {name: a, kind: latency, metric: tpot, threshold: 0.09, objective: 0.99}", "0.075, 0.1, 0.15"},
		{"- {name: a, kind: latency, metric: p99, threshold: 1, objective: 0.99}", `metric: "p99" is not one of ttft, tpot, itl, e2e, queue`},
		{"- {name: a, kind: latency, threshold: 1, objective: 0.99}", "metric: required"},
		{"- {name: a, kind: latency, metric: ttft, threshold: 1, objective: 1}", "objective: 1 must be between 0 and 1"},
		{"- {name: a, kind: latency, metric: ttft, threshold: 1}", "objective: 0 must be"},
		{"- {name: a, kind: latency, metric: ttft, threshold: 1, objective: 0.99, source: logs}", `source: "logs" is not one of server, probe`},
		{"- {name: a, kind: latency, metric: queue, threshold: 1, objective: 0.99, source: probe}", "metric: queue is only measured by the server"},
		{"- {name: a, kind: throughput, objective: 0.99}", `kind: "throughput" is not one of`},
		{"- {name: a, objective: 0.99}", "kind: required"},
		{"- {name: a, kind: preemption, threshold: 2}", "threshold: 2 must be the allowed preemptions per finished request"},
		{"- {name: a, kind: preemption, threshold: 0.01, objective: 0.9}", "objective: 0.9 contradicts threshold 0.01"},
		{"- {name: a, kind: preemption, threshold: 0.01, source: probe}", "source: kind preemption is measured by the server only"},
		{"- {name: a, kind: availability, objective: 0.99, threshold: 1}", "threshold: not used by kind availability"},
		{"- {name: a, kind: availability, objective: 0.99, metric: ttft}", "metric: only valid with kind latency"},
		{"- {name: a, kind: availability, objective: 0.99, period: 10m}", "period: 10m is shorter than 1h"},
		{"- {name: a, kind: availability, objective: 0.99, period: 30x}", `slos[0].period: unknown unit "x" in duration "30x"`},
		{"- {name: a, kind: availability, objective: 0.99, min_events: -1}", "min_events: -1"},
		{"- {name: a, kind: availability, objective: 0.99, profiles: [x]}", "profiles: only valid with source: probe"},
		{"- {name: a, kind: availability, objective: 0.99, windows: [5m]}", "slos[0].windows: unknown field"},
		{"- {name: a, kind: availability, objective: 0.99}\n- {name: a, kind: availability, objective: 0.9}", `duplicate name "a"`},
	} {
		_, err := Parse([]byte("slos:\n"+tc.yaml+"\n"), "f.yml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n  error %v\n  want it to contain %q", tc.yaml, err, tc.want)
		}
	}
}

func TestSLOThresholdAcceptsEveryBoundary(t *testing.T) {
	for _, m := range LatencyMetrics {
		for _, b := range MetricBuckets(m) {
			s := SLO{Name: "a", Kind: KindLatency, Metric: m, Threshold: b, Objective: 0.99}
			if err := s.Validate(); err != nil {
				t.Errorf("%s %v: %v", m, b, err)
			}
		}
	}
}

func TestFingerprintIgnoresObjective(t *testing.T) {
	a := SLO{Name: "a", Kind: KindLatency, Metric: "ttft", Threshold: 1, Objective: 0.99}
	b := a
	b.Objective = 0.999
	c := a
	c.Threshold = 2.5
	a.ApplyDefaults()
	b.ApplyDefaults()
	c.ApplyDefaults()
	if a.Fingerprint() != b.Fingerprint() || a.Fingerprint() == c.Fingerprint() {
		t.Fatalf("fingerprints %q %q %q", a.Fingerprint(), b.Fingerprint(), c.Fingerprint())
	}
}
