package vllm

import (
	"bytes"
	"hash/maphash"
	"strconv"
)

// lineCache makes the line filter (readNeeded) of a body whose lines are
// those of the previous body, values aside, one hash and one comparison
// per line, as parseCache does for parsing. Between two scrapes of a
// running vLLM the lines keep their order; only the value tokens move. The
// filter otherwise finds each line's family (a map lookup or three), its
// label set, its model_name and its parse cost at every scrape: at 16
// models x 8 engines (a 4 MB body of 45,000 lines) half of the exporter's
// scrape cycle.
//
// For each line of the last body the cache keeps a hash of its identity
// (a comment line whole; a sample line without its last token, the value
// or the timestamp) and what the filter decided: kept or dropped, whether
// it names a vllm:* family, its model_name (by index) and whether the
// model bound refused it, and what it added to the parse cost beyond its
// length. A line whose identity hashes as the cached line's at the same
// position, in a body whose earlier lines all did, gets the cached
// decision. The hash is maphash with a seed drawn per process, so a body
// cannot be made to collide on purpose; a kept line is compared exactly
// once more by parseCache, which falls back to the text parser on any
// difference.
//
// A decision that depends on the token is cached only where the token is
// checked again: a dropped sample line is dropped because it is well
// formed, so its value token must still parse as a float (a line that
// stops parsing is kept for the parser to fail on, as without the cache).
// A line the cache cannot describe (malformed, overlong, the last line
// without a newline) is marked never to match. The first line that does
// not match ends the matching: the parse cost's state is replayed from the
// kept lines the sink still holds (keptSink.replayable; the running total
// is kept) and the rest of the body goes through the filter, its
// decisions replacing the cached ones. A body that fails is not kept.
type lineCache struct {
	seed  maphash.Seed
	lines []cachedLine
	// names are the model_name values (raw, still escaped) of the cached
	// lines, indexed by cachedLine.model; nameBytes is their size.
	names     []string
	nameIndex map[string]int16
	nameBytes int
	// matched counts the lines of the body being read (or last read) that
	// matched the cached body.
	matched int
	// admitted is this scrape's decision per name: 0 not asked yet, 1
	// admitted, 2 refused (the model bound decides anew at every scrape).
	admitted []int8
}

// Bounds on what the cache holds: it covers at most maxCachedLines lines
// of a body (16 bytes each: 2 MiB; the 16 x 8 simulator's body has 45,509)
// and model names of at most maxCachedNameBytes in all; lines past them go
// through the filter at every scrape.
const (
	maxCachedLines     = 128 << 10
	maxCachedNameBytes = 64 << 10
	maxCachedNames     = 1 << 12
)

type cachedLine struct {
	hash  uint64
	cost  int32 // parse cost beyond the line's length (kept lines)
	model int16 // index into names; -1: not filtered by model
	flags lineFlags
}

type lineFlags uint8

const (
	lineKeep    lineFlags = 1 << iota // the filter keeps it (before the model bound)
	lineVLLM                          // it names a vllm:* family
	lineFloat                         // a dropped sample whose last token is its value
	lineRefused                       // the model bound refused its model_name
	lineComment                       // a comment line (identity: the whole line)
	lineNever                         // not cached: never matches
)

// start prepares a scrape: true when there is a cached body to match.
func (c *lineCache) start() bool {
	if c == nil {
		return false
	}
	if c.nameIndex == nil {
		c.seed = maphash.MakeSeed()
		c.nameIndex = map[string]int16{}
	}
	c.admitted = append(c.admitted[:0], make([]int8, len(c.names))...)
	c.matched = 0
	return len(c.lines) > 0
}

// reset forgets the cached body.
func (c *lineCache) reset() {
	if c == nil {
		return
	}
	c.lines = c.lines[:0]
	clear(c.nameIndex)
	c.names, c.nameBytes, c.admitted = c.names[:0], 0, c.admitted[:0]
}

// finish keeps the first n lines' decisions after a body read without
// error (a shorter body leaves no stale tail).
func (c *lineCache) finish(n int) {
	if c != nil && n < len(c.lines) {
		c.lines = c.lines[:n]
	}
}

// identity splits a line ending in "\n" into its identity and its last
// token (see lineCache); ok is false for a sample line without a token
// after a blank, or with a brace in it (where the label set would end is
// then not the identity's alone).
func identity(line []byte) (id, tok []byte, ok bool) {
	if line[0] == '#' {
		return line, nil, true
	}
	last := len(line) - 1 // the "\n"
	j := last - 1
	for ; j >= 0; j-- {
		c := line[j]
		if c == ' ' || c == '\t' {
			break
		}
		if c == '{' || c == '}' {
			return nil, nil, false
		}
	}
	if j < 0 || j == last-1 {
		return nil, nil, false
	}
	return line[:j+1], line[j+1 : last], true
}

