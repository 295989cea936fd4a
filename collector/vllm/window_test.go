package vllm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

// v1Series names one series of the V1 fixture.
func v1Series(name string, extra ...string) string {
	labels := `engine="0",`
	for _, e := range extra {
		labels += e + ","
	}
	return name + "{" + labels + `model_name="` + llama + `"}`
}

func ttftBucket(le string) string {
	return v1Series("vllm:time_to_first_token_seconds_bucket", `le="`+le+`"`)
}

// v1After60s is the V1 fixture one minute later: 1 more preemption, 6000
// prompt and 3000 generated tokens, 6000 prefix-cache queries of which 2000
// hit, 10 more "stop" and 2 more "length" finishes, and 12 TTFT observations:
// 2 in (0.04,0.06], 1 in (0.06,0.08], 3 in (0.08,0.1], 4 in (0.1,0.25],
// 1 in (0.25,0.5], 1 in (1,2.5].
func v1After60s(t *testing.T, base []byte) []byte {
	vals := map[string]string{
		v1Series("vllm:num_preemptions_total"):                             "4.0",
		v1Series("vllm:prompt_tokens_total"):                               "840665.0",
		v1Series("vllm:generation_tokens_total"):                           "273297.0",
		v1Series("vllm:prefix_cache_queries_total"):                        "840665.0",
		v1Series("vllm:prefix_cache_hits_total"):                           "262320.0",
		v1Series("vllm:request_success_total", `finished_reason="stop"`):   "1168.0",
		v1Series("vllm:request_success_total", `finished_reason="length"`): "92.0",
		ttftBucket("0.06"): "159.0", ttftBucket("0.08"): "160.0", ttftBucket("0.1"): "163.0",
		v1Series("vllm:time_to_first_token_seconds_sum"):   "528.415928950481",
		v1Series("vllm:time_to_first_token_seconds_count"): "1268.0",
	}
	// Cumulative: 157+2=159, 294+3=297, 444+6=450, 930+10=940, 996+11=1007,
	// 1024+11, 1058+11, 1251+12, and +12 from 5.0 up.
	vals[ttftBucket("0.08")] = "297.0"
	vals[ttftBucket("0.1")] = "450.0"
	vals[ttftBucket("0.25")] = "940.0"
	vals[ttftBucket("0.5")] = "1007.0"
	vals[ttftBucket("0.75")] = "1035.0"
	vals[ttftBucket("1.0")] = "1069.0"
	vals[ttftBucket("2.5")] = "1263.0"
	for _, le := range []string{"5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "160.0", "640.0", "2560.0", "+Inf"} {
		vals[ttftBucket(le)] = "1268.0"
	}
	return withValues(t, base, vals)
}

