package vllmsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// genParams are the parsed generation fields of a completions or chat request.
type genParams struct {
	model        string
	prompt       []int
	maxTokens    int
	minTokens    int
	ignoreEOS    bool
	stream       bool
	includeUsage bool
	continuous   bool
	seed         *int64
	interval     int
	requestID    string
	priority     int
}

type streamOptions struct {
	IncludeUsage         *bool `json:"include_usage"`
	ContinuousUsageStats *bool `json:"continuous_usage_stats"`
}

type genBody struct {
	Model               *string           `json:"model"`
	Prompt              json.RawMessage   `json:"prompt"`
	Messages            []json.RawMessage `json:"messages"`
	MaxTokens           *int              `json:"max_tokens"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	MinTokens           int               `json:"min_tokens"`
	IgnoreEOS           bool              `json:"ignore_eos"`
	Temperature         *float64          `json:"temperature"`
	Stream              bool              `json:"stream"`
	StreamOptions       *streamOptions    `json:"stream_options"`
	N                   *int              `json:"n"`
	Seed                *int64            `json:"seed"`
	StreamInterval      *int              `json:"stream_interval"`
	RequestID           string            `json:"request_id"`
	Priority            int               `json:"priority"`
}

// parsePrompt accepts str, [int], [str] (one) and [[int]] (one).
func parsePrompt(raw json.RawMessage) ([]int, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("Field required: prompt", "prompt")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return Tokenize(text), nil
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		if len(ids) == 0 {
			return nil, badRequest("Prompt cannot be empty", "prompt")
		}
		for _, t := range ids {
			if t < 0 || t >= VocabSize {
				return nil, badRequest(fmt.Sprintf("Token id %d is out of vocabulary", t), "prompt")
			}
		}
		return ids, nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil && len(texts) == 1 {
		return Tokenize(texts[0]), nil
	}
	var idss [][]int
	if json.Unmarshal(raw, &idss) == nil && len(idss) == 1 {
		return parsePrompt(mustJSON(idss[0]))
	}
	return nil, badRequest("prompt must be a string, a list of token ids, or a list with exactly one of those (the simulator serves one prompt per request)", "prompt")
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// parseMessages accepts content as a string or a list of {"type":"text","text":...} parts.
func parseMessages(raws []json.RawMessage) ([]ChatMessage, *apiError) {
	if len(raws) == 0 {
		return nil, badRequest("Field required: messages", "messages")
	}
	var out []ChatMessage
	for _, raw := range raws {
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(raw, &m); err != nil || m.Role == "" {
			return nil, badRequest("each message needs a role and content", "messages")
		}
		var text string
		if json.Unmarshal(m.Content, &text) != nil {
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(m.Content, &parts) != nil {
				return nil, badRequest("message content must be a string or a list of text parts", "messages")
			}
			var b strings.Builder
			for _, p := range parts {
				b.WriteString(p.Text)
			}
			text = b.String()
		}
		out = append(out, ChatMessage{Role: m.Role, Content: text})
	}
	return out, nil
}

// parseGen reads and checks a completions or chat request as vLLM does. It
// is long because it is one check per request field, in vLLM's order, so
// the first error named is the one vLLM names.
func (s *Sim) parseGen(r *http.Request, chat bool) (*genParams, *apiError) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return nil, badRequest("Unsupported Media Type: Only 'application/json' is allowed", "")
	}
	var b genBody
	if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 16<<20)).Decode(&b); err != nil {
		return nil, badRequest("JSON decode error: "+err.Error(), "")
	}
	p := &genParams{stream: b.Stream, minTokens: b.MinTokens, ignoreEOS: b.IgnoreEOS, seed: b.Seed,
		interval: s.cfg.StreamInterval, requestID: b.RequestID}
	if b.Model != nil {
		p.model = *b.Model
	} else if s.version.name == MetricsV0 {
		return nil, badRequest("Field required: model", "model")
	}
	var aerr *apiError
	if chat {
		var msgs []ChatMessage
		if msgs, aerr = parseMessages(b.Messages); aerr != nil {
			return nil, aerr
		}
		p.prompt = ChatTokens(msgs)
	} else if p.prompt, aerr = parsePrompt(b.Prompt); aerr != nil {
		return nil, aerr
	}
	max := b.MaxTokens
	if chat && b.MaxCompletionTokens != nil {
		max = b.MaxCompletionTokens
	}
	switch {
	case max != nil:
		p.maxTokens = *max
	case chat:
		if len(p.prompt) >= s.cfg.MaxModelLen {
			return nil, badRequest(fmt.Sprintf("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.",
				s.cfg.MaxModelLen, len(p.prompt)), "")
		}
		p.maxTokens = s.cfg.MaxModelLen - len(p.prompt)
	default:
		p.maxTokens = 16
	}
	if p.maxTokens < 1 {
		return nil, badRequest(fmt.Sprintf("max_tokens must be at least 1, got %d.", p.maxTokens), "max_tokens")
	}
	if p.minTokens < 0 || p.minTokens > p.maxTokens {
		return nil, badRequest(fmt.Sprintf("min_tokens must be between 0 and max_tokens=%d, got %d.", p.maxTokens, p.minTokens), "min_tokens")
	}
	if b.Temperature != nil && *b.Temperature < 0 {
		return nil, badRequest(fmt.Sprintf("temperature must be non-negative, got %v.", *b.Temperature), "temperature")
	}
	if b.Priority != 0 && s.cfg.SchedulingPolicy != PolicyPriority {
		// As vLLM without --scheduling-policy priority.
		return nil, badRequest(fmt.Sprintf("Got priority %d but Priority scheduling is not enabled.", b.Priority), "priority")
	}
	p.priority = b.Priority
	if b.N != nil && *b.N != 1 {
		return nil, badRequest("the simulator supports only n=1", "n")
	}
	if b.StreamInterval != nil {
		if *b.StreamInterval < 1 {
			return nil, badRequest("stream_interval must be at least 1", "stream_interval")
		}
		p.interval = *b.StreamInterval
	}
	if b.StreamOptions != nil {
		if !b.Stream {
			return nil, badRequest("Stream options can only be defined when `stream=True`.", "stream_options")
		}
		p.includeUsage = !s.version.main // default drifted to False on main
		setIf(&p.includeUsage, b.StreamOptions.IncludeUsage)
		if b.StreamOptions.ContinuousUsageStats != nil {
			p.continuous = *b.StreamOptions.ContinuousUsageStats && p.includeUsage
		}
	}
	if id := r.Header.Get("X-Request-Id"); id != "" {
		p.requestID = id
	}
	return p, nil
}

// Wire types, field order as vLLM's pydantic models serialize them.
type usageInfo struct {
	PromptTokens        int           `json:"prompt_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	PromptTokensDetails *tokenDetails `json:"prompt_tokens_details,omitempty"`
}

type tokenDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// usageFull is the non-streaming usage block (prompt_tokens_details always present, null by default).
type usageFull struct {
	PromptTokens        int           `json:"prompt_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	PromptTokensDetails *tokenDetails `json:"prompt_tokens_details"`
}

// finalUsage is the usage of a finished request; cached tokens are reported
// only with Config.EnablePromptTokensDetails (--enable-prompt-tokens-details)
// and, as in vLLM, only when the prefix-cache hit is non-zero.
func (s *Sim) finalUsage(o Output) usageInfo {
	u := usageInfo{PromptTokens: o.PromptTokens, CompletionTokens: o.CompletionTokens, TotalTokens: o.PromptTokens + o.CompletionTokens}
	if s.cfg.EnablePromptTokensDetails && o.CachedTokens > 0 { // vLLM: "and num_cached_tokens"
		u.PromptTokensDetails = &tokenDetails{CachedTokens: o.CachedTokens}
	}
	return u
}

type compStreamChoice struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
	StopReason   *int      `json:"stop_reason"`
}

type chatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// chatStreamChoice: StopReason is set (to JSON null) only on the last content
// chunk, as vLLM sets stop_reason only there (exclude_unset).
type chatStreamChoice struct {
	Index        int             `json:"index"`
	Delta        chatDelta       `json:"delta"`
	Logprobs     *struct{}       `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason,omitempty"`
}

type streamChunk struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Choices any        `json:"choices"`
	Usage   *usageInfo `json:"usage,omitempty"`
}

func strp(s string) *string { return &s }

