package vllm

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

// streamRead is one body read as the scraper reads it: through the line
// cache and, when it can, patched into the parse cache as the lines
// stream; a body whose held lines are not enough is read again whole.
type streamRead struct {
	fams  map[string]*dto.MetricFamily
	first streamed // what the first read found
	held  int      // the held text's size after the first read
	again bool     // read again whole
	// before are the names of the cached families the first read kept.
	before map[string]bool
	err    error
}

func readStreamed(c *parseCache, lc *lineCache, body []byte, ct string) streamRead {
	var pc *parseCache
	if !strings.Contains(ct, "openmetrics") {
		pc = c
	}
	var dst bytes.Buffer
	read := func() (streamed, error) {
		dst.Reset()
		return readNeeded(bufio.NewReaderSize(nil, maxLineBytes), bytes.NewReader(body), 1<<30, &dst, nil, lc, pc)
	}
	var r streamRead
	st, err := read()
	r.first, r.held = st, dst.Len()
	if st.held != nil {
		r.before = map[string]bool{}
		for name := range st.held.before {
			r.before[name] = true
		}
	}
	if err == nil && st.held != nil && st.held.rereadWhole() {
		c.reset()
		r.again = true
		st, err = read()
	}
	if err == nil {
		var e parsedBody
		e, err = parseFiltered(dst.Bytes(), ct, &st, c)
		r.fams = e.fams
	}
	if err != nil {
		c.reset() // as the scraper does after a failed scrape
	}
	r.err = err
	return r
}

// checkStreamed reads body through the caches and fails unless it gives
// what the scraper's path without them gives (readNeeded, then
// parseFiltered: the families, or a failure) and the same parse-cost
// estimate.
func checkStreamed(t *testing.T, c *parseCache, lc *lineCache, body []byte, ct, what string) streamRead {
	t.Helper()
	got := readStreamed(c, lc, body, ct)
	var dst bytes.Buffer
	st, _ := readNeeded(bufio.NewReaderSize(nil, maxLineBytes), bytes.NewReader(body), 1<<30, &dst, nil, nil, nil)
	want, wantErr := parseFiltered(dst.Bytes(), ct, &st, nil)
	if (got.err == nil) != (wantErr == nil) {
		t.Fatalf("%s: error %v, without the caches %v", what, got.err, wantErr)
	}
	if wantErr == nil && !sameFamilies(got.fams, want.fams) {
		for name, mf := range want.fams {
			if g := got.fams[name]; g == nil || g.String() != mf.String() {
				t.Fatalf("%s: family %s differs:\nstreamed: %v\nparser: %v", what, name, g, mf)
			}
		}
		t.Fatalf("%s: families differ (%d vs %d)", what, len(got.fams), len(want.fams))
	}
	if got.first.cost != st.cost {
		t.Fatalf("%s: parse cost %d through the caches, %d without", what, got.first.cost, st.cost)
	}
	return got
}

// simBodies returns n successive /metrics bodies of a simulated server
// under load, a minute apart.
func simBodies(t *testing.T, models []string, engines, n int) [][]byte {
	t.Helper()
	sim, err := vllmsim.New(vllmsim.Config{Models: models, DataParallelSize: engines, VirtualClock: true, Seed: 1, LoadGen: true})
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for range n {
		sim.Advance(time.Minute)
		out = append(out, sim.Metrics())
	}
	return out
}

const textCT = "text/plain; version=0.0.4; charset=utf-8"

// String describes what a sink held, for test failures.
func (h *heldLines) String() string {
	if h == nil {
		return "held whole"
	}
	return fmt.Sprintf("patched %v, %d families before part %d (slot %d), tail from byte %d, read again %v", h.patched, len(h.before), h.part, h.slot, h.tailFrom, h.rereadWhole())
}

