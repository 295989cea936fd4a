package alerts

import (
	"math"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// step is the sample interval of the vllm-alerts and recording cases:
// every [1m] and longer window holds at least two samples on Prometheus 3.
const step = 30 * time.Second

// job, instance (and more) labels of replica x, as the scrape adds them.
func replica(x string, kv ...string) map[string]string {
	return lbl(append([]string{"job", "vllm", "instance", x + ":9400"}, kv...)...)
}

// mid is a check time half-way between two, on the step grid.
func mid(a, b time.Duration) time.Duration { return (a + b) / 2 / step * step }

// vllmAlertsTests are the cases of alerts/vllm-alerts.yml. Each alert has
// a case where it fires (and promtool's comparison of the complete set
// proves the noisy-but-healthy series of the same case do not), a check
// before it fires and one after its condition cleared. Replica "a" is the
// broken one unless the case says otherwise. A new alert is one case
// function in this list (holdCase or gaugeHoldCase for a condition held
// for the rule's `for`, a scenario with expectations computed from its
// rates otherwise), then `go test ./alerts -run
// TestPromtoolTestFilesAreGenerated -update`; TestEveryAlertIsUnitTested
// fails until the alert fires, is silent twice and resolves.
func vllmAlertsTests() promtoolFile {
	return promtoolFile{
		name:  "vllm-alerts_test.yml",
		about: "promtool unit tests of alerts/vllm-alerts.yml (the hand-written alerts), evaluated at the shipped 30s.",
		rules: []string{"vllm-alerts.yml"},
		eval:  30 * time.Second,
		cases: []func(testing.TB) testutil.RuleTest{
			engineStalledCase, sleepingEngineCase, deferredLivelockCase, kvTransferFailuresCase, kvOffloadFailuresCase, admissionRejectionsCase, vllmDownCase,
			kvCacheNearFullCase, queueBuildupCase, gpuThrottlingCase, fatalXidCase, probesFailingCase,
			expectedMetricMissingCase, scrapeErrorsCase, configReloadFailedCase, collectorDownCase,
			exporterTargetDownCase, exporterAbsentCase, watchdogCase,
		},
	}
}

// high is a 0/1 gauge that is 1 in [from, to).
func high(from, to time.Duration) curve { return gauge(at{0, 0}, at{from, 1}, at{to, 0}) }

// low is a 1/0 gauge that is 0 in [from, to).
func low(from, to time.Duration) curve { return gauge(at{0, 1}, at{from, 0}, at{to, 1}) }

// holdCase is the shape of the alerts that hold a gauge condition for
// their `for`: broken replica a from onset to off, a second replica b
// whose condition holds for less than `for` (or flaps), extra series; the
// alert is silent a minute before onset+for, fires half-way to off, and is
// silent two minutes after off.
func holdCase(t testing.TB, alert, desc string, onset, off time.Duration, a map[string]string, value float64, in ...series) testutil.RuleTest {
	t.Helper()
	hold := ruleFor(t, alert)
	s := scenario{name: desc, step: step, end: off + 10*time.Minute, series: in}
	return s.test([]testutil.AlertTest{
		silent(alert, onset+hold-time.Minute),
		firing(alert, mid(onset+hold, off), fires(t, alert, a, value)),
		silent(alert, off+2*time.Minute),
	})
}

func engineStalledCase(t testing.TB) testutil.RuleTest {
	const alert = "VLLMEngineStalled"
	a, b, c := replica("a"), replica("b"), replica("c")
	onset, off, blip := mins(11), mins(22), mins(11) // c: one stalled verdict
	s := scenario{name: "engine stalled pages at once and resolves; a one-sample verdict pages only while it holds", step: step, end: mins(31), series: []series{
		{name("vllm_engine_stalled", a), high(onset, off)},
		{name("vllm_engine_stalled", b), gauge(at{0, 0})},
		{name("vllm_engine_stalled", c), high(blip, blip+step)},
	}}
	at := onset + ruleFor(t, alert) // no `for`: the verdict is confirmed
	return s.test([]testutil.AlertTest{
		silent(alert, onset-6*time.Minute),
		firing(alert, at, fires(t, alert, a, 1), fires(t, alert, c, 1)),
		firing(alert, at+3*time.Minute, fires(t, alert, a, 1)),
		silent(alert, off+3*time.Minute),
	})
}

func sleepingEngineCase(t testing.TB) testutil.RuleTest {
	// s: put to sleep at 11m (the stall verdict and probe failures of a
	// sleeping engine must not page); woken at 42m, stalls for real at 48m.
	s0 := replica("s")
	sleep, wake, stall := mins(11), mins(42), mins(48)
	s := scenario{name: "a sleeping engine raises neither the stall page nor the probe ticket", step: step, end: mins(60), series: []series{
		{name("vllm_engine_awake", s0, "model", "m"), low(sleep, wake)},
		{name("vllm_engine_stalled", s0), gauge(at{0, 0}, at{sleep, 1}, at{wake, 0}, at{stall, 1})},
		{name("vllm_probe_requests_total", s0, "profile", "short"), counter(at{0, 2})},
		{name("vllm_probe_failures_total", s0, "profile", "short", "reason", "timeout"), counter(at{0, 0}, at{sleep, 2}, at{wake, 0})},
	}}
	return s.test([]testutil.AlertTest{
		silent("VLLMEngineStalled", wake-5*time.Minute),
		silent("VLLMProbesFailing", wake-5*time.Minute),
		firing("VLLMEngineStalled", stall+2*time.Minute, fires(t, "VLLMEngineStalled", s0, 1)),
	})
}

func deferredLivelockCase(t testing.TB) testutil.RuleTest {
	const alert = "VLLMDeferredLivelock"
	a := replica("a", "model", "m", "class", "deferred_livelock")
	b := replica("b", "model", "m")
	onset, off := mins(11), mins(22)
	return holdCase(t, alert, "deferred livelock pages after its `for` of the classifier's verdict and resolves; a shorter verdict does not",
		onset, off, a, 1,
		series{name("vllm_bottleneck", a), high(onset, off)},
		// b: the verdict for 4 minutes, shorter than the `for`
		series{name("vllm_bottleneck", b, "class", "deferred_livelock"), high(onset, onset+ruleFor(t, alert)-time.Minute)},
		series{name("vllm_bottleneck", b, "class", "queueing"), gauge(at{0, 1})},
	)
}

func kvTransferFailuresCase(t testing.TB) testutil.RuleTest {
	const alert, window = "VLLMKVTransferFailures", 10 * time.Minute // the rule's rate window
	a, b, c := replica("a", "model", "llama"), replica("b", "model", "llama"), replica("c", "model", "llama")
	onset, off := mins(11), mins(41)
	okA, failA := counter(at{0, 10}), counter(at{0, 0}, at{onset, 10}, at{off, 0}) // half of a's transfers fail
	s := scenario{name: "KV transfer failures page after the `for` above 5% and resolve; a healthy pod and a single failure do not", step: step, end: mins(62), series: []series{
		{name("vllm_kv_transfer_time_seconds_count", a), okA},
		{name("vllm_kv_transfer_failures_total", a), failA},
		{name("vllm_kv_transfer_time_seconds_count", b), counter(at{0, 10})},
		{name("vllm_kv_transfer_failures_total", b), gauge(at{0, 0})},
		// c: one failure among 100 transfers a minute
		{name("vllm_kv_transfer_time_seconds_count", c), counter(at{0, 100})},
		{name("vllm_kv_transfer_failures_total", c), gauge(at{0, 0}, at{mins(20), 1})},
	}}
	check := mins(30)
	f := s.sumRate(check, window, failA)
	return s.test([]testutil.AlertTest{
		silent(alert, onset+ruleFor(t, alert)-time.Minute),
		firing(alert, check, fires(t, alert, a, f/(s.sumRate(check, window, okA)+f))),
		silent(alert, off+window+time.Minute),
	})
}

// kvOffloadFailuresCase: a's HF3FS loads fail 3 times a minute from onset
// to off; b's CPU tier fails an allocation every other minute (below the
// threshold); c's disk tier fails cascades 5 times a minute for less than
// the rule's for.
func kvOffloadFailuresCase(t testing.TB) testutil.RuleTest {
	const alert, window = "VLLMKVOffloadFailures", 10 * time.Minute // the rule's rate window
	a, b, c := replica("a", "model", "llama"), replica("b", "model", "llama"), replica("c", "model", "llama", "tier", "disk")
	onset, off := mins(10), mins(40)
	loads := counter(at{0, 0}, at{onset, 3}, at{off, 0})
	s := scenario{name: "KV offload failures ticket by kind; a rare failure and a short burst do not", step: step, end: mins(62), series: []series{
		{name("vllm_hf3fs_load_failures_total", a), loads},
		{name("vllm_hf3fs_save_failures_total", a), gauge(at{0, 0})},
		{name("vllm_kv_offload_allocation_failures_total", b), counter(at{0, 0.5})},
		{name("vllm_kv_offload_cascade_failures_total", c), counter(at{0, 0}, at{mins(20), 5}, at{mins(24), 0})},
	}}
	check := mins(30)
	return s.test([]testutil.AlertTest{
		silent(alert, onset+ruleFor(t, alert)-time.Minute),
		firing(alert, check, fires(t, alert, replica("a", "model", "llama", "failure", "hf3fs_load"), 60*s.sumRate(check, window, loads))),
		silent(alert, off+window+time.Minute),
	})
}

// admissionRejectionsCase: a (600 finished requests a minute) refuses 60 a
// minute at the queue cap from onset to off (9 %); b refuses one request
// every 10 minutes (noise); c has no admission control and so no
// vllm_requests_rejected_total at all.
func admissionRejectionsCase(t testing.TB) testutil.RuleTest {
	const alert, window = "VLLMAdmissionRejections", 10 * time.Minute // the rule's rate window
	a := replica("a", "model", "llama", "reason", "max_num_queued_reqs")
	b := replica("b", "model", "llama", "reason", "max_num_queued_tokens")
	onset, off := mins(10), mins(40)
	finished, rejected := counter(at{0, 600}), counter(at{0, 0}, at{onset, 60}, at{off, 0})
	var rare []at
	for m := 9.0; m < 60; m += 10 {
		rare = append(rare, at{mins(m), float64(len(rare) + 1)})
	}
	s := scenario{name: "admission rejections ticket; a rare refusal does not, servers without admission control have no series", step: step, end: mins(62), series: []series{
		{name("vllm_requests_finished_total", replica("a", "model", "llama", "finished_reason", "stop")), finished},
		{name("vllm_requests_rejected_total", a), rejected},
		{name("vllm_requests_finished_total", replica("b", "model", "llama", "finished_reason", "stop")), finished},
		{name("vllm_requests_rejected_total", b), gauge(append([]at{{0, 0}}, rare...)...)},
		{name("vllm_requests_finished_total", replica("c", "model", "llama", "finished_reason", "stop")), finished},
	}}
	check := mins(30)
	r := s.sumRate(check, window, rejected)
	return s.test([]testutil.AlertTest{
		silent(alert, onset+ruleFor(t, alert)-time.Minute),
		firing(alert, check, fires(t, alert, replica("a", "model", "llama"), r/(r+s.sumRate(check, window, finished)))),
		silent(alert, off+window+time.Minute),
	})
}

func vllmDownCase(t testing.TB) testutil.RuleTest {
	const alert, loadLimit = "VLLMDown", 20 * time.Minute // a vLLM that never answers pages after loadLimit
	a, b, c, d, e := replica("a"), replica("b"), replica("c"), replica("d"), replica("e")
	down, back := mins(6), mins(16) // a's vLLM down
	seconds := func(t time.Duration) float64 { return t.Seconds() }
	// lastOK is the last-success timestamp of a vLLM that failed in [from, to).
	lastOK := func(from, to time.Duration) curve {
		return func(t time.Duration) float64 {
			if t >= from && t < to {
				return (from - step).Seconds()
			}
			return t.Seconds()
		}
	}
	loaded := mins(13) // d: a new pod loading its model until then
	s := scenario{name: "vLLM down while the exporter is up pages; exporter down, a blip or a model still loading does not", step: step, end: mins(30), series: []series{
		{name("up", a), gauge(at{0, 1})},
		{name("vllm_up", a), low(down, back)},
		{name("vllm_exporter_last_successful_scrape_timestamp_seconds", a), lastOK(down, back)},
		{name("vllm_exporter_start_time_seconds", a), gauge(at{0, 0})},
		// b: the whole pod is gone: exporter unreachable, vllm_up absent
		{name("up", b), gauge(at{0, 1}, at{down, 0})},
		{name("vllm_up", b), gauge(at{0, 1}).absent(down, time.Hour)},
		// c: one failed fetch
		{name("up", c), gauge(at{0, 1})},
		{name("vllm_up", c), low(down, down+step)},
		{name("vllm_exporter_last_successful_scrape_timestamp_seconds", c), lastOK(down, down+step)},
		// d: vLLM loads its model (no success yet, exporter started at 0)
		{name("up", d), gauge(at{0, 1})},
		{name("vllm_up", d), gauge(at{0, 0}, at{loaded, 1})},
		{name("vllm_exporter_last_successful_scrape_timestamp_seconds", d), curve(seconds).absent(0, loaded)},
		{name("vllm_exporter_start_time_seconds", d), gauge(at{0, 0})},
		// e: vLLM never comes up (bad flags, crash loop at load)
		{name("up", e), gauge(at{0, 1})},
		{name("vllm_up", e), gauge(at{0, 0})},
		{name("vllm_exporter_start_time_seconds", e), gauge(at{0, 0})},
	}}
	hold := ruleFor(t, alert)
	return s.test([]testutil.AlertTest{
		silent(alert, down-time.Minute),
		silent(alert, down+hold-time.Minute),
		firing(alert, down+hold+time.Minute, fires(t, alert, a, 0)),
		silent(alert, loadLimit),
		firing(alert, loadLimit+hold+time.Minute, fires(t, alert, e, 0)),
	})
}

func kvCacheNearFullCase(t testing.TB) testutil.RuleTest {
	a, b := replica("a", "model", "llama"), replica("b", "model", "llama")
	onset, off, full := mins(6), mins(37), 0.97
	return holdCase(t, "VLLMKVCacheNearFull", "KV cache above 95% for the `for` tickets; oscillation around 95% does not",
		onset, off, a, full,
		series{name("vllm_kv_cache_usage_ratio", a), gauge(at{0, 0.5}, at{onset, full}, at{off, 0.6})},
		series{name("vllm_kv_cache_usage_ratio", b), cycle(step, 0.96, 0.90)},
	)
}

func queueBuildupCase(t testing.TB) testutil.RuleTest {
	const alert = "VLLMQueueBuildup"
	const waitWindow, quantileWindow = 10 * time.Minute, 5 * time.Minute // the rule's windows
	a, b, c := replica("a", "model", "llama"), replica("b", "model", "llama"), replica("c", "model", "llama")
	onset, off := mins(11), mins(41)
	// a: 10 requests/min; fast queueing (under 0.3 s) except in [onset, off),
	// when every request waits 1 to 5 s and the queue never empties
	fast := counter(at{0, 10}, at{onset, 0}, at{off, 10})
	les := []struct {
		le string
		v  float64
	}{{"0.3", 0.3}, {"1.0", 1}, {"5.0", 5}, {"+Inf", math.Inf(1)}}
	aBuckets := []curve{fast, fast, counter(at{0, 10}), counter(at{0, 10})}
	var in []series
	for i, le := range les {
		in = append(in, series{name("vllm_request_queue_time_seconds_bucket", a, "le", le.le), aBuckets[i]})
	}
	in = append(in, series{name("vllm_requests_waiting", a), gauge(at{0, 0}, at{onset, 3}, at{off, 0})})
	// b: a busy queue that keeps draining; c: saturated (queue always 1)
	// but requests barely wait. Both fast.
	for _, x := range []struct {
		l       map[string]string
		waiting curve
	}{{b, cycle(step, 0, 2, 1, 0, 3, 0, 1, 2, 0, 4)}, {c, gauge(at{0, 1})}} {
		for _, le := range les {
			in = append(in, series{name("vllm_request_queue_time_seconds_bucket", x.l, "le", le.le), counter(at{0, 20})})
		}
		in = append(in, series{name("vllm_requests_waiting", x.l), x.waiting})
	}
	s := scenario{name: "queue that never drains with slow queue time tickets; a busy but draining queue does not", step: step, end: mins(60), series: in}
	firesFrom := onset + waitWindow + ruleFor(t, alert)
	check := firesFrom + 2*time.Minute
	var bs []bucket
	for i, le := range les {
		bs = append(bs, bucket{le.v, s.sumRate(check, quantileWindow, aBuckets[i])})
	}
	return s.test([]testutil.AlertTest{
		silent(alert, firesFrom-time.Minute),
		firing(alert, check, fires(t, alert, a, bucketQuantile(0.9, bs))),
		silent(alert, off+2*time.Minute),
	})
}

func gpuThrottlingCase(t testing.TB) testutil.RuleTest {
	const alert, window = "VLLMGPUThrottlingTPOTDegraded", 10 * time.Minute // the rule's short window
	a, b, c := replica("a"), replica("b"), replica("c")
	onset, off := mins(61), mins(102)
	gpu := func(r map[string]string, x, reason string) string {
		return name("vllm_gpu_clock_event_active", r, "gpu", "0", "uuid", "GPU-"+x, "reason", reason)
	}
	tpot := func(r map[string]string, le string) string {
		return name("vllm_request_time_per_output_token_seconds_bucket", r, "model", "llama", "le", le)
	}
	// a and c: 10 requests/min at a TPOT of 10-25 ms, 50-75 ms in [onset, off)
	healthy := counter(at{0, 10}, at{onset, 0}, at{off, 10})
	all := counter(at{0, 10})
	capped := high(onset, off)
	s := scenario{name: "GPU throttling with degraded TPOT tickets; throttling alone or slow TPOT alone does not", step: step, end: mins(140), series: []series{
		{gpu(a, "a", "sw_power_cap"), capped},
		{gpu(a, "a", "gpu_idle"), gauge(at{0, 1})},
		{tpot(a, "0.01"), gauge(at{0, 0})},
		{tpot(a, "0.025"), healthy},
		{tpot(a, "0.05"), healthy},
		{tpot(a, "0.075"), all},
		{tpot(a, "+Inf"), all},
		// b: power-capped the whole time, TPOT unchanged
		{gpu(b, "b", "sw_power_cap"), gauge(at{0, 1})},
		{tpot(b, "0.025"), all},
		{tpot(b, "0.075"), all},
		{tpot(b, "+Inf"), all},
		// c: TPOT degrades, clocks are fine (idle only)
		{gpu(c, "c", "gpu_idle"), gauge(at{0, 1})},
		{tpot(c, "0.025"), healthy},
		{tpot(c, "0.075"), all},
		{tpot(c, "+Inf"), all},
	}}
	check := onset + window + ruleFor(t, alert) + time.Minute
	return s.test([]testutil.AlertTest{
		silent(alert, onset-time.Minute),
		firing(alert, check, fires(t, alert, a, s.avgOverTime(capped, check, window))),
		silent(alert, off+window+time.Minute),
	})
}

func fatalXidCase(t testing.TB) testutil.RuleTest {
	const alert, window = "VLLMGPUFatalXid", 15 * time.Minute // the rule's window
	xid := func(x, gpu, id string) map[string]string { return replica(x, "gpu", gpu, "uuid", "GPU-"+x, "xid", id) }
	a, b, c, d := xid("a", "0", "79"), xid("b", "1", "48"), xid("c", "0", "13"), xid("d", "0", "79")
	onset := mins(11)
	in := []series{
		// a: first ever Xid 79 (the series appears with value 1)
		{name("vllm_gpu_xid_events_total", a), gauge(at{0, 1}).absent(0, onset)},
		// b: Xid 48 counter already present, increments
		{name("vllm_gpu_xid_events_total", b), gauge(at{0, 0}, at{onset, 1})},
		// c: application-caused Xid 13 keeps increasing: not this alert
		{name("vllm_gpu_xid_events_total", c), counter(at{0, 1})},
		// d: an old Xid 79 from before the window, no new events
		{name("vllm_gpu_xid_events_total", d), gauge(at{0, 2})},
	}
	for _, x := range []string{"a", "b", "c", "d"} {
		in = append(in, series{name("vllm_exporter_build_info", replica(x), "version", "0.1.0"), gauge(at{0, 1})})
	}
	s := scenario{name: "fatal Xid tickets for its window, including the first event of a new series; application Xids do not", step: step, end: mins(40), series: in}
	return s.test([]testutil.AlertTest{
		silent(alert, onset-3*time.Minute),
		silent(alert, onset-time.Minute),
		firing(alert, onset+4*time.Minute, fires(t, alert, a, 1), fires(t, alert, b, 1)),
		silent(alert, onset+window+time.Minute),
	})
}

func probesFailingCase(t testing.TB) testutil.RuleTest {
	const alert, window = "VLLMProbesFailing", 10 * time.Minute // the rule's window
	a, b, c := replica("a", "profile", "short"), replica("b", "profile", "short"), replica("c", "profile", "long")
	onset, off := mins(11), mins(41)
	reqA, failA := counter(at{0, 2}), counter(at{0, 0}, at{onset, 2}, at{off, 0}) // every probe of a fails
	s := scenario{name: "probes failing tickets; 10% failures or one failed probe at low volume do not", step: step, end: mins(60), series: []series{
		{name("vllm_probe_requests_total", a), reqA},
		{name("vllm_probe_failures_total", a, "reason", "timeout"), failA},
		// b: one probe in ten fails
		{name("vllm_probe_requests_total", b), counter(at{0, 2})},
		{name("vllm_probe_failures_total", b, "reason", "http_5xx"), func(t time.Duration) float64 { return math.Floor(t.Minutes() / 5) }},
		// c: a profile that ran once in the hour, and that one failed
		{name("vllm_probe_requests_total", c), gauge(at{0, 0}, at{mins(10), 1})},
		{name("vllm_probe_failures_total", c, "reason", "timeout"), gauge(at{0, 0}, at{mins(10), 1})},
	}}
	check := mins(35)
	return s.test([]testutil.AlertTest{
		silent(alert, onset-time.Minute),
		firing(alert, check, fires(t, alert, a, s.sumRate(check, window, failA)/s.sumRate(check, window, reqA))),
		silent(alert, off+window+2*time.Minute),
	})
}

// gaugeHoldCase is holdCase for an alert on one gauge: replica a in
// state bad over [onset, off), replica b only for `short`, under the
// alert's `for`.
func gaugeHoldCase(t testing.TB, alert, desc, metric string, a, b map[string]string, bad func(from, to time.Duration) curve, onset, off, short time.Duration) testutil.RuleTest {
	t.Helper()
	return holdCase(t, alert, desc, onset, off, a, 1,
		series{name(metric, a), bad(onset, off)},
		series{name(metric, b), bad(onset, onset+short)},
	)
}

func expectedMetricMissingCase(t testing.TB) testutil.RuleTest {
	return gaugeHoldCase(t, "VLLMExpectedMetricMissing", "expected vLLM metric missing for the `for` tickets (schema drift); a short gap does not",
		"vllm_exporter_expected_metric_missing", replica("a", "metric", "vllm:kv_cache_usage_perc"), replica("b", "metric", "vllm:num_requests_waiting"),
		high, mins(6), mins(36), 5*time.Minute)
}

func scrapeErrorsCase(t testing.TB) testutil.RuleTest {
	const alert, window = "VLLMExporterScrapeErrors", 5 * time.Minute // the rule's window
	a, b := replica("a"), replica("b")
	onset, off := mins(11), mins(41)
	// 12 scrapes/min on both; a fails half of them in [onset, off), b once in 10 minutes
	scrapes, errA := counter(at{0, 12}), counter(at{0, 0}, at{onset, 6}, at{off, 0})
	s := scenario{name: "exporter scrape errors above 10% for the `for` ticket; rare errors do not", step: step, end: mins(60), series: []series{
		{name("vllm_exporter_scrapes_total", a), scrapes},
		{name("vllm_exporter_scrape_errors_total", a, "reason", "timeout"), errA},
		{name("vllm_exporter_scrapes_total", b), scrapes},
		{name("vllm_exporter_scrape_errors_total", b, "reason", "parse"), gauge(at{0, 0}, at{mins(11), 1}, at{mins(22), 2}, at{mins(33), 3})},
	}}
	check := mins(35)
	return s.test([]testutil.AlertTest{
		silent(alert, onset+ruleFor(t, alert)-time.Minute),
		firing(alert, check, fires(t, alert, a, s.sumRate(check, window, errA)/s.sumRate(check, window, scrapes))),
		silent(alert, off+window+2*time.Minute),
	})
}

func configReloadFailedCase(t testing.TB) testutil.RuleTest {
	return gaugeHoldCase(t, "VLLMExporterConfigReloadFailed", "config reload failure for the `for` tickets and resolves on a good reload; a failure fixed sooner does not",
		"vllm_exporter_config_last_reload_successful", replica("a"), replica("b"), low, mins(6), mins(16), 2*time.Minute)
}

func collectorDownCase(t testing.TB) testutil.RuleTest {
	a := replica("a", "collector", "gpu")
	onset, off := mins(6), mins(26)
	return holdCase(t, "VLLMExporterCollectorDown", "collector failing for the `for` tickets; a flapping collector or an absent one does not",
		onset, off, a, 0,
		series{name("vllm_exporter_collector_up", a), low(onset, off)},
		series{name("vllm_exporter_collector_up", replica("b", "collector", "vllm")), cycle(step, 1, 0)},
		// d: a host without NVML, GPU collector in auto mode: reported
		// absent, no up series, no ticket
		series{name("vllm_exporter_collector_absent", replica("d", "collector", "gpu", "reason", "nvml_library_not_found")), gauge(at{0, 1})},
		series{name("vllm_exporter_collector_up", replica("d", "collector", "vllm")), gauge(at{0, 1})},
	)
}

func exporterTargetDownCase(t testing.TB) testutil.RuleTest {
	a, c := replica("a"), replica("c")
	onset, off := mins(11), mins(31)
	build := func(r map[string]string) string { return name("vllm_exporter_build_info", r, "version", "0.1.0") }
	return holdCase(t, "VLLMExporterTargetDown", "exporter target down tickets; other targets and short outages do not",
		onset, off, a, 0,
		series{name("up", a), low(onset, off)},
		series{build(a), gauge(at{0, 1}).absent(onset, off)},
		// b: not an exporter (never exposed vllm_exporter_build_info)
		series{name("up", lbl("job", "node", "instance", "b:9100")), gauge(at{0, 0})},
		// c: exporter restarts, down for 2 minutes
		series{name("up", c), low(onset, onset+2*time.Minute)},
		series{build(c), gauge(at{0, 1}).absent(onset, onset+2*time.Minute)},
	)
}

func exporterAbsentCase(t testing.TB) testutil.RuleTest {
	const alert, lookback = "VLLMExporterAbsent", 5 * time.Minute // Prometheus' lookback delta
	// the only exporter: scraped, gone for 5 minutes (a restart), back,
	// then gone after its sample at lastSeen (its PodMonitor no longer
	// matches) until back
	restart, lastSeen, back := mins(6), mins(20), mins(46)
	s := scenario{name: "no exporter scraped at all for the `for` tickets; a short gap does not", step: step, end: mins(55), series: []series{
		{name("vllm_exporter_build_info", replica("a"), "version", "0.1.0"), gauge(at{0, 1}).absent(restart, restart+5*time.Minute).absent(lastSeen+step, back)},
		// other targets exist all along
		{name("up", lbl("job", "node", "instance", "b:9100")), gauge(at{0, 1})},
	}}
	// lookback windows are left-open: the sample at lastSeen is gone at lastSeen+lookback
	firesFrom := lastSeen + lookback + ruleFor(t, alert)
	return s.test([]testutil.AlertTest{
		silent(alert, restart+6*time.Minute),
		silent(alert, firesFrom-time.Minute),
		firing(alert, mid(firesFrom, back), fires(t, alert, nil, 1)),
		silent(alert, back+time.Minute),
	})
}

func watchdogCase(t testing.TB) testutil.RuleTest {
	const alert = "Watchdog"
	s := scenario{name: "the dead-man's switch always fires, with no input at all", step: step}
	return s.test([]testutil.AlertTest{
		firing(alert, time.Minute, fires(t, alert, nil, 1)),
		firing(alert, time.Hour, fires(t, alert, nil, 1)),
	})
}

// vllmRecordingTests are the cases of alerts/vllm-recording.yml.
func vllmRecordingTests() promtoolFile {
	return promtoolFile{
		name:  "vllm-recording_test.yml",
		about: "promtool unit tests of the fleet recording rules (alerts/vllm-recording.yml).",
		rules: []string{"vllm-recording.yml"},
		eval:  30 * time.Second,
		cases: []func(testing.TB) testutil.RuleTest{fleetRecordingCase, fleetVerdictsCase},
	}
}

func fleetRecordingCase(t testing.TB) testutil.RuleTest {
	a, b := replica("a", "model", "llama"), replica("b", "model", "llama")
	stuck := replica("c", "model", "stuck")
	// TTFT: a answers half its 60 requests/min within 0.1 s, the rest
	// within 0.25 s; b all within 0.25 s
	ttft := map[string][2]curve{ // le -> a, b
		"0.1":  {counter(at{0, 30}), gauge(at{0, 0})},
		"0.25": {counter(at{0, 60}), counter(at{0, 60})},
		"+Inf": {counter(at{0, 60}), counter(at{0, 60})},
	}
	genA, genB := counter(at{0, 600}), counter(at{0, 1200})
	kvA, kvB, runA, runB := 0.5, 0.8, 3.0, 5.0
	preA, finA, finB := counter(at{0, 3}), counter(at{0, 60}), counter(at{0, 60})
	in := []series{}
	for _, le := range []string{"0.1", "0.25", "+Inf"} {
		in = append(in,
			series{name("vllm_time_to_first_token_seconds_bucket", a, "le", le), ttft[le][0]},
			series{name("vllm_time_to_first_token_seconds_bucket", b, "le", le), ttft[le][1]})
	}
	in = append(in,
		series{name("vllm_generation_tokens_total", a), genA},
		series{name("vllm_generation_tokens_total", b), genB},
		series{name("vllm_kv_cache_usage_ratio", a), gauge(at{0, kvA})},
		series{name("vllm_kv_cache_usage_ratio", b), gauge(at{0, kvB})},
		series{name("vllm_requests_running", a), gauge(at{0, runA})},
		series{name("vllm_requests_running", b), gauge(at{0, runB})},
		series{name("vllm_preemptions_total", a), preA},
		series{name("vllm_requests_finished_total", a, "finished_reason", "stop"), finA},
		series{name("vllm_requests_finished_total", b, "finished_reason", "stop"), finB},
		// a stuck replica of another model preempts but finishes nothing,
		// and its prefix cache sees no lookups: no ratio (not a huge one,
		// not NaN)
		series{name("vllm_preemptions_total", stuck), counter(at{0, 5})},
		series{name("vllm_requests_finished_total", stuck, "finished_reason", "stop"), gauge(at{0, 7})},
		series{name("vllm_prefix_cache_hits_total", stuck), gauge(at{0, 0})},
		series{name("vllm_prefix_cache_queries_total", stuck), gauge(at{0, 0})},
	)
	s := scenario{name: "two replicas of one model aggregate into one per-model series; histograms are summed by le before the quantile", step: step, end: mins(20), series: in}
	const w = 5 * time.Minute
	check := mins(10)
	var bs []bucket // summed by le across replicas, then the quantile
	for _, le := range []struct {
		s string
		v float64
	}{{"0.1", 0.1}, {"0.25", 0.25}, {"+Inf", math.Inf(1)}} {
		bs = append(bs, bucket{le.v, s.sumRate(check, w, ttft[le.s][0], ttft[le.s][1])})
	}
	llama := lbl("model", "llama")
	expr := func(record string, v ...float64) testutil.ExprTest {
		e := testutil.ExprTest{Expr: record, EvalTime: testutil.Duration(check)}
		for _, x := range v {
			e.ExpSamples = append(e.ExpSamples, testutil.ExpSample{Labels: name(record, llama), Value: x})
		}
		return e
	}
	return s.test(nil,
		expr("model:vllm_time_to_first_token_seconds:p99_rate5m", bucketQuantile(0.99, bs)),
		expr("model:vllm_generation_tokens:rate5m", s.sumRate(check, w, genA, genB)),
		expr("model:vllm_kv_cache_usage_ratio:max", math.Max(kvA, kvB)),
		expr("model:vllm_kv_cache_usage_ratio:avg", (kvA+kvB)/2),
		expr("model:vllm_replicas:count", 2),
		expr("model:vllm_requests_running:sum", runA+runB),
		expr("model:vllm_preemptions_per_request:ratio_rate5m", s.sumRate(check, w, preA)/s.sumRate(check, w, finA, finB)),
		expr("model:vllm_prefix_cache_hit:ratio_rate5m"),
	)
}

func fleetVerdictsCase(t testing.TB) testutil.RuleTest {
	// two replicas of llama: the worst replica's SLO verdicts per model,
	// and the mean queue time over both
	a, b := replica("a", "model", "llama"), replica("b", "model", "llama")
	slo := func(r map[string]string, kv ...string) map[string]string {
		return lbl(append(append(flatten(r), "slo", "ttft-p99"), kv...)...)
	}
	queueA, queueB := counter(at{0, 60}), counter(at{0, 30})
	sumA, sumB := counter(at{0, 60 * 0.2}), counter(at{0, 30 * 0.5})
	in := []series{
		{name("vllm_slo_error_budget_remaining_ratio", slo(a)), gauge(at{0, 0.9})},
		{name("vllm_slo_error_budget_remaining_ratio", slo(b)), gauge(at{0, 0.4})},
		{name("vllm_slo_burn_rate", slo(a, "window", "1h")), gauge(at{0, 2})},
		{name("vllm_slo_burn_rate", slo(b, "window", "1h")), gauge(at{0, 16})},
		{name("vllm_slo_alert_state", slo(a, "severity", "critical")), gauge(at{0, 0})},
		{name("vllm_slo_alert_state", slo(b, "severity", "critical")), gauge(at{0, 1})},
		{name("vllm_bottleneck", a, "class", "queueing"), gauge(at{0, 0})},
		{name("vllm_bottleneck", b, "class", "queueing"), gauge(at{0, 1})},
		{name("vllm_request_queue_time_seconds_count", a), queueA},
		{name("vllm_request_queue_time_seconds_count", b), queueB},
		{name("vllm_request_queue_time_seconds_sum", a), sumA},
		{name("vllm_request_queue_time_seconds_sum", b), sumB},
	}
	s := scenario{name: "the exporters' verdicts per model are the worst replica's; phase means are over every replica", step: step, end: mins(15), series: in}
	check := mins(10)
	expr := func(record string, v float64, kv ...string) testutil.ExprTest {
		return testutil.ExprTest{Expr: record, EvalTime: testutil.Duration(check),
			ExpSamples: []testutil.ExpSample{{Labels: name(record, lbl(append([]string{"model", "llama"}, kv...)...)), Value: v}}}
	}
	const w = 5 * time.Minute
	return s.test(nil,
		expr("model:vllm_slo_error_budget_remaining_ratio:min", 0.4, "slo", "ttft-p99"),
		expr("model:vllm_slo_burn_rate:max", 16, "slo", "ttft-p99", "window", "1h"),
		expr("model:vllm_slo_alert_state:max", 1, "slo", "ttft-p99", "severity", "critical"),
		expr("model:vllm_bottleneck:max", 1, "class", "queueing"),
		expr("model:vllm_request_queue_time_seconds:mean_rate5m", s.sumRate(check, w, sumA, sumB)/s.sumRate(check, w, queueA, queueB)),
	)
}
