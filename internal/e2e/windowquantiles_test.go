package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vllm-exporter/vllm_exporter/internal/histq"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
	"github.com/vllm-exporter/vllm_exporter/probes"
)

// pacedModel is one model of pacedServer: its median TTFT and gap.
type pacedModel struct {
	name      string
	ttft, itl time.Duration
	interval  string // the probe profile's
}

// pacedModels are the latencies the probe quantiles are checked at.
var pacedModels = []pacedModel{
	{"ttft-50ms-itl-8ms", 50 * time.Millisecond, 8 * time.Millisecond, "1s"},
	{"ttft-200ms-itl-20ms", 200 * time.Millisecond, 20 * time.Millisecond, "1500ms"},
	{"ttft-1200ms-itl-20ms", 1200 * time.Millisecond, 20 * time.Millisecond, "3s"},
}

// pacedServer is an OpenAI-compatible completions server with a latency
// model of its own (not the simulator's, not the exporter's code): a
// log-normal TTFT (sigma 0.15) around the model's, then one token per
// chunk, gaps log-normal (sigma 0.1) around its ITL, 3% of them two to
// four times longer (a prefill running in the same step), so p50 and p99
// differ as on a real server. Chunks leave at absolute deadlines, so a
// late wake-up does not shift the rest of the stream.
type pacedServer struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func (p *pacedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/models" {
		var data []map[string]any
		for _, m := range pacedModels {
			data = append(data, map[string]any{"id": m.name, "object": "model", "owned_by": "paced", "max_model_len": 4096})
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
		return
	}
	var req struct {
		Model     string `json:"model"`
		Prompt    []int  `json:"prompt"`
		MaxTokens int    `json:"max_tokens"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/completions" {
		http.Error(w, `{"error":{"message":"completions only","code":400}}`, http.StatusBadRequest)
		return
	}
	i := slices.IndexFunc(pacedModels, func(m pacedModel) bool { return m.name == req.Model })
	if i < 0 {
		http.Error(w, `{"error":{"message":"no such model","code":404}}`, http.StatusNotFound)
		return
	}
	m := pacedModels[i]
	start := time.Now()
	p.mu.Lock()
	due := start.Add(time.Duration(float64(m.ttft) * math.Exp(0.15*p.rng.NormFloat64())))
	gaps := make([]time.Duration, req.MaxTokens)
	for k := range gaps {
		f := math.Exp(0.1 * p.rng.NormFloat64())
		if p.rng.Float64() < 0.03 {
			f = 2 + 2*p.rng.Float64()
		}
		gaps[k] = time.Duration(float64(m.itl) * f)
	}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(s string) {
		fmt.Fprintf(w, "data: %s\n\n", s)
		fl.Flush()
	}
	for k := range req.MaxTokens {
		time.Sleep(time.Until(due))
		finish := "null"
		if k == req.MaxTokens-1 {
			finish = `"length"`
		}
		send(fmt.Sprintf(`{"id":"cmpl-p","object":"text_completion","created":1,"model":%q,"choices":[{"index":0,"text":" t%d","logprobs":null,"finish_reason":%s,"stop_reason":null}]}`, m.name, k, finish))
		due = due.Add(gaps[k])
	}
	send(fmt.Sprintf(`{"id":"cmpl-p","object":"text_completion","created":1,"model":%q,"choices":[],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}}`,
		m.name, len(req.Prompt), len(req.Prompt)+req.MaxTokens, req.MaxTokens))
	send("[DONE]")
}

// rawStream is what the raw client measured of one stream.
type rawStream struct {
	ttft, e2e, tpot float64
	itl             []float64
}

// rawClient stands between the exporter's probes and pacedServer: a raw
// streaming client of the server (its own SSE line reader, timestamps at
// each line read, vLLM bench's definitions) that passes every line on to
// the probe as it arrives. Each probe's stream is thus measured twice, by
// the exporter and by this client, and the comparison is free of the
// sampling noise two separate sets of requests would add.
type rawClient struct {
	upstream string
	mu       sync.Mutex
	streams  map[string][]rawStream // by model
	stopped  atomic.Bool            // answer 503 from now on
	inFlight atomic.Int64
}

func (c *rawClient) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.stopped.Load() {
		http.Error(w, "measurement over", http.StatusServiceUnavailable)
		return
	}
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	start := time.Now() // the probe's request has arrived: the raw client sends it now
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Model string `json:"model"`
	}
	json.Unmarshal(body, &req)
	resp, err := http.Post(c.upstream+r.URL.Path, "application/json", bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	var s rawStream
	var last time.Time
	tokens, done, broken := 0, false, false
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadBytes('\n')
		at := time.Now()
		if _, werr := w.Write(line); werr != nil {
			broken = true
		}
		if data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data: ")); ok {
			var ch struct {
				Choices []struct {
					Text string `json:"text"`
				} `json:"choices"`
				Usage *struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			switch {
			case string(data) == "[DONE]":
				done = true
			case json.Unmarshal(data, &ch) != nil:
				broken = true
			case len(ch.Choices) > 0 && ch.Choices[0].Text != "":
				if last.IsZero() {
					s.ttft = at.Sub(start).Seconds()
				} else {
					s.itl = append(s.itl, at.Sub(last).Seconds())
				}
				last = at
			case ch.Usage != nil:
				tokens = ch.Usage.CompletionTokens
			}
		}
		if len(bytes.TrimSpace(line)) == 0 {
			w.(http.Flusher).Flush()
		}
		if err != nil {
			break
		}
	}
	if broken || !done || tokens < 2 || last.IsZero() || resp.StatusCode != http.StatusOK {
		return
	}
	s.e2e = last.Sub(start).Seconds()
	s.tpot = (s.e2e - s.ttft) / float64(tokens-1)
	c.mu.Lock()
	c.streams[req.Model] = append(c.streams[req.Model], s)
	c.mu.Unlock()
}

// quantiles are the raw client's latencies of one model: ttft, tpot, itl, e2e.
func (c *rawClient) latencies(model string) map[string][]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]float64{}
	for _, s := range c.streams[model] {
		out["ttft"] = append(out["ttft"], s.ttft)
		out["tpot"] = append(out["tpot"], s.tpot)
		out["itl"] = append(out["itl"], s.itl...)
		out["e2e"] = append(out["e2e"], s.e2e)
	}
	return out
}

// percentile is numpy's default percentile (linear interpolation), as
// vllm bench serve reports.
func percentile(xs []float64, q float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}

// probeQuantileConfig probes each paced model with a profile of its name.
func probeQuantileConfig() string {
	var b strings.Builder
	b.WriteString("probes:\n  max_requests_per_minute: 600\n  max_tokens_per_hour: 10000000\n  profiles:\n")
	for _, m := range pacedModels {
		iv, _ := time.ParseDuration(m.interval)
		fmt.Fprintf(&b, "    - {name: %s, model: %s, endpoint: completions, input_tokens: 32, output_tokens: 16, interval: %s, timeout: %s, jitter: 0s}\n",
			m.name, m.name, m.interval, iv-100*time.Millisecond)
	}
	return b.String()
}

// probePanels maps the Probes dashboard's latency panels to the latency
// they show.
var probePanels = map[string]string{
	"Probe TTFT p50 / p99": "ttft", "Probe TPOT p50 / p99": "tpot",
	"Probe inter-token latency p50 / p99": "itl", "Probe e2e latency p50 / p99": "e2e",
}

// probeHistogram is the probe histogram of each latency.
var probeHistogram = map[string]string{
	"ttft": "vllm_probe_time_to_first_token_seconds", "tpot": "vllm_probe_time_per_output_token_seconds",
	"itl": "vllm_probe_inter_token_latency_seconds", "e2e": "vllm_probe_e2e_latency_seconds",
}

// TestProbeQuantilesMatchRawClient: p50 and p99 of the probes' TTFT, TPOT,
// ITL and e2e, as the shipped Probes dashboard computes them, are within 5%
// of what a raw streaming client measured of the same streams, in
// Prometheus 3.16's classic (its default), native and NHCB storage, at
// TTFT 50 ms / ITL 8 ms, 200 ms / 20 ms and 1.2 s / 20 ms (pacedServer).
// Beside it the exporter scrapes a simulator speaking vLLM 0.10's layout,
// which has no per-request TPOT histogram: the Overview's server TPOT panel
// falls back to the inter-token latency there (and equals the ITL panel),
// and the ITL panel has data. With -v it prints the table docs/probes.md shows,
// with histogram_quantile over the probe histograms beside it.
func TestProbeQuantilesMatchRawClient(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Prometheus for about a minute and a half")
	}
	// After TestEndToEnd and TestTimeToPage in file order, so on two
	// cores it runs once TestEndToEnd is done, beside TestTimeToPage's
	// waits, and adds nothing to the package's time.
	t.Parallel()
	RequireTool(t, "prometheus")
	exporterBin, _ := binaries(t)
	var modes []histMode
	for _, m := range histModes {
		if m.name == "classic" || m.name == "native" || m.name == "nhcb" {
			modes = append(modes, m)
		}
	}

	paced := httptest.NewServer(&pacedServer{rng: rand.New(rand.NewPCG(53, 2))})
	t.Cleanup(paced.Close)
	raw := &rawClient{upstream: paced.URL, streams: map[string][]rawStream{}}
	sim := vllmsimtest.Start(t, vllmsim.Config{Seed: 5, LoadGen: true, MetricsVersion: vllmsim.MetricsV1_0_10})
	pacedURL, _ := url.Parse(paced.URL)
	mux := http.NewServeMux()
	mux.Handle("/v1/completions", raw)
	mux.Handle("/v1/models", httputil.NewSingleHostReverseProxy(pacedURL))
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)

	// The probe scheduler runs in this process, beside the paced server
	// and the raw client: a stall of a loaded machine delays all three
	// alike, so the comparison is of the measurement and its way through
	// Prometheus and the dashboards, not of two processes' scheduling.
	holder, _ := testutil.ConfigHolder(t, probeQuantileConfig())
	sched := probes.New(probes.Options{URL: front.URL}, holder, nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(sched)
	probeTarget := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(probeTarget.Close)
	// The exporter scrapes the simulator (probes off: this test's probes
	// are the scheduler above).
	port := freePort(t)
	exporter := startProc(t, "vllm_exporter", exporterBin, "--vllm.url="+sim.URL(), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--vllm.scrape-interval=1s", "--no-probe.enabled")
	targets := []string{strings.TrimPrefix(probeTarget.URL, "http://"), fmt.Sprintf("127.0.0.1:%d", port)}
	global := map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
	recording := filepath.Join(testutil.ModuleRoot(t), "alerts", "vllm-recording.yml")
	proms := make([]promClient, len(modes))
	procs := make([][]*proc, len(modes))
	for i, m := range modes {
		var p *proc
		// The server panels read the fleet recording rules.
		p, proms[i] = startPrometheus(t, "prometheus-"+m.name, global, m.scrape, []string{recording}, targets, "")
		procs[i] = []*proc{p, exporter}
	}
	// Probing starts once every Prometheus has scraped both targets, so
	// the histograms' increase covers every probe too.
	for i, m := range modes {
		waitFor(t, m.name+": both targets scraped", time.Minute, procs[i], func() error {
			res, err := proms[i].query(`up == 1`)
			if err == nil && len(res) < 2 {
				err = fmt.Errorf("%d of 2 targets up", len(res))
			}
			return err
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sched.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	for i, m := range modes {
		waitFor(t, m.name+": histograms stored as the mode says", time.Minute, procs[i], func() error { return m.checkStorage(proms[i]) })
	}

	// Probe until the slowest profile has 20 streams measured both ways.
	waitFor(t, "20 probes of every profile", 3*time.Minute, procs[0], func() error {
		for _, m := range pacedModels {
			if n := len(raw.latencies(m.name)["ttft"]); n < 20 {
				return fmt.Errorf("%s: %d streams", m.name, n)
			}
		}
		return nil
	})
	raw.stopped.Store(true)
	waitFor(t, "probes in flight done", 10*time.Second, nil, func() error {
		if n := raw.inFlight.Load(); n > 0 {
			return fmt.Errorf("%d in flight", n)
		}
		return nil
	})
	// Every Prometheus holds the final state: as many TTFT observations
	// per profile as the raw client measured streams (the same probes).
	for i, m := range modes {
		waitFor(t, m.name+": final probe counts scraped", 30*time.Second, procs[i], func() error {
			res, err := proms[i].query(`vllm_probe_time_to_first_token_window_seconds_count`)
			if err != nil {
				return err
			}
			got := map[string]string{}
			for _, r := range res {
				got[r.Metric["profile"]], _ = r.Value[1].(string)
			}
			for _, pm := range pacedModels {
				if want := strconv.Itoa(len(raw.latencies(pm.name)["ttft"])); got[pm.name] != want {
					return fmt.Errorf("%s: %s successful probes in Prometheus, %s streams measured by the raw client", pm.name, got[pm.name], want)
				}
			}
			return nil
		})
	}

	panels, _ := dashboardQueries(t)
	var table strings.Builder
	fmt.Fprintf(&table, "| latency | metric | mode | dashboard p50 / p99 | histogram_quantile (5m) p50 / p99 | raw client p50 / p99 | error p50 / p99 |\n|---|---|---|---:|---:|---:|---:|\n")
	for _, pm := range pacedModels {
		rawLat := raw.latencies(pm.name)
		for _, metric := range []string{"ttft", "tpot", "itl", "e2e"} {
			want := [2]float64{percentile(rawLat[metric], 0.5), percentile(rawLat[metric], 0.99)}
			for i, m := range modes {
				var got, hist [2]float64
				for _, q := range panels {
					if q.Dashboard != "vllm-probes.json" || probePanels[q.Panel] != metric {
						continue
					}
					k := 0
					if strings.Contains(q.Expr, `quantile="0.99"`) {
						k = 1
					}
					got[k] = valueOf(t, proms[i], Substitute(q.Expr), "profile", pm.name)
				}
				for k, qq := range []string{"0.5", "0.99"} {
					h := histq.H{Name: probeHistogram[metric], Matchers: `profile="` + pm.name + `"`, Window: "5m"}
					hist[k] = valueOf(t, proms[i], h.Quantile(qq, "profile").String(), "profile", pm.name)
				}
				var errs [2]float64
				for k := range errs {
					errs[k] = (got[k] - want[k]) / want[k]
					if !(math.Abs(errs[k]) <= 0.05) {
						t.Errorf("%s %s %s: dashboard p%s %.4g s, raw client %.4g s (%+.1f%%, over 5%%)", pm.name, metric, m.name,
							[]string{"50", "99"}[k], got[k], want[k], 100*errs[k])
					}
				}
				fmt.Fprintf(&table, "| TTFT %v, ITL %v | %s | %s | %s / %s | %s / %s | %s / %s | %+.1f%% / %+.1f%% |\n",
					pm.ttft, pm.itl, metric, m.name, ms(got[0]), ms(got[1]), ms(hist[0]), ms(hist[1]), ms(want[0]), ms(want[1]), 100*errs[0], 100*errs[1])
			}
		}
	}
	t.Logf("probe quantiles (dashboard: the Probes dashboard's panels; raw client: the same streams measured in the test; %s):\n%s", sampleCounts(raw), table.String())

	// The server TPOT panels fall back to ITL on a body without the
	// per-request TPOT histogram, and the ITL panel has data.
	for i, m := range modes {
		noTPOT := histq.H{Name: "vllm_request_time_per_output_token_seconds", Window: "5m"}.Count("increase")
		if res, err := proms[i].query(noTPOT.String()); err != nil || len(res) > 0 {
			t.Fatalf("%s: the simulator's v1-0.10 body has a per-request TPOT histogram (%v, %v): the fallback is not exercised", m.name, res, err)
		}
		tpot, itl := overviewServerTargets(t, panels, "TPOT p50 / p99"), overviewServerTargets(t, panels, "Inter-token latency p50 / p99")
		for k := range tpot {
			// 90 s: the fleet latency records are evaluated each minute.
			waitFor(t, m.name+": server TPOT panel equals the ITL panel", 90*time.Second, procs[i], func() error {
				diff := fmt.Sprintf(`abs((%s) - (%s))`, Substitute(tpot[k]), Substitute(itl[k]))
				res, err := proms[i].query(diff)
				if err == nil && (len(res) != 1 || res[0].Value[1] != "0" || res[0].Metric["model"] != "meta-llama/Llama-3.1-8B-Instruct") {
					err = fmt.Errorf("%s: %v, want one model at 0", diff, res)
				}
				return err
			})
		}
	}
}

// valueOf evaluates q and returns the value of the series whose label is
// value (NaN if none).
func valueOf(t *testing.T, pc promClient, q, label, value string) float64 {
	t.Helper()
	res, err := pc.query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	for _, r := range res {
		if r.Metric[label] == value {
			s, _ := r.Value[1].(string)
			v, _ := strconv.ParseFloat(s, 64)
			return v
		}
	}
	return math.NaN()
}

// overviewServerTargets are the server p99 and p50 queries of an Overview
// panel (its first two targets).
func overviewServerTargets(t *testing.T, panels []query, title string) []string {
	t.Helper()
	var out []string
	for _, q := range panels {
		if q.Dashboard == "vllm-overview.json" && q.Panel == title && strings.Contains(q.Expr, "vllm_inter_token_latency_seconds") && !strings.Contains(q.Expr, "vllm_probe_") {
			out = append(out, q.Expr)
		}
	}
	if len(out) != 2 {
		t.Fatalf("Overview panel %q: %d server targets reading vllm_inter_token_latency_seconds, want 2 (p99, p50)", title, len(out))
	}
	return out
}

func ms(v float64) string { return strconv.FormatFloat(v*1000, 'f', 1, 64) + " ms" }

// sampleCounts says how many streams and gaps each model's quantiles rest on.
func sampleCounts(c *rawClient) string {
	var parts []string
	for _, m := range pacedModels {
		l := c.latencies(m.name)
		parts = append(parts, fmt.Sprintf("%s: %d streams, %d gaps", m.name, len(l["ttft"]), len(l["itl"])))
	}
	return strings.Join(parts, "; ")
}
