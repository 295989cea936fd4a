package vllm

import (
	"bytes"
	"hash/maphash"
	"math"
	"slices"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"
)

// parseCache makes parsing a body whose lines are those of the previous
// body, values aside, a pass over its value tokens. Between two scrapes
// of a running vLLM the lines keep their order and series; only values
// move. Parsing such a body with prometheus/common's text parser rebuilt
// every family, metric, label pair and bucket (and their strings) at every
// scrape: a third of the exporter's CPU at rest, and nearly all of what a
// scrape allocated.
//
// The cache keeps the families of the last body and, for each of its
// lines, the length and a hash of the line without its value (its
// identity: the comment line whole, a sample's name, label set and the
// blanks before the value) and the field of the families that line's
// value lands in (its slot). The hash is maphash with a seed drawn at each
// build, as the line cache's: keeping the identities themselves took 2.4
// MB at 16 models x 8 engines, more than the families' values. A body
// whose identities hash as those of the cached body, line for line, is parsed
// by reading each value token as the text parser does (parseValue) and
// writing it into its slot: no allocation, no map. Anything else falls
// back to the text parser, and the cache is rebuilt from that body.
//
// Building the slots does not reimplement the parser's rules (which
// metric a _bucket line joins, what a duplicate line overwrites): the
// body is parsed a second time with line i's value replaced by i+1, so
// every field of those families holds the number of the line that wrote
// it last. The cache is kept only when those families, with the body's
// own values written through the slots, equal the text parser's
// families of the body (proto.Equal, family by family): a line the cache
// cannot read exactly as the parser does is never cached.
type parseCache struct {
	fams map[string]*dto.MetricFamily
	// slots are the cached body's lines, in order.
	slots []slot
	seed  maphash.Seed
	// owner gives each name the parser looks a line up by (see build) the
	// index of the part whose lines have it: a family's part.
	owner map[string]int
	// largestPart is the size of the cached body's largest part: what a
	// keptSink holds at most while the lines are the cached ones.
	largestPart int
	// tailPart is the first part of the last buildTail since build
	// (math.MaxInt: none). A tail rebuilt from a later part would keep the
	// families between the two in the last tail's arrays, and those arrays
	// whole: the cache is then built anew from a whole body instead, so it
	// holds at most the arrays of one build and one tail.
	tailPart int
	// fromText: the cached body was text as vLLM sent it, not rewritten
	// from OpenMetrics, so a body may be patched line by line as it streams
	// (keptSink).
	fromText bool
}

// streams: a body may be patched into the cache as it streams (keptSink).
func (c *parseCache) streams() bool { return c != nil && c.fams != nil && c.fromText }

// slotKind says how a line's value is written.
type slotKind uint8

const (
	slotNone       slotKind = iota // a comment, or a value nothing keeps
	slotFloat                      // a counter, gauge, untyped, sum or quantile value
	slotUint                       // a summary's _count: uint64(value), whatever the value
	slotHistCount                  // a histogram bucket or _count: a whole non-negative number
	slotUnreadable                 // a line the cache cannot read (set while building only)
)

type slot struct {
	kind      slotKind
	sample    bool  // a sample line (else its identity is the whole line)
	partStart bool  // the first line of a part (see build)
	costType  bool  // a TYPE line as parseCost reads one (costTypeLine)
	keyLen    int32 // the identity's length
	hash      uint64
	f         *float64
	u         *uint64
}

// parse parses the kept lines of a body (text format, each line ending in
// "\n") as expfmt's TextToMetricFamilies does. The families it returns
// belong to the cache and are overwritten by the next call: the caller
// reads them before parsing again and keeps nothing of them.
func (c *parseCache) parse(body []byte, mayBuild bool) (map[string]*dto.MetricFamily, error) {
	if c.fams != nil && c.patch(body) {
		return c.fams, nil
	}
	c.reset()
	var parts []part
	if mayBuild {
		parts = c.build(body)
	}
	if parts == nil || !c.sameAsParser(body, parts) {
		c.reset()
		return textParse(body)
	}
	return c.fams, nil
}

// sameAsParser: the cache, body's values written in, holds the families
// the text parser reads from body. Compared part by part (see build): the
// parts' families are disjoint, so the parser's families of body are the
// union of its families of the parts.
func (c *parseCache) sameAsParser(body []byte, parts []part) bool {
	return sameAsParser(c.fams, body, parts)
}

