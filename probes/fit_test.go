package probes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	commoncfg "github.com/prometheus/common/config"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
)

// smallContext is an OpenAI-compatible server with a 1,024-token context,
// like a third-party vLLM simulator at its default: it answers a request
// whose prompt plus max_tokens exceeds it with HTTP 200 and an in-stream
// error (as SSE data), and streams a correct answer otherwise. listLen
// says whether /v1/models lists max_model_len (vLLM does).
type smallContext struct {
	*httptest.Server
	listLen   bool
	echo      string // appended to the error message (a server echoing a credential)
	models    atomic.Int64
	mu        sync.Mutex
	completes []int // prompt lengths of the generation requests received
}

const smallContextLen = 1024

func newSmallContext(t *testing.T, listLen bool) *smallContext {
	sc := &smallContext{listLen: listLen}
	sc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			sc.models.Add(1)
			extra := ""
			if sc.listLen {
				extra = fmt.Sprintf(`,"max_model_len":%d`, smallContextLen)
			}
			fmt.Fprintf(w, `{"object":"list","data":[{"id":"small","object":"model","owned_by":"sim"%s}]}`, extra)
			return
		}
		var req request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad json", 400)
			return
		}
		sc.mu.Lock()
		sc.completes = append(sc.completes, len(req.Prompt))
		sc.mu.Unlock()
		if n := len(req.Prompt) + req.MaxTokens; n > smallContextLen {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", mustJSON(map[string]any{"error": map[string]any{
				"message": fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.%s",
					smallContextLen, n, len(req.Prompt), req.MaxTokens, sc.echo),
				"type": "BadRequestError", "param": nil, "code": 400}}))
			return
		}
		writeStream(w, r.URL.Path, req, streamSpec{})
	}))
	t.Cleanup(sc.Close)
	return sc
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (sc *smallContext) sent() []int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return append([]int(nil), sc.completes...)
}

// A profile of 1,024 input + 8 output tokens (diagnose's cold/warm pair)
// against a 1,024-token model that lists max_model_len: shrunk before the
// first request to 1,016 + 8, with a warning stating the new sizes, and it
// succeeds. A profile whose
// output alone fills the context is refused, never sent.
func TestProfilesFitMaxModelLen(t *testing.T) {
	sc := newSmallContext(t, true)
	var logs bytes.Buffer
	h, _ := writeConfig(t, probesYAML("",
		profile("cold", "completions", 1024, 8, ", prefix: cold"),
		profile("warm", "completions", 1024, 8, ", prefix: warm"),
		profile("huge", "completions", 64, 1020, "")))
	s := New(Options{URL: sc.URL}, h, log.NewLogfmtLogger(log.NewSyncWriter(&logs)))
	for _, name := range []string{"cold", "warm", "warm"} {
		res, err := s.ProbeOnce(context.Background(), name)
		if err != nil || res.Reason != "" {
			t.Fatalf("%s: %v, reason %q (%s)", name, err, res.Reason, res.Detail)
		}
		if res.PromptTokens != 1016 || res.CompletionTokens != 8 {
			t.Errorf("%s: usage %d+%d, want 1016+8", name, res.PromptTokens, res.CompletionTokens)
		}
	}
	for _, n := range sc.sent() {
		if n+8 > smallContextLen {
			t.Errorf("a %d-token prompt was sent to a %d-token model", n, smallContextLen)
		}
	}
	if !strings.Contains(logs.String(), `input_tokens 1024 -> 1016, output_tokens 8`) || !strings.Contains(logs.String(), "level=warn") {
		t.Errorf("no warning with the new sizes: %s", logs.String())
	}

	res, err := s.ProbeOnce(context.Background(), "huge")
	if !errors.Is(err, ErrTooLong) || !res.Refused {
		t.Fatalf("huge profile: %v %+v, want ErrTooLong", err, res)
	}
	if len(sc.sent()) != 3 {
		t.Errorf("the refused profile was sent: %d generation requests", len(sc.sent()))
	}
	if v := testutil.ToFloat64(s.m.skipped.WithLabelValues("huge", SkipModelLen)); v != 1 {
		t.Errorf("skipped{reason=max_model_len} = %v, want 1", v)
	}
	if !strings.Contains(res.Detail, "1020 output tokens") || !strings.Contains(res.Detail, "max_model_len 1024") || !strings.Contains(res.Detail, "lower output_tokens") {
		t.Errorf("refusal message %q", res.Detail)
	}
	p := s.Latest().Profiles
	if !strings.Contains(p["cold"].FitNote, "1024 -> 1016") || !strings.Contains(p["huge"].LastError, "not sent") {
		t.Errorf("snapshot: cold fit %q, huge last error %q", p["cold"].FitNote, p["huge"].LastError)
	}
	if notes := s.FitNotes(); len(notes) != 3 {
		t.Errorf("fit notes %q, want cold, huge and warm", notes)
	}
	if n := sc.models.Load(); n != 1 {
		t.Errorf("/v1/models asked %d times, want once", n)
	}
}

