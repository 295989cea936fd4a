package probes

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
)

// stepReader hands out its parts one Read at a time and advances a clock
// before each, so the test knows exactly when each byte "arrived".
type stepReader struct {
	parts [][]byte
	clock *time.Time
	step  time.Duration
}

func (r *stepReader) Read(p []byte) (int, error) {
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	*r.clock = r.clock.Add(r.step)
	n := copy(p, r.parts[0])
	if n < len(r.parts[0]) {
		r.parts[0] = r.parts[0][n:]
	} else {
		r.parts = r.parts[1:]
	}
	return n, nil
}

func readAll(t testing.TB, r io.Reader, now func() time.Time, max int) ([]Event, error) {
	t.Helper()
	sr := NewSSEReader(r, now, max)
	var evs []Event
	for {
		ev, err := sr.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func TestSSEReaderTimestampsAtReadOfLastByte(t *testing.T) {
	clock := time.Unix(1000, 0)
	now := func() time.Time { return clock }
	r := &stepReader{clock: &clock, step: time.Second, parts: [][]byte{
		[]byte("data: {\"a\":"),            // t=1001: incomplete
		[]byte("1}\n"),                     // t=1002: line done, event not yet
		[]byte("\ndata: 2\n\ndata: 3\n\n"), // t=1003: ends event 1, holds 2 and 3
		[]byte(": ping\n\n"),               // t=1004: comment only
		[]byte("data: [DONE]\n\n"),
	}}
	evs, err := readAll(t, r, now, 0)
	if !errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want io.EOF", err)
	}
	want := []struct {
		data string
		at   int64
	}{{`{"a":1}`, 1003}, {"2", 1003}, {"3", 1003}, {"[DONE]", 1005}}
	if len(evs) != len(want) {
		t.Fatalf("got %d events, want %d", len(evs), len(want))
	}
	for i, w := range want {
		if string(evs[i].Data) != w.data || evs[i].At.Unix() != w.at {
			t.Errorf("event %d = %q at %d, want %q at %d", i, evs[i].Data, evs[i].At.Unix(), w.data, w.at)
		}
	}
}

func TestSSEReaderShapes(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		err  error
	}{
		{"data: a\n\n", []string{"a"}, io.EOF},
		{"data:a\r\n\r\ndata:  b\r\r", []string{"a", " b"}, io.EOF},
		{"data: x\ndata: y\n\n", []string{"x\ny"}, io.EOF},
		{"event: e\nid: 1\nretry: 5\ndata\n\n", []string{""}, io.EOF},
		{": only a comment\n\n\n", nil, io.EOF},
		{"data: a\n\ndata: partial", []string{"a"}, io.ErrUnexpectedEOF},
		{"data: a\n\ndata: b\n", []string{"a"}, io.ErrUnexpectedEOF},
		{"", nil, io.EOF},
	}
	for _, c := range cases {
		evs, err := readAll(t, strings.NewReader(c.in), time.Now, 0)
		if !errors.Is(err, c.err) || (c.err == io.EOF && errors.Is(err, io.ErrUnexpectedEOF)) {
			t.Errorf("%q: err = %v, want %v", c.in, err, c.err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, string(e.Data))
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
			t.Errorf("%q: events %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSSEReaderLimit(t *testing.T) {
	long := "data: " + strings.Repeat("x", 300) + "\n\n"
	if _, err := readAll(t, strings.NewReader(long), time.Now, 100); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("long line: err = %v", err)
	}
	many := strings.Repeat("data: "+strings.Repeat("y", 40)+"\n", 5) + "\n"
	if _, err := readAll(t, strings.NewReader(many), time.Now, 100); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("long event: err = %v", err)
	}
	unterminated := strings.Repeat("z", 1000)
	if _, err := readAll(t, strings.NewReader(unterminated), time.Now, 100); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("unterminated: err = %v", err)
	}
}

// oneByte reads one byte per Read call.
type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

func seedStreams(f interface{ Helper() }) [][]byte {
	f.Helper()
	files, _ := filepath.Glob("testdata/streams/*.sse")
	var out [][]byte
	for _, fn := range files {
		b, err := os.ReadFile(fn)
		if err == nil {
			out = append(out, b)
		}
	}
	return out
}

