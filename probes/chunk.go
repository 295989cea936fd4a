package probes

import "encoding/json"

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

// isError reports an error sent in-stream ({"error":{...}} not null, or the
// flat {"object":"error",...}).
func (c *chunk) isError() bool {
	return (len(c.Error) > 0 && string(c.Error) != "null") || c.Object == "error"
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

// badFinish is the first choice's finish_reason that is "error" or "abort",
// "" when none is.
func (c *chunk) badFinish() string {
	for _, ch := range c.Choices {
		if ch.FinishReason != nil && (*ch.FinishReason == "error" || *ch.FinishReason == "abort") {
			return *ch.FinishReason
		}
	}
	return ""
}
