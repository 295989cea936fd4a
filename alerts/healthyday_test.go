package alerts

import (
	"fmt"
	"math"
	"math/rand"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// dayReplica is one vLLM replica's cumulative counters, one sample a minute.
type dayReplica struct {
	model, instance string
	// per family, per minute: cumulative value, or NaN where the replica
	// was not scraped (restarting)
	series map[string][]float64
}

// healthyDay simulates 24 hours of a fleet at one sample a minute:
// model "llama" on three replicas with a diurnal load (about 1 to 3
// requests/s in all), model "qwen" on one replica at 0.05 to 0.3 requests/s
// (the low-traffic guard's case). Every SLO sees binomial noise at a
// fraction of its budget, and the day holds what a healthy fleet goes
// through: one-minute latency spikes (a burst of long prompts: 8% to 33%
// slow), a two-minute preemption flurry under a traffic peak, and a
// rolling restart of the llama replicas at 14:00 (each gone for 3
// minutes, its counters restarting from zero, its in-flight requests
// aborted, its first minute slow on cold caches). breachAt > 0 adds a hard
// breach: half of llama's TTFT events bad for 10 minutes from that minute.
func healthyDay(minutes, breachAt int) []dayReplica {
	rng := rand.New(rand.NewSource(14))
	binom := func(n int, p float64) float64 {
		// normal approximation, clamped: cheap and deterministic
		mu, sd := float64(n)*p, math.Sqrt(float64(n)*p*(1-p))
		return math.Max(0, math.Min(float64(n), math.Round(mu+sd*rng.NormFloat64())))
	}
	load := func(m int) float64 { // 0.3 at night .. 1 at 15:00
		return 0.65 - 0.35*math.Cos(2*math.Pi*float64(m-180)/1440)
	}
	spikes := map[int]float64{200: 0.33, 430: 0.08, 615: 0.2, 890: 0.25, 1110: 0.15, 1300: 0.3}
	type rep struct {
		dayReplica
		cum       map[string]float64
		restartAt int // minute the replica goes away for 3 minutes
	}
	families := []string{"ttft", "ttft_good", "tpot", "tpot_good", "e2e", "e2e_good", "stop", "abort", "preempt"}
	var reps []*rep
	for i, spec := range []struct {
		model, inst string
		restart     int
	}{{"llama", "a:9470", 840}, {"llama", "b:9470", 846}, {"llama", "c:9470", 852}, {"qwen", "d:9470", -1}} {
		r := &rep{dayReplica: dayReplica{model: spec.model, instance: spec.inst, series: map[string][]float64{}}, cum: map[string]float64{}, restartAt: spec.restart}
		_ = i
		reps = append(reps, r)
	}
	for m := 0; m <= minutes; m++ {
		var up []*rep
		for _, r := range reps {
			if r.restartAt >= 0 && m >= r.restartAt && m < r.restartAt+3 {
				for _, f := range families {
					r.series[f] = append(r.series[f], math.NaN())
				}
				if m == r.restartAt {
					for _, f := range families {
						r.cum[f] = 0 // the new process starts from zero
					}
				}
				continue
			}
			up = append(up, r)
		}
		nLlama := 0
		for _, r := range up {
			if r.model == "llama" {
				nLlama++
			}
		}
		for _, r := range up {
			rate := 3 * load(m) / float64(nLlama) // requests/s per replica
			if r.model == "qwen" {
				rate = 0.3 * load(m)
			}
			n := int(math.Round(rate * 60))
			slowTTFT := 0.003
			if p, ok := spikes[m]; ok && r.model == "llama" {
				slowTTFT = p
			}
			if r.restartAt >= 0 && m == r.restartAt+3 {
				slowTTFT = 0.03 // cold prefix cache, first minute back
			}
			if breachAt > 0 && r.model == "llama" && m > breachAt && m <= breachAt+10 {
				slowTTFT = 0.5
			}
			preempt := 0.002
			if r.model == "llama" && m >= 900 && m < 902 {
				preempt = 0.03
			}
			aborts := binom(n, 0.0002)
			if r.restartAt >= 0 && m == r.restartAt-1 {
				aborts += 4 // in flight when the pod was told to stop
			}
			inc := map[string]float64{"ttft": float64(n), "tpot": float64(n), "e2e": float64(n)}
			inc["ttft_good"] = float64(n) - binom(n, slowTTFT)
			inc["tpot_good"] = float64(n) - binom(n, 0.003)
			inc["e2e_good"] = float64(n) - binom(n, 0.002)
			inc["abort"] = aborts
			inc["stop"] = math.Max(0, float64(n)-aborts)
			inc["preempt"] = binom(n, preempt)
			for _, f := range families {
				r.cum[f] += inc[f]
				r.series[f] = append(r.series[f], r.cum[f])
			}
		}
	}
	out := make([]dayReplica, len(reps))
	for i, r := range reps {
		out[i] = r.dayReplica
	}
	return out
}

// promtoolSeries renders the replicas as promtool input series, one
// sample every 30 s (interval 30s): the minute's counters plus a sample
// half-way to the next minute (testutil.Interpolate; none where either is
// missing). Prometheus 3 range selectors are left-open, so a [1m] window
// over one sample a minute holds a single sample and rate() over it is
// empty; at 30 s it holds two. vLLM's latency histograms are rendered as
// classic buckets (_count, and the bucket at the SLO threshold with
// Prometheus 3's `le` spelling), or with nhcb as native histograms with
// custom buckets (convert_classic_histograms_to_nhcb: one bound, the
// threshold; no _bucket or _count series).
func promtoolSeries(reps []dayReplica, nhcb bool) []testutil.InputSeries {
	dense := func(v []float64) []float64 { return testutil.Interpolate(v, 2) }
	// histogram renders a cumulative custom-bucket histogram per sample:
	// good observations at or below bound, the rest above (sum: good ones
	// at half the bound, bad ones at twice it).
	histogram := func(total, good []float64, bound string) string {
		s := make([]string, len(total))
		le, _ := strconv.ParseFloat(bound, 64)
		for i := range total {
			if math.IsNaN(total[i]) || math.IsNaN(good[i]) {
				s[i] = "_"
				continue
			}
			g, bad := good[i], total[i]-good[i]
			s[i] = fmt.Sprintf("{{schema:-53 sum:%s count:%s custom_values:[%s] buckets:[%s %s]}}",
				strconv.FormatFloat(g*le/2+bad*le*2, 'f', -1, 64), strconv.FormatFloat(total[i], 'f', -1, 64), bound,
				strconv.FormatFloat(g, 'f', -1, 64), strconv.FormatFloat(bad, 'f', -1, 64))
		}
		return strings.Join(s, " ")
	}
	hists := []struct{ name, bound, fam string }{
		{"vllm_time_to_first_token_seconds", "1", "ttft"},
		{"vllm_request_time_per_output_token_seconds", "0.1", "tpot"},
		{"vllm_e2e_request_latency_seconds", "60", "e2e"},
	}
	var in []testutil.InputSeries
	add := func(series, values string) {
		in = append(in, testutil.InputSeries{Series: series, Values: values})
	}
	for _, r := range reps {
		base := fmt.Sprintf(`job="vllm",instance=%q,model=%q`, r.instance, r.model)
		for _, h := range hists {
			total, good := dense(r.series[h.fam]), dense(r.series[h.fam+"_good"])
			if nhcb {
				add(fmt.Sprintf("%s{%s}", h.name, base), histogram(total, good, h.bound))
				continue
			}
			add(fmt.Sprintf("%s_count{%s}", h.name, base), testutil.Samples(total))
			add(fmt.Sprintf("%s_bucket{%s,le=%q}", h.name, base, promLe(h.bound)), testutil.Samples(good))
		}
		for _, s := range []struct{ name, labels, fam string }{
			{"vllm_requests_finished_total", `,finished_reason="stop"`, "stop"},
			{"vllm_requests_finished_total", `,finished_reason="abort"`, "abort"},
			{"vllm_preemptions_total", "", "preempt"},
		} {
			add(fmt.Sprintf("%s{%s%s}", s.name, base, s.labels), testutil.Samples(dense(r.series[s.fam])))
		}
	}
	return in
}

// promLe is a bound as Prometheus 3 writes a classic `le` label ("1.0").
func promLe(bound string) string {
	if !strings.ContainsAny(bound, ".eE") {
		return bound + ".0"
	}
	return bound
}

// A simulated healthy day (see healthyDay) pages 0 times with the shipped
// SLO rules; the same day with a 10-minute hard breach pages (so the check
// can fail). Evaluated by every pinned promtool (3.16 and 3.5) at a sample
// every 30 s and an evaluation a minute (the shipped 15s/30s would take
// minutes of promtool time for a day).
func TestHealthyDayPagesZeroTimes(t *testing.T) {
	t.Parallel()
	rules, err := filepath.Abs("slo-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	const day = 24 * time.Hour
	// vLLM's histograms are classic only: a Prometheus scraping native
	// histograms stores them as classic buckets, one converting to NHCB as
	// custom-bucket histograms. Both forms, each with every pinned promtool.
	for _, mode := range []struct {
		name string
		nhcb bool
	}{{"classic buckets", false}, {"NHCB", true}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			p := testutil.WriteRuleTest(t, t.TempDir(), "healthy-day_test.yml", testutil.RuleTestFile{
				RuleFiles:          []string{rules},
				EvaluationInterval: testutil.Duration(time.Minute),
				Tests: []testutil.RuleTest{{
					Name:        "a healthy day pages 0 times",
					Interval:    testutil.Duration(30 * time.Second),
					InputSeries: promtoolSeries(healthyDay(int(day/time.Minute), 0), mode.nhcb),
					ExprTests: []testutil.ExprTest{{
						Expr:     `count_over_time(ALERTS{severity="critical"}[1d])`,
						EvalTime: testutil.Duration(day),
					}},
				}, {
					Name:        "the same fleet pages on a 10-minute hard TTFT breach",
					Interval:    testutil.Duration(30 * time.Second),
					InputSeries: promtoolSeries(healthyDay(240, 150), mode.nhcb),
					ExprTests: []testutil.ExprTest{{
						Expr:     `max_over_time(ALERTS{severity="critical",alertstate="firing"}[4h])`,
						EvalTime: testutil.Duration(4 * time.Hour),
						ExpSamples: []testutil.ExpSample{{
							Labels: `{alertname="VLLMSLOBurnRatePage",alertstate="firing",severity="critical",slo="ttft-p99",model="llama"}`,
							Value:  1,
						}},
					}},
				}},
			})
			start := time.Now()
			testutil.RunRuleTests(t, p)
			t.Logf("healthy day (24h, 4 replicas, spikes, a rolling restart), histograms as %s: 0 pages; the 10-minute hard breach paged (%v)",
				mode.name, time.Since(start).Round(time.Second))
		})
	}
}
