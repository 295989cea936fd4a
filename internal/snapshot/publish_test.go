package snapshot

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// follow runs Follow in the background until the test ends and returns the
// times it evaluates at. The tests run it in a testing/synctest bubble: its
// timers are the bubble's, so a fallback fires (and a missing evaluation is
// seen) without waiting in real time.
func follow(t *testing.T, src Subscriber, at func() time.Time, fallback time.Duration, start func()) <-chan time.Time {
	evals := make(chan time.Time, 8)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Follow(ctx, src, at, fallback, start, func(now time.Time) { evals <- now })
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return evals
}

// nextEval is Follow's next evaluation; a minute (of the bubble's clock)
// without one fails the test.
func nextEval(t *testing.T, evals <-chan time.Time, what string) time.Time {
	t.Helper()
	select {
	case at := <-evals:
		return at
	case <-time.After(time.Minute):
		t.Fatalf("%s: no evaluation", what)
		return time.Time{}
	}
}

// A snapshot published while the start-up evaluation runs is evaluated:
// Follow subscribes before start, so the publish is not lost (with an hour
// of fallback, a lost one would leave nothing evaluated).
func TestFollowStartMissesNoPublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pub Publisher
		published := time.Unix(1_800_000_000, 0)
		evals := follow(t, &pub, func() time.Time { return published }, time.Hour,
			func() { pub.Publish() }) // a scrape lands during the start-up evaluation
		if at := nextEval(t, evals, "the snapshot published during start-up"); !at.Equal(published) {
			t.Fatalf("evaluated at %v, want the snapshot's time %v", at, published)
		}
	})
}

// Without a notification Follow still evaluates on the fallback timer, at
// the wall clock.
func TestFollowFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := time.Now()
		evals := follow(t, nil, nil, time.Millisecond, nil)
		if at := nextEval(t, evals, "fallback"); !at.Equal(before.Add(time.Millisecond)) {
			t.Fatalf("fallback evaluation at %v, want one fallback (1ms) after Follow started (%v)", at, before)
		}
	})
}

// Each published snapshot is evaluated at its own time, and time never
// steps back (a scrape stamped when it began may land after a later one).
func TestFollowStampsEachSnapshotAndNeverStepsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p Publisher
		stamp := make(chan time.Time, 8)
		started := make(chan struct{})
		evals := follow(t, &p, func() time.Time { return <-stamp }, time.Hour, func() { close(started) })
		<-started
		t0 := time.Date(2026, 8, 10, 6, 0, 0, 0, time.UTC)
		for i, at := range []time.Time{t0, t0.Add(5 * time.Second), t0.Add(2 * time.Second)} {
			stamp <- at
			p.Publish()
			want := at
			if i == 2 {
				want = t0.Add(5 * time.Second)
			}
			if got := nextEval(t, evals, "a published snapshot"); !got.Equal(want) {
				t.Fatalf("snapshot %d stamped %v evaluated at %v, want %v", i, at, got, want)
			}
		}
	})
}

type fixedVLLM struct{ v *VLLM }

func (f fixedVLLM) Latest() *VLLM { return f.v }

// LatestOf reads an optional source: nil when the exporter runs without it.
func TestLatestOf(t *testing.T) {
	var none Source[VLLM]
	if LatestOf(none) != nil {
		t.Fatal("a nil source has a snapshot")
	}
	v := &VLLM{Up: true}
	if got := LatestOf[VLLM](fixedVLLM{v}); got != v {
		t.Fatalf("LatestOf = %v, want the source's snapshot", got)
	}
}
