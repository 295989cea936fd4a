package probes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
)

// Failure reasons (the `reason` label of vllm_probe_failures_total). A probe
// counts at most one of them.
const (
	ReasonTimeout        = "timeout"         // the profile's timeout elapsed (before or during the stream)
	ReasonConnect        = "connect"         // no HTTP response: refused, reset, DNS, TLS
	ReasonHTTP4xx        = "http_4xx"        // a non-200 status below 500 (incl. 3xx, never followed)
	ReasonHTTP5xx        = "http_5xx"        // status >= 500 (503 also backs off)
	ReasonStreamError    = "stream_error"    // in-stream {"error":...}, finish_reason error/abort, cut stream, bad JSON
	ReasonShortOutput    = "short_output"    // fewer completion tokens than asked, or no content chunk at all
	ReasonLengthMismatch = "length_mismatch" // usage disagrees with the request (prompt length, too many tokens) or is missing
	// ReasonContextLength: the server refused the request as longer than
	// the model's context (an HTTP 4xx or in-stream error saying so).
	ReasonContextLength = "context_length"
	// ReasonUnknownModel: the profile's model (a served model name or a
	// LoRA adapter) is not among those GET /v1/models lists; nothing was
	// sent.
	ReasonUnknownModel = "unknown_model"
)

// Reasons lists every failure reason in a fixed order; all are pre-created.
var Reasons = []string{ReasonTimeout, ReasonConnect, ReasonHTTP4xx, ReasonHTTP5xx, ReasonStreamError, ReasonShortOutput, ReasonLengthMismatch, ReasonContextLength, ReasonUnknownModel}

// RequestIDPrefix starts the X-Request-Id of every probe request, so probe
// traffic can be found in vLLM's logs and told apart at a gateway.
const RequestIDPrefix = "vllm-exporter-probe-"

// ProbeUser is the OpenAI `user` field sent with every probe.
const ProbeUser = "vllm-exporter-probe"

// Result is one probe's outcome and measurements. Durations are measured
// from the instant before the request is sent with a monotonic clock; chunk
// times are when the bytes of the event were read from the connection.
type Result struct {
	Profile   string
	RequestID string // the X-Request-Id sent
	Start     time.Time
	// Reason is "" on success, else one of Reasons.
	Reason string
	// Detail says what failed: the server's error text (HTTP error body or
	// in-stream error, truncated to 240 characters, credentials scrubbed)
	// or the probe's own description. Empty on success.
	Detail string
	// Refused: not sent, the profile does not fit the served model's
	// max_model_len even shrunk (Detail says so).
	Refused    bool
	StatusCode int
	// RetryAfter is the server's Retry-After on 503 or 429, if any.
	RetryAfter time.Duration

	// Chunks counts the stream chunks that carry generated text (a
	// completions choice's text, a chat delta's content or reasoning). A
	// chat role-only delta, a final chunk with only a finish reason and a
	// usage-only chunk carry none and are not counted.
	Chunks int
	// TTFT: the first chunk with generated text. E2E: the last one.
	TTFT, E2E time.Duration
	// ITL holds the gaps between successive chunks with generated text
	// (len(ITL) = Chunks-1), as vLLM's benchmark measures them.
	ITL []time.Duration
	// TPOT = (E2E-TTFT)/(CompletionTokens-1); valid when HasTPOT.
	TPOT    time.Duration
	HasTPOT bool

	HasUsage                       bool
	PromptTokens, CompletionTokens int
}

// FirstToken reports whether any content arrived.
func (r *Result) FirstToken() bool { return r.Chunks > 0 }

