package slo

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/modelset"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// rotatingVLLM serves a V1 /metrics body for a settable list of model
// names, each with requests finishing at a steady rate, so every name is a
// full citizen: scraped, windowed and measurable by latency and
// availability SLOs.
type rotatingVLLM struct {
	*httptest.Server
	mu     sync.Mutex
	models []string
	served float64 // finished requests per model, cumulative
	down   bool    // answer 503: every scrape fails
}

func newRotatingVLLM(t *testing.T) *rotatingVLLM {
	v := &rotatingVLLM{}
	v.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v.mu.Lock()
		if v.down {
			v.mu.Unlock()
			http.Error(w, "restarting", http.StatusServiceUnavailable)
			return
		}
		v.served += 10
		body := testutil.ModelsBody(v.models, v.served)
		v.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(body)
	}))
	t.Cleanup(v.Close)
	return v
}

// setDown makes every scrape fail (down) or, coming back, restart vLLM:
// its counters start again from zero.
func (v *rotatingVLLM) setDown(down bool) {
	v.mu.Lock()
	v.down = down
	if !down {
		v.served = 0
	}
	v.mu.Unlock()
}

func (v *rotatingVLLM) serve(models ...string) {
	v.mu.Lock()
	v.models = models
	v.mu.Unlock()
}

// seriesOf gathers reg and returns the number of series and the distinct
// values of the `model` label.
func seriesOf(t *testing.T, reg *prometheus.Registry) (int, map[string]bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n, models := 0, map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			n++
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "model" {
					models[lp.GetValue()] = true
				}
			}
		}
	}
	return n, models
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string, kv ...string) float64 {
	t.Helper()
	if v, ok := testutil.Gather(t, reg).Value(name, kv...); ok {
		return v
	}
	return -1
}

