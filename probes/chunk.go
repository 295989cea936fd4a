package probes

import (
	"bytes"
	"encoding/json"
)

// chunkInfo is what readStream takes from one stream chunk.
type chunkInfo struct {
	// isError: an error sent in-stream ({"error":{...}} not null, or the
	// flat {"object":"error",...}).
	isError bool
	// hasText: some choice carries generated text.
	hasText bool
	// badFinish is the first choice's finish_reason that is "error" or
	// "abort", "" when none is.
	badFinish string
	// usage is set when the chunk has a non-null usage object.
	hasUsage                       bool
	promptTokens, completionTokens int
}

// infoOf is the chunkInfo of a chunk encoding/json decoded.
func infoOf(c *chunk) chunkInfo {
	info := chunkInfo{
		isError: (len(c.Error) > 0 && string(c.Error) != "null") || c.Object == "error",
		hasText: c.hasText(),
	}
	for _, ch := range c.Choices {
		if ch.FinishReason != nil && (*ch.FinishReason == "error" || *ch.FinishReason == "abort") {
			info.badFinish = *ch.FinishReason
			break
		}
	}
	if c.Usage != nil {
		info.hasUsage = true
		info.promptTokens, info.completionTokens = c.Usage.PromptTokens, c.Usage.CompletionTokens
	}
	return info
}

// readChunk reads one event's data as json.Unmarshal into a chunk would,
// and fails where it fails. A probe stream is some 35 chunks of the same
// small shape every 15 s; decoding each with encoding/json (reflection,
// a string per field) was the larger part of a probe's CPU. fastChunk reads
// that shape directly; anything it is not sure of goes to encoding/json.
func readChunk(data []byte) (chunkInfo, error) {
	if info, ok := fastChunk(data); ok {
		return info, nil
	}
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return chunkInfo{}, err
	}
	return infoOf(&c), nil
}

// fastChunk reads a chunk that is valid JSON whose fields of interest
// have exactly the names and types of the chunk struct, each at most
// once, names without escapes. It declines (ok false) on anything else:
// a key that only matches a field case-insensitively (encoding/json would
// take it), a duplicate field, a number that is not a plain integer for a
// token count, an escaped finish_reason or object, an error field that
// is not null.
func fastChunk(data []byte) (info chunkInfo, ok bool) {
	if !json.Valid(data) {
		return chunkInfo{}, false
	}
	s := jscan{b: data}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return chunkInfo{}, false
	}
	ok = s.fields(topFields, func(i int) bool {
		switch i {
		case 0: // object
			v, isNull, ok := s.plainString()
			if ok && !isNull && string(v) == "error" {
				info.isError = true
			}
			return ok
		case 1: // error
			return s.null() // a non-null error is read by encoding/json
		case 2: // choices
			return s.choices(&info)
		default: // usage
			return s.usage(&info)
		}
	})
	return info, ok
}

var (
	topFields    = []string{"object", "error", "choices", "usage"}
	choiceFields = []string{"finish_reason", "text", "delta"}
	deltaFields  = []string{"content", "reasoning_content", "reasoning"}
	usageFields  = []string{"prompt_tokens", "completion_tokens"}
)

// field finds key among names: its index and true on an exact match; -1
// and false when no name matches even ignoring case (and the key has no
// escape or non-ASCII byte that could make it match after unescaping or
// Unicode folding); 0 and false otherwise (decline).
func field(key []byte, names []string) (int, bool) {
	for _, c := range key {
		if c == '\\' || c >= 0x80 {
			return 0, false
		}
	}
	for i, n := range names {
		if string(key) == n {
			return i, true
		}
		if bytes.EqualFold(key, []byte(n)) {
			return 0, false
		}
	}
	return -1, false
}

// jscan walks JSON already known to be valid.
type jscan struct {
	b []byte
	i int
}