// A body with the lines of the cached one is patched as it streams: its
// families are the parser's, and the sink holds at most one part of its
// kept lines (a family's), not all of them.
func TestKeptSinkPatchesAsTheLinesStream(t *testing.T) {
	bodies := simBodies(t, []string{"a", "b", "c", "d"}, 4, 4)
	var c parseCache
	var lc lineCache
	first := checkStreamed(t, &c, &lc, bodies[0], textCT, "first body")
	if first.first.held != nil || c.fams == nil || !c.fromText {
		t.Fatalf("the first body was not held whole and cached: %v", first.first.held)
	}
	kept := first.held
	for i, body := range bodies[1:] {
		r := checkStreamed(t, &c, &lc, body, textCT, fmt.Sprintf("body %d", i+1))
		if h := r.first.held; h == nil || !h.patched {
			t.Fatalf("body %d, the same lines: not patched as it streamed (%+v)", i+1, h)
		}
		t.Logf("body %d: %d bytes kept, %d held, largest part %d", i+1, r.first.kept, r.held, c.largestPart)
		if r.held > c.largestPart || r.held > kept/4 {
			t.Fatalf("body %d: the sink held %d bytes of %d kept (largest part %d)", i+1, r.held, kept, c.largestPart)
		}
	}
	// OpenMetrics is rewritten from the whole body: held whole, as before.
	r := checkStreamed(t, &c, &lc, bodies[0], "application/openmetrics-text; version=1.0.0", "as OpenMetrics")
	if r.first.held != nil || r.held != kept {
		t.Fatalf("an OpenMetrics body was not held whole: %d of %d bytes, %v", r.held, kept, r.first.held)
	}
}

// insertAfter returns body with extra inserted after the first line that
// starts with prefix.
func insertAfter(t *testing.T, body []byte, prefix, extra string) []byte {
	t.Helper()
	i := bytes.Index(body, []byte("\n"+prefix))
	if i < 0 {
		t.Fatalf("no line starts with %q", prefix)
	}
	j := i + 1 + bytes.IndexByte(body[i+1:], '\n') + 1
	return append(append(append([]byte{}, body[:j]...), extra...), body[j:]...)
}

// A body whose lines changed in a family (a new series) keeps the
// families of the parts before that family, already patched, and the
// cache is rebuilt from that family on: the next body with those lines is
// patched again. A tail the cache cannot take (a timestamp) is parsed by
// the text parser, and the next body is held whole and cached.
func TestKeptSinkParsesTheTailOfAChangedBody(t *testing.T) {
	bodies := simBodies(t, []string{"a", "b"}, 2, 5)
	var c parseCache
	var lc lineCache
	checkStreamed(t, &c, &lc, bodies[0], textCT, "first body")
	withSeries := func(i int, value string) []byte {
		return insertAfter(t, bodies[i], "vllm:num_requests_waiting{", `vllm:num_requests_waiting{engine="9",model_name="a"} `+value+"\n")
	}
	changed := withSeries(1, "4")
	r := checkStreamed(t, &c, &lc, changed, textCT, "a new series")
	h := r.first.held
	if h == nil || h.patched || h.rereadWhole() || len(r.before) == 0 || r.again {
		t.Fatalf("a changed family: want the parts before it kept and the rest parsed, got %+v (read again: %v)", h, r.again)
	}
	if r.before["vllm:num_requests_waiting"] || !r.before["vllm:num_requests_running"] {
		t.Fatalf("the cached families kept: %v; want those before the changed one", r.before)
	}
	kept := keptLines(t, changed)
	if from := bytes.Index(kept, []byte("# HELP vllm:num_requests_waiting ")); r.held != len(kept)-from {
		t.Fatalf("held %d bytes of %d kept, want those from the changed family's part on (%d)", r.held, len(kept), len(kept)-from)
	}
	if c.fams == nil {
		t.Fatal("the cache was not rebuilt from the changed family on")
	}
	if r := checkStreamed(t, &c, &lc, withSeries(2, "5"), textCT, "the same lines again"); r.first.held == nil || !r.first.held.patched {
		t.Fatalf("the lines of the rebuilt cache were not patched: %v", r.first.held)
	}
	stamped := withSeries(3, "6 1700000000000")
	if r := checkStreamed(t, &c, &lc, stamped, textCT, "a timestamp in the tail"); r.first.held == nil || r.first.held.patched || c.fams != nil {
		t.Fatalf("a tail the cache cannot read: held %v, cache kept %v", r.first.held, c.fams != nil)
	}
	if r := checkStreamed(t, &c, &lc, withSeries(4, "7"), textCT, "the next body, held whole"); r.first.held != nil || c.fams == nil {
		t.Fatalf("after a tail the cache could not read, the next body was not held whole and cached: %v", r.first.held)
	}
}

