package probes

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	sharedtest "github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

func TestCompletionsRequestAndMeasurement(t *testing.T) {
	srv := newFakeVLLM(t, func(w http.ResponseWriter, r *http.Request, req request) {
		writeStream(w, r.URL.Path, req, streamSpec{multi: 3}) // first chunk carries 3 tokens
	})
	h, _ := writeConfig(t, probesYAML("m", profile("c", "completions", 64, 8, "")))
	s := New(Options{URL: srv.URL + "/metrics/", APIKey: "sekret"}, h, nil)

	res, err := s.ProbeOnce(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != "" {
		t.Fatalf("probe failed: %s", res.Reason)
	}
	reqs := srv.requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests", len(reqs))
	}
	got := reqs[0]
	if got.path != "/v1/completions" {
		t.Errorf("path %s", got.path)
	}
	if n := len(got.req.Prompt); n != 64 {
		t.Errorf("prompt has %d token IDs, want 64", n)
	}
	for _, id := range got.req.Prompt {
		if id < 1000 || id >= 20000 {
			t.Fatalf("token id %d outside [1000,20000)", id)
		}
	}
	b := got.body
	if b["max_tokens"] != 8.0 || b["min_tokens"] != 8.0 || b["ignore_eos"] != true || b["stream"] != true || b["temperature"] != 0.0 {
		t.Errorf("length forcing fields wrong: %v", b)
	}
	so, _ := b["stream_options"].(map[string]any)
	if v, ok := so["include_usage"]; !ok || v != true {
		t.Errorf("stream_options.include_usage not explicit true: %v", so)
	}
	if v, ok := so["continuous_usage_stats"]; !ok || v != false {
		t.Errorf("stream_options.continuous_usage_stats not explicit false: %v", so)
	}
	if b["user"] != ProbeUser || b["model"] != "m" {
		t.Errorf("user/model: %v %v", b["user"], b["model"])
	}
	if _, ok := b["messages"]; ok {
		t.Error("completions request carries messages")
	}
	if id := got.header.Get("X-Request-Id"); !strings.HasPrefix(id, RequestIDPrefix+"c-") {
		t.Errorf("X-Request-Id %q", id)
	}
	if a := got.header.Get("Authorization"); a != "Bearer sekret" {
		t.Errorf("Authorization %q", a)
	}

	// 8 tokens in 6 content chunks (one multi-token chunk): chunks are
	// counted apart from tokens, ITL is per chunk gap, TPOT per token.
	if res.Chunks != 6 || len(res.ITL) != 5 || res.CompletionTokens != 8 || res.PromptTokens != 64 {
		t.Fatalf("chunks=%d itl=%d completion=%d prompt=%d", res.Chunks, len(res.ITL), res.CompletionTokens, res.PromptTokens)
	}
	var sum time.Duration
	for _, g := range res.ITL {
		sum += g
	}
	if res.E2E-res.TTFT != sum || res.TTFT <= 0 || res.E2E < res.TTFT {
		t.Errorf("e2e-ttft=%v, sum(itl)=%v, ttft=%v", res.E2E-res.TTFT, sum, res.TTFT)
	}
	if !res.HasTPOT || res.TPOT != (res.E2E-res.TTFT)/7 {
		t.Errorf("tpot %v, want (e2e-ttft)/7 = %v", res.TPOT, (res.E2E-res.TTFT)/7)
	}

	snap := s.Latest().Profiles["c"]
	if snap.Requests != 1 || snap.Chunks != 6 || snap.OutputTokensReceived != 8 || !snap.LastSuccess || snap.TTFT.Count != 1 || snap.ITL.Count != 5 || snap.TPOT.Count != 1 {
		t.Errorf("snapshot %+v", snap)
	}
	if v := testutil.ToFloat64(s.m.chunks.WithLabelValues("c")); v != 6 {
		t.Errorf("vllm_probe_chunks_total = %v", v)
	}
	if v := testutil.ToFloat64(s.m.outTokens.WithLabelValues("c")); v != 8 {
		t.Errorf("vllm_probe_output_tokens_total = %v", v)
	}
	for r, v := range failures(s, "c") {
		if v != 0 {
			t.Errorf("failure %s = %v on success", r, v)
		}
	}
}

