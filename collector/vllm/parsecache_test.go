package vllm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

// keptLines is what the scraper parses of a fixture: its needed lines, each
// ending in "\n" (readNeeded's output).
func keptLines(t testing.TB, body []byte) []byte {
	t.Helper()
	kept, _ := keepNeeded(body)
	if len(kept) > 0 && kept[len(kept)-1] != '\n' {
		kept = append(kept, '\n')
	}
	return kept
}

// withValueTokens replaces the value token of every sample line of body
// with pick(line number, old token).
func withValueTokens(body []byte, pick func(i int, old string) string) []byte {
	var out bytes.Buffer
	for i, line := range strings.SplitAfter(string(body), "\n") {
		key, value, sample, ok := splitLine([]byte(strings.TrimSuffix(line, "\n")))
		if !sample || !ok {
			out.WriteString(line)
			continue
		}
		out.Write(key)
		out.WriteString(pick(i, string(value)))
		if strings.HasSuffix(line, "\n") {
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// checkSameParse parses body through c and through the text parser and
// fails unless both give equal families or the same error.
func checkSameParse(t *testing.T, c *parseCache, body []byte, what string) map[string]*dto.MetricFamily {
	t.Helper()
	want, wantErr := textParse(body)
	got, gotErr := c.parse(body, true)
	if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) {
		t.Fatalf("%s: error %v, the text parser says %v", what, gotErr, wantErr)
	}
	if wantErr == nil && !sameFamilies(got, want) {
		for name, mf := range want {
			if g := got[name]; g == nil || g.String() != mf.String() {
				t.Fatalf("%s: family %s differs:\ncache: %v\nparser: %v", what, name, g, mf)
			}
		}
		t.Fatalf("%s: families differ (%d vs %d)", what, len(got), len(want))
	}
	return got
}

// Every fixture, then the same lines with other values, parses through the
// cache exactly as through the text parser, and the second body is read
// from the cache (the families of the first, rewritten).
func TestParseCacheReadsValuesOfUnchangedLines(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	cached := 0
	for _, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if isOpenMetricsBody(body) {
			body = openMetricsToText(body)
		}
		kept := keptLines(t, body)
		var c parseCache
		first := checkSameParse(t, &c, kept, file)
		if c.fams == nil {
			continue // a body the cache does not hold (checked below)
		}
		cached++
		next := withValueTokens(kept, func(i int, old string) string {
			if strings.HasSuffix(old, ".0") || !strings.ContainsAny(old, ".eEaN") {
				return fmt.Sprint(i * 7) // counts stay whole
			}
			return fmt.Sprint(float64(i) * 1.25)
		})
		second := checkSameParse(t, &c, next, file+" with new values")
		if c.fams == nil || fmt.Sprintf("%p", first) != fmt.Sprintf("%p", second) {
			t.Fatalf("%s: a body with the same lines was not read from the cache", file)
		}
	}
	t.Logf("%d of %d fixtures cached", cached, len(files))
	if cached < len(files)/2 {
		t.Fatalf("only %d of %d fixtures were cached", cached, len(files))
	}
}

func isOpenMetricsBody(body []byte) bool { return hasEOFLine(body) }

// The cache keeps one label pair per distinct name and value and one bucket
// bound per distinct bound, however many series repeat them (at 16 models x
// 8 engines the repeats took 2 MB of the 17 MB the scraper retained), and
// reading the next body through the shared pairs still gives the parser's
// families.
func TestParseCacheSharesLabelPairsAndBounds(t *testing.T) {
	kept := keptLines(t, fixture(t, "vllm-late-2026-dp2-priority-spec.txt"))
	var c parseCache
	checkSameParse(t, &c, kept, "first body")
	if c.fams == nil {
		t.Fatal("the body was not cached")
	}
	pairs := map[[2]string]map[*dto.LabelPair]int{}
	bounds := map[float64]map[*float64]int{}
	for _, mf := range c.fams {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				k := [2]string{lp.GetName(), lp.GetValue()}
				if pairs[k] == nil {
					pairs[k] = map[*dto.LabelPair]int{}
				}
				pairs[k][lp]++
			}
			for _, b := range m.GetHistogram().GetBucket() {
				if bounds[b.GetUpperBound()] == nil {
					bounds[b.GetUpperBound()] = map[*float64]int{}
				}
				bounds[b.GetUpperBound()][b.UpperBound]++
			}
		}
	}
	reused := 0
	for k, objs := range pairs {
		if len(objs) != 1 {
			t.Errorf("label %s=%q is held by %d objects, want 1", k[0], k[1], len(objs))
		}
		for _, n := range objs {
			if n > 1 {
				reused++
			}
		}
	}
	for v, objs := range bounds {
		if len(objs) != 1 {
			t.Errorf("bucket bound %g is held by %d objects, want 1", v, len(objs))
		}
	}
	if reused == 0 || len(bounds) == 0 {
		t.Fatalf("the fixture repeats no label pair (%d reused) or has no buckets (%d bounds): nothing was checked", reused, len(bounds))
	}
	next := withValueTokens(kept, func(i int, old string) string {
		if strings.HasSuffix(old, ".0") || !strings.ContainsAny(old, ".eEaN") {
			return fmt.Sprint(i * 3)
		}
		return fmt.Sprint(float64(i) * 0.5)
	})
	checkSameParse(t, &c, next, "second body")
}

