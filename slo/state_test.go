package slo

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// restartCfg is ttft999 with an availability and a preemption SLO beside.
const restartCfg = ttft999 + `  - name: avail
    kind: availability
    objective: 0.999
  - name: preempt
    kind: preemption
    threshold: 0.01
`

// A watchdog killed mid-run (no shutdown save) and re-created from its
// checkpoint continues exactly where an uninterrupted one is: same windows,
// budget and alert states, including the events that happened while it was
// down.
func TestRestartContinuesFromCheckpoint(t *testing.T) {
	dir := t.TempDir()
	stateFile := filepath.Join(dir, "slo.state")
	holder := holderFor(t, restartCfg)

	srcA, srcRef := &fakeVLLM{}, &fakeVLLM{}
	// Production checkpoints every tick (SaveEvery 1); each write fsyncs,
	// which is slow on a shared CI disk, so here a checkpoint lands every
	// 29th tick and the kill comes right after one (tick 319 = 11 x 29):
	// the restart resumes from the last tick's checkpoint either way.
	a := New(Options{StateFile: stateFile, SaveEvery: 29}, holder, Sources{VLLM: srcA}, nil)
	ref := New(Options{}, holder, Sources{VLLM: srcRef}, nil)
	tr := &traffic{}
	step := 30 * time.Second
	tick := func(w *Watchdog, src *fakeVLLM, now time.Time) {
		tickAt(w, src, tr, now)
	}
	now := t0
	tick(a, srcA, now)
	tick(ref, srcRef, now)
	// Two hours healthy, then a breach with preemptions and aborts.
	for i := 1; i <= 318; i++ {
		now = t0.Add(time.Duration(i) * step)
		if i < 240 {
			tr.add(50, 0)
		} else {
			tr.add(10, 40)
			tr.preemptions += 3
			tr.aborted += 2
		}
		tick(a, srcA, now)
		tick(ref, srcRef, now)
	}
	if a.ticks != 319 || a.ticks%29 != 0 {
		t.Fatalf("kill must follow a checkpoint tick; ticks=%d", a.ticks)
	}
	if !only2(t, ref, "ttft").Page {
		t.Fatalf("scenario should be paging before the kill: %v", ref.Status())
	}
	// kill -9: a is gone without a final save. Traffic continues while the
	// exporter is down (3 ticks missed).
	a = nil
	for i := 0; i < 3; i++ {
		now = now.Add(step)
		tr.add(10, 40)
		tick(ref, srcRef, now)
	}
	b := New(Options{StateFile: stateFile}, holder, Sources{VLLM: srcA}, nil)
	if !b.self.restored.Load() {
		t.Fatal("state was not restored")
	}
	now = now.Add(step)
	tr.add(10, 40)
	tick(b, srcA, now)
	tick(ref, srcRef, now)
	// The events of the three missed ticks land in b's current bucket
	// instead of their own; all windows cover it, so sums are identical
	// (but the fast tier's 1m window, shorter than the outage: it holds
	// them all at once until they age out).
	if got, want := stripFast(stripTime(b.Status())), stripFast(stripTime(ref.Status())); !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart:\n got %v\nwant %v", got, want)
	}
	// Continue for an hour of recovery: still identical.
	for i := 0; i < 120; i++ {
		now = now.Add(step)
		tr.add(50, 0)
		tick(b, srcA, now)
		tick(ref, srcRef, now)
	}
	if got, want := stripTime(b.Status()), stripTime(ref.Status()); !reflect.DeepEqual(got, want) {
		t.Fatalf("an hour after restart:\n got %v\nwant %v", got, want)
	}
	if b.Status()[0].BudgetRemaining.V >= 0 {
		t.Fatalf("budget should stay overspent after restart: %v", b.Status())
	}
}

func only2(t *testing.T, w *Watchdog, slo string) Result {
	t.Helper()
	for _, r := range w.Status() {
		if r.SLO == slo {
			return r
		}
	}
	t.Fatalf("no result for %s", slo)
	return Result{}
}