func (s *jscan) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// is consumes c (after blanks) if it is next.
func (s *jscan) is(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// null consumes a null value.
func (s *jscan) null() bool {
	s.ws()
	if bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// object calls member for each key of the object whose '{' was consumed;
// member must consume the value.
func (s *jscan) object(member func(key []byte) bool) bool {
	if s.is('}') {
		return true
	}
	for {
		key, isNull, ok := s.plainString()
		if !ok || isNull || !s.is(':') || !member(key) {
			return false
		}
		if s.is(',') {
			continue
		}
		return s.is('}')
	}
}

// fields consumes an object (or null) whose members named in names are
// read by read(index); other members are skipped. It declines a name
// given twice and a key that matches a name only ignoring case.
func (s *jscan) fields(names []string, read func(i int) bool) bool {
	if s.null() {
		return true
	}
	if !s.is('{') {
		return false
	}
	var seen uint8
	return s.object(func(key []byte) bool {
		i, known := field(key, names)
		if !known {
			return i < 0 && s.skip()
		}
		if seen&(1<<i) != 0 {
			return false
		}
		seen |= 1 << i
		return read(i)
	})
}

// rawString consumes a string and returns its raw contents (escapes kept).
func (s *jscan) rawString() ([]byte, bool) {
	if !s.is('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
		case '"':
			s.i++
			return s.b[start : s.i-1], true
		default:
			s.i++
		}
	}
	return nil, false
}

// plainString consumes a string without escapes, or null.
func (s *jscan) plainString() (v []byte, isNull, ok bool) {
	if s.null() {
		return nil, true, true
	}
	v, ok = s.rawString()
	if !ok || bytes.IndexByte(v, '\\') >= 0 {
		return nil, false, false
	}
	return v, false, true
}

// text consumes a string or null and reports whether it is a non-empty
// string (escapes never make a string empty).
func (s *jscan) text() (nonEmpty, ok bool) {
	if s.null() {
		return false, true
	}
	v, ok := s.rawString()
	return len(v) > 0, ok
}

// skip consumes any value.
func (s *jscan) skip() bool {
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '"':
		_, ok := s.rawString()
		return ok
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if _, ok := s.rawString(); !ok {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return true
				}
			}
			s.i++
		}
		return false
	}
	// A number, true, false or null: up to the next delimiter.
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return true
		}
		s.i++
	}
	return true
}

// choices consumes the choices value (an array of choice objects, or null).
func (s *jscan) choices(info *chunkInfo) bool {
	if s.null() {
		return true
	}
	if !s.is('[') {
		return false
	}
	if s.is(']') {
		return true
	}
	for {
		if !s.choice(info) {
			return false
		}
		if s.is(',') {
			continue
		}
		return s.is(']')
	}
}

func (s *jscan) choice(info *chunkInfo) bool {
	return s.fields(choiceFields, func(i int) bool {
		switch i {
		case 0: // finish_reason
			v, isNull, ok := s.plainString()
			if ok && !isNull && info.badFinish == "" && (string(v) == "error" || string(v) == "abort") {
				info.badFinish = string(v)
			}
			return ok
		case 1: // text
			nonEmpty, ok := s.text()
			info.hasText = info.hasText || nonEmpty
			return ok
		default: // delta
			return s.fields(deltaFields, func(int) bool {
				nonEmpty, ok := s.text()
				info.hasText = info.hasText || nonEmpty
				return ok
			})
		}
	})
}

func (s *jscan) usage(info *chunkInfo) bool {
	s.ws()
	info.hasUsage = s.i < len(s.b) && s.b[s.i] == '{'
	return s.fields(usageFields, func(i int) bool {
		if s.null() {
			return true // null leaves an int at zero
		}
		n, ok := s.smallInt()
		if i == 0 {
			info.promptTokens = n
		} else {
			info.completionTokens = n
		}
		return ok
	})
}

// smallInt consumes an integer of at most 15 digits (declining anything
// else: fractions, exponents and large numbers are encoding/json's).
func (s *jscan) smallInt() (int, bool) {
	s.ws()
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	n, digits := 0, 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		n = n*10 + int(s.b[s.i]-'0')
		s.i++
		digits++
	}
	if digits == 0 || digits > 15 || (s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E')) {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}