// Values that change what the parser builds or make it fail (a fractional
// or negative histogram count, a value that is not a float, a timestamp)
// and changed lines (a new series, a dropped one, a changed HELP) all
// give what the text parser gives, and the cache recovers after them.
func TestParseCacheFallsBackWhenTheParserWouldDiffer(t *testing.T) {
	kept := keptLines(t, fixture(t, "vllm-main-2026-08-v1.txt"))
	lines := strings.SplitAfter(string(kept), "\n")
	bucket, gauge, help := -1, -1, -1
	for i, l := range lines {
		switch {
		case bucket < 0 && strings.Contains(l, "_bucket{"):
			bucket = i
		case gauge < 0 && strings.HasPrefix(l, "vllm:num_requests_running{"):
			gauge = i
		case help < 0 && strings.HasPrefix(l, "# HELP "):
			help = i
		}
	}
	if bucket < 0 || gauge < 0 || help < 0 {
		t.Fatal("fixture lacks a bucket, a gauge or a HELP line")
	}
	token := func(line int, tok string) []byte {
		return withValueTokens(kept, func(i int, old string) string {
			if i == line {
				return tok
			}
			return old
		})
	}
	replace := func(line int, with string) []byte {
		l := append([]string(nil), lines...)
		l[line] = with
		return []byte(strings.Join(l, ""))
	}
	cases := []struct {
		name string
		body []byte
	}{
		{"fractional bucket count", token(bucket, "2.5")},
		{"negative bucket count", token(bucket, "-3")},
		{"NaN bucket count", token(bucket, "NaN")},
		{"huge bucket count", token(bucket, "1e300")},
		{"gauge NaN", token(gauge, "NaN")},
		{"gauge +Inf", token(gauge, "+Inf")},
		{"gauge not a float", token(gauge, "1_000")},
		{"gauge hex", token(gauge, "0x1p3")},
		{"gauge empty", token(gauge, "")},
		{"timestamp", token(gauge, "3 1700000000000")},
		{"trailing blank", token(gauge, "3 ")},
		{"carriage return", token(gauge, "3\r")},
		{"line dropped", replace(gauge, "")},
		{"series added", replace(gauge, lines[gauge]+strings.Replace(lines[gauge], "model_name=", "x=\"1\",model_name=", 1))},
		{"HELP changed", replace(help, strings.TrimSuffix(lines[help], "\n")+" more\n")},
		{"no final newline", kept[:len(kept)-1]},
		{"garbage", append(append([]byte(nil), kept...), "}{\n"...)},
	}
	var c parseCache
	checkSameParse(t, &c, kept, "fixture")
	if c.fams == nil {
		t.Fatal("fixture not cached")
	}
	for _, tc := range cases {
		checkSameParse(t, &c, tc.body, tc.name)
		checkSameParse(t, &c, kept, "fixture after "+tc.name)
		checkSameParse(t, &c, kept, "fixture twice after "+tc.name)
		if c.fams == nil {
			t.Fatalf("after %s the fixture is no longer cached", tc.name)
		}
	}
}