// After a tail rebuilt from one family, a change in a later family is
// parsed by the text parser and the cache is built anew from the next
// body, held whole: tails rebuilt ever later would each keep the last
// one's arrays.
func TestKeptSinkRebuildsNoTailPastTheLast(t *testing.T) {
	bodies := simBodies(t, []string{"a", "b"}, 2, 4)
	kept := keptLines(t, bodies[0])
	last := kept[bytes.LastIndex(kept, []byte("\n# HELP "))+len("\n# HELP "):]
	last = last[:bytes.IndexByte(last, ' ')]
	var c parseCache
	var lc lineCache
	checkStreamed(t, &c, &lc, bodies[0], textCT, "first body")
	early := insertAfter(t, bodies[1], "vllm:num_requests_waiting{", `vllm:num_requests_waiting{engine="9",model_name="a"} 4`+"\n")
	if r := checkStreamed(t, &c, &lc, early, textCT, "a change early"); r.first.held == nil || r.first.held.patched || c.fams == nil {
		t.Fatalf("a change in an early family: held %v, cached %v", r.first.held, c.fams != nil)
	}
	later := insertAfter(t, bodies[2], "vllm:num_requests_waiting{", `vllm:num_requests_waiting{engine="9",model_name="a"} 5`+"\n")
	later = insertAfter(t, later, string(last)+"{", string(last)+`{engine="9",model_name="a"} 1`+"\n")
	if r := checkStreamed(t, &c, &lc, later, textCT, "a change in "+string(last)); r.first.held == nil || r.first.held.patched || c.fams != nil {
		t.Fatalf("a change past the last tail (%s): held %v, cached %v", last, r.first.held, c.fams != nil)
	}
	again := insertAfter(t, bodies[3], "vllm:num_requests_waiting{", `vllm:num_requests_waiting{engine="9",model_name="a"} 6`+"\n")
	again = insertAfter(t, again, string(last)+"{", string(last)+`{engine="9",model_name="a"} 2`+"\n")
	if r := checkStreamed(t, &c, &lc, again, textCT, "the next body"); r.first.held != nil || c.fams == nil {
		t.Fatalf("the next body was not held whole and cached: %v", r.first.held)
	}
}

// movedBodies: the second has a sample of vllm:num_requests_running after
// the other family's lines, which the text parser adds to the family of
// the part before: the held tail alone would parse it as its own.
var movedBodies = [2]string{
	"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"a\"} 1\n" +
		"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"a\"} 2\n",
	"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"a\"} 3\n" +
		"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"a\"} 4\n" +
		"vllm:num_requests_running{model_name=\"b\"} 5\n",
}

// A body whose family moved into a later part cannot be parsed from the
// tail: it is read again whole, and parses as the text parser does.
func TestKeptSinkReadsAMovedFamilyAgainWhole(t *testing.T) {
	var c parseCache
	var lc lineCache
	checkStreamed(t, &c, &lc, []byte(movedBodies[0]), textCT, "first body")
	r := checkStreamed(t, &c, &lc, []byte(movedBodies[1]), textCT, "a moved family")
	if !r.again {
		t.Fatalf("a family in two parts was not read again whole: %v", r.first.held)
	}
	if got := len(r.fams["vllm:num_requests_running"].GetMetric()); got != 2 {
		t.Fatalf("vllm:num_requests_running has %d series, want 2", got)
	}
}

// The scraper reads such a body again, once, and tracks what it holds.
func TestScraperReadsAMovedFamilyAgain(t *testing.T) {
	var requests atomic.Int32
	serve := movedBodies[0]
	s := New(Options{URL: "http://vllm.test", MaxBodyBytes: DefaultMaxBodyBytes, Client: &http.Client{Transport: streamTransport(func() (io.Reader, http.Header) {
		requests.Add(1)
		return strings.NewReader(serve), http.Header{"Content-Type": {textCT}}
	})}}, nil)
	scrapeAt(s, t0)
	scrapeAt(s, t0.Add(5*time.Second))
	if n := requests.Load(); n != 2 {
		t.Fatalf("two scrapes of the same lines made %d requests", n)
	}
	serve = movedBodies[1]
	scrapeAt(s, t0.Add(10*time.Second))
	if n := requests.Load(); n != 4 {
		t.Fatalf("a body with a moved family: %d requests in all, want it read again once (4)", n)
	}
	l := s.Latest()
	if !l.Up || l.Models["b"] == nil || l.Models["a"] == nil {
		t.Fatalf("after the body was read again: up %v, error %q, models %v", l.Up, l.Error, l.Models)
	}
}

