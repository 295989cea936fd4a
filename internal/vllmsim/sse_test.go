package vllmsim

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// startReal is vllmsimtest.Start for this package's own tests, which
// cannot import vllmsimtest (it imports vllmsim: an import cycle).
func startReal(t *testing.T, cfg Config) *Sim {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func post(t *testing.T, url, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp, string(b)
}

// strictEvents parses an SSE body exactly as vLLM writes it: only
// "data: <payload>\n\n" events, ending with "data: [DONE]\n\n", nothing else.
func strictEvents(t *testing.T, body string) []string {
	t.Helper()
	if !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("stream does not end with [DONE]: %q", body)
	}
	parts := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
	var out []string
	for i, p := range parts {
		if !strings.HasPrefix(p, "data: ") || strings.Contains(p, "\n") {
			t.Fatalf("event %d is not a single data line: %q", i, p)
		}
		out = append(out, strings.TrimPrefix(p, "data: "))
	}
	if out[len(out)-1] != "[DONE]" {
		t.Fatal("last event not [DONE]")
	}
	return out[:len(out)-1]
}

var (
	reCompChunk = regexp.MustCompile(`^\{"id":"cmpl-[0-9a-f]+","object":"text_completion","created":\d+,"model":"m","choices":\[\{"index":0,"text":"[^"]*","logprobs":null,"finish_reason":(null|"stop"|"length"),"stop_reason":null\}\](,"usage":\{"prompt_tokens":\d+,"total_tokens":\d+,"completion_tokens":\d+\})?\}$`)
	reCompUsage = regexp.MustCompile(`^\{"id":"cmpl-[0-9a-f]+","object":"text_completion","created":\d+,"model":"m","choices":\[\],"usage":\{"prompt_tokens":(\d+),"total_tokens":(\d+),"completion_tokens":(\d+)\}\}$`)
	reChatRole  = regexp.MustCompile(`^\{"id":"chatcmpl-[0-9a-f]+","object":"chat.completion.chunk","created":\d+,"model":"m","choices":\[\{"index":0,"delta":\{"role":"assistant","content":""\},"logprobs":null,"finish_reason":null\}\]\}$`)
	reChatText  = regexp.MustCompile(`^\{"id":"chatcmpl-[0-9a-f]+","object":"chat.completion.chunk","created":\d+,"model":"m","choices":\[\{"index":0,"delta":\{"content":"[^"]*"\},"logprobs":null,"finish_reason":null\}\]\}$`)
	reChatLast  = regexp.MustCompile(`^\{"id":"chatcmpl-[0-9a-f]+","object":"chat.completion.chunk","created":\d+,"model":"m","choices":\[\{"index":0,"delta":\{"content":"[^"]*"\},"logprobs":null,"finish_reason":"(stop|length)","stop_reason":null\}\]\}$`)
	reChatUsage = regexp.MustCompile(`^\{"id":"chatcmpl-[0-9a-f]+","object":"chat.completion.chunk","created":\d+,"model":"m","choices":\[\],"usage":\{"prompt_tokens":(\d+),"total_tokens":(\d+),"completion_tokens":(\d+)\}\}$`)
)

