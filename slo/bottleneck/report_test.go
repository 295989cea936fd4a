package bottleneck

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
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
		Now:    clk.Now, Sleep: clk.Sleep, Window: time.Minute, GPUHour: cost.GPUHour,
	})
}

func TestRenderGolden(t *testing.T) {
	kv := healthy()
	kv.kv, kv.waiting, kv.ttft99, kv.tpot50 = 0.985, 12, 3, 0.027
	rep := synthWatch(t, kv, testSpec, CostSpec{GPUHour: 3.5})
	if len(rep.Models) != 1 || rep.Models[0].Class != KVCacheExhausted || rep.Models[0].Recommendation == "" {
		t.Fatalf("report = %+v", rep.Models)
	}
	if rep.Scrapes != 12 || rep.Duration != 55*time.Second {
		t.Errorf("scrapes %d over %v, want 12 over 55s", rep.Scrapes, rep.Duration)
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