func TestWindowOverFixtureSequence(t *testing.T) {
	base := fixture(t, "vllm-main-2026-08-v1.txt")
	later := v1After60s(t, base)
	srv := newFakeVLLM(t, base, "text/plain; version=0.0.4")
	s := newTestScraper(t, srv.URL, nil)

	scrapeAt(s, t0)
	if w := s.Window(time.Minute); w != nil {
		t.Fatalf("a single scrape has no window, got %v", w)
	}
	scrapeAt(s, t0.Add(30*time.Second)) // unchanged body
	srv.set(later, nil)
	scrapeAt(s, t0.Add(60*time.Second))

	d := s.Window(time.Minute)[llama]
	if d == nil {
		t.Fatal("no 1m window after 60s of history")
	}
	if !d.Start.Equal(t0) || !d.End.Equal(t0.Add(time.Minute)) {
		t.Fatalf("window spans %v..%v, want t0..t0+1m", d.Start, d.End)
	}
	wantValue(t, "preemptions/s", d.PreemptionsPerSecond, 1.0/60)
	wantValue(t, "preemptions/request", d.PreemptionsPerRequest, 1.0/12) // 1 preemption / 12 finished
	wantValue(t, "prefix hit ratio", d.PrefixCacheHitRatio, 2000.0/6000)
	wantValue(t, "prompt tokens/s", d.PromptTokensPerSecond, 6000.0/60)
	wantValue(t, "generation tokens/s", d.GenerationTokensPerSecond, 3000.0/60)
	wantValue(t, "requests/s", d.RequestsPerSecond, 12.0/60)
	for reason, want := range map[string]float64{"stop": 10.0 / 60, "length": 2.0 / 60, "abort": 0, "error": 0, "repetition": 0} {
		if got := d.FinishedPerSecondByReason[reason]; !approx(got, want) {
			t.Errorf("finished/s %s = %v, want %v", reason, got, want)
		}
	}
	ttft := d.Quantiles[snapshot.TTFT]
	// 12 observations, cumulative deltas 0.06:2 0.08:3 0.1:6 0.25:10 0.5:11 1:11 2.5:12.
	wantValue(t, "ttft p50", ttft[0.5], 0.1)   // rank 6: top of (0.08,0.1]
	wantValue(t, "ttft p90", ttft[0.9], 0.45)  // rank 10.8: 0.25 + 0.25*0.8/1
	wantValue(t, "ttft p95", ttft[0.95], 1.6)  // rank 11.4: 1 + 1.5*0.4/1
	wantValue(t, "ttft p99", ttft[0.99], 2.32) // rank 11.88: 1 + 1.5*0.88/1
	// Histograms that saw nothing in the window: absent, not 0, not NaN.
	wantAbsent(t, "e2e p50", d.Quantiles[snapshot.E2E][0.5])
	if c := d.Deltas[snapshot.TTFT].Count; c != 12 {
		t.Errorf("ttft delta count = %v, want 12", c)
	}
	if w := s.Window(5 * time.Minute); w != nil {
		t.Errorf("5m window with 1m of history: got %v, want nil", w)
	}
	// A window that is not configured is derived on demand from the history.
	if w := s.Window(30 * time.Second)[llama]; w == nil || !w.Start.Equal(t0.Add(30*time.Second)) {
		t.Errorf("30s window = %+v, want one starting at t0+30s", w)
	}

	// The same values as exported series (0.45, 1.6 and 2.32 as float64
	// interpolation rounds them, as PromQL would print them). A summary:
	// windowed quantiles, cumulative _sum/_count (TTFT's new totals);
	// e2e saw nothing in the window, so it has no quantile lines at all.
	compareNoHelp(t, s, `
# TYPE vllm_time_to_first_token_window_seconds summary
vllm_time_to_first_token_window_seconds_sum{model="`+llama+`",window="1m"} 528.415928950481
vllm_time_to_first_token_window_seconds_count{model="`+llama+`",window="1m"} 1268
vllm_time_to_first_token_window_seconds{model="`+llama+`",quantile="0.5",window="1m"} 0.1
vllm_time_to_first_token_window_seconds{model="`+llama+`",quantile="0.9",window="1m"} 0.4500000000000002
vllm_time_to_first_token_window_seconds{model="`+llama+`",quantile="0.95",window="1m"} 1.5999999999999979
vllm_time_to_first_token_window_seconds{model="`+llama+`",quantile="0.99",window="1m"} 2.3199999999999985
# TYPE vllm_prompt_tokens_per_second gauge
vllm_prompt_tokens_per_second{model="`+llama+`",window="1m"} 100
# TYPE vllm_prefix_cache_hit_ratio gauge
vllm_prefix_cache_hit_ratio{model="`+llama+`",window="1m"} 0.3333333333333333
# TYPE vllm_requests_finished_per_second gauge
vllm_requests_finished_per_second{finished_reason="abort",model="`+llama+`",window="1m"} 0
vllm_requests_finished_per_second{finished_reason="error",model="`+llama+`",window="1m"} 0
vllm_requests_finished_per_second{finished_reason="length",model="`+llama+`",window="1m"} 0.03333333333333333
vllm_requests_finished_per_second{finished_reason="repetition",model="`+llama+`",window="1m"} 0
vllm_requests_finished_per_second{finished_reason="stop",model="`+llama+`",window="1m"} 0.16666666666666666
# TYPE vllm_e2e_request_latency_window_seconds summary
vllm_e2e_request_latency_window_seconds_sum{model="`+llama+`",window="1m"} 7163.580518089371
vllm_e2e_request_latency_window_seconds_count{model="`+llama+`",window="1m"} 1250
`, "vllm_time_to_first_token_window_seconds", "vllm_prompt_tokens_per_second", "vllm_prefix_cache_hit_ratio",
		"vllm_requests_finished_per_second", "vllm_e2e_request_latency_window_seconds")
}