type chunkJSON struct {
	Choices []struct {
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
		Delta        struct {
			Content *string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *usageInfo `json:"usage"`
}

func decodeChunk(t *testing.T, s string) chunkJSON {
	t.Helper()
	var c chunkJSON
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		t.Fatalf("chunk is not JSON: %v: %s", err, s)
	}
	return c
}

func TestStreamShapes(t *testing.T) {
	s := startReal(t, Config{Models: []string{"m"}, Seed: 5, MeanOutputTokens: 3})
	url := s.URL()
	streamed := 0
	prompt := "Tell me a story about a stone."
	promptTokens := len(Tokenize(prompt))

	t.Run("completions without usage", func(t *testing.T) {
		_, body := post(t, url+"/v1/completions", `{"model":"m","prompt":"`+prompt+`","max_tokens":6,"ignore_eos":true,"stream":true}`, nil)
		ev := strictEvents(t, body)
		if len(ev) != 6 {
			t.Fatalf("%d chunks, want 6 (one per token)", len(ev))
		}
		var text string
		for i, e := range ev {
			if !reCompChunk.MatchString(e) || strings.Contains(e, `"usage"`) {
				t.Fatalf("chunk %d has the wrong shape: %s", i, e)
			}
			c := decodeChunk(t, e)
			text += c.Choices[0].Text
			if (i == len(ev)-1) != (c.Choices[0].FinishReason != nil) {
				t.Fatalf("finish_reason on chunk %d of %d", i, len(ev))
			}
		}
		if n := len(TextTokens(text)); n != 6 {
			t.Fatalf("text %q has %d tokens, want 6", text, n)
		}
		streamed += 6
	})
	t.Run("completions with usage", func(t *testing.T) {
		_, body := post(t, url+"/v1/completions", `{"model":"m","prompt":"`+prompt+`","max_tokens":4,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":false}}`, nil)
		ev := strictEvents(t, body)
		if len(ev) != 5 {
			t.Fatalf("%d events, want 4 chunks + usage", len(ev))
		}
		m := reCompUsage.FindStringSubmatch(ev[4])
		if m == nil || m[1] != itoa(promptTokens) || m[3] != "4" || m[2] != itoa(promptTokens+4) {
			t.Fatalf("usage chunk wrong: %s (prompt tokens %d)", ev[4], promptTokens)
		}
		streamed += 4
	})
	t.Run("completions continuous usage", func(t *testing.T) {
		_, body := post(t, url+"/v1/completions", `{"model":"m","prompt":[11,12,13],"max_tokens":3,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`, nil)
		ev := strictEvents(t, body)
		for i, e := range ev[:3] {
			c := decodeChunk(t, e)
			if !reCompChunk.MatchString(e) || c.Usage == nil || c.Usage.CompletionTokens != i+1 || c.Usage.PromptTokens != 3 {
				t.Fatalf("chunk %d lacks cumulative usage: %s", i, e)
			}
		}
		if !reCompUsage.MatchString(ev[3]) {
			t.Fatalf("final usage chunk wrong: %s", ev[3])
		}
		streamed += 3
	})
	t.Run("chat with usage", func(t *testing.T) {
		_, body := post(t, url+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"Hi there"}],"max_completion_tokens":3,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, nil)
		ev := strictEvents(t, body)
		if len(ev) != 5 || !reChatRole.MatchString(ev[0]) || !reChatText.MatchString(ev[1]) || !reChatText.MatchString(ev[2]) || !reChatLast.MatchString(ev[3]) {
			t.Fatalf("chat stream shape wrong:\n%s", strings.Join(ev, "\n"))
		}
		m := reChatUsage.FindStringSubmatch(ev[4])
		want := len(ChatTokens([]ChatMessage{{Role: "user", Content: "Hi there"}}))
		if m == nil || m[1] != itoa(want) || m[3] != "3" {
			t.Fatalf("chat usage wrong: %s (want prompt %d)", ev[4], want)
		}
		streamed += 3
	})
	t.Run("chat without usage", func(t *testing.T) {
		_, body := post(t, url+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"ignore_eos":true,"stream":true}`, nil)
		ev := strictEvents(t, body)
		if len(ev) != 3 || !reChatRole.MatchString(ev[0]) || !reChatText.MatchString(ev[1]) || !reChatLast.MatchString(ev[2]) {
			t.Fatalf("chat stream without usage wrong:\n%s", strings.Join(ev, "\n"))
		}
		streamed += 2
	})
	t.Run("chat continuous usage", func(t *testing.T) {
		_, body := post(t, url+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`, nil)
		ev := strictEvents(t, body)
		p := len(ChatTokens([]ChatMessage{{Role: "user", Content: "Hi"}}))
		// vLLM's role-only first chunk carries usage with completion_tokens 0.
		wantUsage := []string{
			`"usage":{"prompt_tokens":` + itoa(p) + `,"total_tokens":` + itoa(p) + `,"completion_tokens":0}}`,
			`"usage":{"prompt_tokens":` + itoa(p) + `,"total_tokens":` + itoa(p+1) + `,"completion_tokens":1}}`,
			`"usage":{"prompt_tokens":` + itoa(p) + `,"total_tokens":` + itoa(p+2) + `,"completion_tokens":2}}`,
		}
		if len(ev) != 4 || !strings.Contains(ev[0], `"delta":{"role":"assistant","content":""}`) || !reChatUsage.MatchString(ev[3]) {
			t.Fatalf("chat continuous-usage stream wrong:\n%s", strings.Join(ev, "\n"))
		}
		for i, w := range wantUsage {
			if !strings.HasSuffix(ev[i], w) {
				t.Fatalf("chunk %d: %s, want suffix %s", i, ev[i], w)
			}
		}
		streamed += 2
	})
	t.Run("multi-token chunks", func(t *testing.T) {
		_, body := post(t, url+"/v1/completions", `{"model":"m","prompt":[1,2],"max_tokens":7,"ignore_eos":true,"stream":true,"stream_interval":3,"stream_options":{"include_usage":true}}`, nil)
		ev := strictEvents(t, body)
		if len(ev) != 4 {
			t.Fatalf("%d events, want 1+3+3 token chunks + usage", len(ev))
		}
		for i, want := range []int{1, 3, 3} {
			if n := len(TextTokens(decodeChunk(t, ev[i]).Choices[0].Text)); n != want {
				t.Fatalf("chunk %d carries %d tokens, want %d", i, n, want)
			}
		}
		streamed += 7
	})
	t.Run("EOS after min_tokens", func(t *testing.T) {
		_, body := post(t, url+"/v1/completions", `{"model":"m","prompt":[9,9,9],"max_tokens":200,"min_tokens":5,"seed":1,"stream":true,"stream_options":{"include_usage":true}}`, nil)
		ev := strictEvents(t, body)
		last := decodeChunk(t, ev[len(ev)-2])
		u := decodeChunk(t, ev[len(ev)-1]).Usage
		if last.Choices[0].FinishReason == nil || *last.Choices[0].FinishReason != "stop" || u.CompletionTokens < 5 || u.CompletionTokens >= 200 {
			t.Fatalf("want a stop after >=5 tokens (mean output 3): %s / %+v", ev[len(ev)-2], u)
		}
		if last.Choices[0].Text != "" {
			t.Fatalf("the EOS chunk carries no text, got %q", last.Choices[0].Text)
		}
		streamed += u.CompletionTokens
	})
	t.Run("seeded requests repeat", func(t *testing.T) {
		body := `{"model":"m","prompt":"same","max_tokens":8,"min_tokens":4,"seed":42,"temperature":0}`
		_, a := post(t, url+"/v1/completions", body, nil)
		_, b := post(t, url+"/v1/completions", body, nil)
		var ra, rb struct {
			Choices []struct{ Text string } `json:"choices"`
			Usage   usageInfo               `json:"usage"`
		}
		_ = json.Unmarshal([]byte(a), &ra)
		_ = json.Unmarshal([]byte(b), &rb)
		if ra.Choices[0].Text == "" || ra.Choices[0].Text != rb.Choices[0].Text {
			t.Fatalf("same seed gave %q and %q", ra.Choices[0].Text, rb.Choices[0].Text)
		}
		if !strings.Contains(a, `"usage":{"prompt_tokens":2,`) {
			t.Fatalf("non-streaming usage wrong: %s", a)
		}
		streamed += ra.Usage.CompletionTokens + rb.Usage.CompletionTokens
	})
	fams := parseMetrics(t, s.Metrics())
	if got := sumValue(t, fams, "vllm:generation_tokens_total", nil); int(got) != streamed {
		t.Fatalf("generation_tokens_total = %v, tokens delivered to clients = %d", got, streamed)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestAPIErrorsAndAuxEndpoints(t *testing.T) {
	s := startReal(t, Config{Models: []string{"m"}, APIKey: "sekret"})
	url := s.URL()
	auth := map[string]string{"Authorization": "Bearer sekret"}
	cases := []struct {
		path, body string
		hdr        map[string]string
		status     int
		want       string
	}{
		{"/v1/completions", `{"model":"m","prompt":"x"}`, nil, 401, `{"error":"Unauthorized"}`},
		{"/v1/completions", `{"model":"m","prompt":"x"}`, map[string]string{"Authorization": "Bearer wrong"}, 401, `{"error":"Unauthorized"}`},
		{"/v1/completions", `{"model":"other","prompt":"x"}`, auth, 404, `{"error":{"message":"The model ` + "`other`" + ` does not exist.","type":"NotFoundError","param":"model","code":404}}`},
		{"/v1/completions", `{"model":"m","prompt":"x","stream_options":{"include_usage":true}}`, auth, 400, `"message":"Stream options can only be defined when ` + "`stream=True`" + `.","type":"BadRequestError"`},
		{"/v1/completions", `{"model":"m","prompt":"x","max_tokens":9000}`, auth, 400, `"message":"This model's maximum context length is 8192 tokens. However, you requested 9002 tokens (2 in the messages, 9000 in the completion)`},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("word ", 8200) + `"}]}`, auth, 400, `"message":"This model's maximum context length is 8192 tokens. However, your request has 82`},
		{"/v1/completions", `{"model":"m","prompt":"x","temperature":-1}`, auth, 400, `"param":"temperature","code":400}}`},
		{"/v1/chat/completions", `{"model":"m"}`, auth, 400, `"type":"BadRequestError"`},
		{"/v1/completions", `not json`, auth, 400, `"type":"BadRequestError"`},
		{"/v1/completions", `{"model":"m","prompt":"x","priority":1}`, auth, 400, `Priority scheduling is not enabled`},
	}
	for i, c := range cases {
		resp, body := post(t, url+c.path, c.body, c.hdr)
		if resp.StatusCode != c.status || !strings.Contains(body, c.want) {
			t.Errorf("case %d: %d %s, want %d containing %s", i, resp.StatusCode, body, c.status, c.want)
		}
	}
	// Unguarded endpoints.
	for path, want := range map[string]string{"/health": "", "/version": `{"version":"0.25.0"}`} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != want {
			t.Errorf("%s: %d %q", path, resp.StatusCode, b)
		}
	}
	req, _ := http.NewRequest("GET", url+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer sekret")
	_, b, err := testutil.Do(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `{"object":"list","data":[{"id":"m","object":"model",`) || !strings.Contains(string(b), `"max_model_len":8192`) {
		t.Errorf("/v1/models: %s", b)
	}
	fams := parseMetrics(t, s.Metrics())
	if n := sumValue(t, fams, "http_requests_total", map[string]string{"handler": "/v1/completions", "status": "4xx"}); n != 8 {
		t.Errorf("http_requests_total{/v1/completions,4xx} = %v, want 8 (401s included)", n)
	}
	_, tok := post(t, url+"/tokenize", `{"model":"m","prompt":"Hello world"}`, nil)
	if !strings.HasPrefix(tok, `{"count":3,"max_model_len":8192,"tokens":[1,`) {
		t.Errorf("/tokenize: %s", tok)
	}
}

