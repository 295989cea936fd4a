// Package ratelog limits how often a recurring condition is logged: the
// first occurrence of each key is logged at once, later ones at most once
// per interval, with the number suppressed in between. A hostile or broken
// upstream that repeats the same problem on every scrape then costs a log
// line every few minutes, not one per sample.
package ratelog

import "time"

// Limiter decides per key; not safe for concurrent use (its owner's lock
// guards it). Keys should come from a bounded set (a reason, not a value).
type Limiter struct {
	every time.Duration
	last  map[string]time.Time
	held  map[string]int
}

// New returns a Limiter that lets each key through at most once per every.
func New(every time.Duration) *Limiter {
	return &Limiter{every: every, last: map[string]time.Time{}, held: map[string]int{}}
}

// Allow reports whether key may be logged at now, and how many of its
// occurrences were suppressed since it was last let through.
func (l *Limiter) Allow(key string, now time.Time) (ok bool, suppressed int) {
	if last, seen := l.last[key]; seen && now.Sub(last) < l.every && now.After(last.Add(-l.every)) {
		l.held[key]++
		return false, 0
	}
	suppressed = l.held[key]
	l.last[key], l.held[key] = now, 0
	return true, suppressed
}