// chunk is the subset of a vLLM completions/chat stream chunk a probe reads.
// Both the OpenAI-shaped error ({"error":{...}}) and the pre-0.10.1 flat
// shape ({"object":"error",...}) are recognised.
type chunk struct {
	Object  string          `json:"object"`
	Error   json.RawMessage `json:"error"`
	Choices []struct {
		FinishReason *string `json:"finish_reason"`
		Text         string  `json:"text"` // completions
		Delta        struct {
			Content string `json:"content"`
			// Reasoning models stream their thinking here (vLLM's
			// reasoning parsers: reasoning_content, newer reasoning);
			// those are generated tokens too.
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
		} `json:"delta"` // chat
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// hasText reports whether the chunk carries generated text.
func (c *chunk) hasText() bool {
	for _, ch := range c.Choices {
		if ch.Text != "" || ch.Delta.Content != "" || ch.Delta.ReasoningContent != "" || ch.Delta.Reasoning != "" {
			return true
		}
	}
	return false
}

type streamOptions struct {
	IncludeUsage         bool `json:"include_usage"`
	ContinuousUsageStats bool `json:"continuous_usage_stats"`
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// request is the JSON body of a probe. Prompt is set for completions,
// Messages for chat; exactly one of MaxTokens/MaxCompletionTokens is set.
type request struct {
	Model               string        `json:"model,omitempty"`
	Prompt              []int         `json:"prompt,omitempty"`
	Messages            []message     `json:"messages,omitempty"`
	MaxTokens           int           `json:"max_tokens,omitempty"`
	MaxCompletionTokens int           `json:"max_completion_tokens,omitempty"`
	MinTokens           int           `json:"min_tokens"`
	IgnoreEOS           bool          `json:"ignore_eos"`
	Temperature         float64       `json:"temperature"`
	Stream              bool          `json:"stream"`
	StreamOptions       streamOptions `json:"stream_options"`
	User                string        `json:"user"`
}

// buildRequest makes the body for one probe of pr. prompt is the token-ID
// prompt (completions) and text the chat message (chat).
func buildRequest(pr *config.ProbeProfile, model string, prompt []int, text string) ([]byte, string) {
	req := request{
		Model:         model,
		MinTokens:     pr.OutputTokens,
		IgnoreEOS:     true,
		Stream:        true,
		StreamOptions: streamOptions{IncludeUsage: true, ContinuousUsageStats: false},
		User:          ProbeUser,
	}
	ep := config.ProbeEndpoints[pr.Endpoint]
	if ep.TokenPrompt {
		req.Prompt = prompt
		req.MaxTokens = pr.OutputTokens
	} else {
		req.Messages = []message{{Role: "user", Content: text}}
		req.MaxCompletionTokens = pr.OutputTokens
	}
	b, err := json.Marshal(&req)
	if err != nil {
		panic("probes: marshal request: " + err.Error()) // plain struct: cannot fail
	}
	return b, ep.Path
}

// target is what one probe needs from the scheduler.
type target struct {
	baseURL   string
	client    *http.Client
	scrub     *upstream.Scrubber // what error texts are scrubbed with
	now       func() time.Time
	maxEvent  int
	requestID string
}

// do sends one probe and measures it. It never logs or keeps the prompt or
// the generated text.
func (t *target) do(ctx context.Context, pr *config.ProbeProfile, body []byte, path string) Result {
	res := Result{Profile: pr.Name, Start: t.now()}
	ctx, cancel := context.WithTimeout(ctx, pr.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.baseURL+path, bytes.NewReader(body))
	if err != nil {
		res.Reason = ReasonConnect
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-Request-Id", t.requestID)
	res.Start = t.now()
	resp, err := t.client.Do(req)
	if err != nil {
		res.Reason = classifyErr(ctx, err, ReasonConnect)
		res.Detail = t.transportDetail(res.Reason, pr, err)
		return res
	}
	defer resp.Body.Close()
	res.StatusCode = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		res.Reason = statusReason(resp.StatusCode)
		if overloaded(resp.StatusCode) {
			res.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), t.now())
		}
		// Read a little (the connection can then be reused) for the
		// server's error text, kept scrubbed and truncated.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		res.Detail = fmt.Sprintf("HTTP %d", resp.StatusCode)
		if d := errorDetail(b, t.scrub); d != "" {
			res.Detail += ": " + d
		}
		if resp.StatusCode < 500 && contextLengthError(res.Detail) {
			res.Reason = ReasonContextLength
		}
		return res
	}
	t.readStream(ctx, resp.Body, t.now, pr, &res)
	return res
}

// readStream consumes the SSE body event by event and fills res.
// Events are stamped with now, called when a body Read returns bytes. It is
// long because it is one loop over the stream whose cases are the kinds of
// event (error, usage, text, finish-only) and the checks after the last one;
// split, the measurement rules would be spread over several functions.
func (t *target) readStream(ctx context.Context, body io.Reader, now func() time.Time, pr *config.ProbeProfile, res *Result) {
	sr := NewSSEReader(body, now, t.maxEvent)
	var last time.Time
	done := false
	for !done {
		ev, err := sr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // ended without [DONE]: cut
			}
			res.Reason = classifyErr(ctx, err, ReasonStreamError)
			res.Detail = t.transportDetail(res.Reason, pr, err)
			return
		}
		data := bytes.TrimSpace(ev.Data)
		if string(data) == "[DONE]" {
			done = true
			continue
		}
		c, err := readChunk(data)
		if err != nil {
			res.Reason, res.Detail = ReasonStreamError, "a stream event is not JSON"
			return
		}
		if c.isError {
			// An error sent as SSE data once the stream had started
			// (vLLM answers 200 and reports some errors in-stream).
			res.Reason, res.Detail = ReasonStreamError, "in-stream error"
			if d := errorDetail(data, t.scrub); d != "" {
				res.Detail += ": " + d
			}
			if contextLengthError(res.Detail) {
				res.Reason = ReasonContextLength
			}
			return
		}
		// Only chunks with generated text are tokens: a role-only delta,
		// a last chunk with just a finish reason (some OpenAI-compatible
		// servers send one) and the usage chunk are not, and counting them
		// would add ITL gaps and stretch E2E past the last token.
		if c.hasText {
			if res.Chunks == 0 {
				res.TTFT = ev.At.Sub(res.Start)
			} else {
				res.ITL = append(res.ITL, ev.At.Sub(last))
			}
			last = ev.At
			res.Chunks++
		}
		if c.badFinish != "" {
			res.Reason, res.Detail = ReasonStreamError, "finish_reason "+c.badFinish
			return
		}
		// The final usage chunk (choices: []) carries the totals; if a
		// server adds cumulative usage to every chunk the last one wins.
		if c.hasUsage {
			res.HasUsage = true
			res.PromptTokens = c.promptTokens
			res.CompletionTokens = c.completionTokens
		}
	}
	// Read to the end of the body (normally just the chunked-encoding
	// trailer) so the connection is reused and the next probe's TTFT does
	// not include a TCP (and TLS) handshake.
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	if res.Chunks > 0 {
		res.E2E = last.Sub(res.Start)
	}
	if res.HasUsage && res.CompletionTokens > 1 && res.Chunks > 0 {
		res.TPOT = (res.E2E - res.TTFT) / time.Duration(res.CompletionTokens-1)
		res.HasTPOT = true
	}
	switch {
	case res.Chunks == 0:
		res.Reason, res.Detail = ReasonShortOutput, "no chunk with generated text"
	case !res.HasUsage:
		res.Reason, res.Detail = ReasonLengthMismatch, "no usage in the stream: lengths cannot be verified" // cannot verify lengths
	case res.CompletionTokens < pr.OutputTokens:
		res.Reason, res.Detail = ReasonShortOutput, fmt.Sprintf("%d completion tokens, asked for %d", res.CompletionTokens, pr.OutputTokens)
	case res.CompletionTokens > pr.OutputTokens:
		res.Reason, res.Detail = ReasonLengthMismatch, fmt.Sprintf("%d completion tokens, asked for %d", res.CompletionTokens, pr.OutputTokens)
	case config.ProbeEndpoints[pr.Endpoint].TokenPrompt && res.PromptTokens != pr.InputTokens:
		// Chat prompts go through the chat template, so only token-ID
		// prompts have an exact expected length.
		res.Reason, res.Detail = ReasonLengthMismatch, fmt.Sprintf("usage says %d prompt tokens, %d were sent", res.PromptTokens, pr.InputTokens)
	}
}