// TestRotatingModelNamesStayBounded: vLLM's model names rotate (a new set
// of 84 names every scrape, 10 080 names in 10 minutes of virtual time,
// beside the one real model). Through the real scraper and the SLO
// watchdog with a state file: the series count never exceeds the bound
// derived from --vllm.max-models, no more than max-models names ever carry
// series, drops are counted and their log lines rate-limited, the state
// file holds at most max-models models; once the names stop rotating and
// the idle timeout passes, the series are back to the baseline with only
// the real model, in memory and in the state file.
func TestRotatingModelNamesStayBounded(t *testing.T) {
	const (
		maxModels = 16
		idle      = time.Hour
		interval  = 5 * time.Second
		perScrape = 84
		real      = "meta-llama/Llama-3.1-8B-Instruct"
	)
	v := newRotatingVLLM(t)
	logs := &testutil.SyncBuffer{}
	logger := log.NewLogfmtLogger(logs)
	stats := modelset.NewStats()
	limits := modelset.Limits{Max: maxModels, IdleTimeout: idle, Stats: stats}
	sc := vllm.New(vllm.Options{URL: v.URL, Interval: interval, Models: limits}, logger)
	holder := holderFor(t, `slos:
  - {name: ttft, source: server, kind: latency, metric: ttft, threshold: 1.0, objective: 0.99}
  - {name: availability, source: server, kind: availability, objective: 0.999}
`)
	stateFile := filepath.Join(t.TempDir(), "slo.state")
	w := New(Options{StateFile: stateFile, Models: limits}, holder, Sources{VLLM: sc}, logger)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(sc, w, stats)

	now := t0
	step := func() {
		now = now.Add(interval)
		sc.ScrapeOnce(context.Background(), now)
		if l := sc.Latest(); l == nil || !l.Up {
			t.Fatalf("scrape failed: %+v", l)
		}
		w.Tick(now)
	}
	stateModels := func() map[string]bool {
		sf, err := parseState(mustRead(t, stateFile))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, s := range sf.SLOs {
			for _, se := range s.Series {
				out[se.Model] = true
			}
		}
		return out
	}

	// The per-model series count: from a scrape with no model and one with
	// the real model only (the baseline).
	v.serve()
	for range 3 {
		step()
	}
	fixed, _ := seriesOf(t, reg)
	v.serve(real)
	for range 70 { // past the largest window, so windowed series exist
		step()
	}
	baseline, models := seriesOf(t, reg)
	if len(models) != 1 || !models[real] {
		t.Fatalf("baseline models %v", models)
	}
	perModel := baseline - fixed
	bound := fixed + maxModels*perModel
	t.Logf("series: %d without a model, %d with one (baseline), bound %d for %d models", fixed, baseline, bound, maxModels)

	// 10 minutes of rotation: 120 scrapes of 84 new names each.
	maxSeries, names := 0, 0
	for i := range int(10 * time.Minute / interval) {
		batch := []string{real}
		for range perScrape {
			batch = append(batch, fmt.Sprintf("rotating-adapter-%05d", names))
			names++
		}
		if i%2 == 1 {
			batch[0], batch[len(batch)-1] = batch[len(batch)-1], batch[0] // the real one is not always first
		}
		v.serve(batch...)
		step()
		n, models := seriesOf(t, reg)
		maxSeries = max(maxSeries, n)
		if n > bound || len(models) > maxModels {
			t.Fatalf("after %d names: %d series (bound %d), %d models with series (bound %d)", names, n, bound, len(models), maxModels)
		}
		if !models[real] {
			t.Fatalf("after %d names the real model lost its series", names)
		}
	}
	if names < 10000 {
		t.Fatalf("only %d names rotated", names)
	}
	if n := len(stateModels()); n > maxModels {
		t.Fatalf("state file holds %d models, bound %d", n, maxModels)
	}
	if d := counterValue(t, reg, "vllm_exporter_samples_dropped_total", "reason", "model_limit"); d <= 0 {
		t.Fatalf("dropped samples not counted: %v", d)
	}
	if r := counterValue(t, reg, "vllm_exporter_models_refused_total", "component", "vllm"); r <= 0 {
		t.Fatalf("refused models not counted: %v", r)
	}
	// One line at the first drop, one more at most after 10 minutes.
	if lines := strings.Count(logs.String(), `msg="vLLM samples dropped"`); lines < 1 || lines > 2 {
		t.Fatalf("%d drop log lines in 10 minutes of drops on every scrape, want 1 or 2:\n%s", lines, logs)
	}
	t.Logf("rotation: %d names, at most %d series (bound %d)", names, maxSeries, bound)

	// Recovery: only the real model, past the idle timeout.
	v.serve(real)
	end := now.Add(idle + 2*time.Minute)
	for now.Before(end) {
		step()
	}
	n, models := seriesOf(t, reg)
	if n != baseline || len(models) != 1 || !models[real] {
		t.Fatalf("after recovery: %d series (baseline %d), models %v", n, baseline, models)
	}
	if sm := stateModels(); len(sm) != 1 || !sm[real] {
		t.Fatalf("state file after recovery holds %v", sm)
	}
	for _, c := range []string{"vllm", "slo"} {
		if e := counterValue(t, reg, "vllm_exporter_models_evicted_total", "component", c); e < maxModels-1 {
			t.Fatalf("%s evicted %v models, want at least %d", c, e, maxModels-1)
		}
		if tr := counterValue(t, reg, "vllm_exporter_models_tracked", "component", c); tr != 1 {
			t.Fatalf("%s tracks %v models after recovery, want 1", c, tr)
		}
	}
}

