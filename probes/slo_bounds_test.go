package probes

import (
	"math"
	"math/rand"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// loadConfig reads a configuration from testdata.
func loadConfig(t *testing.T, path string) *config.File {
	t.Helper()
	h, err := config.NewHolder(path)
	if err != nil {
		t.Fatal(err)
	}
	return h.Get()
}

// The probe histograms' bounds follow the configuration: every latency
// SLO's threshold is a bound of both the snapshot's fine bounds and the
// exported few (so the SLO is measurable, and reads exactly on /metrics),
// and nothing else changes.
func TestProbeBoundsIncludeSLOThresholds(t *testing.T) {
	if b := BoundsFor(nil); !slices.Equal(b.TTFT, DefaultBounds.TTFT) {
		t.Error("no configuration: bounds differ from DefaultBounds")
	}
	if b := ExportBoundsFor(nil); !slices.Equal(b.TTFT, DefaultExportBounds.TTFT) {
		t.Error("no configuration: export bounds differ from DefaultExportBounds")
	}
	h, _ := writeConfig(t, "slos:\n  - {name: p, source: probe, kind: latency, metric: ttft, threshold: 0.25, objective: 0.99}\n"+
		"  - {name: q, source: probe, kind: latency, metric: e2e, threshold: 15, objective: 0.99}\n"+
		"  - {name: r, source: server, kind: latency, metric: tpot, threshold: 0.4, objective: 0.99}\n")
	b := BoundsFor(h.Get())
	// 0.25 replaces the fine bound 0.25000000000000017 (exported exactly);
	// 15 is added between two fine bounds.
	if !slices.Contains(b.TTFT, 0.25) || !slices.Contains(b.E2E, 15) || slices.Contains(DefaultBounds.TTFT, 0.25) || slices.Contains(DefaultBounds.E2E, 15) {
		t.Fatalf("thresholds 0.25 (ttft) and 15 (e2e) not bounds: %v / %v", b.TTFT, b.E2E)
	}
	if !slices.IsSorted(b.TTFT) || !slices.IsSorted(b.E2E) || len(b.TTFT) != len(DefaultBounds.TTFT) || len(b.E2E) != len(DefaultBounds.E2E)+1 || !slices.Equal(b.ITL, DefaultBounds.ITL) {
		t.Errorf("merged bounds unsorted or changed elsewhere: %d ttft, %d e2e bounds", len(b.TTFT), len(b.E2E))
	}
	x := ExportBoundsFor(h.Get())
	// 0.25 is already an export bound; 15 and the server SLO's 0.4 are added.
	if !slices.Contains(x.E2E, 15) || !slices.Contains(x.TPOT, 0.4) || len(x.TTFT) != len(DefaultExportBounds.TTFT) || !slices.Equal(x.ITL, DefaultExportBounds.ITL) {
		t.Errorf("export bounds: ttft %v, tpot %v, e2e %v", x.TTFT, x.TPOT, x.E2E)
	}
	s := New(Options{URL: "http://127.0.0.1:1"}, h, nil)
	if got := s.bounds.TTFT; !slices.Contains(got, 0.25) {
		t.Errorf("scheduler's TTFT bounds lack the SLO threshold: %v", got)
	}
}

// TestProbeSLOEventsExactAtEveryThreshold: for every latency SLO threshold
// of the configuration, probes observed at, just under and just over it
// (1 ns, the probe clock's resolution) and all around it are counted good or
// bad exactly, both in the snapshot the SLO watchdog reads and in the
// exported classic bucket at le=threshold that the generated probe SLO
// rules read.
func TestProbeSLOEventsExactAtEveryThreshold(t *testing.T) {
	slos, err := os.ReadFile("testdata/slo-thresholds.yml")
	if err != nil {
		t.Fatal(err)
	}
	h, _ := writeConfig(t, probesYAML("m", profile("p", "completions", 8, 4, ""))+string(slos))
	s := New(Options{URL: "http://127.0.0.1:1"}, h, nil)

	thresholds := sloThresholds(h.Get())
	var all []time.Duration
	for _, ts := range thresholds {
		for _, x := range ts {
			d := time.Duration(math.Round(x * 1e9))
			all = append(all, d, d-1, d+1, d-time.Microsecond, d+time.Microsecond)
		}
	}
	rng := rand.New(rand.NewSource(1))
	for range 200 {
		all = append(all, time.Duration(rng.Float64()*float64(20*time.Second)))
	}
	s.mu.Lock()
	st := s.profiles["p"]
	if st == nil {
		s.mu.Unlock()
		t.Fatal("profile p not configured")
	}
	for _, d := range all {
		s.observeLatencies(st, &Result{TTFT: d, E2E: d, TPOT: d, HasTPOT: true, ITL: []time.Duration{d}})
	}
	s.publishLocked(time.Now())
	s.mu.Unlock()

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]map[float64]uint64{}
	for _, mf := range mfs {
		for metric, fam := range map[string]string{"ttft": "vllm_probe_time_to_first_token_seconds", "tpot": "vllm_probe_time_per_output_token_seconds",
			"itl": "vllm_probe_inter_token_latency_seconds", "e2e": "vllm_probe_e2e_latency_seconds"} {
			if mf.GetName() != fam {
				continue
			}
			exported[metric] = map[float64]uint64{}
			for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
				exported[metric][b.GetUpperBound()] = b.GetCumulativeCount()
			}
		}
	}
	pr := s.Latest().Profiles["p"]
	snap := map[string]snapshot.Histogram{"ttft": pr.TTFT, "tpot": pr.TPOT, "itl": pr.ITL, "e2e": pr.E2E}
	checked := 0
	for metric, ts := range thresholds {
		for _, x := range ts {
			var want uint64
			for _, d := range all {
				if d.Seconds() <= x {
					want++
				}
			}
			if got, ok := exported[metric][x]; !ok || got != want {
				t.Errorf("%s threshold %v: exported bucket le=%v holds %d (present %v), want %d", metric, x, x, got, ok, want)
			}
			i := slices.Index(snap[metric].Bounds, x)
			if i < 0 || snap[metric].Counts[i] != float64(want) {
				t.Errorf("%s threshold %v: snapshot bound index %d, want %d at or below", metric, x, i, want)
			}
			checked++
		}
	}
	if checked != strings.Count(string(slos), "threshold:") {
		t.Errorf("checked %d thresholds, the configuration has %d", checked, strings.Count(string(slos), "threshold:"))
	}
}
