package vllmsim

import (
	"hash/fnv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Token IDs of the stand-in tokenizer. IDs below firstWordID are special.
const (
	// BOSToken is prepended to every text prompt (like a Llama tokenizer with
	// add_special_tokens=True). Token-ID prompts are taken as given.
	BOSToken = 1
	// EOSToken ends generation with finish_reason "stop".
	EOSToken = 2
	// Chat template markers, one token each.
	tokStartHeader = 3
	tokEndHeader   = 4
	tokEOT         = 5
	tokNewlines    = 6

	firstWordID = 256
	// VocabSize bounds every token ID the stand-in tokenizer produces.
	VocabSize = 32000
	// maxPieceBytes: longer words are split into pieces of at most this many bytes.
	maxPieceBytes = 6
)

// outputWords is the closed vocabulary generated tokens are drawn from. Each
// is at most five ASCII letters; with its leading space it tokenizes back to
// exactly one token.
var outputWords = strings.Fields(`the of and to in is was for on that with as by at
from his her they this had not are but were which be one all an have their has
more who been also will would there can its into than other some time first only
new when what about after may two then them these so most over made such many
any where could out like did just state city after while world year under same
light model token cache block queue batch text data fast slow word line path
river stone cloud green north south east west small large great early later`)

// Tokenize returns the token IDs of a text prompt: BOSToken followed by
// TextTokens(text). The mapping is deterministic and stable across runs.
func Tokenize(text string) []int {
	return append([]int{BOSToken}, TextTokens(text)...)
}

// TextTokens splits text into tokens without BOS. Rules: a word (letters and
// digits) together with one directly preceding space is one piece; pieces longer
// than 6 bytes are split every 6 bytes; every other rune (punctuation, extra
// whitespace, symbols) is one token. A piece's ID is an FNV-1a hash into
// [256, VocabSize).
func TextTokens(text string) []int {
	var out []int
	i := 0
	for i < len(text) {
		start := i
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == ' ' && i+size < len(text) {
			if r2, _ := utf8.DecodeRuneInString(text[i+size:]); isWordRune(r2) {
				i += size // leading space joins the word
				r, size = r2, 0
			}
		}
		if isWordRune(r) {
			for i < len(text) {
				r3, s3 := utf8.DecodeRuneInString(text[i:])
				if !isWordRune(r3) {
					break
				}
				i += s3
			}
			for p := start; p < i; p += maxPieceBytes {
				end := p + maxPieceBytes
				if end > i {
					end = i
				}
				out = append(out, pieceID(text[p:end]))
			}
			continue
		}
		i += size
		out = append(out, pieceID(text[start:i]))
	}
	return out
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func pieceID(piece string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(piece))
	return firstWordID + int(h.Sum32()%uint32(VocabSize-firstWordID))
}

// outputToken maps a random draw to a generated token: " "+word, whose ID is
// the ID the tokenizer gives that text.
func outputToken(draw uint64) (int, string) {
	w := " " + outputWords[draw%uint64(len(outputWords))]
	return pieceID(w), w
}

// ChatMessage is one message of a chat request.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatTokens renders messages with the stand-in chat template and returns its
// tokens: BOS, then per message [start_header, role pieces, end_header, "\n\n",
// content tokens, eot], then the assistant generation header
// [start_header, "assistant", end_header, "\n\n"]. So
// len = 1 + Σ(4 + len(TextTokens(role)) + len(TextTokens(content))) + 4.
func ChatTokens(msgs []ChatMessage) []int {
	out := []int{BOSToken}
	for _, m := range msgs {
		out = append(out, tokStartHeader)
		out = append(out, TextTokens(m.Role)...)
		out = append(out, tokEndHeader, tokNewlines)
		out = append(out, TextTokens(m.Content)...)
		out = append(out, tokEOT)
	}
	out = append(out, tokStartHeader)
	out = append(out, TextTokens("assistant")...)
	return append(out, tokEndHeader, tokNewlines)
}