// smallV1 is a freshly started single-engine V1 server: what a restarted
// vLLM shows.
func smallV1(preempt, prompt, gen, stop float64, ttft [3]float64, ttftSum float64) []byte {
	return fmt.Appendf(nil, `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 1.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} %v
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} %v
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} %v
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 0.0
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 0.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} %v
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} %v
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="m"} %v
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} %v
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} %v
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} %v
`, preempt, prompt, gen, stop, ttft[0], ttft[1], ttft[2], ttft[2], ttftSum)
}

func TestWindowCounterResetMidWindow(t *testing.T) {
	before := smallV1(5, 100000, 50000, 400, [3]float64{100, 380, 400}, 150)
	// vLLM restarted 20s before the end: everything counts from zero again.
	after := smallV1(0, 500, 200, 2, [3]float64{1, 3, 4}, 2.5)
	srv := newFakeVLLM(t, before, "text/plain")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	scrapeAt(s, t0.Add(30*time.Second))
	srv.set(after, nil)
	scrapeAt(s, t0.Add(60*time.Second))

	d := s.Window(time.Minute)["m"]
	if d == nil {
		t.Fatal("no window")
	}
	// Newer < older: the newer value is the increase since the restart.
	wantValue(t, "prompt tokens/s", d.PromptTokensPerSecond, 500.0/60)
	wantValue(t, "generation tokens/s", d.GenerationTokensPerSecond, 200.0/60)
	wantValue(t, "preemptions/s", d.PreemptionsPerSecond, 0)
	wantValue(t, "requests/s", d.RequestsPerSecond, 2.0/60)
	wantValue(t, "preemptions/request", d.PreemptionsPerRequest, 0)
	// The restarted histogram: 1 <= 0.1, 2 in (0.1,1], 1 above.
	// p50: rank 2 -> 0.1 + 0.9*(1/2) = 0.55; p99: rank 3.96 > 3 -> highest finite bound 1.
	wantValue(t, "ttft p50", d.Quantiles[snapshot.TTFT][0.5], 0.55)
	wantValue(t, "ttft p99", d.Quantiles[snapshot.TTFT][0.99], 1)
	// No queries in the window: no ratio.
	wantAbsent(t, "prefix hit ratio", d.PrefixCacheHitRatio)
}

func TestWindowEmpty(t *testing.T) {
	body := smallV1(1, 10, 10, 1, [3]float64{1, 1, 1}, 0.05)
	srv := newFakeVLLM(t, body, "text/plain")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	scrapeAt(s, t0.Add(time.Minute))
	d := s.Window(time.Minute)["m"]
	if d == nil {
		t.Fatal("no window")
	}
	wantValue(t, "requests/s", d.RequestsPerSecond, 0)
	wantValue(t, "prompt tokens/s", d.PromptTokensPerSecond, 0)
	wantAbsent(t, "preemptions/request", d.PreemptionsPerRequest)
	wantAbsent(t, "prefix hit ratio", d.PrefixCacheHitRatio)
	for _, q := range Quantiles {
		wantAbsent(t, fmt.Sprintf("ttft q%v", q), d.Quantiles[snapshot.TTFT][q])
	}
	// And nothing (no NaN, no 0) is exported for them: the summary keeps
	// only its cumulative _sum and _count.
	compareNoHelp(t, s, `
# TYPE vllm_time_to_first_token_window_seconds summary
vllm_time_to_first_token_window_seconds_sum{model="m",window="1m"} 0.05
vllm_time_to_first_token_window_seconds_count{model="m",window="1m"} 1
`, "vllm_time_to_first_token_window_seconds", "vllm_preemptions_per_request_ratio", "vllm_prefix_cache_hit_ratio")
}