func (s *Sim) handleGenerate(w http.ResponseWriter, r *http.Request, chat bool) {
	if _, bad := s.fault(Fault5xx); bad {
		s.writeError(w, &apiError{status: 500, typ: "InternalServerError", message: "EngineCore encountered an issue. See stack trace (above) for the root cause."})
		return
	}
	if aerr := s.refusal(); aerr != nil {
		s.writeError(w, aerr)
		return
	}
	p, aerr := s.parseGen(r, chat)
	if aerr != nil {
		s.writeError(w, aerr)
		return
	}
	h := &Handle{notify: make(chan struct{}, 1), s: s}
	err := s.submit(Request{Model: p.model, Prompt: p.prompt, MaxTokens: p.maxTokens, MinTokens: p.minTokens,
		IgnoreEOS: p.ignoreEOS, Seed: p.seed, ID: p.requestID, Priority: p.priority}, h)
	switch {
	case errors.Is(err, ErrAdmission):
		s.writeError(w, &apiError{status: 503, typ: "ServiceUnavailableError", message: strings.TrimPrefix(err.Error(), ErrAdmission.Error()+": ")})
		return
	case errors.Is(err, ErrUnknownModel):
		s.writeError(w, &apiError{status: 404, typ: "NotFoundError", message: fmt.Sprintf("The model `%s` does not exist.", p.model), param: strp("model")})
		return
	case err != nil:
		s.writeError(w, badRequest(strings.TrimPrefix(err.Error(), ErrBadRequest.Error()+": "), ""))
		return
	}
	model := h.r.eng.model
	created := h.r.arrival.Unix()
	id := "cmpl-" + h.r.id
	obj := "text_completion"
	if chat {
		id, obj = "chatcmpl-"+h.r.id, "chat.completion.chunk"
	}
	if !p.stream {
		s.respondWhole(w, r, h, chat, id, model, created)
		return
	}
	s.respondStream(w, r, h, p, chat, streamChunk{ID: id, Object: obj, Created: created, Model: model})
}

// respondStream streams h's outputs as SSE events shaped like head (id,
// object, created, model), p.interval tokens to an event, then the usage
// chunk if asked and [DONE].
func (s *Sim) respondStream(w http.ResponseWriter, r *http.Request, h *Handle, p *genParams, chat bool, head streamChunk) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	st := &sseWriter{s: s, w: w, h: h}
	// Starlette's StreamingResponse sends the status line and headers before
	// the first event: a client sees 200 at once, then waits for tokens
	// (the chat role chunk only comes with the first token).
	st.flush()
	chunk := func(choices any, u *usageInfo) bool {
		c := head
		c.Choices, c.Usage = choices, u
		return st.event(c)
	}
	var text strings.Builder
	var last Output
	buffered, sent := 0, false
	for {
		o, ok := nextOutput(h, r)
		if !ok {
			return
		}
		text.WriteString(o.Text)
		buffered += len(o.TokenIDs)
		last = o
		if sent && buffered < p.interval && o.FinishReason == "" {
			continue
		}
		var u *usageInfo
		if p.continuous {
			u = &usageInfo{PromptTokens: o.PromptTokens, CompletionTokens: o.CompletionTokens, TotalTokens: o.PromptTokens + o.CompletionTokens}
		}
		var fin *string
		if o.FinishReason != "" {
			fin = strp(o.FinishReason)
		}
		var okw bool
		if chat {
			if !sent {
				// The role-only delta goes out with the first engine output;
				// its continuous usage counts no completion tokens yet.
				var ru *usageInfo
				if p.continuous {
					ru = &usageInfo{PromptTokens: o.PromptTokens, TotalTokens: o.PromptTokens}
				}
				if !chunk([]chatStreamChoice{{Delta: chatDelta{Role: "assistant", Content: strp("")}}}, ru) {
					return
				}
			}
			c := chatStreamChoice{Delta: chatDelta{Content: strp(text.String())}, FinishReason: fin}
			if fin != nil {
				c.StopReason = json.RawMessage("null")
			}
			okw = chunk([]chatStreamChoice{c}, u)
		} else {
			okw = chunk([]compStreamChoice{{Text: text.String(), FinishReason: fin}}, u)
		}
		if !okw {
			return
		}
		sent = true
		text.Reset()
		buffered = 0
		if o.FinishReason != "" {
			break
		}
	}
	if p.includeUsage {
		u := s.finalUsage(last)
		if !chunk([]struct{}{}, &u) {
			return
		}
	}
	st.done()
}

// nextOutput waits for h's next output. A client disconnect aborts the
// request (false); a server restart drops the connection like a dying process.
func nextOutput(h *Handle, r *http.Request) (Output, bool) {
	o, ok := h.Next(r.Context())
	if !ok {
		h.Abort()
		return o, false
	}
	if o.Err != nil {
		panic(http.ErrAbortHandler)
	}
	return o, true
}