func stripFast(rs []Result) []Result {
	for i := range rs {
		rs[i].Fast, rs[i].FastPage = nil, false
	}
	return rs
}

func stripTime(rs []Result) []Result {
	out := append([]Result(nil), rs...)
	for i := range out {
		out[i].Time = time.Time{}
	}
	return out
}

func TestCorruptOrForeignStateIsSetAside(t *testing.T) {
	for _, tc := range []struct {
		name, content, reason string
	}{
		{"corrupt", `{"format":"vllm_exporter/slo-state","version":1,"slos":[{"name":"ttft"`, "corrupt"},
		{"garbage", "\x00\x01not json", "corrupt"},
		{"foreign", `{"format":"pyrra","version":1}`, "foreign"},
		{"version", `{"format":"vllm_exporter/slo-state","version":99}`, "version"},
		{"bad-bucket", `{"format":"vllm_exporter/slo-state","version":1,"slos":[{"name":"ttft","fingerprint":"server|latency|ttft|1|720h0m0s|","series":[{"model":"m","has_last":true,"last":{"bad":1,"total":2,"series":"x"},"last_seen":"2026-03-01T00:00:00Z","fine":{"width_ns":30000000000,"len":8641,"head":5,"init":true,"buckets":[[99,1,1]]},"coarse":{"width_ns":3600000000000,"len":721,"head":0,"init":false,"buckets":[]}}]}]}`, "corrupt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "slo.state")
			if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			w := New(Options{StateFile: p}, holderFor(t, ttft999), Sources{VLLM: &fakeVLLM{}}, nil)
			if w.self.restored.Load() {
				t.Fatal("untrusted state restored")
			}
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Fatalf("state file not set aside: %v", err)
			}
			m, _ := filepath.Glob(filepath.Join(dir, "slo.state."+tc.reason+"-*"))
			if len(m) != 1 {
				entries, _ := os.ReadDir(dir)
				t.Fatalf("set-aside file for %s not found: %v", tc.reason, entries)
			}
			want := `
# HELP vllm_exporter_slo_state_errors_total SLO state checkpoint problems by reason (corrupt, foreign, version, read, write); a bad file is set aside, not trusted.
# TYPE vllm_exporter_slo_state_errors_total counter
`
			for _, r := range stateErrorReasons {
				v := "0"
				if r == tc.reason {
					v = "1"
				}
				want += `vllm_exporter_slo_state_errors_total{reason="` + r + `"} ` + v + "\n"
			}
			if err := testutil.CollectAndCompare(w, strings.NewReader(want), "vllm_exporter_slo_state_errors_total"); err != nil {
				t.Fatal(err)
			}
			// The watchdog works and writes a fresh checkpoint.
			w.Tick(t0)
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("no fresh checkpoint: %v", err)
			}
		})
	}
}

// A checkpoint for an SLO whose definition changed (threshold) is not
// applied to it; the other SLOs still restore.
func TestStateSkipsRedefinedSLO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "slo.state")
	src := &fakeVLLM{}
	tr := &traffic{}
	a := New(Options{StateFile: p}, holderFor(t, restartCfg), Sources{VLLM: src}, nil)
	tickAt(a, src, tr, t0)
	tr.add(90, 10)
	tickAt(a, src, tr, t0.Add(time.Minute))
	b := New(Options{StateFile: p}, holderFor(t, strings.Replace(restartCfg, "threshold: 1\n", "threshold: 2.5\n", 1)), Sources{VLLM: src}, nil)
	b.Tick(t0.Add(time.Minute))
	if r := only2(t, b, "avail"); win(t, r, "1h").Total != 100 {
		t.Fatalf("unchanged SLO lost its state: %v", r)
	}
	if r := only2(t, b, "ttft"); win(t, r, "1h").Total != 0 {
		t.Fatalf("redefined SLO kept old events: %v", r)
	}
}