func TestWindowNotFreshAfterFailure(t *testing.T) {
	body := smallV1(1, 10, 10, 1, [3]float64{1, 1, 1}, 0.05)
	srv := newFakeVLLM(t, body, "text/plain")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	scrapeAt(s, t0.Add(30*time.Second))
	srv.set(nil, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "engine dead", http.StatusServiceUnavailable)
	})
	scrapeAt(s, t0.Add(60*time.Second))
	if w := s.Window(time.Minute); w != nil {
		t.Fatalf("window ending in a failed scrape: %v, want nil", w)
	}
	compareNoHelp(t, s, "", "vllm_prompt_tokens_per_second", "vllm_requests_finished_per_second")

	// Back up 5s later: the newest success at least 57.5s older is t0.
	srv.set(body, nil)
	scrapeAt(s, t0.Add(65*time.Second))
	if d := s.Window(time.Minute)["m"]; d == nil || !d.Start.Equal(t0) {
		t.Fatalf("window after recovery = %+v", d)
	}
}

func TestWindowDoesNotStretchOverAGap(t *testing.T) {
	body := smallV1(1, 10, 10, 1, [3]float64{1, 1, 1}, 0.05)
	srv := newFakeVLLM(t, body, "text/plain")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	srv.set(nil, func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "", http.StatusBadGateway) })
	for i := 1; i < 24; i++ {
		scrapeAt(s, t0.Add(time.Duration(i)*5*time.Second))
	}
	srv.set(body, nil)
	scrapeAt(s, t0.Add(2*time.Minute))
	// The only earlier success is 2m old: not a 1m window.
	if w := s.Window(time.Minute); w != nil {
		t.Fatalf("1m window over a 2m gap: %v", w)
	}
}

func TestHistoryIsBounded(t *testing.T) {
	body := smallV1(1, 10, 10, 1, [3]float64{1, 1, 1}, 0.05)
	srv := newFakeVLLM(t, body, "text/plain")
	s := newTestScraper(t, srv.URL, nil)
	for i := range 400 { // 400 scrapes, 33 minutes of virtual time
		scrapeAt(s, t0.Add(time.Duration(i)*5*time.Second))
	}
	s.histMu.RLock()
	n := len(s.history)
	s.histMu.RUnlock()
	// Largest window 5m + 2 intervals at 5s: 62 intervals, 63 snapshots.
	if n > 63 {
		t.Fatalf("history holds %d snapshots, want <= 63", n)
	}
	if d := s.Window(5 * time.Minute)["m"]; d == nil {
		t.Fatal("pruning removed the 5m window's start")
	}
}

// A reader of Window over hours gets a thinned history
// that reaches back that far, and memory stays bounded.
func TestLongReaderWindow(t *testing.T) {
	srv := newFakeVLLM(t, nil, "text/plain")
	s := newTestScraper(t, srv.URL, nil)
	s.SetReaders(time.Hour)
	if s.Window(time.Hour) != nil {
		t.Fatal("window before any scrape")
	}
	// 10 prompt tokens and one finished request per 5s scrape, for 1h10m.
	const n = 14 * 60
	for i := range n + 1 {
		srv.set(smallV1(0, float64(10*i), float64(5*i), float64(i), [3]float64{float64(i), float64(i), float64(i)}, 0.05*float64(i)), nil)
		scrapeAt(s, t0.Add(time.Duration(i)*5*time.Second))
	}
	d := s.Window(time.Hour)["m"]
	if d == nil {
		t.Fatal("no 1h window with a 1h reader")
	}
	// The start is within one coarse step (1h/720 = 5s) plus one interval of end-1h.
	if span := d.End.Sub(d.Start); span < time.Hour-10*time.Second || span > time.Hour+10*time.Second {
		t.Fatalf("1h window spans %v", span)
	}
	wantValue(t, "prompt tokens/s over 1h", d.PromptTokensPerSecond, 2) // 10 per 5s
	wantValue(t, "requests/s over 1h", d.RequestsPerSecond, 0.2)        // 1 per 5s
	s.histMu.RLock()
	kept := len(s.history)
	s.histMu.RUnlock()
	// 5m10s at full resolution (63) + at most 720 coarse snapshots.
	if kept > 63+coarseSnapshots {
		t.Fatalf("history holds %d snapshots", kept)
	}
	// Beyond the retention: nothing, rather than a shorter window.
	if w := s.Window(2 * time.Hour); w != nil {
		t.Fatal("2h window from 1h of retention")
	}
}