// A server whose families move at every scrape is read twice only now and
// then: after a second read the next bodies are held whole, for longer each
// time, and every scrape still reads what was served.
func TestScraperHoldsWholeTheBodiesOfAServerThatMovesFamilies(t *testing.T) {
	var requests atomic.Int32
	var serve string
	s := New(Options{URL: "http://vllm.test", MaxBodyBytes: DefaultMaxBodyBytes, Client: &http.Client{Transport: streamTransport(func() (io.Reader, http.Header) {
		requests.Add(1)
		return strings.NewReader(serve), http.Header{"Content-Type": {textCT}}
	})}}, nil)
	const scrapes = 300
	for i := range scrapes {
		serve = movedBodies[i%2]
		scrapeAt(s, t0.Add(time.Duration(i)*5*time.Second))
		l := s.Latest()
		wantB := i%2 == 1
		if !l.Up || l.Models["a"] == nil || (l.Models["b"] != nil) != wantB {
			t.Fatalf("scrape %d: up %v, error %q, models %v; want b %v", i, l.Up, l.Error, l.Models, wantB)
		}
		if got, want := l.Models["a"].Running, snapshot.Some(float64(1+2*(i%2))); got != want {
			t.Fatalf("scrape %d: running %v, want %v", i, got, want)
		}
	}
	again := int(requests.Load()) - scrapes
	// 1, 2, 4, ... 64 bodies held whole after each second read.
	most := 0
	for held, left := 1, scrapes; left > 0; held = min(2*held, maxWholeBodies) {
		most++
		left -= held + 1
	}
	if again < 1 || again > most {
		t.Fatalf("%d scrapes read the body %d times more; want 1 to %d", scrapes, again, most)
	}
}

// Both reads of a body whose family moved share the scrape's one deadline
// (--vllm.timeout), so the scrape never takes twice as long.
func TestScraperReadsAgainWithinTheSameDeadline(t *testing.T) {
	var deadlines []time.Time
	serve := movedBodies[0]
	s := New(Options{URL: "http://vllm.test", MaxBodyBytes: DefaultMaxBodyBytes, Timeout: time.Hour, Client: &http.Client{Transport: deadlineTransport(func(d time.Time) (io.Reader, http.Header) {
		deadlines = append(deadlines, d)
		return strings.NewReader(serve), http.Header{"Content-Type": {textCT}}
	})}}, nil)
	scrapeAt(s, t0)
	serve = movedBodies[1]
	scrapeAt(s, t0.Add(5*time.Second))
	if len(deadlines) != 3 {
		t.Fatalf("%d requests, want 3 (the second body read again)", len(deadlines))
	}
	if !deadlines[1].Equal(deadlines[2]) || deadlines[1].IsZero() {
		t.Fatalf("the two reads of one scrape had deadlines %v and %v; want the same", deadlines[1], deadlines[2])
	}
}

// deadlineTransport is streamTransport that also sees the request's deadline.
type deadlineTransport func(deadline time.Time) (io.Reader, http.Header)

func (f deadlineTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	d, _ := r.Context().Deadline()
	b, h := f(d)
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(b), Header: h, Request: r, ContentLength: -1}, nil
}

