package snapshot

import (
	"context"
	"testing"
	"time"
)

// A snapshot published while the start-up evaluation runs is evaluated:
// Follow subscribes before start, so the publish is not lost (with an hour
// of fallback, a lost one would leave nothing evaluated).
func TestFollowStartMissesNoPublish(t *testing.T) {
	var pub Publisher
	published := time.Unix(1_800_000_000, 0)
	evals := make(chan time.Time, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Follow(ctx, &pub, func() time.Time { return published }, time.Hour,
			func() { pub.Publish() }, // a scrape lands during the start-up evaluation
			func(now time.Time) { evals <- now })
		close(done)
	}()
	select {
	case at := <-evals:
		if !at.Equal(published) {
			t.Fatalf("evaluated at %v, want the snapshot's time %v", at, published)
		}
	case <-time.After(time.Minute): // bounds a broken run only
		t.Fatal("the snapshot published during start-up was never evaluated")
	}
	cancel()
	<-done
}

// Without a notification Follow still evaluates on the fallback timer, at
// the wall clock.
func TestFollowFallback(t *testing.T) {
	evals := make(chan time.Time, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	before := time.Now()
	go func() {
		Follow(ctx, nil, nil, time.Millisecond, nil, func(now time.Time) { evals <- now })
		close(done)
	}()
	select {
	case at := <-evals:
		if at.Before(before) {
			t.Fatalf("fallback evaluation at %v, before Follow started (%v)", at, before)
		}
	case <-time.After(time.Minute): // bounds a broken run only
		t.Fatal("no fallback evaluation")
	}
	cancel()
	<-done
}

// Each published snapshot is evaluated at its own time, and time never
// steps back (a scrape stamped when it began may land after a later one).
func TestFollowStampsEachSnapshotAndNeverStepsBack(t *testing.T) {
	var p Publisher
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evals := make(chan time.Time, 8)
	stamp := make(chan time.Time, 8)
	started := make(chan struct{})
	go Follow(ctx, &p, func() time.Time { return <-stamp }, time.Hour, func() { close(started) }, func(now time.Time) { evals <- now })
	<-started
	t0 := time.Date(2026, 8, 10, 6, 0, 0, 0, time.UTC)
	for i, at := range []time.Time{t0, t0.Add(5 * time.Second), t0.Add(2 * time.Second)} {
		stamp <- at
		p.Publish()
		want := at
		if i == 2 {
			want = t0.Add(5 * time.Second)
		}
		select {
		case got := <-evals:
			if !got.Equal(want) {
				t.Fatalf("snapshot %d stamped %v evaluated at %v, want %v", i, at, got, want)
			}
		case <-time.After(time.Minute): // bounds a broken run only
			t.Fatalf("snapshot %d not evaluated", i)
		}
	}
}