func TestLongRetentionIsThinned(t *testing.T) {
	srv := newFakeVLLM(t, smallV1(0, 1, 1, 1, [3]float64{1, 1, 1}, 0.05), "text/plain")
	s := newTestScraper(t, srv.URL, nil)
	s.SetReaders(72 * time.Hour)
	for i := range 3000 { // 4h10m at 5s
		scrapeAt(s, t0.Add(time.Duration(i)*5*time.Second))
	}
	s.histMu.RLock()
	kept := len(s.history)
	s.histMu.RUnlock()
	// 72h/720 = 6 min steps: 4h10m of history is ~40 coarse + 63 fine.
	if kept > 63+45 {
		t.Fatalf("history holds %d snapshots, want about 103", kept)
	}
	if d := s.Window(4 * time.Hour)["m"]; d == nil {
		t.Fatal("no 4h window")
	}
}

// A restart inside the window after which the counters already grew past
// their old values: the two ends alone show no reset (and an increase of
// 120-100 = 20 prompt tokens). Like PromQL's increase(), the snapshots in
// between reveal it: 50 tokens before the restart plus 120 since.
func TestWindowResetHiddenBetweenTheEnds(t *testing.T) {
	srv := newFakeVLLM(t, smallV1(2, 100, 40, 10, [3]float64{10, 10, 10}, 1), "text/plain")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	srv.set(smallV1(3, 150, 60, 15, [3]float64{15, 15, 15}, 1.5), nil)
	scrapeAt(s, t0.Add(20*time.Second))
	// vLLM restarts; the next scrape fails, the one after sees small values.
	srv.set(nil, func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "", http.StatusBadGateway) })
	scrapeAt(s, t0.Add(30*time.Second))
	srv.set(smallV1(1, 30, 5, 2, [3]float64{0, 2, 2}, 3), nil)
	scrapeAt(s, t0.Add(40*time.Second))
	// 20 seconds later it has done more than the old process had.
	srv.set(smallV1(3, 120, 70, 12, [3]float64{0, 12, 12}, 18), nil)
	scrapeAt(s, t0.Add(60*time.Second))

	d := s.Window(time.Minute)["m"]
	if d == nil {
		t.Fatal("no window")
	}
	wantValue(t, "prompt tokens/s", d.PromptTokensPerSecond, (50+120)/60.0)
	wantValue(t, "generation tokens/s", d.GenerationTokensPerSecond, (20+70)/60.0)
	wantValue(t, "preemptions/s", d.PreemptionsPerSecond, (1+3)/60.0)
	wantValue(t, "requests/s", d.RequestsPerSecond, (5+12)/60.0)
	wantValue(t, "preemptions/request", d.PreemptionsPerRequest, 4.0/17)
	// TTFT: 5 observations <= 0.1 before the restart, 12 in (0.1,1] after.
	// p50 of 17: rank 8.5 -> 0.1 + 0.9*(3.5/12).
	if c := d.Deltas[snapshot.TTFT].Count; c != 17 {
		t.Errorf("ttft delta count = %v, want 17", c)
	}
	wantValue(t, "ttft p50", d.Quantiles[snapshot.TTFT][0.5], 0.1+0.9*3.5/12)
	if sum := d.Deltas[snapshot.TTFT].Sum; !approx(sum, 0.5+18) {
		t.Errorf("ttft delta sum = %v, want 18.5", sum)
	}
}

