package vllm

import "bytes"

// keptSink takes the kept lines of a body from readNeeded. Without a
// parse cache it holds them all for the parser. With one (the cached body
// was text, and this one is asked for as text), it writes each line's
// value into the cache's families as the line arrives (parseCache.patchLine)
// and holds only the text of the part it is in: at 16 models x 8 engines
// the kept text is 3 MB, which was live whenever the GC marked during a
// scrape and so set a sixth of the heap's goal, while a part (one family)
// is at most a few hundred KB.
//
// The first line that is not the cached one, values aside, ends the
// patching: from there the sink holds every line, from the start of the
// part that line is in (the tail). The parts before it are the cache's
// families, already written; the cache is rebuilt from the tail on
// (parseCache.buildTail, or the text parser reads the tail when it cannot
// be cached), and the two together are the body's families when no name
// of the tail belongs to a part before it (parseCache.before; parts are
// independent, see parseCache.build). When one does, the lines let go are
// needed after all, and the scraper reads the body again whole
// (heldLines.rereadWhole): a body whose families moved, which no vLLM sends
// between two scrapes. A server whose last family changes at every scrape
// (vllm:lora_requests_info names the adapters running) holds only that
// family.
//
// The line cache, when a line stops matching, replays the parse cost's
// state from the kept text (replayable): the sink also holds the text from
// the last TYPE line on, which is where that state starts.
type keptSink struct {
	dst      *bytes.Buffer
	c        *parseCache // nil: hold every line
	patching bool        // every line so far was the cache's
	i        int         // the next line's slot
	part     int         // the index of the part the sink is in
	partSlot int         // the slot of its first line
	partOff  int         // where that part starts in dst
	typeOff  int         // where the last cost TYPE line starts in dst; -1: none yet
}

func newKeptSink(dst *bytes.Buffer, c *parseCache) keptSink {
	s := keptSink{dst: dst, typeOff: -1}
	if c.streams() {
		s.c, s.patching = c, true
	}
	return s
}

// add takes a kept line without its "\n".
func (s *keptSink) add(line []byte) {
	if s.patching {
		if s.i < len(s.c.slots) && s.c.slots[s.i].partStart && s.i > 0 {
			s.enterPart()
		}
		if s.i >= len(s.c.slots) || !s.c.patchLine(s.i, line) {
			s.patching = false
		} else if s.c.slots[s.i].costType {
			s.drop(s.partOff) // the last TYPE line is this part's
			s.typeOff = s.dst.Len()
		}
		s.i++
	}
	s.dst.Write(line)
	s.dst.WriteByte('\n')
}

// enterPart lets go of the text of the part before, all but what follows
// its last TYPE line (until this part has one).
func (s *keptSink) enterPart() {
	from := s.dst.Len()
	if s.typeOff >= 0 {
		from = s.typeOff
	}
	s.drop(from)
	s.part++
	s.partSlot, s.partOff = s.i, s.dst.Len()
}

// drop lets go of the held text before offset from.
func (s *keptSink) drop(from int) {
	if from == 0 {
		return
	}
	b := s.dst.Bytes()
	s.dst.Truncate(copy(b, b[from:]))
	s.partOff -= from
	if s.typeOff -= from; s.typeOff < 0 {
		s.typeOff = -1 // let go (or none yet)
	}
}

// replayable is the held text the parse cost's state can be replayed
// from: the last TYPE line's family and the last sample's labels are in it.
func (s *keptSink) replayable() []byte {
	from := s.partOff
	if s.typeOff >= 0 {
		from = min(from, s.typeOff)
	}
	return s.dst.Bytes()[from:]
}

// finish says, after the body's last line, what the held text is.
func (s *keptSink) finish(st *streamed) {
	switch {
	case s.c == nil:
		return // all of it
	case s.patching && s.i == len(s.c.slots):
		st.held = &heldLines{patched: true, before: s.c.fams}
	case s.part == 0:
		// All of it: the parse cache's families, half written, are
		// rebuilt from it.
		return
	default:
		before := s.c.before(s.part, s.dst.Bytes()[s.partOff:])
		st.held = &heldLines{before: before, part: s.part, slot: s.partSlot, tailFrom: s.partOff}
	}
}

// wholeBackoff spaces the bodies keptSink patches after one whose families
// moved (read twice: heldLines.rereadWhole): the next one is held whole,
// and each time it happens again twice as many, up to maxWholeBodies. A
// body patched without moving resets it. A vLLM reorders nothing between
// scrapes; this bounds what a server that does costs (a second read of
// its body) to one scrape in maxWholeBodies.
type wholeBackoff struct {
	next int // bodies to hold whole after the next move (0: 1)
	left int // bodies still to hold whole
}

const maxWholeBodies = 64

// stream says whether this body may be patched as it streams.
func (b *wholeBackoff) stream() bool {
	if b.left > 0 {
		b.left--
		return false
	}
	return true
}

func (b *wholeBackoff) happened() {
	b.left = max(b.next, 1)
	b.next = min(2*b.left, maxWholeBodies)
}

func (b *wholeBackoff) streamedFine() { b.next = 0 }
