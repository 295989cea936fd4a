package probes

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

// thirdPartySim mimics an OpenAI-compatible vLLM simulator that streams a
// chat answer as: a role-only delta, one chunk per token, then a last
// chunk with only the finish reason and no text, then a usage-only chunk
// and [DONE]. Virtual time moves only here: before each chunk the clock is
// set to the chunk's time, and the next chunk waits until the client has
// read every byte written, so a client that stamps a chunk when its bytes
// are read stamps it with exactly that time.
type thirdPartySim struct {
	clock         *fakeClock
	base          time.Time
	role, first   time.Duration // role delta and first token, after the request
	gap, finish   time.Duration // between tokens; last token to finish-only chunk
	tokens        int
	written, read atomic.Int64
	srv           *http.Server
	url           string
}

func startThirdPartySim(t *testing.T, clock *fakeClock) *thirdPartySim {
	t.Helper()
	ts := &thirdPartySim{clock: clock, base: clock.Now(), role: 95 * time.Millisecond, first: 100 * time.Millisecond,
		gap: 10 * time.Millisecond, finish: 9 * time.Millisecond, tokens: 32}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.srv = &http.Server{Handler: http.HandlerFunc(ts.serve)}
	go func() { _ = ts.srv.Serve(&writeCountListener{Listener: ln, n: &ts.written}) }()
	t.Cleanup(func() { _ = ts.srv.Close() })
	ts.url = "http://" + ln.Addr().String()
	return ts
}

// reset puts the clock back to the base: each request is sent at base.
func (ts *thirdPartySim) reset() {
	ts.clock.mu.Lock()
	ts.clock.t = ts.base
	ts.clock.mu.Unlock()
}

func (ts *thirdPartySim) at(d time.Duration) {
	ts.clock.mu.Lock()
	ts.clock.t = ts.base.Add(d)
	ts.clock.mu.Unlock()
}

func (ts *thirdPartySim) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/models" {
		fmt.Fprint(w, `{"object":"list","data":[{"id":"mimic","object":"model","owned_by":"sim"}]}`)
		return
	}
	_, _ = bufio.NewReader(r.Body).Discard(1 << 20)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	fl := w.(http.Flusher)
	fl.Flush()
	emit := func(at time.Duration, payload string) {
		// Wait until the client has read everything written so far, then
		// move the clock and write the next chunk. The bytes travel a real
		// socket, which testing/synctest cannot wait on, so this polls; it
		// runs in the server's goroutine, where it may not fail the test
		// (the probe's result, checked by the test, shows a broken run).
		deadline := time.Now().Add(20 * time.Second)
		for ts.read.Load() != ts.written.Load() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Microsecond)
		}
		ts.at(at)
		fmt.Fprintf(w, "data: %s\n\n", payload)
		fl.Flush()
	}
	const head = `{"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"mimic","choices":[`
	emit(ts.role, head+`{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
	at := ts.first
	for i := 0; i < ts.tokens; i++ {
		emit(at, head+`{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}`)
		at += ts.gap
	}
	last := ts.first + time.Duration(ts.tokens-1)*ts.gap
	emit(last+ts.finish, head+`{"index":0,"delta":{},"finish_reason":"length"}]}`)
	emit(last+ts.finish, `{"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"mimic","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":32,"total_tokens":72}}`)
	emit(last+ts.finish, "[DONE]")
}

// countingClient is a plain HTTP client whose connections count the bytes
// read, for the mimic's lockstep.
func countingClient(read *atomic.Int64, stamp *readStamp) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if stamp != nil {
			c = &readStampConn{Conn: c, stamp: stamp}
		}
		return &countConn{Conn: c, in: read, out: new(atomic.Int64)}, nil
	}
	return &http.Client{Transport: tr}
}

// readStamp is the clock's time at a connection's latest socket read that
// returned bytes.
type readStamp struct {
	now  func() time.Time
	mu   sync.Mutex
	last time.Time
}

func (r *readStamp) at() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// readStampConn stamps each read before countConn counts it: the count is
// what lets the simulator move the clock for the next chunk, so a stamp
// taken after it (when the client has parsed the line) may already read
// the next chunk's time on a busy machine.
type readStampConn struct {
	net.Conn
	stamp *readStamp
}

func (c *readStampConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.stamp.mu.Lock()
		c.stamp.last = c.stamp.now()
		c.stamp.mu.Unlock()
	}
	return n, err
}

// rawMeasure is what a raw client computes from one streamed answer, by
// the definitions in DESIGN.md (Measurement definitions): TTFT and E2E at
// the first and last chunk with generated text, ITL the gaps between them.
type rawMeasure struct {
	ttft, e2e time.Duration
	itl       []time.Duration
}

// rawClient reads the stream line by line, independently of the probe's
// SSE reader, stamping each data line with the clock at the socket read
// that delivered it (read counts the bytes it reads).
func rawClient(t *testing.T, read *atomic.Int64, url string, now func() time.Time) rawMeasure {
	t.Helper()
	stamp := &readStamp{now: now}
	client := countingClient(read, stamp)
	body := `{"model":"mimic","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":32,"stream":true,"stream_options":{"include_usage":true}}`
	start := now()
	resp, err := client.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m rawMeasure
	var last time.Time
	n := 0
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		at := stamp.at()
		if err != nil {
			break
		}
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) == 0 || c.Choices[0].Delta.Content == "" {
			continue
		}
		if n == 0 {
			m.ttft = at.Sub(start)
		} else {
			m.itl = append(m.itl, at.Sub(last))
		}
		last, n = at, n+1
	}
	if n > 0 {
		m.e2e = last.Sub(start)
	}
	return m
}

