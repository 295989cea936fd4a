package families

import (
	"iter"
	"slices"
	"strings"
)

// Labels are a series' label pairs where the body printed them: Text is the
// series key (or, when a value has escapes, the unescaped pairs), Offs the
// start and end of each name and value in it. Kept as offsets, a scanner's
// cache holds a label set in the key it needs anyway.
type Labels struct {
	Text string
	Offs []uint16
}

// Get returns the value of label name, "" when absent.
func (l Labels) Get(name string) string { v, _ := l.Lookup(name); return v }

// Lookup returns the value of label name and whether l has it.
func (l Labels) Lookup(name string) (string, bool) {
	for i := 0; i < len(l.Offs); i += 4 {
		if l.Text[l.Offs[i]:l.Offs[i+1]] == name {
			return l.Text[l.Offs[i+2]:l.Offs[i+3]], true
		}
	}
	return "", false
}

// All yields the label pairs.
func (l Labels) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for i := 0; i < len(l.Offs); i += 4 {
			if !yield(l.Text[l.Offs[i]:l.Offs[i+1]], l.Text[l.Offs[i+2]:l.Offs[i+3]]) {
				return
			}
		}
	}
}

// Without is l less label name (sharing l's text).
func (l Labels) Without(name string) Labels {
	out := Labels{Text: l.Text, Offs: make([]uint16, 0, len(l.Offs))}
	for i := 0; i < len(l.Offs); i += 4 {
		if l.Text[l.Offs[i]:l.Offs[i+1]] != name {
			out.Offs = append(out.Offs, l.Offs[i:i+4]...)
		}
	}
	return out
}

// Key is the label set in a canonical form, sorted by name.
func (l Labels) Key() string {
	pairs := make([]string, 0, len(l.Offs)/2)
	for n, v := range l.All() {
		pairs = append(pairs, n+"\xff"+v+"\xff")
	}
	slices.Sort(pairs)
	return strings.Join(pairs, "")
}
