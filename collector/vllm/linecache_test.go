package vllm

import (
	"bufio"
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// filterResult is what readNeeded returns for one body.
type filterResult struct {
	kept string
	st   streamed
	err  error
}

func filterBody(body []byte, limit int64, admit func(string) bool, lc *lineCache) filterResult {
	var dst bytes.Buffer
	models := &modelFilter{admit: admit, decided: map[string]bool{}}
	st, err := readNeeded(bufio.NewReaderSize(nil, maxLineBytes), bytes.NewReader(body), limit, &dst, models, lc, nil)
	return filterResult{dst.String(), st, err}
}

// checkSameFilter reads body through the line cache c and without a
// cache, and fails unless both keep the same lines and find the same.
// It returns how many lines matched the cached body.
func checkSameFilter(t *testing.T, c *lineCache, body []byte, limit int64, admit func(string) bool, what string) int {
	t.Helper()
	want := filterBody(body, limit, admit, nil)
	got := filterBody(body, limit, admit, c)
	if got.kept != want.kept {
		t.Fatalf("%s: kept lines differ with the line cache:\n%q\nwithout:\n%q", what, got.kept, want.kept)
	}
	if got.st != want.st || (got.err == nil) != (want.err == nil) || (got.err != nil && got.err.Error() != want.err.Error()) {
		t.Fatalf("%s: with the line cache %+v, %v; without %+v, %v", what, got.st, got.err, want.st, want.err)
	}
	return c.matched
}

func admitAll(string) bool { return true }

// TestLineCacheMatchesUnchangedLines: a body whose values moved is read
// from the cache line for line, with the filter's result.
func TestLineCacheMatchesUnchangedLines(t *testing.T) {
	body := fixture(t, "sim-v1-0.33-one-model.txt")
	lines := bytes.Count(body, []byte("\n"))
	var c lineCache
	if m := checkSameFilter(t, &c, body, DefaultMaxBodyBytes, admitAll, "first body"); m != 0 {
		t.Fatalf("first body matched %d lines of an empty cache", m)
	}
	for i := 1; i <= 3; i++ {
		moved := withValueTokens(body, func(_ int, old string) string {
			if n, ok := strings.CutSuffix(old, ".0"); ok {
				if v, err := strconv.Atoi(n); err == nil {
					return strconv.Itoa(v+i) + ".0"
				}
			}
			return old
		})
		if m := checkSameFilter(t, &c, moved, DefaultMaxBodyBytes, admitAll, "moved values"); m != lines {
			t.Fatalf("body %d: %d of %d lines matched the cache", i, m, lines)
		}
	}
}

// TestLineCacheChanges: every change of a body that changes what the
// filter decides is read as the filter reads it, whatever the cache holds.
func TestLineCacheChanges(t *testing.T) {
	const (
		head = "# HELP vllm:num_requests_running Running.\n# TYPE vllm:num_requests_running gauge\n"
		a    = "vllm:num_requests_running{engine=\"0\",model_name=\"a\"} 1.0\n"
		b    = "vllm:num_requests_running{engine=\"0\",model_name=\"b\"} 2.0\n"
		hist = "# TYPE vllm:e2e_request_latency_seconds histogram\n" +
			"vllm:e2e_request_latency_seconds_bucket{engine=\"0\",le=\"1.0\",model_name=\"a\"} 3.0\n" +
			"vllm:e2e_request_latency_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"a\"} 4.0\n" +
			"vllm:e2e_request_latency_seconds_sum{engine=\"0\",model_name=\"a\"} 1.5\n" +
			"vllm:e2e_request_latency_seconds_count{engine=\"0\",model_name=\"a\"} 4.0\n"
		other = "# TYPE python_gc_objects_collected_total counter\npython_gc_objects_collected_total{generation=\"0\"} 7.0\n"
	)
	onlyA := func(name string) bool { return name == "a" }
	cases := []struct {
		name     string
		body     string
		admit    func(string) bool
		limit    int64
		matching bool // every line matches the body before
	}{
		{"first", head + a + b + hist + other, admitAll, DefaultMaxBodyBytes, false},
		{"values moved", head + a + strings.Replace(b, "2.0", "9.0", 1) + hist + strings.Replace(other, "7.0", "8.5", 1), admitAll, DefaultMaxBodyBytes, true},
		{"dropped line stops parsing", head + a + b + hist + strings.Replace(other, "7.0", "x7", 1), admitAll, DefaultMaxBodyBytes, false},
		{"dropped line with a timestamp", head + a + b + hist + strings.Replace(other, "7.0", "7.0 1700000000", 1), admitAll, DefaultMaxBodyBytes, false},
		{"timestamp moved", head + a + b + hist + strings.Replace(other, "7.0", "7.0 1700000005", 1), admitAll, DefaultMaxBodyBytes, true},
		{"model refused now", head + a + b + hist + other, onlyA, DefaultMaxBodyBytes, false},
		{"still refused", head + a + b + hist + other, onlyA, DefaultMaxBodyBytes, true},
		{"admitted again", head + a + b + hist + other, admitAll, DefaultMaxBodyBytes, false},
		{"line inserted", head + b + a + b + hist + other, admitAll, DefaultMaxBodyBytes, false},
		{"TYPE changed", head + b + a + b + strings.Replace(hist, "histogram", "gauge", 1) + other, admitAll, DefaultMaxBodyBytes, false},
		{"shorter", head + b, admitAll, DefaultMaxBodyBytes, true},
		{"longer", head + b + a + hist, admitAll, DefaultMaxBodyBytes, false},
		{"no final newline", head + b + a + strings.TrimSuffix(hist, "\n"), admitAll, DefaultMaxBodyBytes, false},
		{"brace in the value", head + b + a + strings.Replace(hist, "1.5\n", "{1.5\n", 1), admitAll, DefaultMaxBodyBytes, false},
		{"same again", head + b + a + strings.Replace(hist, "1.5\n", "{1.5\n", 1), admitAll, DefaultMaxBodyBytes, false},
		{"over the body limit", head + b + a + hist, admitAll, int64(len(head + b)), false},
		{"after a failure", head + b + a + hist, admitAll, DefaultMaxBodyBytes, false},
		{"again", head + b + a + hist, admitAll, DefaultMaxBodyBytes, true},
	}
	var c lineCache
	for _, tc := range cases {
		lines := strings.Count(tc.body, "\n")
		if !strings.HasSuffix(tc.body, "\n") {
			lines++
		}
		m := checkSameFilter(t, &c, []byte(tc.body), tc.limit, tc.admit, tc.name)
		if tc.matching && m != lines {
			t.Errorf("%s: %d of %d lines matched the cache", tc.name, m, lines)
		}
		if !tc.matching && m == lines && lines > 0 {
			t.Errorf("%s: every line matched the cache", tc.name)
		}
	}
}

// TestLineCacheParseBudget: a body that passes the parse budget while its
// lines match the cache fails as it does without the cache.
func TestLineCacheParseBudget(t *testing.T) {
	one := fixture(t, "sim-v1-0.33-one-model.txt")
	// Enough copies of the body to pass the parse budget of a limit the
	// body itself stays under.
	var body []byte
	for EstimateParseCost(body) <= parseBudget(int64(len(body))) {
		body = append(body, one...)
	}
	limit := int64(len(body))
	var c lineCache
	checkSameFilter(t, &c, body, 1<<30, admitAll, "first body")
	if m, lines := c.matched, bytes.Count(body, []byte("\n")); m != 0 {
		t.Fatalf("first body: %d of %d lines matched an empty cache", m, lines)
	}
	checkSameFilter(t, &c, body, 1<<30, admitAll, "second body")
	got := filterBody(body, limit, admitAll, &c)
	if !errors.Is(got.err, errParseTooLarge) {
		t.Fatalf("limit %d: %v, want %v", limit, got.err, errParseTooLarge)
	}
	if c.matched == 0 {
		t.Fatal("no line matched the cache before the budget was passed")
	}
	want := filterBody(body, limit, admitAll, nil)
	if got.st != want.st || got.err.Error() != want.err.Error() {
		t.Fatalf("with the line cache %+v, %v; without %+v, %v", got.st, got.err, want.st, want.err)
	}
}

// FuzzLineCache reads two bodies through one line cache: the second must
// be read as the filter reads it without a cache.
func FuzzLineCache(f *testing.F) {
	f.Add([]byte("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 3\nfoo 1\n"),
		[]byte("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 4\nfoo x\n"))
	f.Add([]byte("foo{a=\"b\"} 1 2\nvllm:num_requests_running{model_name=\"m\"} 3\n"),
		[]byte("foo{a=\"b\"} 1 3\nvllm:num_requests_running{model_name=\"n\"} 3\n"))
	f.Add([]byte("vllm:num_requests_running{model_name=\"m\"\t} 3\n"), []byte("vllm:num_requests_running{model_name=\"m\"\t} }\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		admit := func(name string) bool { return name != "n" }
		var c lineCache
		filterBody(a, 1<<20, admit, &c)
		checkSameFilter(t, &c, b, 1<<20, admit, "second body")
		checkSameFilter(t, &c, b, 1<<20, admit, "second body again")
	})
}