// V0 has no prefix-cache counters, only hit-rate gauges that read -1 while
// prefix caching is off (its default): no hit ratio, never -1 or 0.
func TestWindowV0HasNoPrefixHitRatio(t *testing.T) {
	srv := newFakeVLLM(t, fixture(t, "vllm-0.7.3-v0-multiprocess.txt"), "text/plain; version=0.0.4")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	scrapeAt(s, t0.Add(time.Minute))
	d := s.Window(time.Minute)[llama]
	if d == nil {
		t.Fatal("no window")
	}
	wantAbsent(t, "prefix hit ratio", d.PrefixCacheHitRatio)
	wantValue(t, "requests/s", d.RequestsPerSecond, 0)
	compareNoHelp(t, s, "", "vllm_prefix_cache_hit_ratio", "vllm_prefix_cache_queries_total", "vllm_prefix_cache_hits_total")
}

// scaledBody is body with every counter and histogram sample multiplied
// by k, gauges as they are: counters and cumulative bucket counts grow with
// k (a smaller k is a restart).
func scaledBody(t *testing.T, body []byte, k float64) []byte {
	t.Helper()
	var out bytes.Buffer
	scale := false
	for _, line := range strings.SplitAfter(string(body), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if strings.HasPrefix(line, "# TYPE ") {
			typ := strings.TrimSpace(line[i+1:])
			scale = typ == "counter" || typ == "histogram"
		}
		if strings.HasPrefix(line, "#") || i < 0 || !scale {
			out.WriteString(line)
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[i+1:]), 64)
		if err != nil {
			t.Fatalf("value of %q: %v", line, err)
		}
		fmt.Fprintf(&out, "%s %v\n", line[:i], v*k)
	}
	return out.Bytes()
}

// slimmedAway reads the fields pastStore.slim drops from the history, by name.
var slimmedAway = map[string]func(*snapshot.Model) any{
	"PerEngine":             func(m *snapshot.Model) any { return m.PerEngine },
	"CacheConfig":           func(m *snapshot.Model) any { return m.CacheConfig },
	"ByPriority":            func(m *snapshot.Model) any { return m.ByPriority },
	"WaitingByReason":       func(m *snapshot.Model) any { return m.WaitingByReason },
	"Sleep.Resources":       func(m *snapshot.Model) any { return m.Sleep.Resources },
	"LoRA.Running":          func(m *snapshot.Model) any { return m.LoRA.Running },
	"LoRA.Waiting":          func(m *snapshot.Model) any { return m.LoRA.Waiting },
	"KVOffloadLoadBytes":    func(m *snapshot.Model) any { return m.KVOffloadLoadBytes },
	"KVOffloadStoreBytes":   func(m *snapshot.Model) any { return m.KVOffloadStoreBytes },
	"KVOffloadLoadSeconds":  func(m *snapshot.Model) any { return m.KVOffloadLoadSeconds },
	"KVOffloadStoreSeconds": func(m *snapshot.Model) any { return m.KVOffloadStoreSeconds },
	"MooncakeOps":           func(m *snapshot.Model) any { return m.MooncakeOps },
	"MooncakeOpErrors":      func(m *snapshot.Model) any { return m.MooncakeOpErrors },
	"MooncakeKeys":          func(m *snapshot.Model) any { return m.MooncakeKeys },
	"MooncakeBytes":         func(m *snapshot.Model) any { return m.MooncakeBytes },
	"MooncakeFailedKeys":    func(m *snapshot.Model) any { return m.MooncakeFailedKeys },
}