// sseWriter writes "data: <json>\n\n" events and applies stream faults.
type sseWriter struct {
	s      *Sim
	w      http.ResponseWriter
	h      *Handle
	events int
}

func (st *sseWriter) write(data []byte) {
	_, _ = st.w.Write([]byte("data: "))
	_, _ = st.w.Write(data)
	_, _ = st.w.Write([]byte("\n\n"))
	if f, ok := st.w.(http.Flusher); ok {
		f.Flush()
	}
}

// event writes one chunk; false means the stream was ended by a fault.
func (st *sseWriter) event(v any) bool {
	if f, ok := st.s.fault(FaultStreamCut); ok && st.events >= f.AfterChunks {
		st.h.Abort()
		panic(http.ErrAbortHandler)
	}
	if f, ok := st.s.fault(FaultStreamError); ok && st.events >= f.AfterChunks {
		st.h.Abort()
		// Main turns engine failures into GenerationError (500,
		// InternalServerError); older servers caught any exception in the
		// stream generator with create_streaming_error_response's defaults
		// (400, BadRequestError).
		e := &apiError{status: 500, typ: "InternalServerError", message: "Engine generation failed (simulated stream_error fault)"}
		if !st.s.version.main {
			e.status, e.typ = 400, "BadRequestError"
		}
		st.write(streamErrorJSON(e, st.s.version.nestedError))
		st.done()
		return false
	}
	b, _ := json.Marshal(v)
	st.write(b)
	st.events++
	return true
}

func (st *sseWriter) done() { _, _ = st.w.Write([]byte("data: [DONE]\n\n")); st.flush() }

func (st *sseWriter) flush() {
	if f, ok := st.w.(http.Flusher); ok {
		f.Flush()
	}
}

// streamErrorJSON is Python's json.dumps({"error": ...}) with its ", " and ": " separators.
func streamErrorJSON(e *apiError, nested bool) []byte {
	msg, _ := json.Marshal(e.message)
	inner := fmt.Sprintf(`"message": %s, "type": %q, "param": null, "code": %d`, msg, e.typ, e.status)
	if !nested {
		inner = `"object": "error", ` + inner
	}
	return []byte(`{"error": {` + inner + `}}`)
}

func (s *Sim) respondWhole(w http.ResponseWriter, r *http.Request, h *Handle, chat bool, id, model string, created int64) {
	var text strings.Builder
	var last Output
	for {
		o, ok := nextOutput(h, r)
		if !ok {
			return
		}
		text.WriteString(o.Text)
		last = o
		if o.FinishReason != "" {
			break
		}
	}
	u := usageFull(s.finalUsage(last))
	if chat {
		type msg struct {
			Role      string     `json:"role"`
			Content   string     `json:"content"`
			ToolCalls []struct{} `json:"tool_calls"`
		}
		type choice struct {
			Index        int       `json:"index"`
			Message      msg       `json:"message"`
			Logprobs     *struct{} `json:"logprobs"`
			FinishReason string    `json:"finish_reason"`
			StopReason   *int      `json:"stop_reason"`
		}
		writeJSON(w, http.StatusOK, struct {
			ID             string    `json:"id"`
			Object         string    `json:"object"`
			Created        int64     `json:"created"`
			Model          string    `json:"model"`
			Choices        []choice  `json:"choices"`
			Usage          usageFull `json:"usage"`
			PromptLogprobs *struct{} `json:"prompt_logprobs"`
		}{id, "chat.completion", created, model, []choice{{Message: msg{Role: "assistant", Content: text.String(), ToolCalls: []struct{}{}},
			FinishReason: last.FinishReason}}, u, nil})
		return
	}
	type choice struct {
		Index          int       `json:"index"`
		Text           string    `json:"text"`
		Logprobs       *struct{} `json:"logprobs"`
		FinishReason   string    `json:"finish_reason"`
		StopReason     *int      `json:"stop_reason"`
		PromptLogprobs *struct{} `json:"prompt_logprobs"`
	}
	writeJSON(w, http.StatusOK, struct {
		ID      string    `json:"id"`
		Object  string    `json:"object"`
		Created int64     `json:"created"`
		Model   string    `json:"model"`
		Choices []choice  `json:"choices"`
		Usage   usageFull `json:"usage"`
	}{id, "text_completion", created, model, []choice{{Text: text.String(), FinishReason: last.FinishReason}}, u})
}