func meanOfDurations(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	var s time.Duration
	for _, x := range d {
		s += x
	}
	return s / time.Duration(len(d))
}

// A third-party simulator that sends the finish reason in a last chunk
// without text (and a role-only delta first): the probe counts 31 gaps for
// 32 tokens, as a raw client does, and its TTFT, ITL mean and E2E equal
// the raw client's and the values the stream was built with (first token
// at 100 ms, 10 ms gaps, last token at 410 ms; the finish-only chunk 9 ms
// later is not a token). Before, the role delta and the finish-only chunk
// were counted: 33 gaps, the ITL mean 5% low, E2E 9 ms high.
func TestITLCountsOnlyChunksWithText(t *testing.T) {
	clock := newFakeClock()
	ts := startThirdPartySim(t, clock)
	ts.reset()
	raw := rawClient(t, &ts.read, ts.url, clock.Now)

	h, _ := writeConfig(t, probesYAML("mimic", profile("chat", "chat", 16, 32, ", timeout: 9s")))
	client, err := newClient(func(c net.Conn) net.Conn { return &countConn{Conn: c, in: &ts.read, out: new(atomic.Int64)} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{URL: ts.url, Clock: clock, Client: client}, h, nil)
	ts.reset()
	res, err := s.ProbeOnce(context.Background(), "chat")
	if err != nil {
		t.Fatal(err)
	}
	// The chat prompt's template makes usage.prompt_tokens unknowable in
	// advance; only the measurement is checked here.
	if res.Chunks != 32 || len(res.ITL) != 31 || len(raw.itl) != 31 {
		t.Fatalf("probe: %d content chunks, %d ITL gaps; raw client %d gaps; want 32, 31, 31", res.Chunks, len(res.ITL), len(raw.itl))
	}
	wantTTFT, wantE2E, wantITL := 100*time.Millisecond, 410*time.Millisecond, 10*time.Millisecond
	if res.TTFT != wantTTFT || raw.ttft != wantTTFT {
		t.Errorf("TTFT probe %v, raw client %v, want %v", res.TTFT, raw.ttft, wantTTFT)
	}
	if res.E2E != wantE2E || raw.e2e != wantE2E {
		t.Errorf("E2E probe %v, raw client %v, want %v", res.E2E, raw.e2e, wantE2E)
	}
	if m, rm := meanOfDurations(res.ITL), meanOfDurations(raw.itl); m != wantITL || rm != wantITL {
		t.Errorf("ITL mean probe %v, raw client %v, want %v", m, rm, wantITL)
	}
	if want := (wantE2E - wantTTFT) / 31; !res.HasTPOT || res.TPOT != want {
		t.Errorf("TPOT %v (has %v), want %v", res.TPOT, res.HasTPOT, want)
	}
	t.Logf("third-party stream, 32 tokens: probe %d gaps, ITL mean %v, TTFT %v, E2E %v; raw client %d gaps, ITL mean %v, TTFT %v, E2E %v",
		len(res.ITL), meanOfDurations(res.ITL), res.TTFT, res.E2E, len(raw.itl), meanOfDurations(raw.itl), raw.ttft, raw.e2e)
}

// The project's simulator (one token per chunk, finish reason with the
// last token, chat's role-only delta first), in lockstep so chunk times
// are exact: 31 gaps for 32 tokens on both endpoints, and the probe's ITL
// mean and E2E equal the simulator's ground truth for the same request
// (its per-token mean ITL and its last-token time) to one lockstep tick.
func TestSimITLMatchesGroundTruth(t *testing.T) {
	ls := startLockstep(t, vllmsim.Config{Cost: lockCost, Seed: 3})
	s := ls.scheduler(t, probesYAML(simModel,
		profile("c", "completions", 64, 32, ", timeout: 9s"),
		profile("chat", "chat", 32, 32, ", timeout: 9s")))
	for _, c := range []struct {
		name string
		chat bool
	}{{"c", false}, {"chat", true}} {
		res := ls.probe(t, s, c.name, 32, c.chat)
		if res.Reason != "" {
			t.Fatalf("%s probe: %q", c.name, res.Reason)
		}
		rec, ok := recordsByID(ls.sim)[res.RequestID]
		if !ok {
			t.Fatalf("simulator has no record of %s", res.RequestID)
		}
		if res.Chunks != 32 || len(res.ITL) != 31 {
			t.Fatalf("%s: %d chunks, %d gaps; want 32 and 31", c.name, res.Chunks, len(res.ITL))
		}
		var sum time.Duration
		for _, g := range res.ITL {
			sum += g
		}
		if sum != res.E2E-res.TTFT {
			t.Errorf("%s: ITL gaps sum to %v, E2E-TTFT is %v", c.name, sum, res.E2E-res.TTFT)
		}
		mean := meanOfDurations(res.ITL)
		if d := mean - rec.MeanITL; d < -lockTick || d > lockTick {
			t.Errorf("%s: ITL mean probe %v, simulator %v", c.name, mean, rec.MeanITL)
		}
		if d := res.E2E - rec.E2E; d < -lockTick || d > lockTick {
			t.Errorf("%s: E2E probe %v, simulator %v", c.name, res.E2E, rec.E2E)
		}
		t.Logf("simulator %s, 32 tokens: probe %d gaps, ITL mean %v (simulator %v), E2E %v (simulator %v)",
			c.name, len(res.ITL), mean, rec.MeanITL, res.E2E, rec.E2E)
	}
}