func TestChatRequestAndMeasurement(t *testing.T) {
	srv := newFakeVLLM(t, nil)
	h, _ := writeConfig(t, probesYAML("", profile("chat", "chat", 32, 4, "")))
	s := New(Options{URL: srv.URL}, h, nil)
	res, err := s.ProbeOnce(context.Background(), "chat")
	if err != nil || res.Reason != "" {
		t.Fatalf("probe: %v %q", err, res.Reason)
	}
	got := srv.requests()[0]
	b := got.body
	if got.path != "/v1/chat/completions" || b["max_completion_tokens"] != 4.0 || b["min_tokens"] != 4.0 {
		t.Errorf("chat request: %s %v", got.path, b)
	}
	if _, ok := b["max_tokens"]; ok {
		t.Error("chat request sends max_tokens")
	}
	if _, ok := b["prompt"]; ok {
		t.Error("chat request sends prompt")
	}
	if b["model"] != "served-model" || s.Model() != "served-model" {
		t.Errorf("model not discovered from /v1/models: %v, Model() %q", b["model"], s.Model())
	}
	if n := len(strings.Fields(got.req.Messages[0].Content)); n != 32 {
		t.Errorf("chat prompt has %d words, want 32", n)
	}
	// vLLM's role-only first chunk carries no generated text: it is not a
	// token, so 4 content chunks and 3 gaps (DESIGN.md, Measurement
	// definitions).
	if res.Chunks != 4 || len(res.ITL) != 3 || res.CompletionTokens != 4 {
		t.Errorf("chunks=%d itl=%d completion=%d", res.Chunks, len(res.ITL), res.CompletionTokens)
	}
}