// TestSlimmedHistoryDerivesTheSame: the history drops what only the newest
// snapshot is read for (per-engine gauges, by-label gauges, label sets),
// and every window derived from it equals the window derived from the
// snapshots as scraped. The body has every family the scraper reads
// (late-2026, two engines, priority, spec decode, NIXL, LoRA, admission,
// KV offload, Mooncake), scaled up at each scrape, with one restart.
func TestSlimmedHistoryDerivesTheSame(t *testing.T) {
	base := withFragment(t, dp2BodyWithout(t), "vllm-late-2026-decode-lora-fragment.txt",
		"kv-offload-both-fragment.txt", "mooncake-store-fragment.txt")
	srv := newFakeVLLM(t, base, "text/plain; version=1.0.0; charset=utf-8")
	windows := []time.Duration{time.Minute, 5 * time.Minute}
	s := newTestScraper(t, srv.URL, func(o *Options) { o.Windows, o.PerPriority = windows, true })
	var scraped []*snapshot.VLLM // each snapshot as the scrape made it
	const steps = 90
	for i := range steps {
		k := 1 + float64(i)/20
		if i >= 40 {
			k = float64(i-39) / 20 // vLLM restarted: every counter starts again
		}
		srv.set(scaledBody(t, base, k), nil)
		scrapeAt(s, t0.Add(time.Duration(i)*5*time.Second))
		scraped = append(scraped, s.Latest())
	}
	newest := s.Latest().Models[qwen]
	if newest == nil {
		t.Fatalf("no %s in the newest snapshot", qwen)
	}
	for field, get := range slimmedAway {
		if reflect.ValueOf(get(newest)).IsNil() {
			t.Errorf("the newest snapshot has no %s: the body does not exercise its slimming", field)
		}
	}
	s.histMu.RLock()
	history := slices.Clone(s.history)
	s.histMu.RUnlock()
	if len(history) < steps/2 {
		t.Fatalf("history holds %d snapshots", len(history))
	}
	for j, h := range history[:len(history)-1] {
		for field, get := range slimmedAway {
			if !reflect.ValueOf(get(h.Models[qwen])).IsNil() {
				t.Errorf("history[%d] keeps %s", j, field)
			}
		}
	}
	for _, d := range windows {
		got := s.Window(d)
		want := windowOf(scraped[len(scraped)-len(history):], d, s.tolerance(d))
		if got == nil || got[qwen] == nil || len(got[qwen].Deltas) == 0 {
			t.Fatalf("%v window: %+v", d, got)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v window from the slimmed history differs from the one from the scraped snapshots:\n got %+v\nwant %+v", d, *got[qwen], *want[qwen])
		}
	}
}

// The readers' windows (the classifier's, the probes' TTFT gap) are derived
// once per scrape, not again on every read, and are not exported; a reload
// that replaces them derives the new ones and lets the history shrink.
func TestReaderWindowsAreDerivedOncePerScrape(t *testing.T) {
	srv := newFakeVLLM(t, nil, "text/plain")
	s := newTestScraper(t, srv.URL, func(o *Options) { o.Readers = []time.Duration{2 * time.Minute, time.Minute} })
	i := 0
	scrapeFor := func(d time.Duration) {
		for range int(d / (5 * time.Second)) {
			srv.set(smallV1(0, float64(10*i), float64(5*i), float64(i), [3]float64{float64(i), float64(i), float64(i)}, 0.05*float64(i)), nil)
			scrapeAt(s, t0.Add(time.Duration(i)*5*time.Second))
			i++
		}
	}
	same := func(a, b map[string]*snapshot.Derived) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	derivedOnce := func(d time.Duration) {
		t.Helper()
		first := s.Window(d)
		if first["m"] == nil {
			t.Fatalf("no %v window", d)
		}
		wantValue(t, fmt.Sprintf("prompt tokens/s over %v", d), first["m"].PromptTokensPerSecond, 2)
		if !same(first, s.Window(d)) {
			t.Errorf("the %v window is derived again on each read", d)
		}
		scrapeFor(5 * time.Second)
		if next := s.Window(d); same(first, next) || next["m"] == nil || next["m"].End == first["m"].End {
			t.Errorf("the %v window was not derived by the next scrape", d)
		}
	}
	scrapeFor(3 * time.Minute)
	derivedOnce(2 * time.Minute)
	derivedOnce(time.Minute) // also among Windows

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	if out := string(gatherText(t, reg)); strings.Contains(out, `window="2m"`) {
		t.Error("a reader's window is exported")
	}

	s.SetReaders(10 * time.Minute)
	scrapeFor(11 * time.Minute)
	derivedOnce(10 * time.Minute)
	// Shortened again: the history no longer reaches back 10 minutes.
	s.SetReaders(2 * time.Minute)
	scrapeFor(5 * time.Second)
	if s.Window(10*time.Minute) != nil {
		t.Error("the history still reaches back 10m after the readers were shortened to 2m")
	}
	derivedOnce(2 * time.Minute)
}

