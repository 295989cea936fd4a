package snapshot

import (
	"context"
	"sync"
	"time"
)

// Publisher tells subscribers that a source stored a new snapshot. Sources
// publish; consumers (the SLO watchdog, the bottleneck classifier) react,
// so an evaluation always sees the scrape of its own interval instead of
// racing a parallel timer. A notification carries no data: the consumer
// reads the source's Latest(). Sends never block; a slow subscriber sees
// one pending notification for any number of publishes.
type Publisher struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// Subscribe returns a channel that receives after each Publish, and a
// function that ends the subscription.
func (p *Publisher) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	p.mu.Lock()
	if p.subs == nil {
		p.subs = map[chan struct{}]struct{}{}
	}
	p.subs[ch] = struct{}{}
	p.mu.Unlock()
	return ch, func() {
		p.mu.Lock()
		delete(p.subs, ch)
		p.mu.Unlock()
	}
}

// Publish notifies every subscriber.
func (p *Publisher) Publish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ch := range p.subs {
		select {
		case ch <- struct{}{}:
		default: // one notification already pending
		}
	}
}

// Subscriber is a source that publishes its snapshots (collector/vllm's
// Scraper).
type Subscriber interface {
	Subscribe() (<-chan struct{}, func())
}

// Follow calls eval on every notification of src, at the time at() returns
// (the new snapshot's own timestamp, so an evaluation is stamped with the
// scrape it reads), and at the wall clock when no notification came for
// fallback: time-based windows and "no data" verdicts must still advance
// while a source is stuck. src may be nil (then only the fallback ticks).
// start, if set, runs once when the subscription is in place, before the
// first wait: a start-up evaluation there cannot miss a snapshot published
// while it runs (one run before subscribing could, and then nothing would
// be evaluated until the next publish or the fallback). Follow returns
// when ctx ends.
func Follow(ctx context.Context, src Subscriber, at func() time.Time, fallback time.Duration, start func(), eval func(now time.Time)) {
	var updates <-chan struct{}
	if src != nil {
		ch, cancel := src.Subscribe()
		defer cancel()
		updates = ch
	}
	if start != nil {
		start()
	}
	timer := time.NewTimer(fallback)
	defer timer.Stop()
	var last time.Time
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return
		case <-updates:
			now = at()
			if now.IsZero() {
				now = time.Now()
			}
		case now = <-timer.C:
		}
		// Never step back: a scrape stamped when it began may land after
		// a fallback evaluation stamped later.
		if now.Before(last) {
			now = last
		}
		last = now
		eval(now)
		timer.Reset(fallback)
	}
}

// FollowVLLM is Follow on a vLLM source: it evaluates at each new
// snapshot's scrape time when src publishes (see Subscriber), else every
// fallback. src and start may be nil.
func FollowVLLM(ctx context.Context, src interface{ Latest() *VLLM }, fallback time.Duration, start func(), eval func(now time.Time)) {
	var pub Subscriber
	at := func() time.Time { return time.Time{} }
	if src != nil {
		pub, _ = src.(Subscriber)
		at = func() time.Time {
			if l := src.Latest(); l != nil {
				return l.Time
			}
			return time.Time{}
		}
	}
	Follow(ctx, pub, at, fallback, start, eval)
}

// Source publishes snapshots of type T: the vLLM scraper (VLLM), the GPU
// sampler (GPU), the probe scheduler (Probes).
type Source[T any] interface{ Latest() *T }

// LatestOf is src's latest snapshot, or nil when src is nil (a source the
// exporter runs without).
func LatestOf[T any](src Source[T]) *T {
	if src == nil {
		return nil
	}
	return src.Latest()
}
