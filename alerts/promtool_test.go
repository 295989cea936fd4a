package alerts

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// The promtool unit tests of the shipped rules are built here, in Go: each
// case is a scenario (input series as functions of time, sampled at 30 s or
// at the shipped 15 s scrape interval, so that Prometheus 3's left-open
// range windows hold enough samples) plus checks whose expected values and
// times follow from the scenario (the rate it feeds, the rule's `for`, the
// burn-rate arithmetic; see promRate). promtoolFiles lists them by file;
// alerts/tests/*.yml are those files, written by testutil's one writer
// (TestPromtoolTestFilesAreGenerated, -update), for operators who run
// `promtool test rules alerts/tests/*.yml`; TestPromtoolTestRules runs
// them on every pinned promtool through testutil.RunRuleTests.

const promtoolUpdate = "go test ./alerts -run TestPromtoolTestFilesAreGenerated -update"

// promtoolFile is one file of alerts/tests: the rule files it loads (in
// alerts/), the evaluation interval and its cases. A new alert gets a case
// function here, in the file of its rule file.
type promtoolFile struct {
	name  string
	about string
	rules []string
	eval  time.Duration
	cases []func(testing.TB) testutil.RuleTest
}

func promtoolFiles() []promtoolFile {
	return []promtoolFile{
		vllmAlertsTests(),
		vllmRecordingTests(),
		sloRulesTests(),
		sloPagingTests(),
		sloEventsTests(),
	}
}

// build renders f with rule files relative to alerts/tests.
func (f promtoolFile) build(t testing.TB) testutil.RuleTestFile {
	t.Helper()
	out := testutil.RuleTestFile{
		Comment: "Code generated from the cases in alerts/promtool_*_test.go; DO NOT EDIT.\n" +
			"Regenerate: " + promtoolUpdate + "\nRun: promtool test rules alerts/tests/*.yml\n\n" + f.about,
		EvaluationInterval: testutil.Duration(f.eval),
	}
	for _, r := range f.rules {
		out.RuleFiles = append(out.RuleFiles, "../"+r)
	}
	for _, c := range f.cases {
		out.Tests = append(out.Tests, c(t))
	}
	return out
}

// alerts/tests holds exactly the files promtoolFiles builds.
func TestPromtoolTestFilesAreGenerated(t *testing.T) {
	want := map[string]bool{}
	for _, f := range promtoolFiles() {
		want[f.name] = true
		b, err := f.build(t).Encode()
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join("tests", f.name)
		if *update {
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%v (run: %s)", err, promtoolUpdate)
		}
		if !bytes.Equal(got, b) {
			t.Errorf("alerts/%s differs from its cases in alerts/*_test.go (edit those, then run: %s)", p, promtoolUpdate)
		}
	}
	on, _ := filepath.Glob("tests/*.yml")
	for _, p := range on {
		if !want[filepath.Base(p)] {
			t.Errorf("alerts/%s is not generated: promtool cases are Go functions in alerts/*_test.go", p)
		}
	}
}

// Every promtool case passes on every pinned promtool (3.16 and 3.5). The
// files run as built (beside copies of the rule files, which they name
// relative to alerts/tests), so the cases are tested even before -update.
func TestPromtoolTestRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range ruleFilePaths(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var files []string
	for _, f := range promtoolFiles() {
		files = append(files, testutil.WriteRuleTest(t, filepath.Join(dir, "tests"), f.name, f.build(t)))
	}
	testutil.RunRuleTests(t, files...)
}

// ---------------------------------------------------------------- inputs

// curve is an input series as a function of the time since the test's
// start; NaN is no sample.
type curve func(t time.Duration) float64

// at is a value (or a per-minute rate) from time t on.
type at struct {
	t time.Duration
	v float64
}

// mins is m minutes.
func mins(m float64) time.Duration { return time.Duration(m * float64(time.Minute)) }

// gauge holds each value from its time on (the first also before it).
func gauge(steps ...at) curve {
	return func(t time.Duration) float64 {
		v := steps[0].v
		for _, s := range steps {
			if t >= s.t {
				v = s.v
			}
		}
		return v
	}
}

// counter starts at 0 and grows at each per-minute rate from its time on.
func counter(rates ...at) curve {
	return func(t time.Duration) float64 {
		var v float64
		for i, r := range rates {
			end := t
			if i+1 < len(rates) && rates[i+1].t < end {
				end = rates[i+1].t
			}
			if end > r.t {
				v += r.v * (end - r.t).Minutes()
			}
		}
		return v
	}
}

// cycle repeats values, one a sample of step.
func cycle(step time.Duration, values ...float64) curve {
	return func(t time.Duration) float64 { return values[int(t/step)%len(values)] }
}

