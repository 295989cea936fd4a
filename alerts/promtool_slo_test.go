package alerts

import (
	"math"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// scrape is the shipped scrape interval (deploy/prometheus/prometheus.yml),
// at which the paging cases sample their inputs.
const scrape = 15 * time.Second

const (
	pageAlert   = "VLLMSLOBurnRatePage"
	ticketAlert = "VLLMSLOBurnRateTicket"
)

// sloBudget is the error budget (1 - objective) of a shipped default SLO.
func sloBudget(t testing.TB, slo string) float64 {
	t.Helper()
	for _, s := range config.DefaultSLOs() {
		if s.Name == slo {
			s.ApplyDefaults()
			return s.ErrorBudget()
		}
	}
	t.Fatalf("no default SLO %s", slo)
	return 0
}

// sloEval is the evaluation interval of the SLO rule cases
// (slo-rules_test.yml), sloBase the shortest burn-rate window of a 30d
// SLO: the window the generated rules read raw series over, and whose
// records every longer window sums.
const (
	sloEval = 2 * time.Minute
	sloBase = 5 * time.Minute
)

// rates is a rate over w at t, e.g. the sum of some curves' rates.
type rates func(t, w time.Duration) float64

// sumRates is the sum of cs's rates.
func (s scenario) sumRates(cs ...curve) rates {
	return func(t, w time.Duration) float64 { return s.sumRate(t, w, cs...) }
}

// sloRatio is an SLO's error ratio over w at t as the generated rules
// compute it from the rates of its bad and total events: a raw window
// (the fast tier's 1m, the base 5m) as their ratio; a longer window as
// the ratio of the sums of the base window's records, one per evaluation
// (every sloEval from the start) within the last w - sloBase.
func sloRatio(t, w time.Duration, bad, total rates) float64 {
	if w <= sloBase {
		return bad(t, w) / total(t, w)
	}
	var b, n float64
	for r := t / sloEval * sloEval; r > t-(w-sloBase) && r >= 0; r -= sloEval {
		b, n = b+bad(r, sloBase), n+total(r, sloBase)
	}
	return b / n
}

// latencyRatio is a latency SLO's error ratio over w at t: the share of
// count's events not in the threshold bucket.
func (s scenario) latencyRatio(t, w time.Duration, count, bucket curve) float64 {
	return sloRatio(t, w, func(t, w time.Duration) float64 { return s.sumRate(t, w, count) - s.sumRate(t, w, bucket) }, s.sumRates(count))
}

// sloAlert is what a burn-rate alert of slo on model carries, at burn.
func sloAlert(t testing.TB, alert, slo, model string, burn float64) testutil.ExpAlert {
	t.Helper()
	return fires(t, alert, lbl("slo", slo, "model", model), burn)
}

// vllm is the labels of replica x of model, as the scrape adds them.
func vllm(x, model string) map[string]string {
	return lbl("job", "vllm", "instance", x+":9470", "model", model)
}

// sloRulesTests drive the generated SLO rules (the shipped default SLOs)
// through a hard breach that pages and resolves, a single bad request at
// low traffic, healthy noise with a one-minute spike, a slow leak that
// tickets but does not page, and requests refused before the engine.
func sloRulesTests() promtoolFile {
	return promtoolFile{
		name: "slo-rules_test.yml",
		about: "promtool unit tests of the generated SLO rules (alerts/slo-rules.yml, the shipped default SLOs).\n" +
			"A 2m evaluation keeps the run short; the ratios and alerts are exact at any interval\n" +
			"(slo-events_test.yml pins the period count at 30s, slo-paging_test.yml the timing at\n" +
			"the shipped 15s/30s). Inputs are a sample every 30s: Prometheus 3 range windows are\n" +
			"left-open, (t-w, t], so a [1m] window over one sample a minute holds a single sample.\n" +
			"Expected burn rates are computed from the inputs as Prometheus' rate() extrapolates.",
		rules: []string{"slo-rules.yml"},
		eval:  sloEval,
		cases: []func(testing.TB) testutil.RuleTest{
			ttftBreachCase, lowTrafficCase, healthyNoiseCase, slowLeakCase, everySLOBreachCase, refusedCase,
		},
	}
}

func ttftBreachCase(t testing.TB) testutil.RuleTest {
	// 1 request/s; every request over 1 s in [onset, off). le="1.0" as
	// Prometheus 3 stores it (whether the target exposed "1" or "1.0").
	a := vllm("a", "llama")
	onset, off := mins(420), mins(450)
	count, good := counter(at{0, 60}), counter(at{0, 60}, at{onset, 0}, at{off, 60})
	s := scenario{name: "hard TTFT breach pages within minutes and resolves after recovery", step: step, end: mins(540), series: []series{
		{name("vllm_time_to_first_token_seconds_count", a), count},
		{name("vllm_time_to_first_token_seconds_bucket", a, "le", "1.0"), good},
	}}
	burn := func(at, w time.Duration) float64 {
		return s.latencyRatio(at, w, count, good) / sloBudget(t, "ttft-p99")
	}
	// 6 minutes in, only the fast tier (5m and 1m windows all bad) pages:
	// its value is the 5m burn. 12 minutes in the 1h/5m pair holds too
	// and, first operand of the `or`, gives the 1h burn.
	fast, pair := onset+6*time.Minute, onset+12*time.Minute
	return s.test([]testutil.AlertTest{
		silent(pageAlert, onset),
		firing(pageAlert, fast, sloAlert(t, pageAlert, "ttft-p99", "llama", burn(fast, 5*time.Minute))),
		firing(pageAlert, pair, sloAlert(t, pageAlert, "ttft-p99", "llama", burn(pair, time.Hour))),
		// 46 minutes after recovery the 5m, 30m and 1m windows are clean (the
		// 1h window still holds the breach, but each pair needs both)
		silent(pageAlert, off+46*time.Minute),
	})
}

func lowTrafficCase(t testing.TB) testutil.RuleTest {
	// three requests in two hours; the second is slow. No window ever
	// holds 10 events. le="1" as Prometheus 2 stored an le exposed as "1"
	// (Prometheus 3 stores "1.0"): the rules match both.
	a := vllm("a", "llama")
	first, slow, third := mins(31), mins(61), mins(91)
	s := scenario{name: "a single bad request at low traffic neither pages nor tickets", step: step, end: mins(120), series: []series{
		{name("vllm_time_to_first_token_seconds_count", a), gauge(at{0, 0}, at{first, 1}, at{slow, 2}, at{third, 3})},
		{name("vllm_time_to_first_token_seconds_bucket", a, "le", "1"), gauge(at{0, 0}, at{first, 1}, at{third, 2})},
	}}
	return s.test([]testutil.AlertTest{
		silent(pageAlert, slow+time.Minute),
		silent(pageAlert, slow+5*time.Minute),
		silent(ticketAlert, slow+5*time.Minute),
		silent(ticketAlert, s.end),
	})
}

func healthyNoiseCase(t testing.TB) testutil.RuleTest {
	// 1 request/s, 0.5% slow (half the budget), and one minute at 10% slow;
	// a second replica of another model, quiet
	a, b := vllm("a", "llama"), vllm("b", "qwen")
	spike := mins(200)
	s := scenario{name: "healthy traffic with noise and a one-minute spike stays silent", step: step, end: mins(400), series: []series{
		{name("vllm_time_to_first_token_seconds_count", a), counter(at{0, 60})},
		{name("vllm_time_to_first_token_seconds_bucket", a, "le", "1.0"), counter(at{0, 60 * 0.995}, at{spike, 54}, at{spike + time.Minute, 60 * 0.995})},
		{name("vllm_time_to_first_token_seconds_count", b), counter(at{0, 6})},
		{name("vllm_time_to_first_token_seconds_bucket", b, "le", "1.0"), counter(at{0, 6})},
	}}
	return s.test([]testutil.AlertTest{
		silent(pageAlert, spike/2),
		silent(pageAlert, spike+4*time.Minute),
		silent(ticketAlert, spike+4*time.Minute),
		silent(ticketAlert, s.end),
	})
}

// sloInputs are one model's series for each default SLO, each with a good
// share of events (1 - bad) given as a per-minute rate model.
type sloInputs struct {
	series []series
	// burn is the SLO's burn over w at t, from the rates fed.
	burn func(at, w time.Duration) float64
}

// latencyInput feeds a latency SLO's histogram: count events a minute,
// good of them within the threshold bucket le.
func latencyInput(t testing.TB, s *scenario, slo, metric string, l map[string]string, le string, count, good curve) func(at, w time.Duration) float64 {
	s.series = append(s.series,
		series{name(metric+"_count", l), count},
		series{name(metric+"_bucket", l, "le", le), good})
	return func(at, w time.Duration) float64 { return s.latencyRatio(at, w, count, good) / sloBudget(t, slo) }
}

func slowLeakCase(t testing.TB) testutil.RuleTest {
	// Every default SLO leaks at 5x its budget for the first `leak`, then
	// recovers: a ticket, never a page, resolved once the 6h window no
	// longer holds the leak. At `leak` every window holds only the leak
	// (the 1d window starts at the first sample, 0: nothing extrapolated).
	leak := mins(130)
	s := &scenario{name: "a slow leak (5x the budget) opens a ticket but does not page, then resolves", step: step, end: mins(500)}
	total := counter(at{0, 100})
	leaking := func(budget float64) curve { return counter(at{0, 100 * (1 - 5*budget)}, at{leak, 100}) }
	burns := map[string]func(at, w time.Duration) float64{
		"ttft-p99/llama": latencyInput(t, s, "ttft-p99", "vllm_time_to_first_token_seconds", vllm("a", "llama"), "1.0", total, leaking(sloBudget(t, "ttft-p99"))),
		"tpot-p99/qwen":  latencyInput(t, s, "tpot-p99", "vllm_request_time_per_output_token_seconds", vllm("b", "qwen"), "0.1", total, leaking(sloBudget(t, "tpot-p99"))),
		"e2e-p99/mistral": latencyInput(t, s, "e2e-p99", "vllm_e2e_request_latency_seconds", vllm("c", "mistral"), "60.0", total,
			leaking(sloBudget(t, "e2e-p99"))),
	}
	pre := counter(at{0, 100 * 5 * sloBudget(t, "preemption")}, at{leak, 0})
	d := vllm("d", "gemma")
	s.series = append(s.series,
		series{name("vllm_requests_finished_total", d, "finished_reason", "length"), total},
		series{name("vllm_preemptions_total", d), pre})
	burns["preemption/gemma"] = func(at, w time.Duration) float64 {
		return sloRatio(at, w, s.sumRates(pre), s.sumRates(total)) / sloBudget(t, "preemption")
	}
	ab := sloBudget(t, "availability")
	stop, abort := counter(at{0, 1000 * (1 - 5*ab)}, at{leak, 1000}), counter(at{0, 1000 * 5 * ab}, at{leak, 0})
	e := vllm("e", "phi")
	s.series = append(s.series,
		series{name("vllm_requests_finished_total", e, "finished_reason", "stop"), stop},
		series{name("vllm_requests_finished_total", e, "finished_reason", "abort"), abort})
	burns["availability/phi"] = func(at, w time.Duration) float64 {
		return sloRatio(at, w, s.sumRates(abort), s.sumRates(stop, abort)) / ab
	}
	var tickets []testutil.ExpAlert
	for _, key := range []string{"ttft-p99/llama", "tpot-p99/qwen", "e2e-p99/mistral", "preemption/gemma", "availability/phi"} {
		slo, model := splitKey(key)
		// the ticket's value is its first pair's long window, 1d
		tickets = append(tickets, sloAlert(t, ticketAlert, slo, model, burns[key](leak, 24*time.Hour)))
	}
	return s.test([]testutil.AlertTest{
		silent(pageAlert, leak),
		firing(ticketAlert, leak, tickets...),
		// 6h after the leak stopped the 6h and 2h windows are clean (the 1d
		// and 3d ones still hold it, but each pair needs both windows)
		silent(ticketAlert, leak+6*time.Hour+6*time.Minute),
	})
}

func splitKey(key string) (slo, model string) {
	for i := range key {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return key, ""
}

func everySLOBreachCase(t testing.TB) testutil.RuleTest {
	// One model per SLO, each breached over [onset, off) at 1 request/s;
	// the model "steady" carries healthy noise for every SLO (half the
	// budget or less, two replicas) and must stay silent throughout.
	onset, off := mins(60), mins(90)
	s := &scenario{name: "TPOT, e2e, preemption and availability SLOs page on a hard breach and resolve", step: step, end: mins(150)}
	breached := func(perMin float64) curve { return counter(at{0, perMin}, at{onset, 0}, at{off, perMin}) }
	burns := map[string]func(at, w time.Duration) float64{
		// tpot-p99 from vLLM's per-request TPOT histogram (le="0.1": 100ms)
		"tpot-p99/llama": latencyInput(t, s, "tpot-p99", "vllm_request_time_per_output_token_seconds", vllm("a", "llama"), "0.1", counter(at{0, 60}), breached(60)),
		// tpot-p99 falls back to the inter-token latency histogram on a
		// vLLM without vllm:request_time_per_output_token_seconds (< 0.10.2)
		"tpot-p99/qwen": latencyInput(t, s, "tpot-p99", "vllm_inter_token_latency_seconds", vllm("b", "qwen"), "0.1", counter(at{0, 600}), breached(600)),
		// e2e-p99, le="60" as Prometheus 2 stored an le exposed as "60"
		"e2e-p99/mistral": latencyInput(t, s, "e2e-p99", "vllm_e2e_request_latency_seconds", vllm("c", "mistral"), "60", counter(at{0, 60}), breached(60)),
	}
	// preemption: every request preempted once during the breach
	d := vllm("d", "gemma")
	finD, pre := counter(at{0, 60}), counter(at{0, 0}, at{onset, 60}, at{off, 0})
	s.series = append(s.series,
		series{name("vllm_requests_finished_total", d, "finished_reason", "stop"), finD},
		series{name("vllm_preemptions_total", d), pre})
	burns["preemption/gemma"] = func(at, w time.Duration) float64 {
		return sloRatio(at, w, s.sumRates(pre), s.sumRates(finD)) / sloBudget(t, "preemption")
	}
	// availability: half the requests end in error during the breach
	e := vllm("e", "phi")
	stop, errs := counter(at{0, 60}, at{onset, 30}, at{off, 60}), counter(at{0, 0}, at{onset, 30}, at{off, 0})
	s.series = append(s.series,
		series{name("vllm_requests_finished_total", e, "finished_reason", "stop"), stop},
		series{name("vllm_requests_finished_total", e, "finished_reason", "error"), errs})
	burns["availability/phi"] = func(at, w time.Duration) float64 {
		return sloRatio(at, w, s.sumRates(errs), s.sumRates(stop, errs)) / sloBudget(t, "availability")
	}
	f, g := vllm("f", "steady"), vllm("g", "steady")
	s.series = append(s.series,
		series{name("vllm_request_time_per_output_token_seconds_count", f), counter(at{0, 200})},
		series{name("vllm_request_time_per_output_token_seconds_bucket", f, "le", "0.1"), counter(at{0, 199})},
		series{name("vllm_e2e_request_latency_seconds_count", f), counter(at{0, 200})},
		series{name("vllm_e2e_request_latency_seconds_bucket", f, "le", "60.0"), counter(at{0, 199})},
		series{name("vllm_requests_finished_total", f, "finished_reason", "stop"), counter(at{0, 1000})},
		series{name("vllm_requests_finished_total", g, "finished_reason", "length"), counter(at{0, 999})},
		series{name("vllm_requests_finished_total", g, "finished_reason", "abort"), counter(at{0, 1})},
		series{name("vllm_preemptions_total", g), counter(at{0, 10})},
	)
	// 16 minutes in the 5m windows are all bad and the 1h windows hold the
	// breach so far: every breached SLO pages on its 1h/5m pair, whose 1h
	// burn is the value (the preemption and error counters start at 0
	// inside the window, so rate() does not extrapolate them below zero).
	check := onset + 16*time.Minute
	var pages []testutil.ExpAlert
	for _, key := range []string{"preemption/gemma", "tpot-p99/llama", "e2e-p99/mistral", "availability/phi", "tpot-p99/qwen"} {
		slo, model := splitKey(key)
		pages = append(pages, sloAlert(t, pageAlert, slo, model, burns[key](check, time.Hour)))
	}
	return s.test([]testutil.AlertTest{
		silent(pageAlert, onset),
		firing(pageAlert, check, pages...),
		// 36m after recovery the 5m, 30m and 1m windows are clean again
		silent(pageAlert, off+36*time.Minute),
	})
}

func refusedCase(t testing.TB) testutil.RuleTest {
	// rr: 10 finished and 5 refused (5xx) requests a minute: a third fail.
	// ss: the same refusals, but its engine sleeps on purpose (503s while
	// asleep): no events, no page.
	rr, ss := vllm("r", "rr"), vllm("s", "ss")
	fin, refused := counter(at{0, 10}), counter(at{0, 5})
	s := scenario{name: "requests refused before the engine (5xx) burn the availability budget, except while the engine sleeps on purpose", step: step, end: mins(70), series: []series{
		{name("vllm_requests_finished_total", rr, "finished_reason", "stop"), fin},
		{name("vllm_requests_refused_total", rr), refused},
		{name("vllm_engine_awake", rr), gauge(at{0, 1})},
		{name("vllm_requests_finished_total", ss, "finished_reason", "stop"), fin},
		{name("vllm_requests_refused_total", ss), refused},
		{name("vllm_engine_awake", ss), gauge(at{0, 0})},
	}}
	check := mins(66)
	burn := sloRatio(check, time.Hour, s.sumRates(refused), s.sumRates(fin, refused)) / sloBudget(t, "availability")
	return s.test([]testutil.AlertTest{
		firing(pageAlert, check, sloAlert(t, pageAlert, "availability", "rr", burn)),
	})
}

// sloPagingTests time the paging design at the shipped 15s scrapes and 30s
// evaluations, querying ALERTS (pending and firing), so no page can go
// unnoticed between checks.
func sloPagingTests() promtoolFile {
	return promtoolFile{
		name: "slo-paging_test.yml",
		about: "promtool tests of the paging design (generated SLO rules, alerts/slo-rules.yml) at the\n" +
			"shipped timing: 15s scrapes (input interval) and 30s evaluations\n" +
			"(deploy/prometheus/prometheus.yml). A hard breach is half of the events bad; the\n" +
			"fast tier (10x, or at least 10% bad, over 5m and 1m) pages within 90s of its onset.",
		rules: []string{"slo-rules.yml", "vllm-alerts.yml"},
		eval:  30 * time.Second,
		cases: []func(testing.TB) testutil.RuleTest{hardBreachTimingCase, stallAftermathCase, queueRecoveryCase},
	}
}

// pageTarget is the most a hard breach may take to make the page condition
// true, leaving 90s of the 3-minute target for the scrape, the evaluation
// and Alertmanager's group_wait (internal/e2e TestTimeToPage measures the
// whole pipeline).
const pageTarget = 90 * time.Second

// pagesAt checks which pages are firing (none: not even pending).
func pagesAt(t testing.TB, at time.Duration, selector string, firingPages ...[2]string) testutil.ExprTest {
	e := testutil.ExprTest{Expr: "ALERTS{alertname=\"" + pageAlert + "\"" + selector + "}", EvalTime: testutil.Duration(at)}
	if len(firingPages) > 0 {
		e.Expr = "ALERTS{alertname=\"" + pageAlert + "\",alertstate=\"firing\"" + selector + "}"
	}
	for _, p := range firingPages {
		e.ExpSamples = append(e.ExpSamples, testutil.ExpSample{Labels: alertsSeries(t, "ALERTS", pageAlert, lbl("slo", p[0], "model", p[1])), Value: 1})
	}
	return e
}

func hardBreachTimingCase(t testing.TB) testutil.RuleTest {
	// Every default SLO: 2h of healthy traffic (2 requests/s, half the
	// error budget spent), then half of the events bad for 10 minutes,
	// then healthy again.
	onset, off := mins(120), mins(130)
	const rate = 120 // requests a minute
	healthy := func(slo string) float64 { return rate * (1 - sloBudget(t, slo)/2) }
	good := func(slo string) curve {
		return counter(at{0, healthy(slo)}, at{onset, rate / 2}, at{off, healthy(slo)})
	}
	bad := func(slo string) curve {
		return counter(at{0, rate - healthy(slo)}, at{onset, rate / 2}, at{off, rate - healthy(slo)})
	}
	total := counter(at{0, rate})
	var in []series
	for _, h := range []struct{ x, model, slo, metric, le string }{
		{"a", "ttft-m", "ttft-p99", "vllm_time_to_first_token_seconds", "1.0"},
		{"b", "tpot-m", "tpot-p99", "vllm_request_time_per_output_token_seconds", "0.1"},
		{"c", "e2e-m", "e2e-p99", "vllm_e2e_request_latency_seconds", "60.0"},
	} {
		l := vllm(h.x, h.model)
		in = append(in, series{name(h.metric+"_count", l), total}, series{name(h.metric+"_bucket", l, "le", h.le), good(h.slo)})
	}
	d, e := vllm("d", "preempt-m"), vllm("e", "avail-m")
	in = append(in,
		series{name("vllm_requests_finished_total", d, "finished_reason", "stop"), total},
		series{name("vllm_preemptions_total", d), bad("preemption")},
		series{name("vllm_requests_waiting", d), gauge(at{0, 0}, at{onset, 20}, at{off, 0})},
		series{name("vllm_requests_finished_total", e, "finished_reason", "stop"), good("availability")},
		series{name("vllm_requests_finished_total", e, "finished_reason", "abort"), bad("availability")},
	)
	s := scenario{name: "a hard breach (50% bad) of every SLO pages within 90s of its onset", step: scrape, end: mins(180), series: in}
	return s.test(nil,
		pagesAt(t, onset, ""),
		pagesAt(t, onset+30*time.Second, ""),
		pagesAt(t, onset+pageTarget, "",
			[2]string{"ttft-p99", "ttft-m"}, [2]string{"tpot-p99", "tpot-m"}, [2]string{"e2e-p99", "e2e-m"},
			[2]string{"preemption", "preempt-m"}, [2]string{"availability", "avail-m"}),
		pagesAt(t, off+35*time.Minute, ""),
	)
}

func stallAftermathCase(t testing.TB) testutil.RuleTest {
	// An engine stall pages once, as VLLMEngineStalled. Replica s stalls
	// (no token: the histograms observe nothing), then the hung requests
	// finish: 2 minutes of slow TTFT and e2e and one preemption per
	// request. None of that pages an SLO. Replica t's aftermath outlasts
	// the stall's suppression: it pages when the suppression ends.
	const suppression = 10 * time.Minute // the page rule's max_over_time(vllm_engine_stalled[10m])
	stall, resume := mins(120), mins(125)
	var in []series
	for _, r := range []struct {
		x, model  string
		aftermath time.Duration
	}{{"s", "st-m", 2 * time.Minute}, {"t", "st2-m", 25 * time.Minute}} {
		l := vllm(r.x, r.model)
		inst := lbl("job", "vllm", "instance", r.x+":9470")
		done := resume + r.aftermath
		count := counter(at{0, 120}, at{stall, 0}, at{resume, 120})
		good := counter(at{0, 119.4}, at{stall, 0}, at{done, 119.4})
		in = append(in,
			series{name("vllm_engine_stalled", inst), high(stall, resume)},
			series{name("vllm_requests_running", l), gauge(at{0, 5})},
			series{name("vllm_time_to_first_token_seconds_count", l), count},
			series{name("vllm_time_to_first_token_seconds_bucket", l, "le", "1.0"), good},
			series{name("vllm_e2e_request_latency_seconds_count", l), count},
			series{name("vllm_e2e_request_latency_seconds_bucket", l, "le", "60.0"), good},
			series{name("vllm_requests_finished_total", l, "finished_reason", "stop"), count},
			series{name("vllm_preemptions_total", l), counter(at{0, 0.6}, at{stall, 0}, at{resume, 120}, at{done, 0.6})},
		)
	}
	s := scenario{name: "a stall pages once; its aftermath does not page the SLOs while the stall suppresses them", step: scrape, end: mins(170), series: in}
	stalled := func(x string) testutil.ExpSample {
		return testutil.ExpSample{Labels: alertsSeries(t, "", "VLLMEngineStalled", lbl("job", "vllm", "instance", x+":9470")), Value: 1}
	}
	return s.test(nil,
		testutil.ExprTest{Expr: `max_over_time(ALERTS{alertname="VLLMEngineStalled",alertstate="firing"}[1h])`, EvalTime: testutil.Duration(s.end),
			ExpSamples: []testutil.ExpSample{stalled("s"), stalled("t")}},
		testutil.ExprTest{Expr: `count_over_time(ALERTS{alertname="` + pageAlert + `",model="st-m"}[1h])`, EvalTime: testutil.Duration(s.end)},
		pagesAt(t, resume+suppression-30*time.Second, `,model="st2-m"`),
		pagesAt(t, resume+suppression+time.Minute, `,model="st2-m"`,
			[2]string{"ttft-p99", "st2-m"}, [2]string{"e2e-p99", "st2-m"}, [2]string{"preemption", "st2-m"}),
	)
}

func queueRecoveryCase(t testing.TB) testutil.RuleTest {
	// A queue of 150 drains at `drained` and its backlog is admitted at
	// once. Replica r preempts every request for 3 minutes (a recovery
	// burst): no page. Replica q keeps preempting for 10 minutes: it pages
	// once the burst has lasted `sustained`.
	const sustained = 5 * time.Minute // the preemption page's min_over_time(...[5m]) while the queue recovers
	queued, drained := mins(110), mins(120)
	var in []series
	for _, r := range []struct {
		x, model string
		burst    time.Duration
	}{{"r", "rq-m", 3 * time.Minute}, {"q", "rq2-m", 10 * time.Minute}} {
		l := vllm(r.x, r.model)
		in = append(in,
			series{name("vllm_requests_waiting", l), gauge(at{0, 0}, at{queued, 150}, at{drained, 0})},
			series{name("vllm_requests_finished_total", l, "finished_reason", "stop"), counter(at{0, 120})},
			series{name("vllm_preemptions_total", l), counter(at{0, 0.6}, at{drained, 120}, at{drained + r.burst, 0.6})},
		)
	}
	s := scenario{name: "a preemption burst while a queue recovers pages only if it persists", step: scrape, end: mins(180), series: in}
	return s.test(nil,
		testutil.ExprTest{Expr: `count_over_time(ALERTS{alertname="` + pageAlert + `",model="rq-m"}[1h])`, EvalTime: testutil.Duration(mins(170))},
		pagesAt(t, drained+sustained-time.Minute, `,model="rq2-m"`),
		pagesAt(t, drained+sustained+time.Minute, `,model="rq2-m"`, [2]string{"preemption", "rq2-m"}),
	)
}

// sloEventsTests pin the generated SLO event counts
// (slo:sli_events:increase<W>) to the true counts of the input.
func sloEventsTests() promtoolFile {
	return promtoolFile{
		name: "slo-events_test.yml",
		about: "promtool unit tests pinning the generated SLO event counts (slo:sli_events:increase<W>,\n" +
			"alerts/slo-rules.yml) to the true counts of the input. Evaluation every 30s: the old\n" +
			"period rule, sum_over_time over the 5m increases, counted every event 5m/30s = 10 times.",
		rules: []string{"slo-rules.yml"},
		eval:  30 * time.Second,
		cases: []func(testing.TB) testutil.RuleTest{eventCountsCase},
	}
}

func eventCountsCase(t testing.TB) testutil.RuleTest {
	// model llama: replica a 60 requests/min from 0, replica b 30/min from
	// bStart (it starts then at 0); model qwen: 6/min.
	bStart := mins(60)
	a, b, c := counter(at{0, 60}), counter(at{0, 30}).startsAt(bStart), counter(at{0, 6})
	s := scenario{name: "events over each window are the true count, per model, across replicas", step: step, end: mins(180), series: []series{
		{name("vllm_time_to_first_token_seconds_count", vllm("a", "llama")), a},
		{name("vllm_time_to_first_token_seconds_count", vllm("b", "llama")), b},
		{name("vllm_time_to_first_token_seconds_count", vllm("c", "qwen")), c},
	}}
	// events is the true count of cs in (at-w, at]
	events := func(at, w time.Duration, cs ...curve) float64 {
		var n float64
		for _, c := range cs {
			from, to := c(at-w), c(at)
			if math.IsNaN(from) { // no sample yet: the series starts inside the window, at 0
				from = 0
			}
			if !math.IsNaN(to) {
				n += to - from
			}
		}
		return n
	}
	check := func(window string, w, at time.Duration) testutil.ExprTest {
		record := "slo:sli_events:increase" + window
		sample := func(model string, n float64) testutil.ExpSample {
			return testutil.ExpSample{Labels: name(record, lbl("model", model, "slo", "ttft-p99")), Value: n}
		}
		return testutil.ExprTest{Expr: record + `{slo="ttft-p99"}`, EvalTime: testutil.Duration(at), ExpSamples: []testutil.ExpSample{
			sample("llama", events(at, w, a, b)), sample("qwen", events(at, w, c)),
		}}
	}
	period := 30 * 24 * time.Hour
	return s.test(nil,
		check("30d", period, s.end),
		check("30d", period, bStart), // only replica a has counted
		check("1h", time.Hour, s.end),
		check("5m", 5*time.Minute, s.end),
	)
}
