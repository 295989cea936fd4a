package vllmsim

import (
	"math"
	"sort"
	"testing"
	"time"
)

func arrivalCV(recs []RequestRecord) float64 {
	var ts []time.Time
	for _, r := range recs {
		ts = append(ts, r.Arrival)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	var gaps []float64
	for i := 1; i < len(ts); i++ {
		gaps = append(gaps, ts[i].Sub(ts[i-1]).Seconds())
	}
	var mean, sq float64
	for _, g := range gaps {
		mean += g
	}
	mean /= float64(len(gaps))
	for _, g := range gaps {
		sq += (g - mean) * (g - mean)
	}
	return math.Sqrt(sq/float64(len(gaps))) / mean
}

func TestLoadGeneratorShapes(t *testing.T) {
	run := func(burst, frac float64) (*Sim, []RequestRecord) {
		s := newVirtual(t, Config{Seed: 8, LoadGen: true})
		sc, _ := ScenarioPreset("healthy")
		sc.Load.Rate = 8
		sc.Load.Burstiness = burst
		sc.Load.SharedPrefixFraction = frac
		sc.Load.Output = Dist{Mean: 8}
		if err := s.ApplyScenario(sc); err != nil {
			t.Fatal(err)
		}
		runFor(s, 60*time.Second)
		return s, s.Records()
	}
	_, poisson := run(1, 0)
	_, bursty := run(0.25, 0)
	cvP, cvB := arrivalCV(poisson), arrivalCV(bursty)
	if math.Abs(cvP-1) > 0.2 || cvB < 1.5 {
		t.Errorf("inter-arrival CV: Poisson %.2f (want ~1), burstiness 0.25 %.2f (want ~2)", cvP, cvB)
	}
	if n := float64(len(poisson)); math.Abs(n-480)/480 > 0.15 {
		t.Errorf("%v requests in 60s at 8/s", n)
	}
	_, shared := run(1, 0.5)
	hit := 0
	for _, r := range shared {
		if r.CachedTokens >= 496 { // the 512-token prefix minus the partial last block
			hit++
		}
	}
	if f := float64(hit) / float64(len(shared)); f < 0.35 || f > 0.6 {
		t.Errorf("fraction of requests hitting the shared prefix %.2f, want ~0.5", f)
	}
	for _, r := range shared {
		if r.OutputTokens != 8 || r.FinishReason != FinishStop {
			t.Fatalf("output length %d (%s), the distribution is fixed at 8", r.OutputTokens, r.FinishReason)
		}
	}
}

// BenchmarkVirtualMinute measures simulating one minute of each scenario's traffic.
func BenchmarkVirtualMinute(b *testing.B) {
	for _, name := range []string{"healthy", "queueing", "kv_exhausted"} {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				s, err := New(Config{VirtualClock: true, Seed: 1, LoadGen: true, Scenario: name})
				if err != nil {
					b.Fatal(err)
				}
				s.Advance(time.Minute)
			}
		})
	}
}

// Presets whose prompts or outputs exceed a small max_model_len are clamped
// to fit, never silently dropped.
func TestLoadGeneratorFitsSmallMaxModelLen(t *testing.T) {
	for _, name := range []string{"prefix_warm", "decode_heavy", "prefill_heavy"} {
		s := newVirtual(t, Config{Seed: 1, LoadGen: true, Scenario: name, MaxModelLen: 512})
		runFor(s, 20*time.Second)
		e := s.Engines()[0]
		if e.Running+e.Waiting+len(s.Records()) == 0 {
			t.Errorf("%s with max_model_len 512: no request reached the engine", name)
		}
		for _, r := range s.Records() {
			if r.PromptTokens+r.OutputTokens > 512 {
				t.Fatalf("%s: request of %d+%d tokens exceeds max_model_len", name, r.PromptTokens, r.OutputTokens)
			}
		}
	}
}