// absent leaves out the samples in [from, to).
func (c curve) absent(from, to time.Duration) curve {
	return func(t time.Duration) float64 {
		if t >= from && t < to {
			return math.NaN()
		}
		return c(t)
	}
}

// startsAt is c shifted to begin at t0 (no samples before).
func (c curve) startsAt(t0 time.Duration) curve {
	return func(t time.Duration) float64 {
		if t < t0 {
			return math.NaN()
		}
		return c(t - t0)
	}
}

// plus adds a constant (a counter already at v when the test starts).
func (c curve) plus(v float64) curve {
	return func(t time.Duration) float64 { return c(t) + v }
}

// scenario is the input of one promtool test: series sampled every step
// from 0 to end.
type scenario struct {
	name      string
	step, end time.Duration
	series    []series
}

type series struct {
	name string // promtool series notation: metric{label="value"}
	c    curve
}

// values is what the test file holds for c: a sample per step, rounded
// to 1e-9 so the file reads well, in promtool's expanding notation.
func (s scenario) values(c curve) string {
	n := int(s.end/s.step) + 1
	out := make([]float64, n)
	for i := range out {
		v := c(time.Duration(i) * s.step)
		if !math.IsNaN(v) {
			v = math.Round(v*1e9) / 1e9
		}
		out[i] = v
	}
	return testutil.Samples(out)
}

// samples is c's samples as promtool reads them from the file: the
// expectations are computed from these.
func (s scenario) samples(c curve) []float64 { return testutil.ExpandSamples(s.values(c)) }

// test is the scenario's promtool test with the given checks.
func (s scenario) test(alerts []testutil.AlertTest, exprs ...testutil.ExprTest) testutil.RuleTest {
	rt := testutil.RuleTest{Name: s.name, Interval: testutil.Duration(s.step), AlertTests: alerts, ExprTests: exprs}
	for _, in := range s.series {
		rt.InputSeries = append(rt.InputSeries, testutil.InputSeries{Series: in.name, Values: s.values(in.c)})
	}
	return rt
}

// ------------------------------------------------- PromQL, as Prometheus 3

// window is c's samples in (t-w, t] (range selectors are left-open in
// Prometheus 3).
func (s scenario) window(c curve, t, w time.Duration) (ts []time.Duration, vs []float64) {
	for i, v := range s.samples(c) {
		ti := time.Duration(i) * s.step
		if ti > t-w && ti <= t && !math.IsNaN(v) {
			ts, vs = append(ts, ti), append(vs, v)
		}
	}
	return ts, vs
}

// rate is rate(c[w]) at t as Prometheus 3.5 and 3.16 compute it
// (promql.extrapolatedRate for float counters): the increase between the
// window's first and last sample (counter resets added back), extrapolated
// to the window's edges where a sample is within 1.1 average intervals of
// them (else by half an interval), never below a zero count. ok is false
// where the window holds fewer than two samples (no result).
func (s scenario) rate(c curve, t, w time.Duration) (r float64, ok bool) {
	ts, vs := s.window(c, t, w)
	if len(vs) < 2 {
		return 0, false
	}
	inc := vs[len(vs)-1] - vs[0]
	for i := 1; i < len(vs); i++ {
		if vs[i] < vs[i-1] {
			inc += vs[i-1]
		}
	}
	sampled := (ts[len(ts)-1] - ts[0]).Seconds()
	avg := sampled / float64(len(vs)-1)
	toStart, toEnd := (ts[0] - (t - w)).Seconds(), (t - ts[len(ts)-1]).Seconds()
	if toStart >= 1.1*avg {
		toStart = avg / 2
	}
	if inc > 0 && vs[0] >= 0 {
		if toZero := sampled * vs[0] / inc; toZero < toStart {
			toStart = toZero
		}
	}
	if toEnd >= 1.1*avg {
		toEnd = avg / 2
	}
	return inc * (sampled + toStart + toEnd) / sampled / w.Seconds(), true
}

// sumRate is sum(rate(c[w])) over the curves that have a rate at t.
func (s scenario) sumRate(t, w time.Duration, cs ...curve) float64 {
	var sum float64
	for _, c := range cs {
		if r, ok := s.rate(c, t, w); ok {
			sum += r
		}
	}
	return sum
}

// avgOverTime is avg_over_time(c[w]) at t.
func (s scenario) avgOverTime(c curve, t, w time.Duration) float64 {
	_, vs := s.window(c, t, w)
	var sum float64
	for _, v := range vs {
		sum += v
	}
	return sum / float64(len(vs))
}

// bucket is one classic histogram bucket: upper bound and cumulative rate.
type bucket struct{ le, v float64 }

