package ratelog

import (
	"testing"
	"time"
)

// TestLimiter: the first occurrence of each key passes, repeats within the
// interval are held and counted, the next one after it passes with the
// count; keys are independent.
func TestLimiter(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	l := New(10 * time.Minute)
	if ok, n := l.Allow("a", t0); !ok || n != 0 {
		t.Fatal("first occurrence held")
	}
	for i := 1; i <= 119; i++ {
		if ok, _ := l.Allow("a", t0.Add(time.Duration(i)*5*time.Second)); ok {
			t.Fatalf("repeat %d let through within the interval", i)
		}
	}
	if ok, _ := l.Allow("b", t0.Add(time.Minute)); !ok {
		t.Fatal("another key held")
	}
	if ok, n := l.Allow("a", t0.Add(10*time.Minute)); !ok || n != 119 {
		t.Fatalf("after the interval: %v with %d suppressed, want true with 119", ok, n)
	}
	// A clock that jumps back further than the interval does not mute a key.
	if ok, _ := l.Allow("a", t0.Add(-time.Hour)); !ok {
		t.Fatal("held after the clock jumped back")
	}
}
