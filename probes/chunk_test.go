package probes

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// streamChunks are the data of every event in the stream fixtures.
func streamChunks(t testing.TB) [][]byte {
	t.Helper()
	files, err := filepath.Glob("testdata/streams/*")
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range bytes.Split(b, []byte("\n\n")) {
			var data []byte
			for _, line := range bytes.Split(ev, []byte("\n")) {
				if v, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
					data = append(data, v...)
				}
			}
			if len(data) > 0 && string(data) != "[DONE]" {
				out = append(out, data)
			}
		}
	}
	return out
}

// checkReadChunk fails unless readChunk reads data as encoding/json does:
// the same chunkInfo, or an error exactly when json.Unmarshal fails.
func checkReadChunk(t *testing.T, data []byte) (fast bool) {
	t.Helper()
	var c chunk
	wantErr := json.Unmarshal(data, &c)
	got, err := readChunk(data)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: readChunk error %v, json.Unmarshal error %v", data, err, wantErr)
	}
	if wantErr == nil {
		if want := infoOf(&c); got != want {
			t.Fatalf("%q: readChunk %+v, json.Unmarshal gives %+v", data, got, want)
		}
	}
	_, fast = fastChunk(data)
	return fast
}

// Every chunk of the stream fixtures, and chunks shaped to trip a reader
// that is not encoding/json, read the same; the fixtures' ordinary chunks
// take the fast path.
func TestReadChunkReadsAsEncodingJSON(t *testing.T) {
	fastCount := 0
	chunks := streamChunks(t)
	for _, data := range chunks {
		if checkReadChunk(t, data) {
			fastCount++
		}
	}
	if fastCount < len(chunks)*3/4 {
		t.Fatalf("only %d of %d fixture chunks took the fast path", fastCount, len(chunks))
	}
	for _, s := range []string{
		`{"choices":[{"delta":{"content":"a"}}]}`,
		`{"choices":[{"delta":{"Content":"a"}}]}`,
		`{"choices":[{"DELTA":{"content":"a"}}]}`,
		`{"choices":[{"delta":{"content":""},"text":""}]}`,
		`{"choices":[{"delta":{"content":"\u0000"}}]}`,
		`{"choices":[{"delta":{"reasoning_content":"x"}},{"finish_reason":"abort"}]}`,
		`{"choices":[{"finish_reason":"stop"},{"finish_reason":"error"},{"finish_reason":"abort"}]}`,
		`{"choices":[{"finish_reason":"err\u006fr"}]}`,
		`{"choices":[{"finish_reason":1}]}`,
		`{"choices":[null,{"text":"x"}]}`,
		`{"choices":[1]}`,
		`{"choices":{}}`,
		`{"choices":null,"usage":null,"error":null,"object":null}`,
		`{"choices":[],"usage":{"prompt_tokens":128,"completion_tokens":32,"total_tokens":160}}`,
		`{"usage":{"prompt_tokens":1.0}}`,
		`{"usage":{"prompt_tokens":1e2}}`,
		`{"usage":{"prompt_tokens":-3,"completion_tokens":null}}`,
		`{"usage":{"prompt_tokens":99999999999999999999}}`,
		`{"usage":{"Prompt_Tokens":5}}`,
		`{"usage":{}}`,
		`{"usage":{"prompt_tokens":1},"usage":{"completion_tokens":2}}`,
		`{"choices":[{"text":"a"}],"choices":[{"text":""}]}`,
		`{"object":"error","message":"x"}`,
		`{"object":"chat.completion.chunk"}`,
		`{"obj\u0065ct":"error"}`,
		`{"error":{"message":"boom"}}`,
		`{"error":"x"}`,
		`{"error":null}`,
		`{"x":[{"choices":[{"text":"a"}]}],"y":"}]","z":[1,2,{"a":null}],"w":true}`,
		` { "choices" : [ { "text" : "a" } ] } `,
		`null`,
		`[]`,
		`"x"`,
		`{"choices":[{"text":"a"}]`,
		`{"choices":[{"text":"a"}]}}`,
		`{}`,
		"{\"choices\":[{\"text\":\"\xff\"}]}",
		`{"ſ":1,"K":2}`,
		`{"choiceſ":[{"text":"a"}]}`,
	} {
		checkReadChunk(t, []byte(s))
	}
}

// FuzzReadChunk: readChunk reads any data as encoding/json does.
func FuzzReadChunk(f *testing.F) {
	for _, data := range streamChunks(f) {
		f.Add(data)
	}
	f.Add([]byte(`{"choices":[{"delta":{"content":"a"},"finish_reason":null}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkReadChunk(t, data)
	})
}

// BenchmarkReadChunk reads a vLLM chat chunk: through readChunk, and with
// json.Unmarshal as the probe did before.
func BenchmarkReadChunk(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-5f0c","object":"chat.completion.chunk","created":1786351200,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":" the"},"logprobs":null,"finish_reason":null}]}`)
	b.Run("readChunk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if c, err := readChunk(data); err != nil || !c.hasText {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c chunk
			if err := json.Unmarshal(data, &c); err != nil || !c.hasText() {
				b.Fatal(err)
			}
		}
	})
}

// The shapes vLLM streams take the fast path.
func TestFastChunkTakesVLLMChunks(t *testing.T) {
	for _, s := range []string{
		`{"id":"cmpl-x","object":"text_completion","created":1786351200,"model":"m","choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}`,
		`{"id":"chatcmpl-x","object":"chat.completion.chunk","created":1786351200,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"chatcmpl-x","object":"chat.completion.chunk","created":1786351200,"model":"m","choices":[{"index":0,"delta":{"content":" a"},"logprobs":null,"finish_reason":"length","stop_reason":null}]}`,
		`{"id":"chatcmpl-x","object":"chat.completion.chunk","created":1786351200,"model":"m","choices":[],"usage":{"prompt_tokens":128,"total_tokens":160,"completion_tokens":32,"prompt_tokens_details":null}}`,
	} {
		if !checkReadChunk(t, []byte(s)) {
			t.Errorf("not read by the fast path: %s", s)
		}
	}
}