func TestFlatErrorBodyOnV0(t *testing.T) {
	s := startReal(t, Config{Models: []string{"m"}, MetricsVersion: MetricsV0})
	resp, body := post(t, s.URL()+"/v1/completions", `{"model":"nope","prompt":"x"}`, nil)
	want := `{"object":"error","message":"The model ` + "`nope`" + ` does not exist.","type":"NotFoundError","param":"model","code":404}`
	if resp.StatusCode != 404 || body != want {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestPromptTokensDetailsReportCachedTokens(t *testing.T) {
	s := startReal(t, Config{Models: []string{"m"}, EnablePromptTokensDetails: true})
	prompt := `[` + strings.Repeat("500,", 99) + `500]` // 100 tokens: 6 full blocks cacheable
	body := `{"model":"m","prompt":` + prompt + `,"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`
	_, first := post(t, s.URL()+"/v1/completions", body, nil)
	_, second := post(t, s.URL()+"/v1/completions", body, nil)
	ev1, ev2 := strictEvents(t, first), strictEvents(t, second)
	// vLLM adds prompt_tokens_details only when num_cached_tokens is non-zero.
	if !strings.HasSuffix(ev1[len(ev1)-1], `"completion_tokens":2}}`) ||
		!strings.HasSuffix(ev2[len(ev2)-1], `"prompt_tokens_details":{"cached_tokens":96}}}`) {
		t.Fatalf("cached tokens: %s / %s", ev1[len(ev1)-1], ev2[len(ev2)-1])
	}
	_, whole := post(t, s.URL()+"/v1/completions", `{"model":"m","prompt":`+prompt+`,"max_tokens":1}`, nil)
	if !strings.Contains(whole, `"prompt_tokens_details":{"cached_tokens":96}`) {
		t.Fatalf("non-streaming usage: %s", whole)
	}
}

func TestNonStreamingChatAndPromptForms(t *testing.T) {
	s := newVirtual(t, Config{Models: []string{"m"}})
	rec := doVirtual(t, s, "POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}],"max_completion_tokens":3,"ignore_eos":true}`, nil)
	p := len(ChatTokens([]ChatMessage{{Role: "user", Content: "Hi"}}))
	var chat struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage usageInfo `json:"usage"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &chat); err != nil || rec.Code != 200 {
		t.Fatalf("chat: %d %s", rec.Code, rec.Body)
	}
	if !strings.HasPrefix(chat.ID, "chatcmpl-") || chat.Object != "chat.completion" || len(chat.Choices) != 1 ||
		chat.Choices[0].Message.Role != "assistant" || len(TextTokens(chat.Choices[0].Message.Content)) != 3 ||
		chat.Choices[0].FinishReason != "length" || chat.Usage != (usageInfo{PromptTokens: p, CompletionTokens: 3, TotalTokens: p + 3}) {
		t.Fatalf("chat response wrong: %s", rec.Body)
	}
	// One prompt in every accepted form; token ids are used as given (no BOS).
	for body, want := range map[string]int{
		`"prompt":"Hello world"`:   len(Tokenize("Hello world")),
		`"prompt":["Hello world"]`: len(Tokenize("Hello world")),
		`"prompt":[7,8,9,10]`:      4,
		`"prompt":[[7,8,9]]`:       3,
	} {
		rec := doVirtual(t, s, "POST", "/v1/completions", `{"model":"m",`+body+`,"max_tokens":1}`, nil)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"usage":{"prompt_tokens":`+itoa(want)+`,`) {
			t.Errorf("%s: %d %s, want prompt_tokens %d", body, rec.Code, rec.Body, want)
		}
	}
	for _, body := range []string{`"prompt":[]`, `"prompt":[-1]`, `"prompt":["a","b"]`} {
		if rec := doVirtual(t, s, "POST", "/v1/completions", `{"model":"m",`+body+`}`, nil); rec.Code != 400 {
			t.Errorf("%s: %d, want 400", body, rec.Code)
		}
	}
}

// Headers arrive before any token (as from vLLM's StreamingResponse); the
// first event, for chat the role-only delta, waits for the first token.
func TestStreamHeadersBeforeFirstToken(t *testing.T) {
	s := startReal(t, Config{Models: []string{"m"}, VirtualClock: true})
	req, _ := http.NewRequest("POST", s.URL()+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"ignore_eos":true,"stream":true}`))
	req.Header.Set("Content-Type", "application/json")
	// The virtual clock never moves until Advance: a response here means the
	// headers were flushed with no token produced.
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("no response headers before the first token: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if e := s.Engines()[0]; e.GenerationTokens != 0 {
		t.Fatalf("tokens produced before Advance: %+v", e)
	}
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(resp.Body); done <- b }()
	var body []byte
	for i := 0; body == nil && i < 100000; i++ {
		select {
		case body = <-done:
		default:
			s.Advance(5 * time.Millisecond)
			runtime.Gosched()
		}
	}
	ev := strictEvents(t, string(body))
	if len(ev) != 3 || !reChatRole.MatchString(ev[0]) {
		t.Fatalf("stream: %q", ev)
	}
}

// stream_options defaults drifted: include_usage defaults to true up to early
// 2026 and to false on main; without a stream_options object there is never a
// usage chunk.
func TestStreamOptionsDefaultsPerVersion(t *testing.T) {
	for _, c := range []struct {
		version, opts string
		usage         bool
	}{
		{MetricsV1, `,"stream_options":{}`, false},
		{MetricsV1_0_10, `,"stream_options":{}`, true},
		{MetricsV0, `,"stream_options":{"continuous_usage_stats":false}`, true},
		{MetricsV0, ``, false},
	} {
		s := newVirtual(t, Config{Models: []string{"m"}, MetricsVersion: c.version})
		rec := doVirtual(t, s, "POST", "/v1/completions", `{"model":"m","prompt":[5,6],"max_tokens":2,"ignore_eos":true,"stream":true`+c.opts+`}`, nil)
		ev := strictEvents(t, rec.Body.String())
		got := len(ev) == 3 && reCompUsage.MatchString(ev[2])
		if got != c.usage || len(ev) != 2+btoi(c.usage) {
			t.Errorf("%s %s: usage chunk %v, want %v: %q", c.version, c.opts, got, c.usage, ev)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