// FuzzKeptSink: bodies a, b, a, c read through the caches give what the
// parser gives, with the parse cost estimated without them.
func FuzzKeptSink(f *testing.F) {
	f.Add([]byte(movedBodies[0]), []byte(movedBodies[1]), []byte(movedBodies[0]), false)
	h := "# HELP vllm:e2e_request_latency_seconds e2e\n# TYPE vllm:e2e_request_latency_seconds histogram\n"
	f.Add([]byte(h+"vllm:e2e_request_latency_seconds_bucket{le=\"1\",model_name=\"m\"} 5\nvllm:e2e_request_latency_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 6\nvllm:e2e_request_latency_seconds_count{model_name=\"m\"} 6\n"+movedBodies[0]),
		[]byte(h+"vllm:e2e_request_latency_seconds_bucket{le=\"1\",model_name=\"m\"} 6\nvllm:e2e_request_latency_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 7\nvllm:e2e_request_latency_seconds_count{model_name=\"m\"} 7\n"+movedBodies[0]),
		[]byte(movedBodies[0]+h+"vllm:e2e_request_latency_seconds_sum{model_name=\"m\"} 2\n"), false)
	f.Add([]byte("# TYPE vllm:num_preemptions counter\nvllm:num_preemptions_total{model_name=\"m\"} 5\n# EOF\n"),
		[]byte("# TYPE vllm:num_preemptions counter\nvllm:num_preemptions_total{model_name=\"m\"} 6\n# EOF\n"), []byte(movedBodies[1]), true)
	f.Add([]byte(movedBodies[0]), []byte(movedBodies[0]+"# EOF\n"), []byte(movedBodies[0]), false)
	hist := h + "vllm:e2e_request_latency_seconds_bucket{le=\"1\",model_name=\"m\"} 5\nvllm:e2e_request_latency_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 6\n"
	// Shorter, longer, broken in the tail, a series more in a histogram.
	f.Add([]byte(movedBodies[0]+hist), []byte(movedBodies[0]), []byte(movedBodies[0]+hist+hist), false)
	f.Add([]byte(movedBodies[0]+hist), []byte(movedBodies[0]+hist+"vllm:e2e_request_latency_seconds_count{model_name=\"m\"} x\n"), []byte(hist+movedBodies[0]), false)
	f.Add([]byte(movedBodies[0]+hist), []byte(movedBodies[0]+strings.Replace(hist, "le=\"1\"", "le=\"2\"", 1)), []byte(movedBodies[0]+hist), false)
	// The parse cost of a line after the last matching one hangs on a TYPE
	// line of an earlier part: a bucket of a histogram series whose labels,
	// le aside, are the last sample's.
	typed := "# TYPE vllm:e2e_request_latency_seconds histogram\nvllm:e2e_request_latency_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 1\n" +
		"# HELP vllm:num_requests_running r\nvllm:num_requests_running{model_name=\"m\",le=\"1\"} 1\n"
	f.Add([]byte(typed), []byte(typed+"vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"2\"} 2\n"), []byte(typed), false)
	f.Fuzz(func(t *testing.T, a, b, c []byte, openMetrics bool) {
		ct := textCT
		if openMetrics {
			ct = "application/openmetrics-text; version=1.0.0"
		}
		var pc parseCache
		var lc lineCache
		for i, body := range [][]byte{a, b, a, c, c} {
			checkStreamed(t, &pc, &lc, body, ct, fmt.Sprintf("body %d", i))
		}
	})
}

// A LoRA server's vllm:lora_requests_info names the adapters running and
// waiting in its labels, so its one series changes as the load moves: the
// families before it come from the cache, the cache is rebuilt from it
// on, only the first body is held whole, and every body parses as the
// text parser parses it.
func TestKeptSinkFollowsALoRAServer(t *testing.T) {
	sim, err := vllmsim.New(vllmsim.Config{Models: []string{"base"}, MetricsVersion: vllmsim.MetricsLatest, VirtualClock: true, Seed: 3, LoadGen: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.SetLoRA(vllmsim.LoRAConfig{MaxLoRA: 1, Adapters: []string{"x", "y", "z"}, LoadFraction: 0.5}); err != nil {
		t.Fatal(err)
	}
	var c parseCache
	var lc lineCache
	outcomes := map[string]int{}
	for i := range 40 {
		sim.Advance(5 * time.Second)
		body := sim.Metrics()
		if !bytes.Contains(body, []byte("vllm:lora_requests_info{")) {
			t.Fatal("the simulator renders no vllm:lora_requests_info: the test tests nothing")
		}
		r := checkStreamed(t, &c, &lc, body, textCT, fmt.Sprintf("body %d", i))
		switch h := r.first.held; {
		case r.again:
			outcomes["read again"]++
		case h == nil:
			outcomes["held whole"]++
		case h.patched:
			outcomes["patched"]++
		default:
			outcomes["tail"]++
			if i < 6 {
				t.Logf("body %d: tail %d of %d kept bytes", i, r.held, r.first.kept)
			}
			if r.held >= int(r.first.kept) {
				t.Fatalf("body %d: a tail of %d bytes of %d kept", i, r.held, r.first.kept)
			}
		}
	}
	t.Logf("40 bodies: %v", outcomes)
	if outcomes["read again"] > 0 || outcomes["held whole"] != 1 || outcomes["tail"] == 0 {
		t.Fatalf("outcomes %v: want only the first body held whole, tails from the changed family on, none read again", outcomes)
	}
}