// The checkpoint is written at the first tick, then not again until
// CheckpointInterval has passed on the tick clock (or the clock went back
// past the last write, or a model's series began); SaveState writes
// whenever asked (shutdown).
func TestCheckpointIntervalSpacesWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "slo.state")
	src := &fakeVLLM{}
	w := New(Options{StateFile: path, CheckpointInterval: time.Minute}, holderFor(t, restartCfg), Sources{VLLM: src}, nil)
	tr := &traffic{}
	savedAt := func() time.Time {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var sf stateFile
		if err := json.Unmarshal(data, &sf); err != nil {
			t.Fatal(err)
		}
		return sf.SavedAt
	}
	steps := []struct {
		at   time.Duration // tick time after t0
		want time.Duration // SavedAt after the tick
	}{
		{0, 0},                                 // first tick writes
		{5 * time.Second, 0},                   // within the interval
		{55 * time.Second, 0},                  //
		{60 * time.Second, 60 * time.Second},   // interval passed
		{115 * time.Second, 60 * time.Second},  //
		{125 * time.Second, 125 * time.Second}, // passed again (ticks need not align)
		{30 * time.Second, 30 * time.Second},   // clock went back: write
		{35 * time.Second, 30 * time.Second},   //
	}
	for _, s := range steps {
		tr.add(10, 1)
		tickAt(w, src, tr, t0.Add(s.at))
		if got := savedAt(); !got.Equal(t0.Add(s.want).UTC()) {
			t.Fatalf("after the tick at t0+%s the checkpoint was saved at t0+%s, want t0+%s", s.at, got.Sub(t0), s.want)
		}
	}
	// A model seen for the first time is written at once (its baseline),
	// inside the interval.
	snap := tr.snap(t0.Add(40 * time.Second))
	n := *snap.Models["m"]
	n.Name = "n"
	snap.Models["n"] = &n
	src.set(snap)
	w.Tick(t0.Add(40 * time.Second))
	if got := savedAt(); !got.Equal(t0.Add(40 * time.Second).UTC()) {
		t.Fatalf("a new model's first tick did not write the checkpoint (saved at t0+%s)", got.Sub(t0))
	}
	before := savedAt()
	if err := w.SaveState(); err != nil {
		t.Fatal(err)
	}
	if savedAt().Equal(before) {
		t.Fatal("SaveState (shutdown) did not write the checkpoint")
	}
}

// With checkpoints an interval apart, a kill -9 restores an older
// checkpoint: the events since it still come from vLLM's counters at the
// first tick after the restart, so every window that covers the gap sums
// the same as a watchdog that never stopped.
func TestRestartFromAnOlderCheckpointCountsTheGap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "slo.state")
	holder := holderFor(t, restartCfg)
	srcA, srcRef := &fakeVLLM{}, &fakeVLLM{}
	a := New(Options{StateFile: path, CheckpointInterval: time.Hour}, holder, Sources{VLLM: srcA}, nil)
	ref := New(Options{}, holder, Sources{VLLM: srcRef}, nil)
	tr := &traffic{}
	now := t0
	tickAt(a, srcA, tr, now) // baseline, written
	tickAt(ref, srcRef, tr, now)
	for i := 1; i <= 20; i++ { // 10 minutes, no write due
		now = now.Add(30 * time.Second)
		tr.add(50, 2)
		tickAt(a, srcA, tr, now)
		tickAt(ref, srcRef, tr, now)
	}
	a = nil // kill -9
	now = now.Add(30 * time.Second)
	tr.add(50, 2)
	tickAt(ref, srcRef, tr, now)
	b := New(Options{StateFile: path, CheckpointInterval: time.Hour}, holder, Sources{VLLM: srcA}, nil)
	if !b.self.restored.Load() {
		t.Fatal("state was not restored")
	}
	now = now.Add(30 * time.Second)
	tr.add(50, 2)
	tickAt(b, srcA, tr, now)
	tickAt(ref, srcRef, tr, now)
	// The events since the checkpoint (10.5 minutes of them) land in the
	// restart's bucket: the 5m windows hold all of them; every longer
	// window sums as ref's.
	got, want := stripFast(stripTime(b.Status())), stripFast(stripTime(ref.Status()))
	for i := range got {
		if g, w := got[i].Windows[0], got[i].Windows[1]; g.Total != w.Total {
			t.Errorf("%s: the 5m window after the restart holds %v events, want the gap's and more (%v, as 30m)", got[i].SLO, g.Total, w.Total)
		}
		got[i].Windows[0], want[i].Windows[0] = WindowResult{}, WindowResult{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart, windows from 30m up:\n got %v\nwant %v", got, want)
	}
}

