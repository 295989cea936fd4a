package probes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	sharedtest "github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// TestProbeHistogramsExportDefaultExportBounds checks each probe histogram
// is exported with DefaultExportBounds as its classic buckets and a native
// (sparse) schema as well.
func TestProbeHistogramsExportDefaultExportBounds(t *testing.T) {
	srv := newFakeVLLM(t, nil)
	h, _ := writeConfig(t, probesYAML("m", profile("p", "completions", 8, 4, "")))
	s := New(Options{URL: srv.URL}, h, nil)
	if res, _ := s.ProbeOnce(context.Background(), "p"); res.Reason != "" {
		t.Fatal(res.Reason)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	hists := map[string][]float64{"vllm_probe_time_to_first_token_seconds": DefaultExportBounds.TTFT,
		"vllm_probe_time_per_output_token_seconds": DefaultExportBounds.TPOT, "vllm_probe_inter_token_latency_seconds": DefaultExportBounds.ITL,
		"vllm_probe_e2e_latency_seconds": DefaultExportBounds.E2E}
	for _, mf := range mfs {
		want, ok := hists[mf.GetName()]
		if !ok {
			continue
		}
		delete(hists, mf.GetName())
		hm := mf.GetMetric()[0].GetHistogram()
		var got []float64
		for _, b := range hm.GetBucket() {
			got = append(got, b.GetUpperBound())
		}
		if !slices.Equal(got, want) || hm.GetSchema() != 7 || hm.GetSampleCount() == 0 {
			t.Errorf("%s: classic bounds %v (want %v), native schema %v, count %d", mf.GetName(), got, want, hm.Schema, hm.GetSampleCount())
		}
	}
	if len(hists) > 0 {
		t.Errorf("not exported: %v", hists)
	}
}

// TestProbesNeverFollowRedirects: a redirect from vLLM (or a proxy in front
// of it) must not take a probe anywhere else; it counts as http_4xx.
func TestProbesNeverFollowRedirects(t *testing.T) {
	var elsewhere atomic.Int64
	other := newFakeVLLM(t, func(w http.ResponseWriter, r *http.Request, req request) {
		elsewhere.Add(1)
		writeStream(w, r.URL.Path, req, streamSpec{})
	})
	srv := newFakeVLLM(t, func(w http.ResponseWriter, r *http.Request, _ request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	})
	h, _ := writeConfig(t, probesYAML("m", profile("p", "completions", 8, 2, "")))
	s := New(Options{URL: srv.URL}, h, nil)
	res, _ := s.ProbeOnce(context.Background(), "p")
	if res.Reason != ReasonHTTP4xx || res.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("redirect: reason %q status %d", res.Reason, res.StatusCode)
	}
	if n := elsewhere.Load(); n != 0 || len(other.requests()) != 0 {
		t.Fatalf("a probe followed the redirect (%d requests elsewhere)", n)
	}
	// The transport is common/config's now: check the configuration it is
	// built from (TestProxyPolicyShared in cmd/vllm_exporter checks the
	// behaviour with HTTP_PROXY set).
	if cfg := s.opts.upstream().Config(); cfg.Proxy() != nil {
		t.Fatal("the probe client may use a proxy from the environment")
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Unix(990, 0)
	for v, want := range map[string]time.Duration{"35": 35 * time.Second, time.Unix(1000, 0).UTC().Format(http.TimeFormat): 10 * time.Second,
		"": 0, "-3": 0, "soon": 0, "1.5": 0, time.Unix(900, 0).UTC().Format(http.TimeFormat): 0,
		"99999999999999999": maxRetryAfter, time.Unix(990+1e9, 0).UTC().Format(http.TimeFormat): maxRetryAfter} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
}

// TestOneProbeInFlightPerProfile: neither ProbeOnce nor the timer starts a
// second probe of a profile while one is in flight.
func TestOneProbeInFlightPerProfile(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 10)
	srv := newFakeVLLM(t, func(w http.ResponseWriter, r *http.Request, req request) {
		arrived <- struct{}{}
		<-release
		writeStream(w, r.URL.Path, req, streamSpec{})
	})
	clk := newFakeClock()
	h, _ := writeConfig(t, probesYAML("m", profile("p", "completions", 8, 2, "")))
	s := New(Options{URL: srv.URL, Clock: clk}, h, nil)
	done := make(chan Result)
	go func() {
		res, _ := s.ProbeOnce(context.Background(), "p")
		done <- res
	}()
	<-arrived
	// A second probe would block in the server: bound each attempt.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := s.ProbeOnce(ctx, "p"); !errors.Is(err, ErrBusy) {
		t.Errorf("second ProbeOnce: %v", err)
	}
	clk.Add(time.Hour)
	s.Tick(ctx, clk.Now()) // due, but in flight: sends nothing
	close(release)
	if res := <-done; res.Reason != "" {
		t.Fatalf("probe: %q", res.Reason)
	}
	if n := len(srv.requests()); n != 1 {
		t.Fatalf("%d requests while one was in flight", n)
	}
}