// A server that does not list max_model_len answers the oversized probe
// with an in-stream error: the failure counts reason context_length, and
// the server's text (scrubbed) reaches the result, the snapshot diagnose
// reports from and the log. The length the error names fits the next
// probe, which then succeeds.
func TestInStreamContextErrorReported(t *testing.T) {
	sc := newSmallContext(t, false)
	sc.echo = " Authorization: Bearer TOPSECRETKEY"
	var logs bytes.Buffer
	h, _ := writeConfig(t, probesYAML("", profile("cold", "completions", 1024, 8, "")))
	s := New(Options{URL: sc.URL, APIKey: "TOPSECRETKEY"}, h, log.NewLogfmtLogger(log.NewSyncWriter(&logs)))
	res, err := s.ProbeOnce(context.Background(), "cold")
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != ReasonContextLength || !strings.Contains(res.Detail, "in-stream error: This model's maximum context length is 1024 tokens. However, you requested 1032 tokens") {
		t.Fatalf("reason %q detail %q", res.Reason, res.Detail)
	}
	if strings.Contains(res.Detail, "TOPSECRETKEY") || len([]rune(res.Detail)) > len("in-stream error: ")+maxDetail+1 {
		t.Errorf("detail not scrubbed or not truncated: %q", res.Detail)
	}
	if v := testutil.ToFloat64(s.m.failures.WithLabelValues("cold", ReasonContextLength)); v != 1 {
		t.Errorf("failures{reason=context_length} = %v, want 1", v)
	}
	if v := testutil.ToFloat64(s.m.failures.WithLabelValues("cold", ReasonStreamError)); v != 0 {
		t.Errorf("failures{reason=stream_error} = %v, want 0", v)
	}
	out := logs.String()
	if !strings.Contains(out, `msg="probe failed"`) || !strings.Contains(out, "maximum context length is 1024 tokens") || strings.Contains(out, "TOPSECRETKEY") {
		t.Errorf("log line without the server's text, or with the key: %s", out)
	}
	if le := s.Latest().Profiles["cold"].LastError; !strings.HasPrefix(le, "context_length: in-stream error: This model's maximum context length is 1024") {
		t.Errorf("snapshot last error %q", le)
	}

	res, err = s.ProbeOnce(context.Background(), "cold")
	if err != nil || res.Reason != "" {
		t.Fatalf("second probe: %v %q %q", err, res.Reason, res.Detail)
	}
	if sent := sc.sent(); len(sent) != 2 || sent[1] != 1016 {
		t.Errorf("prompts sent %v, want the second fitted to 1016 tokens", sent)
	}
	if !strings.Contains(logs.String(), "input_tokens 1024 -> 1016") {
		t.Errorf("no warning with the new sizes: %s", logs.String())
	}
}

