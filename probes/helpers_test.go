package probes

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	sharedtest "github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// fakeClock is a virtual clock set by the test. After never fires: tests
// that use it drive the scheduler with Tick.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_800_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

func (c *fakeClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

// writeConfig writes a config file and returns a Holder for it.
func writeConfig(t testing.TB, yaml string) (*config.Holder, string) {
	t.Helper()
	return sharedtest.ConfigHolder(t, yaml)
}

// profileYAML renders a probes section with generous budgets.
func probesYAML(model string, profiles ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "probes:\n  model: %q\n  max_requests_per_minute: 600\n  max_tokens_per_hour: 10000000\n  backoff_max: 1m\n  profiles:\n", model)
	for _, p := range profiles {
		b.WriteString(p)
	}
	return b.String()
}

func profile(name, endpoint string, in, out int, extra string) string {
	if !strings.Contains(extra, "timeout:") {
		extra += ", timeout: 2s"
	}
	return fmt.Sprintf("    - {name: %s, endpoint: %s, input_tokens: %d, output_tokens: %d, interval: 10s, jitter: 0s%s}\n",
		name, endpoint, in, out, extra)
}

// seenRequest is what the fake server received.
type seenRequest struct {
	path   string
	header http.Header
	body   map[string]any
	req    request
}

// fakeVLLM is an httptest server speaking vLLM's streaming shapes; handle
// decides each response (nil: a correct stream).
type fakeVLLM struct {
	*httptest.Server
	seen   sharedtest.Log[seenRequest]
	handle func(w http.ResponseWriter, r *http.Request, req request)
}

func newFakeVLLM(t testing.TB, handle func(w http.ResponseWriter, r *http.Request, req request)) *fakeVLLM {
	f := &fakeVLLM{handle: handle}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			// served-model is discovered first; m is the model the tests
			// configure (a model the list lacks fails unknown_model).
			fmt.Fprint(w, `{"object":"list","data":[{"id":"served-model","object":"model","owned_by":"vllm","root":"m","parent":null},`+
				`{"id":"m","object":"model","owned_by":"vllm","root":"m","parent":null}]}`)
			return
		}
		var raw map[string]any
		var req request
		dec := json.NewDecoder(r.Body)
		if err := dec.Decode(&raw); err != nil {
			http.Error(w, `{"error":{"message":"bad json","code":400}}`, 400)
			return
		}
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &req)
		f.seen.Add(seenRequest{path: r.URL.Path, header: r.Header.Clone(), body: raw, req: req})
		if f.handle != nil {
			f.handle(w, r, req)
			return
		}
		writeStream(w, r.URL.Path, req, streamSpec{})
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeVLLM) requests() []seenRequest { return f.seen.All() }

// streamSpec bends a correct stream into a faulty one.
type streamSpec struct {
	promptDelta     int  // added to the true prompt length in usage
	completionDelta int  // added to the produced token count
	noUsage         bool // omit the usage chunk
	noDone          bool // stop before [DONE] (cut)
	errorAfter      int  // emit an in-stream error after this many chunks (0: none)
	flatError       bool // use the pre-0.10.1 flat error shape
	multi           int  // tokens in the first content chunk (>=1)
	noContent       bool // no content chunks at all
}

// writeStream writes a vLLM-shaped SSE stream answering req.
func writeStream(w http.ResponseWriter, path string, req request, s streamSpec) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	fl := w.(http.Flusher)
	chat := path == "/v1/chat/completions"
	out := req.MaxTokens
	in := len(req.Prompt)
	if chat {
		out = req.MaxCompletionTokens
		in = 0
		for _, m := range req.Messages {
			in += len(strings.Fields(m.Content)) + 7 // pretend template overhead
		}
	}
	produced := out + s.completionDelta
	if s.multi < 1 {
		s.multi = 1
	}
	emit := func(payload string) {
		fmt.Fprintf(w, "data: %s\n\n", payload)
		fl.Flush()
	}
	chunks := 0
	if chat && !s.noContent {
		emit(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`)
		chunks++
	}
	for tok := 0; tok < produced && !s.noContent; {
		n := 1
		if tok == 0 {
			n = min(s.multi, produced)
		}
		tok += n
		finish := "null"
		if tok >= produced {
			finish = `"length"`
		}
		if chat {
			emit(fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"%s"},"logprobs":null,"finish_reason":%s}]}`, strings.Repeat(" w", n), finish))
		} else {
			emit(fmt.Sprintf(`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"%s","logprobs":null,"finish_reason":%s,"stop_reason":null}]}`, strings.Repeat(" w", n), finish))
		}
		chunks++
		if s.errorAfter > 0 && chunks == s.errorAfter {
			if s.flatError {
				emit(`{"object":"error","message":"engine died","type":"InternalServerError","param":null,"code":500}`)
			} else {
				emit(`{"error":{"message":"EngineCore encountered an issue.","type":"InternalServerError","param":null,"code":500}}`)
			}
			emit("[DONE]")
			return
		}
	}
	if !s.noUsage {
		p, c := in+s.promptDelta, produced
		emit(fmt.Sprintf(`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}}`, p, p+c, c))
	}
	if !s.noDone {
		emit("[DONE]")
	}
}

// failures reads vllm_probe_failures_total for every reason.
func failures(s *Scheduler, profile string) map[string]float64 {
	out := map[string]float64{}
	for _, r := range Reasons {
		out[r] = testutil.ToFloat64(s.m.failures.WithLabelValues(profile, r))
	}
	return out
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
