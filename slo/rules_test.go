package slo

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// defaultRules is the generator's rule file for the shipped default SLOs
// (alerts/slo-rules.yml is this plus links; ./alerts checks that file).
func defaultRules(t testing.TB) []byte {
	t.Helper()
	b, err := GenerateRules(config.Default().SLOs, RuleOptions{Header: DefaultRulesHeader})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGeneratedRulesPassPromtoolCheck(t *testing.T) {
	dir := t.TempDir()
	probe := `
probes:
  profiles:
    - name: short
    - name: long.ctx
slos:
  - name: probe-ttft
    source: probe
    kind: latency
    metric: ttft
    threshold: 2.5
    objective: 0.99
    profiles: [short, "long.ctx"]
  - name: probe-avail
    source: probe
    kind: availability
    objective: 0.995
    period: 7d
    min_events: 0
  - name: queue
    kind: latency
    metric: queue
    threshold: 0.5
    objective: 0.95
    period: 1d
    description: 'queue {{ not a template'
`
	f, err := config.Parse([]byte(probe), "test")
	if err != nil {
		t.Fatal(err)
	}
	extra, err := GenerateRules(f.SLOs, RuleOptions{Selector: `job="vllm",namespace=~"prod-.*"`})
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for name, b := range map[string][]byte{"default.yml": defaultRules(t), "extra.yml": extra} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	testutil.CheckRules(t, files...)
	s := string(extra)
	for _, want := range []string{`profile=~"short|long\\.ctx"`, `job="vllm",namespace=~"prod-.*"`, "[1m10s]", "[1d]", "{{`{{`}}"} {
		if !strings.Contains(s, want) {
			t.Errorf("generated rules lack %s", want)
		}
	}
}

func TestGenerateRulesRejectsBadInput(t *testing.T) {
	if _, err := GenerateRules(config.Default().SLOs, RuleOptions{Selector: `job=vllm`}); err == nil {
		t.Fatal("bad selector accepted")
	}
	if _, err := GenerateRules([]config.SLO{{Name: "x", Kind: "latency", Metric: "ttft", Threshold: 0.3, Objective: 0.99}}, RuleOptions{}); err == nil ||
		!strings.Contains(err.Error(), "threshold") {
		t.Fatalf("bad threshold: %v", err)
	}
}

func TestLeRegex(t *testing.T) {
	for v, want := range map[float64]string{1: `1|1\\.0`, 0.1: `0\\.1`, 2560: `2560|2560\\.0`, 0.001: `0\\.001`} {
		if got := leRegex(v); got != want {
			t.Errorf("leRegex(%v) = %s, want %s", v, got, want)
		}
	}
}

// The shared scenario: two replicas serving model "m" (replica a's bucket
// written as Prometheus 2 stores it, le="1", replica b's the Prometheus 3
// way, le="1.0": the rules must read both), healthy for two hours, then 30 minutes
// of hard breach (every request slow, 5% aborted), then healthy again;
// from the first hour on, 4 preemptions per 100 requests (a 4x burn). The in-process watchdog, fed the sum of
// both replicas, and Prometheus evaluating the checked-in rules over the
// same series must agree on every page and ticket state at every minute
// where the watchdog's decision is stable (its state unchanged for three
// minutes either side: the two differ at the edges by up to one scrape
// interval, Prometheus' rate() window holding samples, ours buckets).
func TestPromtoolAgreesWithWatchdog(t *testing.T) {
	const minutes = 240
	type perMin struct{ good, bad, aborted, preempt float64 }
	gen := func(k int) perMin {
		p := perMin{100, 0, 0, 0}
		if k > 60 {
			p.preempt = 4 // a steady 4x preemption burn: ticket, never page
		}
		if k > 120 && k <= 150 {
			p.good, p.bad, p.aborted = 0, 100, 5
		}
		return p
	}
	// Cumulative per replica (each gets half).
	type cum struct{ good, bad, aborted, preempt float64 }
	series := make([]cum, minutes+1)
	for k := 1; k <= minutes; k++ {
		p := gen(k)
		c := series[k-1]
		series[k] = cum{c.good + p.good/2, c.bad + p.bad/2, c.aborted + p.aborted/2, c.preempt + p.preempt/2}
	}

	// In-process watchdog over the default SLO file, fed both replicas' sum.
	src := &fakeVLLM{}
	w := New(Options{}, holderFor(t, string(config.DefaultYAML)), Sources{VLLM: src}, nil)
	type state struct{ page, ticket bool }
	states := map[string][]state{}
	periodEvents := map[string]float64{} // at the last minute
	for k := 0; k <= minutes; k++ {
		c := series[k]
		tr := &traffic{good: 2 * c.good, bad: 2 * c.bad, aborted: 2 * c.aborted, preemptions: 2 * c.preempt}
		now := t0.Add(time.Duration(k) * time.Minute)
		tickAt(w, src, tr, now)
		for _, r := range w.Status() {
			states[r.SLO] = append(states[r.SLO], state{r.Page, r.Ticket})
			periodEvents[r.SLO] = r.PeriodWindow.Total
		}
	}
	for _, slo := range []string{"ttft-p99", "availability", "preemption"} {
		if len(states[slo]) != minutes+1 {
			t.Fatalf("%s: %d states", slo, len(states[slo]))
		}
	}

	// promtool input series: the per-minute counters with a sample
	// half-way between minutes (interval 30s), so that the fast tier's
	// [1m] windows hold two samples on Prometheus 3's left-open ranges.
	var in []testutil.InputSeries
	for _, r := range []struct{ inst, le string }{{"a", "1"}, {"b", "1.0"}} {
		add := func(name, labels string, f func(c cum) float64) {
			v := make([]float64, minutes+1)
			for k := range v {
				v[k] = f(series[k])
			}
			in = append(in, testutil.InputSeries{
				Series: fmt.Sprintf(`%s{instance=%q,model="m"%s}`, name, r.inst, labels),
				Values: testutil.Samples(testutil.Interpolate(v, 2)),
			})
		}
		add("vllm_time_to_first_token_seconds_count", "", func(c cum) float64 { return c.good + c.bad })
		add("vllm_time_to_first_token_seconds_bucket", `,le="`+r.le+`"`, func(c cum) float64 { return c.good })
		add("vllm_time_to_first_token_seconds_bucket", `,le="+Inf"`, func(c cum) float64 { return c.good + c.bad })
		add("vllm_requests_finished_total", `,finished_reason="stop"`, func(c cum) float64 { return c.good + c.bad - c.aborted })
		add("vllm_requests_finished_total", `,finished_reason="abort"`, func(c cum) float64 { return c.aborted })
		add("vllm_preemptions_total", "", func(c cum) float64 { return c.preempt })
	}

	var checks []testutil.ExprTest
	counts := map[string]int{}
	for _, slo := range []string{"ttft-p99", "availability", "preemption"} {
		st := states[slo]
		for k := 3; k <= minutes-3; k++ {
			stable := true
			for j := k - 3; j <= k+3; j++ {
				if st[j] != st[k] {
					stable = false
				}
			}
			// Prometheus evaluates every 2m (to keep promtool quick); check
			// every 6th minute.
			if !stable || k%6 != 0 {
				continue
			}
			for _, a := range []struct {
				name, sev string
				on        bool
			}{{PageAlert, "critical", st[k].page}, {TicketAlert, "warning", st[k].ticket}} {
				c := testutil.ExprTest{
					Expr:     fmt.Sprintf(`ALERTS{alertname=%q,alertstate="firing",slo=%q}`, a.name, slo),
					EvalTime: testutil.Duration(time.Duration(k) * time.Minute),
				}
				if a.on {
					counts[slo+"/"+a.sev]++
					c.ExpSamples = []testutil.ExpSample{{
						Labels: fmt.Sprintf(`ALERTS{alertname=%q,alertstate="firing",model="m",severity=%q,slo=%q}`, a.name, a.sev, slo),
						Value:  1,
					}}
				}
				checks = append(checks, c)
			}
		}
	}
	// The period's event count agrees with the watchdog's, within 1%: the
	// 2m evaluation does not divide the 5m subquery step, so the first tile
	// misses a minute of the series' start. Counting every 5m record (each
	// event 5m/2m times) would be 2.5x.
	for _, slo := range []string{"ttft-p99", "availability", "preemption"} {
		want := periodEvents[slo]
		if want < 1000 {
			t.Fatalf("%s: watchdog counted only %g events over the period", slo, want)
		}
		checks = append(checks, testutil.ExprTest{
			Expr:       fmt.Sprintf(`abs(slo:sli_events:increase30d{slo=%q} - %g) <= bool %g`, slo, want, want/100),
			EvalTime:   testutil.Duration(minutes * time.Minute),
			ExpSamples: []testutil.ExpSample{{Labels: fmt.Sprintf(`{model="m",slo=%q}`, slo), Value: 1}},
		})
	}
	// The scenario must exercise both states of each alert, or the
	// comparison proves nothing.
	for _, k := range []string{"ttft-p99/critical", "ttft-p99/warning", "availability/critical", "preemption/warning"} {
		if counts[k] == 0 {
			t.Fatalf("watchdog never fired %s in a stable window: %v", k, counts)
		}
	}
	if counts["preemption/critical"] != 0 {
		t.Fatalf("5x preemption burn paged: %v", counts)
	}

	dir := t.TempDir()
	// The generator's rules for the scenario's SLOs, exactly as in the
	// checked-in file (./alerts holds that file equal to the generator);
	// tpot and e2e have no input series here and are left out to keep
	// promtool fast.
	var used []config.SLO
	for _, s := range config.Default().SLOs {
		if s.Name == "ttft-p99" || s.Name == "availability" || s.Name == "preemption" {
			used = append(used, s)
		}
	}
	b, err := GenerateRules(used, RuleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(defaultRules(t), b[len("groups:\n"):len("groups:\n")+2000]) {
		t.Fatal("scenario rules are not the checked-in ones")
	}
	rules := filepath.Join(dir, "slo-rules.yml")
	if err := os.WriteFile(rules, b, 0o644); err != nil {
		t.Fatal(err)
	}
	tf := testutil.WriteRuleTest(t, dir, "slo-test.yml", testutil.RuleTestFile{
		RuleFiles:          []string{rules},
		EvaluationInterval: testutil.Duration(2 * time.Minute),
		Tests: []testutil.RuleTest{{
			Interval:    testutil.Duration(30 * time.Second),
			InputSeries: in,
			ExprTests:   checks,
		}},
	})
	testutil.RunRuleTests(t, tf)
}
