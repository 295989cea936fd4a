package vllm

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	sharedtest "github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// ttft is a TTFT histogram child of model m, engine e: buckets at 0.1 and
// +Inf ("" leaves one out), then _count and _sum ("" leaves them out).
func ttft(m, e, b01, inf, count, sum string) string {
	var b strings.Builder
	line := func(suffix, labels, v string) {
		if v != "" {
			fmt.Fprintf(&b, "vllm:time_to_first_token_seconds%s{engine=%q,%smodel_name=%q} %s\n", suffix, e, labels, m, v)
		}
	}
	line("_bucket", `le="0.1",`, b01)
	line("_bucket", `le="+Inf",`, inf)
	line("_count", "", count)
	line("_sum", "", sum)
	return b.String()
}

const (
	typeTTFT    = "# TYPE vllm:time_to_first_token_seconds histogram\n"
	typeRunning = "# TYPE vllm:num_requests_running gauge\n"
)

// TestHostileBodies feeds damaged or hostile bodies, as an upstream would
// serve them, through the scraper: each gets its defined answer, the
// exported series say only what is true, and the reason is counted.
func TestHostileBodies(t *testing.T) {
	long := strings.Repeat("x", MaxLabelValueBytes+1)
	var longNames strings.Builder
	longNames.WriteString(typeRunning)
	for i := range 20 {
		fmt.Fprintf(&longNames, "vllm:num_requests_running{model_name=\"%s%d\"} 1\n", long, i)
	}
	fmt.Fprintf(&longNames, "vllm:num_requests_running{model_name=\"real\"} 3\n")
	for _, c := range []struct {
		name, body string
		want       string         // the exported series of families
		families   []string       // compared
		dropped    map[string]int // samples_dropped_total by reason (others 0)
		check      func(*testing.T, *snapshot.Model)
	}{
		{name: "histogram cut before +Inf, no _count or _sum",
			body:     typeTTFT + ttft("m", "0", "92", "", "", ""),
			families: []string{"vllm_time_to_first_token_seconds"},
			dropped:  map[string]int{DropInvalidHistogram: 1}},
		{name: "histogram whose buckets decrease",
			body:     typeTTFT + ttft("m", "0", "9", "5", "5", "1"),
			families: []string{"vllm_time_to_first_token_seconds"},
			dropped:  map[string]int{DropInvalidHistogram: 1}},
		{name: "histogram whose _count is below +Inf",
			body:     typeTTFT + ttft("m", "0", "3", "5", "4", "1"),
			families: []string{"vllm_time_to_first_token_seconds"},
			dropped:  map[string]int{DropInvalidHistogram: 1}},
		{name: "one engine's histogram cut: the model's is not summed without it",
			body:     typeTTFT + ttft("m", "0", "3", "5", "5", "1") + ttft("m", "1", "2", "", "", ""),
			families: []string{"vllm_time_to_first_token_seconds"},
			dropped:  map[string]int{DropInvalidHistogram: 1}},
		{name: "histogram without TYPE lines, _count and _sum only",
			body: ttft("m", "0", "", "", "7", "1.5"),
			want: `vllm_time_to_first_token_seconds_bucket{model="m",le="+Inf"} 7
vllm_time_to_first_token_seconds_sum{model="m"} 1.5
vllm_time_to_first_token_seconds_count{model="m"} 7
`, families: []string{"vllm_time_to_first_token_seconds"}},
		{name: "histogram without TYPE lines, _sum before its buckets",
			body: "vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"m\"} 0.5\n" + ttft("m", "0", "2", "3", "3", ""),
			want: `vllm_time_to_first_token_seconds_bucket{model="m",le="0.1"} 2
vllm_time_to_first_token_seconds_bucket{model="m",le="+Inf"} 3
vllm_time_to_first_token_seconds_sum{model="m"} 0.5
vllm_time_to_first_token_seconds_count{model="m"} 3
`, families: []string{"vllm_time_to_first_token_seconds"}},
		{name: "a series twice",
			body:     typeRunning + "vllm:num_requests_running{model_name=\"m\"} 4\nvllm:num_requests_running{model_name=\"m\"} 999\n",
			want:     `vllm_requests_running{model="m"} 4` + "\n",
			families: []string{"vllm_requests_running"},
			dropped:  map[string]int{DropDuplicate: 1}},
		{name: "NaN and +Inf gauges",
			body: typeRunning + "vllm:num_requests_running{model_name=\"m\"} NaN\n" +
				"# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{model_name=\"m\"} +Inf\n" +
				"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 2\n",
			want:     `vllm_requests_waiting{model="m"} 2` + "\n",
			families: []string{"vllm_requests_running", "vllm_kv_cache_usage_ratio", "vllm_requests_waiting"},
			dropped:  map[string]int{DropNonFinite: 2},
			check: func(t *testing.T, m *snapshot.Model) {
				wantAbsent(t, "running", m.Running)
				wantAbsent(t, "kv usage", m.KVUsage)
			}},
		{name: "one engine's gauge NaN: the model's is not summed without it",
			body: typeRunning + "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\nvllm:num_requests_running{engine=\"1\",model_name=\"m\"} -Inf\n" +
				"vllm:num_requests_running{engine=\"2\",model_name=\"m\"} 4\n",
			want: `vllm_engine_requests_running{engine="0",model="m"} 3
vllm_engine_requests_running{engine="2",model="m"} 4
`, families: []string{"vllm_requests_running", "vllm_engine_requests_running"},
			dropped: map[string]int{DropNonFinite: 1},
			check:   func(t *testing.T, m *snapshot.Model) { wantAbsent(t, "running", m.Running) }},
		{name: "a negative counter",
			body: "# TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total{model_name=\"m\"} -3609\n" +
				"# TYPE vllm:request_success_total counter\nvllm:request_success_total{finished_reason=\"stop\",model_name=\"m\"} -1\n" +
				"vllm:request_success_total{finished_reason=\"length\",model_name=\"m\"} 2\n",
			want:     `vllm_requests_finished_total{finished_reason="length",model="m"} 2` + "\n",
			families: []string{"vllm_preemptions_total", "vllm_requests_finished_total"},
			dropped:  map[string]int{DropNegativeCounter: 2},
			check:    func(t *testing.T, m *snapshot.Model) { wantAbsent(t, "preemptions", m.Preemptions) }},
		{name: "20 model names over 512 bytes before a real one",
			body:     longNames.String(),
			want:     `vllm_requests_running{model="real"} 3` + "\n",
			families: []string{"vllm_requests_running"},
			dropped:  map[string]int{DropLabelTooLong: 20}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newFakeVLLM(t, []byte(c.body), "text/plain; version=0.0.4")
			s := newTestScraper(t, srv.URL, func(o *Options) { o.Models.Max = 16 })
			scrapeAt(s, t0)
			l := s.Latest()
			if !l.Up {
				t.Fatalf("scrape failed: %s", l.Error)
			}
			want := ""
			for _, f := range c.families {
				row := rowByExported[strings.Replace(f, "vllm_engine_", "vllm_", 1)]
				want += "# TYPE " + f + " " + typeName(row.Type) + "\n"
			}
			compareNoHelp(t, s, want+c.want, c.families...)
			m := sharedtest.Gather(t, registryOf(s))
			for _, r := range dropReasons {
				if v, _ := m.Value("vllm_exporter_samples_dropped_total", "reason", r); v != float64(c.dropped[r]) {
					t.Errorf("samples_dropped_total{reason=%q} = %v, want %d", r, v, c.dropped[r])
				}
			}
			if c.check != nil {
				c.check(t, l.Models["m"])
			}
		})
	}
}

// A truncated body feeds no SLO 0 events: the window over it has no TTFT.
func TestTruncatedHistogramFeedsNoWindow(t *testing.T) {
	srv := newFakeVLLM(t, []byte(typeTTFT+ttft("m", "0", "3", "5", "5", "1")), "text/plain")
	s := newTestScraper(t, srv.URL, nil)
	scrapeAt(s, t0)
	srv.set([]byte(typeTTFT+ttft("m", "0", "92", "", "", "")), nil)
	scrapeAt(s, t0.Add(time.Minute))
	if d := s.Window(time.Minute)["m"]; d != nil {
		if h, ok := d.Deltas[snapshot.TTFT]; ok {
			t.Fatalf("a window over a truncated TTFT histogram: %+v", h)
		}
	}
}

func typeName(t families.Type) string {
	switch t {
	case families.Counter:
		return "counter"
	case families.Histogram:
		return "histogram"
	}
	return "gauge"
}

func registryOf(c prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return reg
}