// TestAPIKeyNotExported: nothing the exporter serves carries the API key.
func TestAPIKeyNotExported(t *testing.T) {
	srv := newFakeVLLM(t, func(w http.ResponseWriter, r *http.Request, _ request) {
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error": "Unauthorized TOPSECRETKEY"}`))
	})
	h, _ := writeConfig(t, probesYAML("", profile("p", "chat", 8, 2, "")))
	s := New(Options{URL: srv.URL, APIKey: "TOPSECRETKEY"}, h, nil)
	if res, _ := s.ProbeOnce(context.Background(), "p"); res.Reason != ReasonHTTP4xx {
		t.Fatalf("reason %q", res.Reason)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	if body := sharedtest.GatherText(t, reg); strings.Contains(body, "TOPSECRETKEY") || body == "" {
		t.Fatalf("exposition carries the key (or is empty): %d bytes", len(body))
	}
	if snap := fmt.Sprintf("%+v", *s.Latest().Profiles["p"]); strings.Contains(snap, "TOPSECRETKEY") {
		t.Fatal("snapshot carries the key")
	}
}

// TestCancelledProbeNotCounted: a probe its caller abandons (shutdown) is
// no measurement of vLLM: no request, no failure, and the profile is free.
func TestCancelledProbeNotCounted(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv := newFakeVLLM(t, func(w http.ResponseWriter, r *http.Request, _ request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	h, _ := writeConfig(t, probesYAML("m", profile("p", "completions", 8, 2, "")))
	s := New(Options{URL: srv.URL}, h, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	res, err := s.ProbeOnce(ctx, "p")
	if !errors.Is(err, context.Canceled) || res.Reason == "" {
		t.Fatalf("cancelled probe: %v %q", err, res.Reason)
	}
	checkNone := func() {
		t.Helper()
		p := s.Latest().Profiles["p"]
		for r, v := range failures(s, "p") {
			if v != 0 || p.Failures[r] != 0 {
				t.Errorf("failure %s counted for a cancelled probe", r)
			}
		}
		if p.Requests != 0 {
			t.Errorf("cancelled probe counted as a request")
		}
	}
	checkNone()
	// The profile is free again; a probe whose context ends before it is
	// sent is not counted either.
	if _, err := s.ProbeOnce(ctx, "p"); !errors.Is(err, context.Canceled) {
		t.Fatalf("probe with a dead context: %v", err)
	}
	checkNone()
}

// TestTokenBudgetCountsChatTemplate: chat prompts grow by the server's chat
// template; after the first probe the reservation uses the prompt length
// the server reported, so the hourly token budget is never exceeded.
func TestTokenBudgetCountsChatTemplate(t *testing.T) {
	srv := newFakeVLLM(t, nil) // chat template: +7 prompt tokens
	clk := newFakeClock()
	// 32+4 asked, 43 used per probe: two fit in 128 tokens, a third would
	// end at 129.
	h, _ := writeConfig(t, strings.Replace(probesYAML("m", profile("p", "chat", 32, 4, "")), "max_tokens_per_hour: 10000000", "max_tokens_per_hour: 128", 1))
	s := New(Options{URL: srv.URL, Clock: clk}, h, nil)
	used := 0
	for i := range 3 {
		res, err := s.ProbeOnce(context.Background(), "p")
		if errors.Is(err, ErrBudget) {
			if i < 2 {
				t.Fatalf("probe %d refused after %d tokens", i+1, used)
			}
			break
		}
		if err != nil || res.Reason != "" {
			t.Fatalf("probe %d: %v %q", i+1, err, res.Reason)
		}
		used += res.PromptTokens + res.CompletionTokens
	}
	if used > 128 {
		t.Fatalf("%d tokens used within an hour, budget 128", used)
	}
}

// TestReloadKeepsBackoff: reloading the configuration while vLLM fails
// must not restart probing at the full rate.
func TestReloadKeepsBackoff(t *testing.T) {
	srv := newFakeVLLM(t, func(w http.ResponseWriter, r *http.Request, _ request) { w.WriteHeader(http.StatusServiceUnavailable) })
	clk := newFakeClock()
	yaml := probesYAML("m", profile("p", "completions", 8, 2, ""))
	h, path := writeConfig(t, yaml)
	s := New(Options{URL: srv.URL, Clock: clk}, h, nil)
	for range 3 {
		s.Tick(context.Background(), clk.Now())
		clk.Add(time.Minute) // backoff_max
	}
	sent := len(srv.requests())
	if sent != 3 {
		t.Fatalf("%d probes before the reload", sent)
	}
	s.Tick(context.Background(), clk.Now()) // the 4th, at the back-off cap
	writeFile(t, path, strings.Replace(yaml, "backoff_max: 1m", "backoff_max: 50s", 1))
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	for range 49 {
		clk.Add(time.Second)
		s.Tick(context.Background(), clk.Now())
	}
	if n := len(srv.requests()); n != 4 {
		t.Fatalf("%d probes within the back-off after a reload, want 4", n)
	}
	clk.Add(time.Second)
	s.Tick(context.Background(), clk.Now()) // the new cap bounds the wait
	if n := len(srv.requests()); n != 5 {
		t.Fatalf("%d probes once the new back-off cap passed, want 5", n)
	}
}