// TestHistoryKeepsWhatWindowsNeed: the history levels off (full resolution
// over the largest window, at most coarseSnapshots beyond it, back to the
// retention), and only the newest snapshot keeps per-engine gauges and the
// cache config; the windows are unchanged by the slimming.
func TestHistoryKeepsWhatWindowsNeed(t *testing.T) {
	sim, err := vllmsim.New(vllmsim.Config{DataParallelSize: 2, VirtualClock: true, Seed: 1, LoadGen: true})
	if err != nil {
		t.Fatal(err)
	}
	sim.Advance(time.Minute)
	body := sim.Metrics()
	s := New(Options{URL: "http://vllm.test", Interval: 5 * time.Second, Readers: []time.Duration{time.Hour},
		Client: &http.Client{Transport: streamTransport(func() (io.Reader, http.Header) {
			return bytes.NewReader(body), http.Header{"Content-Type": {"text/plain"}}
		})}}, nil)
	fine := int((5*time.Minute+10*time.Second)/(5*time.Second)) + 1
	most := 0
	for i := range int(2 * time.Hour / (5 * time.Second)) {
		s.ScrapeOnce(context.Background(), t0.Add(time.Duration(i)*5*time.Second))
		s.histMu.RLock()
		n := len(s.history)
		for j, h := range s.history[:n-1] {
			for name, m := range h.Models {
				if m.PerEngine != nil || m.CacheConfig != nil {
					t.Fatalf("scrape %d: history[%d] model %s keeps per-engine gauges or cache config", i, j, name)
				}
			}
		}
		s.histMu.RUnlock()
		most = max(most, n)
	}
	if l := s.Latest(); l.Models["meta-llama/Llama-3.1-8B-Instruct"] == nil || l.Models["meta-llama/Llama-3.1-8B-Instruct"].PerEngine == nil {
		t.Fatalf("the newest snapshot lost its per-engine gauges: %+v", l)
	}
	if most > fine+coarseSnapshots+2 {
		t.Fatalf("history reached %d snapshots, want at most %d full-resolution + %d coarse", most, fine, coarseSnapshots)
	}
	for _, d := range []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour} {
		if w := s.Window(d); w == nil {
			t.Fatalf("no %v window after 2h", d)
		}
	}
}

// vLLM creates an admission_rejections_total child on the first rejection
// of its reason: a window whose start has no such child counts it from 0,
// so the first rejections show at once. A server without the family has
// no rejection rate at all; the NIXL failure and expiry counters give
// their rates over the window.
func TestWindowRatesOfAdmissionAndTransferCounters(t *testing.T) {
	at := func(s int, m *snapshot.Model) *snapshot.VLLM {
		m.Name = "m"
		return &snapshot.VLLM{Up: true, Time: t0.Add(time.Duration(s) * time.Second), Models: map[string]*snapshot.Model{"m": m}}
	}
	span := []*snapshot.VLLM{
		at(0, &snapshot.Model{KVTransferFailures: snapshot.Some(2), KVTransferExpiredRequests: snapshot.Some(0)}),
		at(30, &snapshot.Model{RejectedByReason: map[string]float64{"max_num_queued_reqs": 6}}),
		at(60, &snapshot.Model{RejectedByReason: map[string]float64{"max_num_queued_reqs": 9, "max_num_queued_tokens": 3},
			KVTransferFailures: snapshot.Some(8), KVTransferExpiredRequests: snapshot.Some(3)}),
	}
	dv := derive(time.Minute, span)["m"]
	wantValue(t, "rejections per second", dv.RejectedPerSecond, 12.0/60)
	wantValue(t, "transfer failures per second", dv.KVTransferFailuresPerSecond, 6.0/60)
	wantValue(t, "expired per second", dv.KVTransferExpiredPerSecond, 3.0/60)
	none := derive(time.Minute, []*snapshot.VLLM{at(0, &snapshot.Model{}), at(60, &snapshot.Model{})})["m"]
	wantAbsent(t, "rejections per second without admission control", none.RejectedPerSecond)
}