func TestFailureReasonsCountedOnce(t *testing.T) {
	hang := func(w http.ResponseWriter, r *http.Request, _ request) { <-r.Context().Done() }
	status := func(code int) func(http.ResponseWriter, *http.Request, request) {
		return func(w http.ResponseWriter, r *http.Request, _ request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			w.Write([]byte(`{"error":{"message":"no","type":"BadRequestError","param":null,"code":400}}`))
		}
	}
	spec := func(s streamSpec) func(http.ResponseWriter, *http.Request, request) {
		return func(w http.ResponseWriter, r *http.Request, req request) { writeStream(w, r.URL.Path, req, s) }
	}
	cases := []struct {
		name     string
		endpoint string
		handle   func(http.ResponseWriter, *http.Request, request)
		want     string
	}{
		{"400", "completions", status(400), ReasonHTTP4xx},
		{"401", "chat", status(401), ReasonHTTP4xx},
		{"404", "completions", status(404), ReasonHTTP4xx},
		{"500", "completions", status(500), ReasonHTTP5xx},
		{"503", "chat", status(503), ReasonHTTP5xx},
		{"in-stream error", "completions", spec(streamSpec{errorAfter: 2}), ReasonStreamError},
		{"in-stream flat error", "chat", spec(streamSpec{errorAfter: 2, flatError: true}), ReasonStreamError},
		{"cut stream", "completions", spec(streamSpec{noDone: true}), ReasonStreamError},
		{"cut mid-event", "completions", func(w http.ResponseWriter, r *http.Request, _ request) {
			w.WriteHeader(200)
			w.Write([]byte(`data: {"choices":[{"index":0,"text":" a"`))
		}, ReasonStreamError},
		{"garbage", "completions", func(w http.ResponseWriter, r *http.Request, _ request) {
			w.WriteHeader(200)
			w.Write([]byte("data: not json\n\ndata: [DONE]\n\n"))
		}, ReasonStreamError},
		{"finish error", "completions", func(w http.ResponseWriter, r *http.Request, _ request) {
			w.WriteHeader(200)
			w.Write([]byte(`data: {"choices":[{"index":0,"text":"","finish_reason":"abort"}]}` + "\n\ndata: [DONE]\n\n"))
		}, ReasonStreamError},
		{"short output", "completions", spec(streamSpec{completionDelta: -3}), ReasonShortOutput},
		{"short chat", "chat", spec(streamSpec{completionDelta: -1}), ReasonShortOutput},
		{"no content", "completions", spec(streamSpec{noContent: true}), ReasonShortOutput},
		{"prompt mismatch", "completions", spec(streamSpec{promptDelta: 1}), ReasonLengthMismatch},
		{"too many tokens", "chat", spec(streamSpec{completionDelta: 2}), ReasonLengthMismatch},
		{"no usage", "completions", spec(streamSpec{noUsage: true}), ReasonLengthMismatch},
		{"hang before headers", "completions", hang, ReasonTimeout},
		{"hang mid-stream", "chat", func(w http.ResponseWriter, r *http.Request, _ request) {
			w.WriteHeader(200)
			w.Write([]byte(`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, ReasonTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newFakeVLLM(t, c.handle)
			h, _ := writeConfig(t, probesYAML("m", profile("p", c.endpoint, 16, 6, ", timeout: 150ms")))
			s := New(Options{URL: srv.URL}, h, nil)
			res, err := s.ProbeOnce(context.Background(), "p")
			if err != nil {
				t.Fatal(err)
			}
			if res.Reason != c.want {
				t.Fatalf("reason %q, want %q", res.Reason, c.want)
			}
			checkOnce(t, s, "p", c.want)
		})
	}

	t.Run("connection refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		h, _ := writeConfig(t, probesYAML("m", profile("p", "completions", 16, 6, "")))
		s := New(Options{URL: "http://" + addr}, h, nil)
		res, _ := s.ProbeOnce(context.Background(), "p")
		if res.Reason != ReasonConnect {
			t.Fatalf("reason %q", res.Reason)
		}
		checkOnce(t, s, "p", ReasonConnect)
	})
}

// checkOnce asserts exactly one request and exactly one failure, of reason
// want, in both the metrics and the snapshot.
func checkOnce(t *testing.T, s *Scheduler, profile, want string) {
	t.Helper()
	for r, v := range failures(s, profile) {
		exp := 0.0
		if r == want {
			exp = 1
		}
		if v != exp {
			t.Errorf("vllm_probe_failures_total{reason=%q} = %v, want %v", r, v, exp)
		}
	}
	if v := testutil.ToFloat64(s.m.requests.WithLabelValues(profile)); v != 1 {
		t.Errorf("vllm_probe_requests_total = %v", v)
	}
	p := s.Latest().Profiles[profile]
	if p.Failures[want] != 1 || p.LastSuccess || p.TTFT.Count != 0 {
		t.Errorf("snapshot: failures %v last_success %v ttft count %v", p.Failures, p.LastSuccess, p.TTFT.Count)
	}
	if v := testutil.ToFloat64(s.m.lastSuccess.WithLabelValues(profile)); v != 0 {
		t.Errorf("vllm_probe_last_success = %v", v)
	}
}

// TestBackoffOnFailuresAndOverload: failures back off exponentially; a 503
// or a 429 (the server asking for less load) doubles from the first one and
// its Retry-After, in seconds or as an HTTP date on the injected clock, is
// honoured up to backoff_max.
func TestBackoffOnFailuresAndOverload(t *testing.T) {
	for _, c := range []struct {
		code       int
		retryAfter string          // "date+N": an HTTP date N seconds after the request
		want       []time.Duration // gaps between successive probes
	}{
		// 500: first failure keeps the interval, then doubles, capped at 40s.
		{500, "", []time.Duration{10, 20, 40, 40, 40}},
		// 503 and 429: double from the first one.
		{503, "", []time.Duration{20, 40, 40, 40, 40}},
		{429, "", []time.Duration{20, 40, 40, 40, 40}},
		// Retry-After beyond the back-off is honoured (up to the cap).
		{503, "35", []time.Duration{35, 40, 40, 40, 40}},
		{429, "35", []time.Duration{35, 40, 40, 40, 40}},
		{429, "date+33", []time.Duration{33, 40, 40, 40, 40}},
		// An absurd one is held to backoff_max.
		{429, "999999999999999", []time.Duration{40, 40, 40, 40, 40}},
		{429, "date+100000000", []time.Duration{40, 40, 40, 40, 40}},
		// On a 500 Retry-After means nothing.
		{500, "35", []time.Duration{10, 20, 40, 40, 40}},
	} {
		clk := newFakeClock()
		srv := newFakeVLLM(t, func(w http.ResponseWriter, r *http.Request, _ request) {
			if n, ok := strings.CutPrefix(c.retryAfter, "date+"); ok {
				secs, _ := strconv.Atoi(n)
				w.Header().Set("Retry-After", clk.Now().Add(time.Duration(secs)*time.Second).UTC().Format(http.TimeFormat))
			} else if c.retryAfter != "" {
				w.Header().Set("Retry-After", c.retryAfter)
			}
			w.WriteHeader(c.code)
		})
		h, _ := writeConfig(t, strings.Replace(probesYAML("m", profile("p", "completions", 8, 2, "")), "backoff_max: 1m", "backoff_max: 40s", 1))
		s := New(Options{URL: srv.URL, Clock: clk}, h, nil)
		start := clk.Now()
		var at []time.Duration
		for range 300 {
			n := len(srv.requests())
			s.Tick(context.Background(), clk.Now())
			if len(srv.requests()) > n {
				at = append(at, clk.Now().Sub(start))
			}
			clk.Add(time.Second)
		}
		var gaps []time.Duration
		for i := 1; i < len(at) && i <= len(c.want); i++ {
			gaps = append(gaps, (at[i]-at[i-1])/time.Second)
		}
		if !slices.Equal(gaps, c.want) {
			t.Errorf("%d Retry-After %q: gaps %v s, want %v s (probes at %v)", c.code, c.retryAfter, gaps, c.want, at)
		}
	}
}

func TestRecoveryResetsBackoff(t *testing.T) {
	fail := true
	srv := newFakeVLLM(t, func(w http.ResponseWriter, r *http.Request, req request) {
		if fail {
			w.WriteHeader(500)
			return
		}
		writeStream(w, r.URL.Path, req, streamSpec{})
	})
	clk := newFakeClock()
	h, _ := writeConfig(t, probesYAML("m", profile("p", "completions", 8, 2, "")))
	s := New(Options{URL: srv.URL, Clock: clk}, h, nil)
	for range 3 {
		res, _ := s.ProbeOnce(context.Background(), "p")
		if res.Reason != ReasonHTTP5xx {
			t.Fatalf("reason %q", res.Reason)
		}
	}
	fail = false
	if res, _ := s.ProbeOnce(context.Background(), "p"); res.Reason != "" {
		t.Fatalf("reason %q", res.Reason)
	}
	s.mu.Lock()
	c := s.profiles["p"].consecutive
	s.mu.Unlock()
	if c != 0 {
		t.Fatalf("consecutive failures %d after a success", c)
	}
}

func TestTTFTGapUsesServerTTFT(t *testing.T) {
	srv := newFakeVLLM(t, nil)
	h, _ := writeConfig(t, probesYAML("m", profile("p", "completions", 8, 3, "")))
	var asked time.Duration
	var s *Scheduler
	s = New(Options{URL: srv.URL, ServerTTFT: func(model string, w time.Duration) snapshot.Value {
		if model != "m" || s.Model() != "m" { // Model must not deadlock here
			t.Errorf("model %q", model)
		}
		asked = w
		return snapshot.Some(0.0001)
	}}, h, nil)
	var ttfts []float64
	for range 3 {
		res, _ := s.ProbeOnce(context.Background(), "p")
		ttfts = append(ttfts, res.TTFT.Seconds())
	}
	want := median(ttfts) - 0.0001
	got := s.Latest().Profiles["p"].TTFTGap
	if !got.OK || got.V != want || asked != 5*time.Minute {
		t.Fatalf("gap %+v, want %v (window asked %v)", got, want, asked)
	}
	if v := testutil.ToFloat64(s.m.ttftGap.WithLabelValues("p")); v != want {
		t.Fatalf("vllm_probe_ttft_gap_seconds = %v", v)
	}
}

func TestDeltaMedian(t *testing.T) {
	b := []float64{0.1, 0.2, 0.4}
	older := snapshot.Histogram{Bounds: b, Counts: []float64{5, 5, 5}, Count: 5}
	newer := snapshot.Histogram{Bounds: b, Counts: []float64{5, 15, 25}, Count: 25}
	// delta: 0 in (0,0.1], 10 in (0.1,0.2], 10 in (0.2,0.4]; rank 10 -> 0.2.
	if v := deltaMedian(newer, older); !v.OK || v.V != 0.2 {
		t.Fatalf("median %+v", v)
	}
	newer.Counts = []float64{5, 10, 25}
	// rank 10 falls in (0.2,0.4] with 5 below: 0.2 + 0.2*(10-5)/15.
	if v := deltaMedian(newer, older); !v.OK || v.V != 0.2+0.2*5.0/15 {
		t.Fatalf("median %+v", v)
	}
	if v := deltaMedian(older, newer); v.OK {
		t.Fatal("reset gave a median")
	}
	if v := deltaMedian(older, older); v.OK {
		t.Fatal("no observations gave a median")
	}
}

func TestPromptsColdAndWarm(t *testing.T) {
	srv := newFakeVLLM(t, nil)
	h, _ := writeConfig(t, probesYAML("m",
		profile("cold", "completions", 64, 2, ""),
		profile("warm", "completions", 64, 2, ", prefix: warm, warm_prefix_tokens: 48"),
		profile("warmchat", "chat", 40, 2, ", prefix: warm"),
	))
	s := New(Options{URL: srv.URL}, h, nil)
	for range 2 {
		for _, p := range []string{"cold", "warm", "warmchat"} {
			if res, err := s.ProbeOnce(context.Background(), p); err != nil || res.Reason != "" {
				t.Fatalf("%s: %v %q", p, err, res.Reason)
			}
		}
	}
	reqs := srv.requests()
	byName := map[string][]seenRequest{}
	for _, r := range reqs {
		id := strings.TrimPrefix(r.header.Get("X-Request-Id"), RequestIDPrefix)
		name := id[:strings.LastIndexByte(id, '-')]
		byName[name] = append(byName[name], r)
	}
	cold, warm, chat := byName["cold"], byName["warm"], byName["warmchat"]
	if len(cold) != 2 || len(warm) != 2 || len(chat) != 2 {
		t.Fatalf("requests by profile: %d %d %d", len(cold), len(warm), len(chat))
	}
	if common(cold[0].req.Prompt, cold[1].req.Prompt) > 2 {
		t.Errorf("cold prompts share a prefix: %d", common(cold[0].req.Prompt, cold[1].req.Prompt))
	}
	if n := common(warm[0].req.Prompt, warm[1].req.Prompt); n < 48 || n > 52 {
		t.Errorf("warm prompts share %d leading tokens, want 48", n)
	}
	if chat[0].req.Messages[0].Content != chat[1].req.Messages[0].Content {
		t.Error("warm chat prompts (whole prompt fixed) differ")
	}
	if cold[0].header.Get("X-Request-Id") == cold[1].header.Get("X-Request-Id") {
		t.Error("request ids repeat")
	}
}

func common(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func TestSecretsAndContentNeverLogged(t *testing.T) {
	srv := newFakeVLLM(t, func(w http.ResponseWriter, r *http.Request, req request) {
		writeStream(w, r.URL.Path, req, streamSpec{errorAfter: 2})
	})
	var buf bytes.Buffer
	logger := log.NewLogfmtLogger(log.NewSyncWriter(&buf))
	h, _ := writeConfig(t, probesYAML("m", profile("p", "chat", 16, 3, "")))
	s := New(Options{URL: srv.URL, APIKey: "TOPSECRETKEY"}, h, logger)
	res, _ := s.ProbeOnce(context.Background(), "p")
	if res.Reason != ReasonStreamError {
		t.Fatalf("reason %q", res.Reason)
	}
	out := buf.String()
	if !strings.Contains(out, "stream_error") {
		t.Fatalf("failure not logged at all: %q", out)
	}
	// The server's error text is logged (what failed is the point of the
	// line), never the key, the prompt or the generated text.
	if !strings.Contains(out, "EngineCore encountered an issue.") {
		t.Errorf("the server's error text is not in the log: %q", out)
	}
	prompt := srv.requests()[0].req.Messages[0].Content
	for _, secret := range []string{"TOPSECRETKEY", prompt, " w"} {
		if strings.Contains(out, secret) {
			t.Errorf("log contains %q: %s", secret, out)
		}
	}
}

func TestProbeOnceErrors(t *testing.T) {
	srv := newFakeVLLM(t, nil)
	h, _ := writeConfig(t, strings.Replace(probesYAML("m", profile("p", "completions", 8, 2, "")), "max_requests_per_minute: 600", "max_requests_per_minute: 1", 1))
	clk := newFakeClock()
	s := New(Options{URL: srv.URL, Clock: clk}, h, nil)
	if _, err := s.ProbeOnce(context.Background(), "nope"); !errors.Is(err, ErrUnknownProfile) {
		t.Fatalf("unknown profile: %v", err)
	}
	if _, err := s.ProbeOnce(context.Background(), "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ProbeOnce(context.Background(), "p"); !errors.Is(err, ErrBudget) {
		t.Fatalf("second probe within a minute: %v", err)
	}
	if v := s.Latest().Profiles["p"].BudgetSkips; v != 1 {
		t.Fatalf("budget skips %v", v)
	}
	clk.Add(61 * time.Second)
	if _, err := s.ProbeOnce(context.Background(), "p"); err != nil {
		t.Fatalf("after a minute: %v", err)
	}
}

func TestBadURLCountsConnect(t *testing.T) {
	h, _ := writeConfig(t, probesYAML("m", profile("p", "completions", 8, 2, "")))
	s := New(Options{URL: "ftp://x"}, h, nil)
	res, err := s.ProbeOnce(context.Background(), "p")
	if err != nil || res.Reason != ReasonConnect {
		t.Fatalf("%v %q", err, res.Reason)
	}
	for u, want := range map[string]string{
		"http://h:8000/metrics/": "http://h:8000", "https://h/": "https://h", "http://h:8000": "http://h:8000",
		"h:8000": "", "http://": "", "ftp://u:secret@h": "",
	} {
		got, err := BaseURL(u)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("BaseURL(%q) = %q, %v; want %q", u, got, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("BaseURL error echoes credentials: %v", err)
		}
	}
}

func TestRunAndReload(t *testing.T) {
	seen := make(chan string, 100)
	srv := newFakeVLLM(t, func(w http.ResponseWriter, r *http.Request, req request) {
		seen <- r.Header.Get("X-Request-Id")
		writeStream(w, r.URL.Path, req, streamSpec{})
	})
	h, path := writeConfig(t, probesYAML("m", profile("first", "completions", 8, 2, "")))
	s := New(Options{URL: srv.URL}, h, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	waitFor := func(prefix string) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case id := <-seen:
				if strings.HasPrefix(id, RequestIDPrefix+prefix+"-") {
					return
				}
			case <-timeout:
				t.Fatalf("no probe of %s", prefix)
			}
		}
	}
	waitFor("first")
	writeFile(t, path, probesYAML("m", profile("second", "chat", 8, 2, "")))
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	waitFor("second")
	// Let it finish: a probe cut short by stopping Run is not recorded. The
	// probe runs over a real socket (httptest), out of testing/synctest's
	// sight, so poll.
	sharedtest.Poll(t, 10*time.Second, time.Millisecond, "probe of second recorded", nil, func() (bool, string) {
		return s.Latest().Profiles["second"].Requests > 0, "no request recorded"
	})
	cancel()
	<-done

	// Same name, new timing: counters stay. Same name, new request shape:
	// the profile's series start afresh.
	before := testutil.ToFloat64(s.m.requests.WithLabelValues("second"))
	writeFile(t, path, strings.Replace(probesYAML("m", profile("second", "chat", 8, 2, "")), "interval: 10s", "interval: 20s", 1))
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := s.Latest().Profiles["second"].Requests; got != before || before == 0 {
		t.Fatalf("timing change reset counters: %v -> %v", before, got)
	}
	writeFile(t, path, probesYAML("m", profile("second", "chat", 16, 2, "")))
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := s.Latest().Profiles["second"].Requests; got != 0 {
		t.Fatalf("changed request shape kept %v requests", got)
	}
	if v := testutil.ToFloat64(s.m.requests.WithLabelValues("second")); v != 0 {
		t.Fatalf("changed request shape kept vllm_probe_requests_total %v", v)
	}

	for _, mf := range gatherPedantic(t, s) {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "profile" && l.GetValue() == "first" {
					t.Fatalf("series of removed profile remain: %s", mf.GetName())
				}
			}
		}
	}
	if _, ok := s.Latest().Profiles["first"]; ok {
		t.Fatal("removed profile still in the snapshot")
	}
}

func TestExpositionLintAndNativeHistograms(t *testing.T) {
	srv := newFakeVLLM(t, nil)
	h, _ := writeConfig(t, probesYAML("m", profile("p", "completions", 8, 4, "")))
	s := New(Options{URL: srv.URL}, h, nil)
	if _, err := s.ProbeOnce(context.Background(), "p"); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.CollectAndLint(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetName() == "vllm_probe_time_to_first_token_seconds" {
			hist := mf.GetMetric()[0].GetHistogram()
			if hist.Schema == nil || len(hist.GetBucket()) != len(DefaultExportBounds.TTFT) {
				t.Errorf("ttft histogram: schema %v, %d classic buckets", hist.Schema, len(hist.GetBucket()))
			}
		}
		if mf.GetName() == "vllm_probe_failures_total" && len(mf.GetMetric()) != len(Reasons) {
			t.Errorf("failures pre-created for %d reasons", len(mf.GetMetric()))
		}
	}
	for _, n := range []string{"vllm_probe_time_to_first_token_seconds", "vllm_probe_time_per_output_token_seconds",
		"vllm_probe_inter_token_latency_seconds", "vllm_probe_e2e_latency_seconds", "vllm_probe_requests_total",
		"vllm_probe_failures_total", "vllm_probe_output_tokens_total", "vllm_probe_chunks_total", "vllm_probe_last_success",
		"vllm_probe_last_ttft_seconds", "vllm_probe_last_timestamp_seconds", "vllm_engine_stalled", "vllm_probe_skipped_total"} {
		if !names[n] {
			t.Errorf("%s not exported", n)
		}
	}
}

func TestTTFTGapFromVLLMSnapshots(t *testing.T) {
	srv := newFakeVLLM(t, nil)
	h, _ := writeConfig(t, probesYAML("m", profile("p", "completions", 8, 3, "")))
	// Two scrapes a minute apart: 10 requests in (0,0.001], 10 in (0.001,0.005]
	// in between, so the server-side median over the window is 0.001.
	b := []float64{0.001, 0.005, 0.01, 0.02, 0.04} // vLLM's first TTFT buckets
	hist := func(n1, n2 float64) snapshot.Histogram {
		c := make([]float64, len(b))
		for i := range c {
			c[i] = n1 + n2
		}
		c[0] = n1
		return snapshot.Histogram{Bounds: b, Counts: c, Count: n1 + n2}
	}
	t0 := time.Now()
	snaps := []*snapshot.VLLM{
		{Time: t0.Add(-time.Minute), Up: true, Models: map[string]*snapshot.Model{"m": {Histograms: snapshot.HistogramsOf(map[snapshot.HistogramName]snapshot.Histogram{snapshot.TTFT: hist(5, 5)})}}},
		{Time: t0, Up: true, Models: map[string]*snapshot.Model{"m": {Histograms: snapshot.HistogramsOf(map[snapshot.HistogramName]snapshot.Histogram{snapshot.TTFT: hist(15, 15)})}}},
	}
	calls := 0
	s := New(Options{URL: srv.URL, VLLM: func() *snapshot.VLLM {
		v := snaps[min(calls, len(snaps)-1)]
		calls++
		return v
	}}, h, nil)
	res, err := s.ProbeOnce(context.Background(), "p")
	if err != nil || res.Reason != "" {
		t.Fatal(err, res.Reason)
	}
	got := s.Latest().Profiles["p"].TTFTGap
	if want := res.TTFT.Seconds() - 0.001; !got.OK || math.Abs(got.V-want) > 1e-12 {
		t.Fatalf("gap %+v, want %v", got, want)
	}
}