// The checkpoint, written series by series, is the JSON of the whole
// stateFile: it parses (unknown fields refused) into exactly what
// marshalling the stateFile at once gives.
func TestCheckpointStreamsTheStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "slo.state")
	src := &fakeVLLM{}
	w := New(Options{StateFile: path, CheckpointInterval: time.Hour}, holderFor(t, restartCfg), Sources{VLLM: src}, nil)
	tr := &traffic{}
	for i := range 40 {
		now := t0.Add(time.Duration(i) * 30 * time.Second)
		snap := tr.snap(now)
		if i >= 10 { // a second model from the 10th tick
			n := *snap.Models["m"]
			n.Name = "n"
			snap.Models["n"] = &n
		}
		src.set(snap)
		tr.add(40, float64(i%3))
		w.Tick(now)
	}
	end := t0.Add(40 * 30 * time.Second)
	w.mu.Lock()
	err := w.saveLocked(end)
	whole := stateFile{Format: stateFormat, Version: stateVersion, SavedAt: end.UTC()}
	for _, name := range slices.Sorted(maps.Keys(w.states)) {
		st := w.states[name]
		ss := stateSLO{Name: name, Fingerprint: st.fp}
		for _, m := range slices.Sorted(maps.Keys(st.series)) {
			ss.Series = append(ss.Series, st.series[m].state(m))
		}
		whole.SLOs = append(whole.SLOs, ss)
	}
	w.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseState(data)
	if err != nil {
		t.Fatalf("the checkpoint does not parse: %v", err)
	}
	wholeJSON, err := json.Marshal(whole)
	if err != nil {
		t.Fatal(err)
	}
	want, err := parseState(wholeJSON)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.SLOs) != 3 || len(want.SLOs[0].Series) != 2 || len(want.SLOs[0].Series[0].Fine.Buckets) == 0 {
		t.Fatalf("the scenario should give 3 SLOs with 2 models and filled rings: %+v", want)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("streamed checkpoint differs from the stateFile's JSON:\n got %.400s\nwant %.400s", data, wholeJSON)
	}
}

