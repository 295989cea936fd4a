package probes

import (
	"encoding/json"
	"testing"
)

// A chunk's error, text, finish reason and usage are read from the shapes
// vLLM and OpenAI-compatible servers stream.
func TestChunkReadsStreamShapes(t *testing.T) {
	for _, c := range []struct {
		data          string
		isError, text bool
		badFinish     string
		usage         bool
	}{
		{data: `{"choices":[{"delta":{"content":"a"}}]}`, text: true},
		{data: `{"choices":[{"delta":{"role":"assistant","content":""}}]}`},
		{data: `{"choices":[{"delta":{"reasoning_content":"x"}},{"finish_reason":"abort"}]}`, text: true, badFinish: "abort"},
		{data: `{"choices":[{"delta":{"reasoning":"x"}}]}`, text: true},
		{data: `{"choices":[{"text":" a","finish_reason":"length"}]}`, text: true},
		{data: `{"choices":[{"finish_reason":"stop"},{"finish_reason":"error"},{"finish_reason":"abort"}]}`, badFinish: "error"},
		{data: `{"choices":[],"usage":{"prompt_tokens":128,"completion_tokens":32}}`, usage: true},
		{data: `{"choices":[],"usage":null,"error":null}`},
		{data: `{"object":"error","message":"x"}`, isError: true},
		{data: `{"error":{"message":"boom"}}`, isError: true},
	} {
		var ch chunk
		if err := json.Unmarshal([]byte(c.data), &ch); err != nil {
			t.Fatalf("%s: %v", c.data, err)
		}
		if ch.isError() != c.isError || ch.hasText() != c.text || ch.badFinish() != c.badFinish || (ch.Usage != nil) != c.usage {
			t.Errorf("%s: isError %v hasText %v badFinish %q usage %v", c.data, ch.isError(), ch.hasText(), ch.badFinish(), ch.Usage != nil)
		}
	}
}
