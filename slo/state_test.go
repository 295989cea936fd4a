package slo

import (
	"os"
	"path/filepath"
	"reflect"
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