// Random values on random lines, over many scrapes.
func TestParseCacheRandomValues(t *testing.T) {
	kept := keptLines(t, fixture(t, "sim-latest-healthy.txt"))
	r := rand.New(rand.NewPCG(1, 2))
	tokens := []string{"0", "1", "7.0", "12", "0.5", "-1", "NaN", "+Inf", "-Inf", "1e3", "3.25e-2", "x"}
	var c parseCache
	for round := range 200 {
		body := withValueTokens(kept, func(i int, old string) string {
			if r.IntN(50) == 0 {
				return tokens[r.IntN(len(tokens))]
			}
			return old
		})
		checkSameParse(t, &c, body, fmt.Sprintf("round %d", round))
	}
}

// FuzzParseCache: parsing b after a through one cache gives what the text
// parser gives for b.
func FuzzParseCache(f *testing.F) {
	f.Add([]byte("# TYPE a gauge\na{x=\"1\"} 3\n"), []byte("# TYPE a gauge\na{x=\"1\"} 4\n"))
	f.Add([]byte("# TYPE h histogram\nh_bucket{le=\"1\"} 5\nh_bucket{le=\"+Inf\"} 6\nh_sum 2\nh_count 6\n"),
		[]byte("# TYPE h histogram\nh_bucket{le=\"1\"} 5.5\nh_bucket{le=\"+Inf\"} 6\nh_sum 2\nh_count 6\n"))
	f.Add([]byte("# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 2\ns_count 3\n"), []byte("# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 2\ns_count -3\n"))
	f.Add([]byte("# TYPE a gauge\na 1\n# TYPE b gauge\nb 2\na{x=\"1\"} 3\n"), []byte("# TYPE a gauge\na 1\n# TYPE b gauge\nb 2\na{x=\"1\"} 4\n"))
	f.Add([]byte("# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\n# TYPE g gauge\ng 1\nh_count 1\n"), []byte("# TYPE g gauge\ng 1\n# TYPE h histogram\nh_count 1\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var c parseCache
		checkSameParse(t, &c, a, "first body")
		checkSameParse(t, &c, b, "second body")
	})
}

