package bottleneck

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update after checking):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// virtualClock is a Now/Sleep pair that advances time without sleeping and
// lets a hook change the fake sources before each scrape.
type virtualClock struct{ now time.Time }

func (v *virtualClock) Now() time.Time { return v.now }
func (v *virtualClock) Sleep(_ context.Context, d time.Duration) error {
	v.now = v.now.Add(d)
	return nil
}

func synthWatch(t *testing.T, r regime, spec ModelSpec, cost CostSpec) Report {
	t.Helper()
	f := &fakeSources{}
	c := New(Options{Model: spec, Cost: cost}, nil, Sources{VLLM: f, GPU: fakeGPU{f}, Probes: fakeProbes{f}}, nil)
	clk := &virtualClock{now: time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC)}
	rng := newRand(11)
	return Watch(context.Background(), c, WatchOptions{
		Target: "http://127.0.0.1:8000", Duration: time.Minute, Interval: 5 * time.Second,
		Scrape: func(_ context.Context, now time.Time) { r.apply(f, now, rng, defaultTh()) },
		Now:    clk.Now, Sleep: clk.Sleep, GPUHour: cost.GPUHour,
	})
}

func TestRenderGolden(t *testing.T) {
	kv := healthy()
	kv.kv, kv.waiting, kv.ttft99, kv.tpot50 = 0.985, 12, 3, 0.027
	rep := synthWatch(t, kv, testSpec, CostSpec{GPUHour: 3.5})
	if len(rep.Models) != 1 || rep.Models[0].Class != KVCacheExhausted || rep.Models[0].Recommendation == "" {
		t.Fatalf("report = %+v", rep.Models)
	}
	if rep.Scrapes != 13 || rep.Duration != time.Minute {
		t.Errorf("scrapes %d over %v, want 13 over the 1m asked for", rep.Scrapes, rep.Duration)
	}
	var txt bytes.Buffer
	if err := RenderText(&txt, rep); err != nil {
		t.Fatal(err)
	}
	golden(t, "kv_exhausted.txt", txt.Bytes())

	var js bytes.Buffer
	if err := RenderJSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Models[0].Class != KVCacheExhausted {
		t.Fatalf("JSON round trip: %v %+v", err, back.Models)
	}
	golden(t, "kv_exhausted.json", js.Bytes())

	// Healthy, no GPU, no roofline inputs: near_optimal and the unavailable
	// classes are named.
	h := healthy()
	h.gpus = 0
	rep = synthWatch(t, h, ModelSpec{}, CostSpec{})
	txt.Reset()
	if err := RenderText(&txt, rep); err != nil {
		t.Fatal(err)
	}
	golden(t, "healthy_no_gpu.txt", txt.Bytes())
	for _, want := range []string{"BOTTLENECK: near_optimal", "GPUs: none visible", "memory_bound_decode (no_roofline_or_dram)", "predicted: unknown"} {
		if !regexp.MustCompile(regexp.QuoteMeta(want)).Match(txt.Bytes()) {
			t.Errorf("healthy no-GPU report lacks %q", want)
		}
	}
}

func TestRenderEmpty(t *testing.T) {
	var b bytes.Buffer
	if err := RenderText(&b, Report{Target: "http://127.0.0.1:1", Scrapes: 3, ScrapeErrors: 3, LastError: "connect"}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b.Bytes(), []byte("NO DIAGNOSIS")) || !bytes.Contains(b.Bytes(), []byte("last scrape error: connect")) {
		t.Fatalf("empty report:\n%s", b.String())
	}
}

// A quantile interpolated inside one wide bucket is printed as the bucket's
// range (616 s inside vLLM's 160-640 s TTFT bucket is "160-640 s"), a
// quantile in a fine bucket as a point rounded to 3 significant digits.
func TestReportRoundsToWhatTheBucketsSupport(t *testing.T) {
	w := &snapshot.Derived{Deltas: map[snapshot.HistogramName]snapshot.Histogram{
		snapshot.TTFT:              {Bounds: []float64{0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}},
		snapshot.InterTokenLatency: {Bounds: []float64{0.010, 0.0105, 0.011}},
	}}
	ev := withBuckets([]Evidence{
		{Signal: "ttft_seconds", Value: 616, Op: ">", Threshold: 1, Unit: "seconds"},
		{Signal: "tpot_seconds", Value: 0.01049, Op: ">", Threshold: 0.04, Unit: "seconds"},
		{Signal: "preemptions_per_second", Value: 0.09985833001192906, Unit: "1/s"},
	}, w)
	for i, want := range []string{"160-640 s", "10.5 ms", "0.0999"} {
		if got := evidenceLine(ev[i]); !strings.Contains(got, want) {
			t.Errorf("%s: %q lacks %q", ev[i].Signal, got, want)
		}
	}
	if strings.Contains(evidenceLine(ev[0]), "616") || strings.Contains(evidenceLine(ev[2]), "0.09985") {
		t.Errorf("false precision: %q, %q", evidenceLine(ev[0]), evidenceLine(ev[2]))
	}
}

// Without GPU readings a verdict whose knob a slow GPU would make wrong
// says what it cannot rule out; with them it does not.
func TestNoGPUVerdictSaysWhatItCannotRuleOut(t *testing.T) {
	kv := healthy()
	kv.kv, kv.waiting, kv.ttft99 = 0.985, 12, 3
	for _, gpus := range []int{0, 1} {
		kv.gpus = gpus
		rep := synthWatch(t, kv, testSpec, CostSpec{})
		var txt bytes.Buffer
		if err := RenderText(&txt, rep); err != nil {
			t.Fatal(err)
		}
		has := strings.Contains(txt.String(), "CANNOT RULE OUT: a throttled, degraded or slower-than-expected GPU")
		if rep.Models[0].Class != KVCacheExhausted || has != (gpus == 0) {
			t.Errorf("%d GPUs: class %s, caveat printed %v\n%s", gpus, rep.Models[0].Class, has, txt.String())
		}
	}
}