// isFloat: tok parses as a float (strconv.ParseFloat, as wellFormedSample
// reads a value), with a fast path for plain decimals.
func isFloat(tok []byte) bool {
	digits, dots := 0, 0
	for _, c := range tok {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			_, err := strconv.ParseFloat(string(tok), 64)
			return err == nil
		}
	}
	if digits > 0 && dots <= 1 {
		return true
	}
	_, err := strconv.ParseFloat(string(tok), 64)
	return err == nil
}

// match returns the cached decision for line, the n-th of the body (ending
// in "\n"), when it has the cached line's identity and the decisions that
// hang on its token and on the model bound still hold.
func (c *lineCache) match(n int, line []byte, models *modelFilter) (cachedLine, bool) {
	if n >= len(c.lines) || line[len(line)-1] != '\n' {
		return cachedLine{}, false
	}
	e := c.lines[n]
	if e.flags&lineNever != 0 || (line[0] == '#') != (e.flags&lineComment != 0) {
		return e, false
	}
	id, tok, ok := identity(line)
	if !ok || maphash.Bytes(c.seed, id) != e.hash {
		return e, false
	}
	if e.flags&lineFloat != 0 {
		if !isFloat(tok) {
			return e, false
		}
	}
	if e.model >= 0 && c.admit(e.model, models) == (e.flags&lineRefused != 0) {
		return e, false
	}
	c.matched++
	return e, true
}

// admit is the model bound's decision for name i, asked once per scrape.
func (c *lineCache) admit(i int16, models *modelFilter) bool {
	if c.admitted[i] == 0 {
		c.admitted[i] = 2
		if models.keepName(c.names[i]) {
			c.admitted[i] = 1
		}
	}
	return c.admitted[i] == 1
}

// describe records the filter's decision on the n-th line (read whole,
// ending in "\n"): keep before the model bound, refused by it, vllm, and
// the parse cost the line added beyond its length.
func (c *lineCache) describe(n int, line []byte, keep, refused, vllm bool, end int, cost int64) {
	if c == nil || n > len(c.lines) || n >= maxCachedLines {
		return
	}
	e := c.entry(line, keep, refused, vllm, end, cost)
	if n == len(c.lines) {
		c.lines = append(c.lines, e)
	} else {
		c.lines[n] = e
	}
}

// never marks the n-th line as one the cache does not describe.
func (c *lineCache) never(n int) {
	if c == nil || n > len(c.lines) || n >= maxCachedLines {
		return
	}
	if n == len(c.lines) {
		c.lines = append(c.lines, cachedLine{flags: lineNever})
	} else {
		c.lines[n] = cachedLine{flags: lineNever}
	}
}

func (c *lineCache) entry(line []byte, keep, refused, vllm bool, end int, cost int64) cachedLine {
	never := cachedLine{flags: lineNever}
	id, _, ok := identity(line)
	if !ok || cost != int64(int32(cost)) {
		return never
	}
	e := cachedLine{hash: maphash.Bytes(c.seed, id), cost: int32(cost), model: -1}
	if vllm {
		e.flags |= lineVLLM
	}
	if line[0] == '#' {
		e.flags |= lineComment
		if keep {
			e.flags |= lineKeep
		}
		return e
	}
	name, _, _ := lineFamily(line)
	rest := line[len(name):]
	if len(rest) > 0 && rest[0] == '{' {
		ls := labelSetEnd(rest)
		if ls == 0 || len(name)+ls > len(id) {
			return never // the label set runs into the token
		}
		rest = rest[ls:]
	}
	switch {
	case !keep:
		// Dropped because well formed: the value must stay a float.
		if bytes.IndexByte(bytes.TrimSpace(rest), ' ') < 0 {
			e.flags |= lineFloat
		}
		return e
	case !isNeeded(name):
		return never // kept because malformed
	}
	e.flags |= lineKeep
	if end > len(id) {
		return never
	}
	if raw, ok := modelNameOf(line, end); ok && bytes.IndexByte(raw, '\\') < 0 {
		i, found := c.nameIndex[string(raw)]
		if !found {
			if len(c.names) >= maxCachedNames || c.nameBytes+len(raw) > maxCachedNameBytes {
				return never
			}
			i = int16(len(c.names))
			c.names = append(c.names, string(raw))
			c.nameIndex[c.names[i]] = i
			c.nameBytes += len(raw)
			c.admitted = append(c.admitted, 0)
		}
		e.model = i
		if refused {
			e.flags |= lineRefused
		}
		// What the bound decided while reading is this scrape's decision.
		c.admitted[i] = 1
		if refused {
			c.admitted[i] = 2
		}
	}
	return e
}

// replayCost is the parse cost of kept lines (each ending in "\n"), as
// readNeeded counted them: its state (not its total) when matching stops
// mid-body.
func replayCost(kept []byte) parseCost {
	var cost parseCost
	for len(kept) > 0 {
		i := bytes.IndexByte(kept, '\n')
		line := kept[:i+1]
		kept = kept[i+1:]
		cost.add(line)
	}
	return cost
}