// Collect renders the last scrape's state while the next scrape rewrites
// the cached families and the normalizer's scratch: what it reads must be
// the scrape's own (run with -race), and every Collect shows one whole
// scrape.
func TestCollectDuringScrapes(t *testing.T) {
	kept := fixture(t, "sim-v1-0.33-one-model.txt")
	srv := newFakeVLLM(t, kept, "text/plain")
	s := newTestScraper(t, srv.URL, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 40 {
			scrapeAt(s, t0.Add(time.Duration(i)*5*time.Second))
		}
	}()
	for {
		select {
		case <-done:
			if !s.Latest().Up {
				t.Fatal(s.Latest().Error)
			}
			return
		default:
		}
		ms := s.metrics()
		if len(ms) == 0 {
			t.Fatal("no metrics")
		}
		for _, m := range ms {
			var out dto.Metric
			if err := m.Write(&out); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// fields splits as bytes.Fields on ASCII text.
func TestFieldsIsBytesFields(t *testing.T) {
	for _, s := range []string{"", " ", "TYPE a histogram", " TYPE\ta  summary \n", "HELP a b c d", "a", "a b", "\v\fa\rb\n"} {
		var f [3][]byte
		n := fields([]byte(s), f[:])
		want := bytes.Fields([]byte(s))
		if n != min(len(want), 4) {
			t.Fatalf("%q: %d fields, bytes.Fields says %d", s, n, len(want))
		}
		for i := range min(n, 3) {
			if !bytes.Equal(f[i], want[i]) {
				t.Fatalf("%q: field %d is %q, bytes.Fields says %q", s, i, f[i], want[i])
			}
		}
	}
}

// The cache holds the families of a large server in a handful of arrays,
// not one heap object per sample, label pair and value as the text parser
// leaves them: kept as parsed, those objects pinned most of the heap spans
// the parse had touched (6-9 MB in use but empty at 16 models x 8
// engines). Counted as the heap objects the cache holds after a GC.
func TestParseCacheHoldsFamiliesInFewObjects(t *testing.T) {
	kept := largeServerKept(t)
	samples := 0
	for _, line := range strings.Split(string(kept), "\n") {
		if line != "" && line[0] != '#' {
			samples++
		}
	}
	var before, after runtime.MemStats
	var c parseCache
	runtime.GC()
	runtime.ReadMemStats(&before)
	checkSameParse(t, &c, kept, "the body")
	runtime.GC()
	runtime.ReadMemStats(&after)
	if c.fams == nil {
		t.Fatal("the body was not cached")
	}
	held := int64(after.HeapObjects) - int64(before.HeapObjects)
	t.Logf("%d samples: the cache holds %d heap objects (%d KiB)", samples, held, (int64(after.HeapAlloc)-int64(before.HeapAlloc))>>10)
	if held > int64(samples/10) {
		t.Fatalf("the cache of %d samples holds %d heap objects, want at most %d", samples, held, samples/10)
	}
	runtime.KeepAlive(&c)
}

// A large body is parsed part by part (one family's lines at a time) when
// the cache is built, never whole at once: a whole parse holds all of the
// parser's objects together (5 bytes per byte parsed), which set the
// exporter's heap peak at the first scrape. Families whose lines are split
// across parts (a sample after another family's TYPE line) are not cached,
// and parse as the text parser parses them.
func TestParseCacheBuildsPartByPart(t *testing.T) {
	kept := largeServerKept(t)
	var largest, whole int
	parsedHook = func(n int) {
		if n == len(kept) {
			whole++
		} else {
			largest = max(largest, n)
		}
	}
	defer func() { parsedHook = nil }()
	var c parseCache
	if _, err := c.parse(kept, true); err != nil || c.fams == nil {
		t.Fatalf("not cached: %v", err)
	}
	t.Logf("%d-byte body: the largest part parsed is %d bytes", len(kept), largest)
	if whole > 0 || largest > len(kept)/8 {
		t.Fatalf("building the cache of a %d-byte body parsed it whole %d times, and %d bytes at most", len(kept), whole, largest)
	}
	parsedHook = nil
	checkSameParse(t, &c, withValueTokens(kept, func(i int, old string) string {
		if strings.HasSuffix(old, ".0") {
			return fmt.Sprint(i) + ".0"
		}
		return old
	}), "the body with other values")

	for name, body := range map[string]string{
		"a gauge's samples in two parts":               "# TYPE a gauge\na 1\n# TYPE b gauge\nb 2\na{x=\"1\"} 3\n",
		"a histogram's count in another part":          "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\n# TYPE g gauge\ng 1\nh_count 1\n",
		"a summary's sum after a HELP of another name": "# TYPE s summary\ns_count 2\n# HELP t the t\nt 1\ns_sum 3\n",
	} {
		var c parseCache
		fams := checkSameParse(t, &c, []byte(body), name)
		if c.fams != nil {
			t.Errorf("%s: cached", name)
		}
		if len(fams) == 0 {
			t.Errorf("%s: the parser read nothing: the body tests nothing", name)
		}
	}
}

// largeServerKept is what the scraper parses of a simulated server of 4
// models x 4 engines under load (about 300 KB).
func largeServerKept(t *testing.T) []byte {
	t.Helper()
	sim, err := vllmsim.New(vllmsim.Config{Models: []string{"a", "b", "c", "d"}, DataParallelSize: 4, VirtualClock: true, Seed: 1, LoadGen: true})
	if err != nil {
		t.Fatal(err)
	}
	sim.Advance(time.Minute)
	return keptLines(t, sim.Metrics())
}

// sameFamilies: a and b hold equal families under the same names.
func sameFamilies(a, b map[string]*dto.MetricFamily) bool {
	if len(a) != len(b) {
		return false
	}
	for name, fa := range a {
		fb, ok := b[name]
		if !ok || !proto.Equal(fa, fb) {
			return false
		}
	}
	return true
}
