package vllm

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	sharedtest "github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
)

// logLines is a log sink a test reads after scrapes.
type logLines struct{ bytes.Buffer }

func (l *logLines) count(re string) int {
	return len(regexp.MustCompile(re).FindAllString(l.String(), -1))
}

// vLLM families the table does not know are counted on each scrape and
// each new name is logged once per process, whatever it repeats.
func TestUnknownFamiliesAreCountedAndLoggedOnce(t *testing.T) {
	base := fixture(t, "vllm-main-2026-08-v1.txt")
	unknown := `# HELP vllm:brand_new_counter_total A family from a newer vLLM.
# TYPE vllm:brand_new_counter_total counter
vllm:brand_new_counter_total{engine="0",model_name="m"} 3.0
# HELP vllm:brand_new_counter_created A family from a newer vLLM.
# TYPE vllm:brand_new_counter_created gauge
vllm:brand_new_counter_created{engine="0",model_name="m"} 1.7e+09
# TYPE vllm:brand_new_seconds histogram
vllm:brand_new_seconds_bucket{engine="0",le="+Inf",model_name="m"} 1.0
vllm:brand_new_seconds_count{engine="0",model_name="m"} 1.0
vllm:brand_new_seconds_sum{engine="0",model_name="m"} 0.5
lmcache:not_vllm_total 1.0
`
	srv := newFakeVLLM(t, base, "text/plain; version=0.0.4; charset=utf-8")
	var logs logLines
	s := New(Options{URL: srv.URL, Timeout: 2 * time.Second}, log.NewLogfmtLogger(&logs))
	unknownGauge := func() float64 {
		t.Helper()
		for _, mf := range sharedtest.GatherAll(t, s) {
			if mf.GetName() == "vllm_exporter_vllm_unknown_families" {
				return mf.Metric[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no vllm_exporter_vllm_unknown_families")
		return 0
	}
	scrapeAt(s, t0)
	if got := unknownGauge(); got != 0 {
		t.Errorf("vLLM main 2026-08: %v unknown families, want 0 (every family of the tree has a row or is ignored)", got)
	}
	srv.set(append(slices.Clone(base), unknown...), nil)
	for i := 1; i <= 3; i++ {
		scrapeAt(s, t0.Add(time.Duration(i)*5*time.Second))
	}
	if got := unknownGauge(); got != 2 {
		t.Errorf("%v unknown families, want 2 (a counter with its _created, a histogram; lmcache:* is not vLLM's)", got)
	}
	for _, name := range []string{"vllm:brand_new_counter", "vllm:brand_new_seconds"} {
		if n := logs.count(`level=warn.*family=` + name + `\b`); n != 1 {
			t.Errorf("%s logged %d times over three scrapes, want once", name, n)
		}
	}
	srv.set(base, nil)
	scrapeAt(s, t0.Add(time.Minute))
	if got := unknownGauge(); got != 0 {
		t.Errorf("%v unknown families after they left the body, want 0", got)
	}
}

// VLLMExpectedMetricMissing means a family disappeared or one every vLLM
// sends is absent: a family this server never had is not missing, one it
// had and lost is, unless vLLM creates it on first use.
func TestExpectedMissingMeansDisappeared(t *testing.T) {
	full := fixture(t, "vllm-main-2026-08-v1.txt")
	srv := newFakeVLLM(t, full, "text/plain; version=0.0.4; charset=utf-8")
	s := New(Options{URL: srv.URL, Timeout: 2 * time.Second}, nil)
	scrapeAt(s, t0)
	if m := s.Latest().Missing; len(m) != 0 {
		t.Fatalf("missing %v on the full body", m)
	}
	without := dropFamilies(full, "vllm:time_to_first_token_seconds", "vllm:num_preemptions_total", "http_requests_total")
	srv.set(without, nil)
	scrapeAt(s, t0.Add(5*time.Second))
	// http_requests_total appears with the first request: not missing.
	if got, want := s.Latest().Missing, []string{"vllm:num_preemptions_total", "vllm:time_to_first_token_seconds"}; !slices.Equal(got, want) {
		t.Errorf("missing after they disappeared: %v, want %v", got, want)
	}
	compareNoHelp(t, s, `
# TYPE vllm_exporter_expected_metric_missing gauge
vllm_exporter_expected_metric_missing{metric="vllm:num_preemptions_total"} 1
vllm_exporter_expected_metric_missing{metric="vllm:time_to_first_token_seconds"} 1
`, "vllm_exporter_expected_metric_missing")

	// A fresh exporter watching the smaller body from its first scrape:
	// nothing is missing, and what it lacks that something reads is said.
	fresh := New(Options{URL: srv.URL, Timeout: 2 * time.Second}, nil)
	scrapeAt(fresh, t0)
	if m := fresh.Latest().Missing; len(m) != 0 {
		t.Errorf("a server never seen with them: missing %v, want none", m)
	}
	compareNoHelp(t, fresh, `
# TYPE vllm_exporter_vllm_family_absent gauge
vllm_exporter_vllm_family_absent{feeds="the TTFT SLO, the probes' server-side TTFT",metric="vllm:time_to_first_token_seconds"} 1
vllm_exporter_vllm_family_absent{feeds="the availability SLO (requests refused before the engine)",metric="http_requests_total"} 1
vllm_exporter_vllm_family_absent{feeds="the preempted-requests panel",metric="vllm:request_num_preemptions"} 1
vllm_exporter_vllm_family_absent{feeds="the preemption SLO, the KV-exhaustion verdict",metric="vllm:num_preemptions_total"} 1
`, "vllm_exporter_vllm_family_absent", "vllm_exporter_expected_metric_missing")

	// What every vLLM sends is missing from the first scrape.
	srv.set(dropFamilies(full, "vllm:num_requests_running"), nil)
	other := New(Options{URL: srv.URL, Timeout: 2 * time.Second}, nil)
	scrapeAt(other, t0)
	if got := other.Latest().Missing; !slices.Equal(got, []string{"vllm:num_requests_running"}) {
		t.Errorf("missing %v, want vllm:num_requests_running", got)
	}
}

// V0 creates histograms and labelled counters on first use: after a
// restart they are absent until the first request, which is no news.
func TestV0FamiliesCreatedOnFirstUseAreNotMissing(t *testing.T) {
	full := fixture(t, "vllm-0.7.3-v0-multiprocess.txt")
	srv := newFakeVLLM(t, full, "text/plain; version=0.0.4; charset=utf-8")
	s := New(Options{URL: srv.URL, Timeout: 2 * time.Second}, nil)
	scrapeAt(s, t0)
	restarted := dropFamilies(full, "vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds", "vllm:request_success_total")
	srv.set(restarted, nil)
	scrapeAt(s, t0.Add(5*time.Second))
	if m := s.Latest().Missing; len(m) != 0 {
		t.Errorf("V0 after a restart, before its first request: missing %v, want none", m)
	}
}

// llm-d's vLLM simulator stands in for vLLM in many CIs: its label and
// name variants read as vLLM's, and it gets no missing-family ticket for
// the families it never had.
func TestLLMDSimulatorReadsAsVLLM(t *testing.T) {
	body := fixture(t, "llm-d-inference-sim-0.10.2.txt")
	srv := newFakeVLLM(t, body, "text/plain; version=0.0.4; charset=utf-8; escaping=underscores")
	s := newTestScraper(t, srv.URL, nil)
	for i := range 4 {
		scrapeAt(s, t0.Add(time.Duration(i)*5*time.Second))
	}
	v := s.Latest()
	m := v.Models["Qwen/Qwen2.5-1.5B-Instruct"]
	if m == nil {
		t.Fatalf("models %v", v.Models)
	}
	if got := m.FinishedByReason; got["stop"] != 100 || got["length"] != 20 || len(got) != 2 {
		t.Errorf("finished by reason %v, want stop 100, length 20 (read from finish_reason)", got)
	}
	wantValue(t, "prefix hits (no _total)", m.PrefixHits, 119*128)
	wantValue(t, "prefix queries (no _total)", m.PrefixQueries, 120*200)
	if len(v.Missing) != 0 {
		t.Errorf("missing %v: a stand-in never had them", v.Missing)
	}
	compareNoHelp(t, s, `
# TYPE vllm_exporter_vllm_unknown_families gauge
vllm_exporter_vllm_unknown_families 0
# TYPE vllm_exporter_vllm_family_absent gauge
vllm_exporter_vllm_family_absent{feeds="VLLMDeferredLivelock and its verdict",metric="vllm:num_requests_waiting_by_reason"} 1
vllm_exporter_vllm_family_absent{feeds="VLLMEngineStalled (asleep is not stalled)",metric="vllm:engine_sleep_state"} 1
vllm_exporter_vllm_family_absent{feeds="VLLMGPUThrottlingTPOTDegraded (the TPOT SLO falls back to inter-token latency)",metric="vllm:request_time_per_output_token_seconds"} 1
vllm_exporter_vllm_family_absent{feeds="the availability SLO (requests refused before the engine)",metric="http_requests_total"} 1
vllm_exporter_vllm_family_absent{feeds="the preempted-requests panel",metric="vllm:request_num_preemptions"} 1
vllm_exporter_vllm_family_absent{feeds="the preemption SLO, the KV-exhaustion verdict",metric="vllm:num_preemptions_total"} 1
vllm_exporter_vllm_family_absent{feeds="the stall verdict (no step while requests run), the heartbeat panel",metric="vllm:iteration_tokens_total"} 1
`, "vllm_exporter_vllm_unknown_families", "vllm_exporter_vllm_family_absent", "vllm_exporter_vllm_unexpected_label_values")
}

// A label the row keeps but a sample lacks is read under "" and said so
// (vllm_exporter_vllm_unexpected_label_values), once per scrape.
func TestMissingLabelIsCounted(t *testing.T) {
	body := []byte(`# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 1.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{model_name="m"} 7.0
`)
	srv := newFakeVLLM(t, body, "text/plain; version=0.0.4; charset=utf-8")
	var logs logLines
	s := New(Options{URL: srv.URL, Timeout: 2 * time.Second}, log.NewLogfmtLogger(&logs))
	scrapeAt(s, t0)
	scrapeAt(s, t0.Add(5*time.Second))
	if got := s.Latest().Models["m"].FinishedByReason; got[""] != 7 {
		t.Errorf("finished %v, want 7 under \"\"", got)
	}
	compareNoHelp(t, s, `
# TYPE vllm_exporter_vllm_unexpected_label_values gauge
vllm_exporter_vllm_unexpected_label_values{label="finished_reason",metric="vllm:request_success_total"} 1
`, "vllm_exporter_vllm_unexpected_label_values")
	if n := logs.count(`level=warn.*vllm:request_success_total without its label finished_reason`); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
}

// dropFamilies is body without the samples and comments of the named
// families (and their _created families).
func dropFamilies(body []byte, names ...string) []byte {
	var out []string
	for _, l := range strings.SplitAfter(string(body), "\n") {
		keep := true
		for _, n := range names {
			b := strings.TrimSuffix(n, "_total")
			for _, p := range []string{n, b + "_created", b + "_bucket", b + "_sum", b + "_count"} {
				if strings.HasPrefix(l, p+"{") || strings.HasPrefix(l, p+" ") || strings.Contains(l, " "+p+" ") {
					keep = false
				}
			}
		}
		if keep {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, ""))
}

// vLLM's Rust front-end serves OpenMetrics and a subset of the families:
// read as vLLM, no missing-family ticket for what it never sends (the
// cache config, the sleep state, the heartbeat), and said which shipped
// readers lack their input.
func TestRustFrontEndSubsetIsNotMissing(t *testing.T) {
	sim := vllmsimtest.Start(t, vllmsim.Config{VirtualClock: true, LoadGen: true, Seed: 3, MetricsVersion: vllmsim.MetricsRust})
	s := newTestScraper(t, sim.URL(), nil)
	for range 4 {
		sim.Advance(5 * time.Second)
		scrapeAt(s, sim.Now())
	}
	v := s.Latest()
	m := v.Models[sim.Config().Models[0]]
	if !v.Up || m == nil || !m.GenerationTokens.OK || m.GenerationTokens.V == 0 || !m.Running.OK {
		t.Fatalf("up %v (%s), models %v", v.Up, v.Error, v.Models)
	}
	if len(v.Missing) != 0 {
		t.Errorf("missing %v: the Rust front-end never sends them", v.Missing)
	}
	if m.EngineSteps.OK {
		t.Errorf("engine steps %v from a body without vllm:iteration_tokens_total", m.EngineSteps)
	}
	compareNoHelp(t, s, `
# TYPE vllm_exporter_vllm_unknown_families gauge
vllm_exporter_vllm_unknown_families 0
# TYPE vllm_exporter_vllm_family_absent gauge
vllm_exporter_vllm_family_absent{feeds="VLLMEngineStalled (asleep is not stalled)",metric="vllm:engine_sleep_state"} 1
vllm_exporter_vllm_family_absent{feeds="the preempted-requests panel",metric="vllm:request_num_preemptions"} 1
vllm_exporter_vllm_family_absent{feeds="the roofline and capacity (the KV pool)",metric="vllm:cache_config_info"} 1
vllm_exporter_vllm_family_absent{feeds="the stall verdict (no step while requests run), the heartbeat panel",metric="vllm:iteration_tokens_total"} 1
`, "vllm_exporter_vllm_unknown_families", "vllm_exporter_vllm_family_absent")
}