// FuzzSSEReader checks that the reader never panics, never returns an event
// above its limit, ends with a clean error, and that splitting the same
// bytes into one-byte reads yields exactly the same events.
func FuzzSSEReader(f *testing.F) {
	for _, s := range seedStreams(f) {
		f.Add(s)
	}
	f.Add([]byte("data: a\r\n\r\n:c\rdata:b\r\r"))
	f.Add([]byte("data: \ndata\n\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 512
		whole, err1 := readAll(t, bytes.NewReader(in), time.Now, max)
		bytewise, err2 := readAll(t, oneByte{bytes.NewReader(in)}, time.Now, max)
		if err1 == nil || err2 == nil {
			t.Fatal("reader ended without an error")
		}
		for _, e := range whole {
			if len(e.Data) > max {
				t.Fatalf("event of %d bytes above limit %d", len(e.Data), max)
			}
		}
		if errors.Is(err1, ErrEventTooLarge) || errors.Is(err2, ErrEventTooLarge) {
			return // the limit can trip at different points with different read sizes
		}
		if err1 != err2 {
			t.Fatalf("whole read ended with %v, byte-wise with %v", err1, err2)
		}
		if len(whole) != len(bytewise) {
			t.Fatalf("whole read gave %d events, byte-wise %d", len(whole), len(bytewise))
		}
		for i := range whole {
			if !bytes.Equal(whole[i].Data, bytewise[i].Data) {
				t.Fatalf("event %d differs: %q vs %q", i, whole[i].Data, bytewise[i].Data)
			}
		}
	})
}

// BenchmarkSSEReader reads a 512-token completions stream of vLLM chunks.
func BenchmarkSSEReader(b *testing.B) {
	chunk := `data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" w","logprobs":null,"finish_reason":null,"stop_reason":null}]}` + "\n\n"
	stream := []byte(strings.Repeat(chunk, 512) + "data: [DONE]\n\n")
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		sr := NewSSEReader(bytes.NewReader(stream), time.Now, 0)
		for {
			if _, err := sr.Next(); err != nil {
				break
			}
		}
	}
}

// TestStreamFixtures runs the real-shaped streams in testdata through the
// probe's stream evaluation.
func TestStreamFixtures(t *testing.T) {
	cases := []struct {
		file, endpoint string
		in, out        int
		reason         string
		chunks, tokens int
	}{
		// Only chunks with generated text count (DESIGN.md, Measurement
		// definitions): completions.sse has an empty-text chunk and chat.sse
		// vLLM's role-only first delta, neither of which is a token.
		{"completions.sse", "completions", 8, 5, "", 3, 5},
		{"chat.sse", "chat", 16, 3, "", 3, 3},
		{"error.sse", "completions", 8, 5, ReasonStreamError, 1, 0},
		{"cut.sse", "completions", 8, 5, ReasonStreamError, 1, 0},
		{"crlf-comments.sse", "completions", 8, 2, ReasonLengthMismatch, 2, 0},
		{"completions.sse", "completions", 9, 5, ReasonLengthMismatch, 3, 5},
		{"completions.sse", "completions", 8, 6, ReasonShortOutput, 3, 5},
	}
	for _, c := range cases {
		b, err := os.ReadFile(filepath.Join("testdata/streams", c.file))
		if err != nil {
			t.Fatal(err)
		}
		clock := time.Unix(0, 0)
		tg := &target{now: func() time.Time { clock = clock.Add(time.Millisecond); return clock }}
		pr := config.ProbeProfile{Name: "p", Endpoint: c.endpoint, InputTokens: c.in, OutputTokens: c.out}
		res := Result{Start: tg.now()}
		tg.readStream(context.Background(), oneByte{bytes.NewReader(b)}, tg.now, &pr, &res)
		if res.Reason != c.reason || res.Chunks != c.chunks || res.CompletionTokens != c.tokens {
			t.Errorf("%s (in %d out %d): reason %q chunks %d tokens %d; want %q %d %d",
				c.file, c.in, c.out, res.Reason, res.Chunks, res.CompletionTokens, c.reason, c.chunks, c.tokens)
		}
		if c.reason == "" && (!res.HasTPOT || res.TPOT != (res.E2E-res.TTFT)/time.Duration(c.tokens-1) || len(res.ITL) != c.chunks-1) {
			t.Errorf("%s: tpot %v e2e %v ttft %v itl %d", c.file, res.TPOT, res.E2E, res.TTFT, len(res.ITL))
		}
	}
}
