package vllmsim

import (
	"bufio"
	"bytes"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// newVirtual builds a virtual-clock simulator or fails the test.
func newVirtual(t *testing.T, cfg Config) *Sim {
	t.Helper()
	cfg.VirtualClock = true
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// parseMetrics parses a /metrics body with expfmt (the parser the exporter uses).
func parseMetrics(t *testing.T, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("exposition does not parse: %v", err)
	}
	return fams
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

func family(t *testing.T, fams map[string]*dto.MetricFamily, name string) *dto.MetricFamily {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("family %s missing", name)
	}
	return f
}

// sumValue sums a counter/gauge family (or a histogram's count) over the
// children matching want.
func sumValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	var v float64
	for _, m := range family(t, fams, name).GetMetric() {
		if !labelsMatch(m, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return v
}

// histSum sums a histogram family's _sum over all children.
func histSum(t *testing.T, fams map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	var v float64
	for _, m := range family(t, fams, name).GetMetric() {
		v += m.GetHistogram().GetSampleSum()
	}
	return v
}

// famHeader is one family's HELP/TYPE as written in an exposition.
type famHeader struct{ name, typ, help string }

// headers lists # HELP / # TYPE pairs in order of appearance.
func headers(body []byte) []famHeader {
	var out []famHeader
	help := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# HELP "):
			parts := strings.SplitN(line[7:], " ", 2)
			help[parts[0]] = parts[1]
		case strings.HasPrefix(line, "# TYPE "):
			parts := strings.SplitN(line[7:], " ", 2)
			out = append(out, famHeader{parts[0], parts[1], help[parts[0]]})
		}
	}
	return out
}

// bucketBounds returns the le values of the first child of a histogram family, in order.
func bucketBounds(body []byte, name string) []string {
	var out []string
	var first string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"_bucket{") {
			continue
		}
		ls := line[len(name)+8 : strings.IndexByte(line, '}')]
		var other []string
		le := ""
		for _, kv := range strings.Split(ls, ",") {
			if strings.HasPrefix(kv, "le=") {
				le = strings.Trim(kv[3:], `"`)
			} else {
				other = append(other, kv)
			}
		}
		key := strings.Join(other, ",")
		if first == "" {
			first = key
		}
		if key == first {
			out = append(out, le)
		}
	}
	return out
}

// doVirtual sends one HTTP request to a virtual-clock simulator's handler,
// advancing the clock in 5ms steps until the handler returns.
func doVirtual(t *testing.T, s *Sim, method, path, body string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Handler().ServeHTTP(rec, req)
	}()
	for i := 0; ; i++ {
		select {
		case <-done:
			return rec
		default:
		}
		if i > 200000 {
			t.Fatalf("%s %s did not finish within 1000s of virtual time", method, path)
		}
		s.Advance(5 * time.Millisecond)
		runtime.Gosched()
	}
}

// runFor advances a virtual simulator in 1s steps.
func runFor(s *Sim, d time.Duration) {
	for end := s.Now().Add(d); s.Now().Before(end); {
		s.Advance(time.Second)
	}
}

// elem is list[i], or the zero value past the end (for side-by-side diffs).
func elem[T any](list []T, i int) T {
	var zero T
	if i < len(list) {
		return list[i]
	}
	return zero
}