// A checkpoint written when one 30 s ring spanned every window (no medium
// ring) restores into the fine and medium rings exactly: the watchdog
// continues as one that ran with them all along.
func TestRestoreFromACheckpointWithOneFineRing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "slo.state")
	holder := holderFor(t, ttft99)
	src := &fakeVLLM{}
	a := New(Options{StateFile: path, SaveEvery: 1 << 30}, holder, Sources{VLLM: src}, nil)
	period := 30 * 24 * time.Hour
	// The old geometry: 30 s buckets over the 3d window.
	old := newRing(fineWidth(period), Windows(period)[len(baseWindows)-1])
	tr := &traffic{}
	now := t0
	tickAt(a, src, tr, now)
	old.advance(old.index(now))
	for i := 1; now.Sub(t0) < 80*time.Hour; i++ {
		now = now.Add(time.Duration(25+i%11) * time.Second)
		good, bad := float64(i%40), float64(i%7/6)
		tr.add(good, bad)
		tickAt(a, src, tr, now)
		old.add(now, bad, good+bad)
	}
	a.mu.Lock()
	err := a.saveLocked(now) // saved at the last tick's time, as a tick saves
	a.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	var sf stateFile
	if err := json.Unmarshal(mustRead(t, path), &sf); err != nil {
		t.Fatal(err)
	}
	se := &sf.SLOs[0].Series[0]
	if se.Medium == nil || se.Fine.Len >= len(old.bad) {
		t.Fatalf("checkpoint: medium ring %v, fine ring of %d buckets", se.Medium != nil, se.Fine.Len)
	}
	se.Medium, se.Fine = nil, encodeRing(old)
	b, err := json.Marshal(sf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	restored := New(Options{StateFile: path}, holder, Sources{VLLM: src}, nil)
	if !restored.self.restored.Load() {
		t.Fatal("state was not restored")
	}
	tr.add(30, 1)
	tickAt(a, src, tr, now.Add(time.Second))
	tickAt(restored, src, tr, now.Add(time.Second))
	got, want := stripTime(restored.Status()), stripTime(a.Status())
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("restored from the one-ring checkpoint:\n got %v\nwant %v", got, want)
	}
	if wr := win(t, want[0], "3d"); wr.Total < 1000 || wr.Bad == 0 {
		t.Fatalf("3d window holds too little to compare: %+v", wr)
	}
}

// The checkpoint is replaced atomically: a new file is written and renamed
// over the old one, so a reader that opened the old checkpoint keeps reading
// all of it (nothing is truncated or rewritten in place, which is what a
// crash mid-write would expose), and no temp file is left behind.
func TestCheckpointReplacedAtomically(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "slo.state")
	src, tr := &fakeVLLM{}, &traffic{}
	w := New(Options{StateFile: p}, holderFor(t, ttft99), Sources{VLLM: src}, nil)
	tickAt(w, src, tr, t0)
	oldBytes, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	tr.add(90, 10)
	tickAt(w, src, tr, t0.Add(time.Minute))
	got, err := io.ReadAll(old)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, oldBytes) {
		t.Fatalf("the open old checkpoint changed under its reader (written in place, not renamed):\n was %s\n now %s", oldBytes, got)
	}
	newBytes, err := os.ReadFile(p)
	if err != nil || bytes.Equal(newBytes, oldBytes) {
		t.Fatalf("no new checkpoint: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("files beside the checkpoint (temp file left?): %v", entries)
	}
}

// A checkpoint that cannot be written is counted (reason "write") and
// logged; the watchdog keeps evaluating.
func TestCheckpointWriteFailureIsCounted(t *testing.T) {
	p := filepath.Join(t.TempDir(), "missing-dir", "slo.state")
	src, tr := &fakeVLLM{}, &traffic{}
	w := New(Options{StateFile: p}, holderFor(t, ttft99), Sources{VLLM: src}, nil)
	tickAt(w, src, tr, t0)
	tr.add(90, 10)
	tickAt(w, src, tr, t0.Add(time.Minute))
	if r := only(t, w); win(t, r, "5m").Total != 100 {
		t.Fatalf("evaluation stopped after a failed checkpoint: %v", r)
	}
	want := `
# HELP vllm_exporter_slo_state_errors_total SLO state checkpoint problems by reason (corrupt, foreign, version, read, write); a bad file is set aside, not trusted.
# TYPE vllm_exporter_slo_state_errors_total counter
vllm_exporter_slo_state_errors_total{reason="corrupt"} 0
vllm_exporter_slo_state_errors_total{reason="foreign"} 0
vllm_exporter_slo_state_errors_total{reason="read"} 0
vllm_exporter_slo_state_errors_total{reason="version"} 0
vllm_exporter_slo_state_errors_total{reason="write"} 2
`
	if err := testutil.CollectAndCompare(w, strings.NewReader(want), "vllm_exporter_slo_state_errors_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(w, "vllm_exporter_slo_state_last_save_timestamp_seconds"); n != 0 {
		t.Fatalf("last save timestamp exported without a successful save")
	}
}