// TestStateRestoreAppliesModelBound: a checkpoint written under a larger
// --vllm.max-models, or holding models already idle when it was saved, is
// trimmed on restore; the models kept keep their windows.
func TestStateRestoreAppliesModelBound(t *testing.T) {
	holder := holderFor(t, "slos:\n  - {name: availability, source: server, kind: availability, objective: 0.99}\n")
	stateFile := filepath.Join(t.TempDir(), "slo.state")
	src := &fakeVLLM{}
	big := New(Options{StateFile: stateFile, Models: modelset.Limits{Max: 8}}, holder, Sources{VLLM: src}, nil)
	trs := map[string]*traffic{}
	names := []string{"m0", "m1", "m2", "m3", "m4", "m5"}
	now := t0
	tick := func(active []string) {
		snap := &snapshot.VLLM{Time: now, Up: true, Models: map[string]*snapshot.Model{}}
		for _, n := range active {
			if trs[n] == nil {
				trs[n] = &traffic{}
			}
			trs[n].add(100, 1)
			snap.Models[n] = trs[n].snap(now).Models["m"]
		}
		src.set(snap)
		big.Tick(now)
		now = now.Add(10 * time.Second)
	}
	for range 10 {
		tick(names)
	}
	// m5 goes away two hours before the checkpoint.
	for now.Before(t0.Add(2*time.Hour + 10*time.Minute)) {
		tick(names[:5])
	}
	small := New(Options{StateFile: stateFile, Models: modelset.Limits{Max: 3, IdleTimeout: time.Hour}}, holder, Sources{VLLM: src}, nil)
	if got := len(small.states["availability"].series); got != 3 {
		t.Fatalf("restored %d models under --vllm.max-models=3", got)
	}
	if _, ok := small.states["availability"].series["m5"]; ok {
		t.Fatal("a model idle for 2h at save time was restored")
	}
	for m, s := range small.states["availability"].series {
		if s.fine.empty() {
			t.Fatalf("restored model %s lost its events", m)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// boundRig is the real scraper and SLO watchdog on a rotatingVLLM, driven
// in virtual time.
type boundRig struct {
	t     *testing.T
	v     *rotatingVLLM
	sc    *vllm.Scraper
	w     *Watchdog
	reg   *prometheus.Registry
	now   time.Time
	every time.Duration
}

func newBoundRig(t *testing.T, limits modelset.Limits) *boundRig {
	v := newRotatingVLLM(t)
	limits.Stats = modelset.NewStats()
	const interval = 5 * time.Second
	sc := vllm.New(vllm.Options{URL: v.URL, Interval: interval, Models: limits}, nil)
	holder := holderFor(t, `slos:
  - {name: availability, source: server, kind: availability, objective: 0.999}
`)
	w := New(Options{StateFile: filepath.Join(t.TempDir(), "slo.state"), Models: limits}, holder, Sources{VLLM: sc}, nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(sc, w, limits.Stats)
	return &boundRig{t: t, v: v, sc: sc, w: w, reg: reg, now: t0, every: interval}
}

// run scrapes and ticks for d of virtual time; every scrape must end up.
func (r *boundRig) run(d time.Duration, up bool) {
	r.t.Helper()
	for end := r.now.Add(d); r.now.Before(end); {
		r.now = r.now.Add(r.every)
		r.sc.ScrapeOnce(context.Background(), r.now)
		if l := r.sc.Latest(); l.Up != up {
			r.t.Fatalf("scrape at %v: up %v, want %v (%s)", r.now.Sub(t0), l.Up, up, l.Error)
		}
		r.w.Tick(r.now)
	}
}

// sloModels are the models with an availability SLO series.
func (r *boundRig) sloModels() map[string]bool {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	out := map[string]bool{}
	for m := range r.w.states["availability"].series {
		out[m] = true
	}
	return out
}

// TestRotationLeavesRoomForNewModel: after a burst of rotating model names
// fills every --vllm.max-models slot, a new real model that appears once
// the burst is over is tracked, with its series and an SLO, within the
// grace (5 minutes by default), not after the hour-long idle timeout; the
// model served all along never loses its place.
func TestRotationLeavesRoomForNewModel(t *testing.T) {
	const (
		maxModels = 16
		real      = "meta-llama/Llama-3.1-8B-Instruct"
		second    = "Qwen/Qwen3-32B"
	)
	r := newBoundRig(t, modelset.Limits{Max: maxModels, IdleTimeout: time.Hour})
	r.v.serve(real)
	r.run(2*time.Minute, true)
	names := 0
	burst := r.now.Add(r.every) // the first rotated names are seen then, never again
	for range 24 {              // 2 minutes of 20 new names a scrape
		batch := []string{real}
		for range 20 {
			batch = append(batch, fmt.Sprintf("rotating-%04d", names))
			names++
		}
		r.v.serve(batch...)
		r.run(r.every, true)
	}
	if tr := counterValue(t, r.reg, "vllm_exporter_models_tracked", "component", "vllm"); tr != maxModels {
		t.Fatalf("the burst left %v names tracked, want all %d slots taken", tr, maxModels)
	}
	r.v.serve(real, second)
	refusedAt := r.now
	deadline := r.now.Add(modelset.DefaultGrace + time.Minute)
	for !r.sloModels()[second] {
		if r.now.After(deadline) {
			t.Fatalf("the new model is not tracked %v after the burst (grace %v): SLO models %v",
				r.now.Sub(refusedAt), modelset.DefaultGrace, r.sloModels())
		}
		r.run(r.every, true)
	}
	t.Logf("new model tracked %v after the burst of %d names ended", r.now.Sub(refusedAt), names)
	if absent := r.now.Sub(burst); absent < modelset.DefaultGrace {
		t.Fatalf("a rotated name gave its slot after %v of absence, before the grace %v", absent, modelset.DefaultGrace)
	}
	if !r.sloModels()[real] {
		t.Fatal("the model served all along lost its SLO series")
	}
	_, models := seriesOf(t, r.reg)
	if !models[second] || !models[real] {
		t.Fatalf("models with series %v", models)
	}
	for _, c := range []string{"vllm", "slo"} {
		if e := counterValue(t, r.reg, "vllm_exporter_models_evicted_total", "component", c); e < 1 {
			t.Fatalf("%s: no eviction counted", c)
		}
	}
}

// TestOutageKeepsModelsAndSLOState: vLLM down for two hours (longer than
// the idle timeout and the grace) and then restarted with its counters at
// zero: the model keeps its slot and its SLO series with everything they
// recorded, because failed scrapes are not absence; a new name met during
// the outage's aftermath does not take the slot.
func TestOutageKeepsModelsAndSLOState(t *testing.T) {
	const real = "meta-llama/Llama-3.1-8B-Instruct"
	r := newBoundRig(t, modelset.Limits{Max: 1, IdleTimeout: time.Hour, Grace: time.Minute})
	r.v.serve(real)
	r.run(10*time.Minute, true)
	r.w.mu.Lock()
	since := r.w.states["availability"].series[real].since
	r.w.mu.Unlock()

	r.v.setDown(true)
	r.run(2*time.Hour, false)
	r.v.setDown(false) // restarted: counters from zero
	r.v.serve(real, "another-model")
	r.run(30*time.Second, true)

	r.w.mu.Lock()
	s := r.w.states["availability"].series[real]
	r.w.mu.Unlock()
	if s == nil {
		t.Fatal("the model lost its SLO series to an outage")
	}
	if !s.since.Equal(since) || s.coarse.empty() {
		t.Fatalf("the SLO state started over: since %v (was %v), coarse ring empty %v", s.since, since, s.coarse.empty())
	}
	if r.sloModels()["another-model"] {
		t.Fatal("a new name took the place of the model that was only unreachable")
	}
	for _, c := range []string{"vllm", "slo"} {
		if e := counterValue(t, r.reg, "vllm_exporter_models_evicted_total", "component", c); e != 0 {
			t.Fatalf("%s evicted %v models during an outage", c, e)
		}
	}
	if v := counterValue(t, r.reg, "vllm_up"); v != 1 {
		t.Fatalf("vllm_up %v after the restart", v)
	}
}