// bucketQuantile is histogram_quantile(q) over classic buckets sorted by
// bound, the last +Inf: linear within the bucket that holds rank q*total,
// the first bucket starting at 0, the +Inf bucket answering the highest
// finite bound.
func bucketQuantile(q float64, bs []bucket) float64 {
	rank := q * bs[len(bs)-1].v
	for i, b := range bs {
		if b.v < rank {
			continue
		}
		if math.IsInf(b.le, 1) {
			return bs[i-1].le
		}
		lower, below := 0.0, 0.0
		if i > 0 {
			lower, below = bs[i-1].le, bs[i-1].v
		}
		return lower + (b.le-lower)*(rank-below)/(b.v-below)
	}
	return math.NaN()
}

// ------------------------------------------------------------- checks

func silent(alert string, at time.Duration) testutil.AlertTest {
	return testutil.AlertTest{EvalTime: testutil.Duration(at), Alertname: alert}
}

func firing(alert string, at time.Duration, exp ...testutil.ExpAlert) testutil.AlertTest {
	return testutil.AlertTest{EvalTime: testutil.Duration(at), Alertname: alert, ExpAlerts: exp}
}

// shippedRule is the rule of the shipped files that raises alert (for an
// SLO alert, the one of labels["slo"]).
func shippedRule(t testing.TB, alert string, labels map[string]string) rule {
	t.Helper()
	for _, name := range RuleFileNames() {
		var rf ruleFile
		if err := yamlUnmarshalStrict(RuleFiles()[name], &rf); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Alert == alert && (r.Labels["slo"] == "" || r.Labels["slo"] == labels["slo"]) {
					return r
				}
			}
		}
	}
	t.Fatalf("no shipped alert %s %v", alert, labels)
	return rule{}
}

// ruleFor is the `for` of a shipped alert (0: none).
func ruleFor(t testing.TB, alert string) time.Duration {
	t.Helper()
	r := shippedRule(t, alert, nil)
	if r.For == "" {
		return 0
	}
	d, err := time.ParseDuration(r.For)
	if err != nil {
		t.Fatalf("%s: for %q: %v", alert, r.For, err)
	}
	return d
}

// fires is the alert the shipped rule raises for a series with labels and
// value: its labels with the rule's, its annotations rendered from the
// rule's templates as Prometheus renders them ($labels, $value,
// humanizePercentage, humanizeDuration; a label the alert lacks renders
// empty, as in Prometheus).
func fires(t testing.TB, alert string, labels map[string]string, value float64) testutil.ExpAlert {
	t.Helper()
	r := shippedRule(t, alert, labels)
	exp := testutil.ExpAlert{ExpLabels: map[string]string{}, ExpAnnotations: map[string]string{}}
	for k, v := range labels {
		exp.ExpLabels[k] = v
	}
	for k, v := range r.Labels {
		exp.ExpLabels[k] = v
	}
	funcs := template.FuncMap{
		"humanizePercentage": func(v float64) string { return fmt.Sprintf("%.4g%%", v*100) },
		"humanizeDuration":   humanizeDuration,
	}
	for k, text := range r.Annotations {
		tmpl, err := template.New(k).Funcs(funcs).Option("missingkey=zero").
			Parse("{{$labels := .Labels}}{{$value := .Value}}" + text)
		if err != nil {
			t.Fatalf("%s %s: %v", alert, k, err)
		}
		var b strings.Builder
		if err := tmpl.Execute(&b, struct {
			Labels map[string]string
			Value  float64
		}{exp.ExpLabels, value}); err != nil {
			t.Fatalf("%s %s: %v", alert, k, err)
		}
		exp.ExpAnnotations[k] = b.String()
	}
	return exp
}

// humanizeDuration is Prometheus' template function for durations under
// a minute (the only ones an alert here prints).
func humanizeDuration(v float64) string {
	if v >= 60 || v < 1 {
		panic(fmt.Sprintf("humanizeDuration(%v): only seconds are modelled", v))
	}
	return fmt.Sprintf("%.4gs", v)
}

// alertsSeries is the ALERTS sample promtool expects for a firing alert of
// a shipped rule (the rule's labels, then labels).
func alertsSeries(t testing.TB, prefix, alert string, labels map[string]string) string {
	t.Helper()
	all := lbl("alertname", alert, "alertstate", "firing")
	for k, v := range shippedRule(t, alert, labels).Labels {
		all[k] = v
	}
	return name(prefix, all, flatten(labels)...)
}

func flatten(m map[string]string) []string {
	var kv []string
	for k, v := range m {
		kv = append(kv, k, v)
	}
	return kv
}

// name is a series in promtool notation: metric{labels..., extra pairs}.
func name(metric string, labels map[string]string, extra ...string) string {
	all := lbl(extra...)
	for k, v := range labels {
		all[k] = v
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = fmt.Sprintf("%s=%q", k, all[k])
	}
	return metric + "{" + strings.Join(keys, ",") + "}"
}

// lbl builds a label set from name, value pairs.
func lbl(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}