// sameAsParser: fams are the families the text parser reads from body's
// parts.
func sameAsParser(fams map[string]*dto.MetricFamily, body []byte, parts []part) bool {
	seen := 0
	for _, pt := range parts {
		pf, err := textParse(body[pt.body[0]:pt.body[1]])
		if err != nil {
			return false
		}
		for name, mf := range pf {
			if cf, ok := fams[name]; !ok || !proto.Equal(cf, mf) {
				return false
			}
		}
		seen += len(pf)
	}
	return seen == len(fams)
}

// reset forgets the cached body (its families are garbage from here).
func (c *parseCache) reset() {
	*c = parseCache{}
}

// parsedHook, when set (tests), sees the size of every body textParse parses.
var parsedHook func(size int)

func textParse(body []byte) (map[string]*dto.MetricFamily, error) {
	if parsedHook != nil {
		parsedHook(len(body))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(bytes.NewReader(body))
}

// splitLine cuts a line (without its "\n") into its identity and its
// value token. ok is false for a sample line the cache does not read: no
// metric name at its start, a label set it cannot delimit, a blank
// between the name and the label set, or anything after the value (a
// timestamp, trailing blanks). A comment or blank line is all identity.
func splitLine(line []byte) (key, value []byte, sample, ok bool) {
	if len(line) == 0 || line[0] == '#' {
		return line, nil, false, true
	}
	end := 0
	for end < len(line) && isNameByte(line[end], end == 0) {
		end++
	}
	if end == 0 || end == len(line) {
		return nil, nil, true, false
	}
	if line[end] == '{' {
		ls := labelSetEnd(line)
		if ls <= end || line[ls-1] != '}' {
			return nil, nil, true, false
		}
		end = ls
	}
	start := end
	for start < len(line) && (line[start] == ' ' || line[start] == '\t') {
		start++
	}
	if start == end || start == len(line) {
		return nil, nil, true, false
	}
	value = line[start:]
	if bytes.IndexByte(value, ' ') >= 0 || bytes.IndexByte(value, '\t') >= 0 {
		return nil, nil, true, false
	}
	return line[:start], value, true, true
}

// parseValue reads a value token as the text parser does.
func parseValue(tok []byte) (float64, bool) {
	if bytes.ContainsAny(tok, "pP_") {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(tok), 64)
	return v, err == nil
}

// nextLine returns body's first line without its "\n"; ok is false when
// the line has no "\n" (the cache reads only terminated lines).
func nextLine(body []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(body, '\n')
	if i < 0 {
		return nil, nil, false
	}
	return body[:i], body[i+1:], true
}

// patch writes body's values into the cached families when body has the
// cached body's lines; false (the families possibly half written, to be
// dropped) when it has not or a value would change the families' shape.
func (c *parseCache) patch(body []byte) bool { return c.patchFrom(0, body) }

// patchFrom is patch for the lines of slots first on.
func (c *parseCache) patchFrom(first int, body []byte) bool {
	for i := first; i < len(c.slots); i++ {
		line, rest, ok := nextLine(body)
		if !ok || !c.patchLine(i, line) {
			return false
		}
		body = rest
	}
	return len(body) == 0
}

// patchLine writes the value of line (without its "\n") into slot i's
// field; false when line is not the cached line i, values aside, or its
// value would change the families' shape.
func (c *parseCache) patchLine(i int, line []byte) bool {
	s := &c.slots[i]
	k := int(s.keyLen)
	if !s.sample {
		return len(line) == k && maphash.Bytes(c.seed, line) == s.hash
	}
	if len(line) <= k || maphash.Bytes(c.seed, line[:k]) != s.hash {
		return false
	}
	tok := line[k:]
	if bytes.IndexByte(tok, ' ') >= 0 || bytes.IndexByte(tok, '\t') >= 0 {
		return false
	}
	v, ok := parseValue(tok)
	if !ok {
		return false
	}
	switch s.kind {
	case slotFloat:
		*s.f = v
	case slotUint:
		*s.u = uint64(v)
	case slotHistCount:
		// The parser keeps a whole count as uint64 and anything else as a
		// float (or fails on a negative one): the cached families hold
		// whole counts only.
		u := uint64(v)
		if v != float64(u) {
			return false
		}
		*s.u = u
	}
	return true
}

// before returns the cached families of the parts before part p when the
// kept lines tail, which follow those parts in a body, parse as in that
// whole body: no line of tail has a name (or family name) of those parts,
// and tail is not OpenMetrics (whose rewrite reads the whole body). nil
// when they may not.
func (c *parseCache) before(p int, tail []byte) map[string]*dto.MetricFamily {
	if hasEOFLine(tail) {
		return nil
	}
	for rest := tail; len(rest) > 0; {
		line, r, ok := nextLine(rest)
		if !ok {
			return nil
		}
		rest = r
		name, _, _ := lineFamily(line)
		for _, n := range [][]byte{name, familyName(name)} {
			if q, ok := c.owner[string(n)]; len(n) > 0 && ok && q < p {
				return nil
			}
		}
	}
	fams := make(map[string]*dto.MetricFamily, len(c.fams))
	for name, mf := range c.fams {
		q, ok := c.owner[name]
		if !ok {
			return nil
		}
		if q < p {
			fams[name] = mf
		}
	}
	return fams
}

// part is one family's run of lines in a body and in its probe body
// (byte offsets, end exclusive).
type part struct {
	body, probe [2]int
}

// build makes the cache from body's lines and writes body's values into
// its families. It returns the body's parts, nil when body has a line the
// cache cannot read, a value the families cannot take, or parts that are
// not independent. The caller still compares the families with the text
// parser's (sameAsParser).
//
// The probe body is parsed part by part, never whole: a part starts at a
// HELP or TYPE line of a name other than the part before's. Parsing a
// large body whole holds all of the parser's objects at once (about 13 MB
// at 16 models x 8 engines, 5 bytes per byte parsed), which set the heap's
// peak. Parts parse as the whole body does when no name the parser looks a
// line up by (the metric name, and the name without _bucket, _sum or
// _count) occurs in two parts: the parser keeps no other state from one
// family to the next. A body whose parts share a name is not cached.
func (c *parseCache) build(body []byte) []part {
	*c = parseCache{seed: maphash.MakeSeed(), owner: map[string]int{}, tailPart: math.MaxInt}
	fams := c.buildFrom(0, body)
	if fams == nil {
		return nil
	}
	c.fams = fams.fams
	return fams.parts
}

// buildTail rebuilds the cache from part p on out of tail, the kept lines
// of a body from that part on (keptSink held them; the slots and families
// of the parts before p are the body's, before). False, the cache to be
// dropped, when build would not cache the tail, or p is past the last
// tail's first part (see tailPart).
func (c *parseCache) buildTail(p, firstSlot int, before map[string]*dto.MetricFamily, tail []byte) bool {
	if p > c.tailPart {
		return false
	}
	c.tailPart = p
	c.slots = c.slots[:firstSlot:firstSlot]
	for name, q := range c.owner {
		if q >= p {
			delete(c.owner, name)
		}
	}
	built := c.buildFrom(p, tail)
	if built == nil || !sameAsParser(built.fams, tail, built.parts) {
		return false
	}
	for name, mf := range built.fams {
		before[name] = mf
	}
	c.fams = before
	return true
}

// built is what buildFrom made of a body.
type built struct {
	fams  map[string]*dto.MetricFamily
	parts []part
}

// buildFrom appends body's lines to the cache as parts p, p+1, ... (the
// cache holds the slots and owners of parts 0..p-1, with its seed) and
// returns their families, body's values written in, and the parts; nil
// when body has a line the cache cannot read, a value the families cannot
// take, or parts that are not independent (of each other and of the parts
// before p). The caller still compares the families with the text
// parser's (sameAsParser).
func (c *parseCache) buildFrom(p int, body []byte) *built {
	var probe []byte
	parts := []part{} // an empty body is cached too: no parts, not nil
	owner := c.owner  // a name the parser looks up -> its part
	first := len(c.slots)
	rest := body
	var family []byte // the name of the HELP or TYPE lines the part began with
	for off := 0; len(rest) > 0; {
		line, r, ok := nextLine(rest)
		if !ok {
			return nil
		}
		rest = r
		key, _, sample, ok := splitLine(line)
		if !ok || len(key) > math.MaxInt32 {
			return nil
		}
		name, meta, _ := lineFamily(line)
		meta = meta && name != nil // a HELP or TYPE line
		starts := len(parts) == 0 || (meta && !bytes.Equal(name, family))
		if starts {
			if meta {
				family = name
			}
			if n := len(parts); n > 0 {
				parts[n-1].body[1], parts[n-1].probe[1] = off, len(probe)
			}
			parts = append(parts, part{body: [2]int{off, 0}, probe: [2]int{len(probe), 0}})
		}
		for _, n := range [][]byte{name, familyName(name)} {
			if len(n) == 0 {
				continue
			}
			if q, ok := owner[string(n)]; !ok {
				owner[string(n)] = p + len(parts) - 1
			} else if q != p+len(parts)-1 {
				return nil
			}
		}
		off += len(line) + 1
		probe = append(probe, key...)
		id := slot{kind: slotNone, sample: sample, keyLen: int32(len(key)), hash: maphash.Bytes(c.seed, key)}
		id.partStart = starts
		if !sample {
			_, id.costType = costTypeLine(line)
		}
		if sample {
			id.kind = slotUnreadable
			probe = strconv.AppendInt(probe, int64(len(c.slots)+1), 10)
		}
		c.slots = append(c.slots, id)
		probe = append(probe, '\n')
	}
	if n := len(parts); n > 0 {
		parts[n-1].body[1], parts[n-1].probe[1] = len(body), len(probe)
	}
	// Count every part's families, then copy them into arrays of that size.
	var k compactor
	for _, pt := range parts {
		pf, err := textParse(probe[pt.probe[0]:pt.probe[1]])
		if err != nil {
			return nil
		}
		k.count(pf)
	}
	k.alloc()
	fams := make(map[string]*dto.MetricFamily, k.n.fams)
	for _, pt := range parts {
		pf, err := textParse(probe[pt.probe[0]:pt.probe[1]])
		if err != nil {
			return nil
		}
		k.copy(pf, fams) // parts are independent: no name is copied twice
	}
	if !c.claim(fams) {
		return nil
	}
	for _, s := range c.slots[first:] {
		if s.kind == slotUnreadable {
			// A value no field keeps (a line a later one overwrites, a
			// _bucket without le): the parser may still judge it.
			return nil
		}
	}
	if !c.patchFrom(first, body) {
		return nil
	}
	// The slots are held until the lines change: not the slack that
	// appending one per line left.
	c.slots = slices.Clone(c.slots)
	for _, pt := range parts {
		c.largestPart = max(c.largestPart, pt.body[1]-pt.body[0])
	}
	return &built{fams: fams, parts: parts}
}

// familyName is name without the suffix the text parser strips to find a
// summary's or histogram's family (_bucket, _sum, _count); nil without one.
func familyName(name []byte) []byte {
	for _, suffix := range histogramSuffixes {
		if base, ok := bytes.CutSuffix(name, suffix); ok {
			return base
		}
	}
	return nil
}

// claim walks the probe families and gives each value field to the line
// whose number it holds; false when a field holds anything else.
func (c *parseCache) claim(fams map[string]*dto.MetricFamily) bool {
	give := func(kind slotKind, f *float64, u *uint64) bool {
		var n float64
		if f != nil {
			n = *f
		} else {
			n = float64(*u)
		}
		i := int(n) - 1
		if n != math.Trunc(n) || i < 0 || i >= len(c.slots) || c.slots[i].kind != slotUnreadable {
			return false
		}
		c.slots[i].kind, c.slots[i].f, c.slots[i].u = kind, f, u
		return true
	}
	for _, mf := range fams {
		for _, m := range mf.GetMetric() {
			if m.TimestampMs != nil {
				return false
			}
			for _, v := range []*float64{counterValue(m), gaugeValue(m), untypedValue(m)} {
				if v != nil && !give(slotFloat, v, nil) {
					return false
				}
			}
			if s := m.GetSummary(); s != nil {
				if s.SampleSum != nil && !give(slotFloat, s.SampleSum, nil) {
					return false
				}
				if s.SampleCount != nil && !give(slotUint, nil, s.SampleCount) {
					return false
				}
				for _, q := range s.GetQuantile() {
					if q.Value != nil && !give(slotFloat, q.Value, nil) {
						return false
					}
				}
			}
			if h := m.GetHistogram(); h != nil {
				if h.SampleCountFloat != nil {
					return false
				}
				if h.SampleSum != nil && !give(slotFloat, h.SampleSum, nil) {
					return false
				}
				if h.SampleCount != nil && !give(slotHistCount, nil, h.SampleCount) {
					return false
				}
				for _, b := range h.GetBucket() {
					if b.CumulativeCountFloat != nil || (b.CumulativeCount != nil && !give(slotHistCount, nil, b.CumulativeCount)) {
						return false
					}
				}
			}
		}
	}
	return true
}

func counterValue(m *dto.Metric) *float64 {
	if m.Counter == nil {
		return nil
	}
	return m.Counter.Value
}

func gaugeValue(m *dto.Metric) *float64 {
	if m.Gauge == nil {
		return nil
	}
	return m.Gauge.Value
}

func untypedValue(m *dto.Metric) *float64 {
	if m.Untyped == nil {
		return nil
	}
	return m.Untyped.Value
}

// cacheable: the lines of this size may be parsed into a cache. Building
// one holds two parses of the body at once, so only a body whose parse
// fits twice in the parse budget is cached.
func cacheable(pre *streamed, limit int64) bool {
	return pre != nil && 2*pre.cost <= parseBudget(limit)
}