// Failures are logged once per profile and reason per failLogEvery, the
// next line saying how many were not.
func TestFailureLogRateLimited(t *testing.T) {
	srv := newFakeVLLM(t, func(w http.ResponseWriter, r *http.Request, req request) {
		writeStream(w, r.URL.Path, req, streamSpec{errorAfter: 2})
	})
	var logs bytes.Buffer
	clock := newFakeClock()
	h, _ := writeConfig(t, probesYAML("m", profile("p", "completions", 16, 3, "")))
	s := New(Options{URL: srv.URL, Clock: clock}, h, log.NewLogfmtLogger(log.NewSyncWriter(&logs)))
	for range 3 {
		if res, err := s.ProbeOnce(context.Background(), "p"); err != nil || res.Reason != ReasonStreamError {
			t.Fatalf("%v %q", err, res.Reason)
		}
	}
	if n := strings.Count(logs.String(), `msg="probe failed"`); n != 1 {
		t.Errorf("%d failure lines for 3 failures within %v, want 1: %s", n, failLogEvery, logs.String())
	}
	clock.Add(failLogEvery)
	if _, err := s.ProbeOnce(context.Background(), "p"); err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); strings.Count(out, `msg="probe failed"`) != 2 || !strings.Contains(out, "suppressed=2") {
		t.Errorf("the next line does not say 2 were suppressed: %s", out)
	}
}

func TestErrorDetail(t *testing.T) {
	cases := []struct{ body, want string }{
		{`{"error":{"message":"bad  thing\nhappened","type":"BadRequestError","code":400}}`, "bad thing happened"},
		{`{"object":"error","message":"flat shape","type":"x","code":400}`, "flat shape"},
		{`{"detail":"Not Found"}`, "Not Found"},
		{`{"error":"plain string"}`, "plain string"},
		{"<html>\n<b>gateway</b></html>", "<html> <b>gateway</b></html>"},
		{`{"error":{"message":"key sk-abcdefghijklmnop and api_key=hunter2 and Bearer tok123"}}`, "key sk-xxxxx and api_key=xxxxx and Bearer xxxxx"},
	}
	for _, c := range cases {
		if got := errorDetail([]byte(c.body), scrubberFor("")); got != c.want {
			t.Errorf("errorDetail(%q) = %q, want %q", c.body, got, c.want)
		}
	}
	long := errorDetail([]byte(strings.Repeat("x", 1000)), scrubberFor(""))
	if n := len([]rune(long)); n != maxDetail+1 || !strings.HasSuffix(long, "…") {
		t.Errorf("long text kept %d runes", n)
	}
	if got := errorDetail([]byte(`{"error":{"message":"token MYKEY rejected"}}`), scrubberFor("MYKEY")); strings.Contains(got, "MYKEY") {
		t.Errorf("configured key kept: %q", got)
	}
}

// scrubberFor is the scrubber of a connection that sends key as its bearer
// token (none when key is empty).
func scrubberFor(key string) *upstream.Scrubber {
	cfg := upstream.DefaultHTTPClientConfig()
	if key != "" {
		cfg.Authorization = &commoncfg.Authorization{Type: "Bearer", Credentials: commoncfg.Secret(key)}
	}
	u, err := upstream.New(cfg)
	if err != nil {
		panic(err)
	}
	sc := upstream.NewScrubber("http://vllm:8000", "")
	sc.Follow(u)
	return sc
}

func TestContextLengthInErrorText(t *testing.T) {
	for text, want := range map[string]int{
		"This model's maximum context length is 1024 tokens. However, you requested 1032 tokens": 1024,
		"The prompt (total length 9000) is longer than the maximum model length of 8192.":        8192,
		"max_model_len=4096 exceeded":  4096,
		"Internal Server Error":        0,
		"maximum context length is 1":  0,
		"maximum context length is ab": 0,
	} {
		if got := contextLength(text); got != want {
			t.Errorf("contextLength(%q) = %d, want %d", text, got, want)
		}
	}
}
