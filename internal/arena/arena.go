// Package arena hands out the elements of one slice allocated up front, for
// objects that live and die together (a parsed vLLM body, one gather's
// metric families): one allocation per type instead of one per object, so
// the collector has fewer objects to trace and a request or scrape fewer
// allocations to make.
package arena

// Arena hands out the elements of a slice allocated once. Past its capacity
// it falls back to the heap, so a miscount costs compactness, never
// correctness. The zero Arena allocates every element on its own.
type Arena[T any] []T

// Take returns the next element, zeroed.
func (a *Arena[T]) Take() *T {
	if len(*a) == cap(*a) {
		return new(T)
	}
	*a = (*a)[:len(*a)+1]
	return &(*a)[len(*a)-1]
}

// Slice returns the next n elements, capped so that appending to them
// cannot overwrite the elements after.
func (a *Arena[T]) Slice(n int) []T {
	if len(*a)+n > cap(*a) {
		return make([]T, n)
	}
	s := (*a)[len(*a) : len(*a)+n : len(*a)+n]
	*a = (*a)[:len(*a)+n]
	return s
}
