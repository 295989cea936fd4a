package slo

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// Run evaluates once at start-up and writes a final checkpoint when its
// context ends; a watchdog created from that file restores it. Run goes in
// a synctest bubble, so its timers run on virtual time.
func TestRunWritesFinalCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "slo.state")
		src := &fakeVLLM{}
		tr := &traffic{}
		src.set(tr.snap(time.Now()))
		h := holderFor(t, ttft99)
		w := New(Options{Interval: time.Millisecond, StateFile: p, SaveEvery: 1 << 30}, h, Sources{VLLM: src}, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { w.Run(ctx); close(done) }()
		synctest.Wait() // the start-up evaluation is done; Run waits for the next
		if len(w.Status()) == 0 {
			t.Fatal("no evaluation at start-up")
		}
		cancel()
		<-done
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("no checkpoint after shutdown: %v", err)
		}
		w2 := New(Options{StateFile: p}, h, Sources{VLLM: src}, nil)
		if !w2.self.restored.Load() {
			t.Fatal("checkpoint written on shutdown was not restored")
		}
	})
}

// A reload that changes the objective re-judges the same events; a removed
// SLO disappears from the results.
func TestReloadAppliesObjectiveAndRemovals(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yml")
	os.WriteFile(p, []byte(ttft99+`
  - name: avail
    kind: availability
    objective: 0.99
`), 0o600)
	h, err := holderFromPath(p)
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeVLLM{}
	tr := &traffic{}
	w := New(Options{}, h, Sources{VLLM: src}, nil)
	tickAt(w, src, tr, t0)
	tr.add(98, 2)
	tickAt(w, src, tr, t0.Add(time.Minute))
	if r := only2(t, w, "ttft"); !near(win(t, r, "5m").BurnRate.V, 2) {
		t.Fatalf("burn at 0.99: %v", r)
	}
	os.WriteFile(p, []byte(ttft999), 0o600)
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	w.Tick(t0.Add(2 * time.Minute))
	r := only(t, w)
	if r.SLO != "ttft" || r.Objective != 0.999 || !near(win(t, r, "5m").BurnRate.V, 20) || !r.Page {
		t.Fatalf("after reload to 0.999: %v", r)
	}
}