// transportDetail describes a failure without a server answer. The
// error's own text is kept without the URL (net/http quotes it, and it may
// carry credentials).
func (t *target) transportDetail(reason string, pr *config.ProbeProfile, err error) string {
	if reason == ReasonTimeout {
		return fmt.Sprintf("no complete answer within the %s timeout", pr.Timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "the stream ended before [DONE]"
	}
	return cleanDetail(err.Error(), t.scrub)
}

// classifyErr maps a transport or body-read error: the probe's own deadline
// is a timeout, anything else is fallback.
func classifyErr(ctx context.Context, err error, fallback string) string {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ReasonTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ReasonTimeout
	}
	return fallback
}

func statusReason(code int) string {
	if code >= 500 {
		return ReasonHTTP5xx
	}
	return ReasonHTTP4xx
}

// overloaded: the server asks for less load (503 Service Unavailable, 429
// Too Many Requests); the probes back off from the first one and honour
// its Retry-After.
func overloaded(code int) bool {
	return code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests
}

// maxRetryAfter bounds what a Retry-After can ask for (the scheduler caps
// it at backoff_max too): a day, so a hostile value cannot overflow.
const maxRetryAfter = 24 * time.Hour

// parseRetryAfter reads delta-seconds or an HTTP date; 0 when absent/bad.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseUint(v, 10, 64); err == nil && n > 0 {
		return time.Duration(min(n, uint64(maxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

// modelsResponse is GET /v1/models. vLLM lists each served model's
// max_model_len (prompt plus output tokens it accepts), then its LoRA
// adapters (--lora-modules) with their base model as parent and no
// max_model_len.
type modelsResponse struct {
	Data []struct {
		ID          string `json:"id"`
		Parent      string `json:"parent"`
		MaxModelLen int    `json:"max_model_len"`
	} `json:"data"`
}

// maxModelLen is the context of a listed model: its own, or for a LoRA
// adapter its parent's (0: not given).
func (m *modelsResponse) maxModelLen(i int) int {
	d := m.Data[i]
	if d.MaxModelLen > 0 || d.Parent == "" {
		return max(d.MaxModelLen, 0)
	}
	for _, p := range m.Data {
		if p.ID == d.Parent {
			return max(p.MaxModelLen, 0)
		}
	}
	return 0
}

// maxListedModels bounds the served names an unknown_model detail quotes.
const maxListedModels = 8

// discoverModel asks the server what it serves: want's entry, or with want
// empty the first model listed, and that model's max_model_len (0 when the
// server does not say). On failure it returns the failure reason to count
// and a detail.
func (t *target) discoverModel(ctx context.Context, timeout time.Duration, want string) (model string, maxLen int, reason, detail string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.baseURL+"/v1/models", nil)
	if err != nil {
		return "", 0, ReasonConnect, "GET /v1/models: bad request"
	}
	resp, err := t.client.Do(req)
	if err != nil {
		reason := classifyErr(ctx, err, ReasonConnect)
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", 0, reason, "GET /v1/models: " + cleanDetail(err.Error(), t.scrub)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return "", 0, statusReason(resp.StatusCode), fmt.Sprintf("GET /v1/models: HTTP %d: %s", resp.StatusCode, errorDetail(b, t.scrub))
	}
	var m modelsResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&m); err != nil {
		return "", 0, classifyErr(ctx, err, ReasonStreamError), "GET /v1/models: the answer is not a model list"
	}
	var listed []string
	for i, d := range m.Data {
		if d.ID != "" && (want == "" || d.ID == want) {
			return d.ID, m.maxModelLen(i), "", ""
		}
		if d.ID != "" {
			listed = append(listed, d.ID)
		}
	}
	switch {
	case want != "" && len(listed) > 0:
		if len(listed) > maxListedModels {
			listed = append(listed[:maxListedModels], fmt.Sprintf("… %d more", len(listed)-maxListedModels))
		}
		return "", 0, ReasonUnknownModel, cleanDetail(fmt.Sprintf("model %q is not served (neither a model nor a LoRA adapter): GET /v1/models lists %s",
			want, strings.Join(listed, ", ")), t.scrub)
	case want != "":
		return want, 0, "", "" // nothing listed: the probe itself will tell
	}
	return "", 0, ReasonHTTP4xx, "GET /v1/models lists no model"
}

// BaseURL turns --vllm.url into the API base probes use: a trailing
// /metrics or / is removed, so both http://h:8000 and http://h:8000/metrics
// work. Anything but an http(s) URL is an error.
func BaseURL(u string) (string, error) {
	u = strings.TrimRight(strings.TrimSpace(u), "/")
	u = strings.TrimSuffix(u, "/metrics")
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		// The URL itself is not echoed: it may carry credentials.
		return "", errors.New("probes: the vLLM URL must be http(s)://host[:port]")
	}
	return u, nil
}
