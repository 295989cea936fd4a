package probes

import (
	"encoding/json"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
)

// maxDetail bounds the server error text a failed probe keeps (runes).
const maxDetail = 240

// errorDetail is the human-readable text of a server's error body: the
// message of vLLM's OpenAI-shaped {"error":{"message":...}}, of the older
// flat {"object":"error","message":...}, of FastAPI's {"detail":...}, or the
// body itself; credentials scrubbed, white space collapsed, control
// characters dropped, truncated to maxDetail runes.
func errorDetail(body []byte, sc *upstream.Scrubber) string {
	text := strings.TrimSpace(string(body))
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &e) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case len(e.Error) > 0 && json.Unmarshal(e.Error, &nested) == nil && nested.Message != "":
			text = nested.Message
		case len(e.Error) > 0 && json.Unmarshal(e.Error, &s) == nil && s != "":
			text = s
		case e.Message != "":
			text = e.Message
		case len(e.Detail) > 0 && json.Unmarshal(e.Detail, &s) == nil && s != "":
			text = s
		case len(e.Detail) > 0:
			text = string(e.Detail)
		}
	}
	return cleanDetail(text, sc)
}

// cleanDetail scrubs, flattens and truncates an error text.
func cleanDetail(text string, sc *upstream.Scrubber) string {
	text = sc.Scrub(text)
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "?")
	}
	var b strings.Builder
	space, n := false, 0
	for _, r := range text {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			n++
			space = false
		}
		if n >= maxDetail {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// contextLenInText finds the model's context length in such an error text
// ("maximum context length is 1024 tokens", "maximum model length of
// 1024", "max_model_len 1024"); 0 when it names none.
var contextLenInText = regexp.MustCompile(`(?i)(?:maximum context length is|maximum model length(?: is| of)?|max_model_len(?: is|=|:)?)\s*\(?(\d{2,9})`)

func contextLength(text string) int {
	m := contextLenInText.FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	n := 0
	for _, c := range m[1] {
		n = n*10 + int(c-'0')
	}
	return n
}

// contextLengthError reports whether an error text says the request is
// longer than the model's context: vLLM's "This model's maximum context
// length is N tokens. However, you requested M tokens ..." (and its newer
// "... longer than the maximum model length of N"), and the same from
// other OpenAI-compatible servers.
func contextLengthError(text string) bool {
	t := strings.ToLower(text)
	for _, s := range []string{"maximum context length", "max_model_len", "maximum model length", "context length", "context window", "too many tokens", "prompt is too long"} {
		if strings.Contains(t, s) {
			return true
		}
	}
	return false
}
