package snapshot

import (
	"context"
	"testing"
	"time"
)

type publisherSource struct{ p *Publisher }

func (s publisherSource) Subscribe() (<-chan struct{}, func()) { return s.p.Subscribe() }

// Follow subscribes before its start-up evaluation, so a snapshot published
// as soon as that evaluation is seen is never missed, and each published
// snapshot is evaluated at its own time; time never steps back.
func TestFollowSeesEverySnapshotAfterItsFirstEvaluation(t *testing.T) {
	var p Publisher
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evals := make(chan time.Time, 8)
	stamp := make(chan time.Time, 8)
	go Follow(ctx, publisherSource{&p}, func() time.Time { return <-stamp }, time.Hour, func(now time.Time) { evals <- now })
	next := func() time.Time {
		select {
		case now := <-evals:
			return now
		case <-time.After(time.Minute): // bounds a broken build only
			t.Fatal("no evaluation")
			return time.Time{}
		}
	}
	next() // start-up, wall clock
	t0 := time.Date(2026, 8, 10, 6, 0, 0, 0, time.UTC)
	for i, at := range []time.Time{t0, t0.Add(5 * time.Second), t0.Add(2 * time.Second)} {
		stamp <- at
		p.Publish()
		want := at
		if i == 2 {
			want = t0.Add(5 * time.Second) // a stamp behind the previous one does not step back
		}
		if got := next(); !got.Equal(want) {
			t.Fatalf("snapshot %d stamped %v evaluated at %v, want %v", i, at, got, want)
		}
	}
}
