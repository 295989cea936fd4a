package probes

import (
	"bytes"
	"errors"
	"io"
	"time"
)

// ErrEventTooLarge is returned when one SSE line or event exceeds the
// reader's limit; the stream is abandoned rather than buffered without bound.
var ErrEventTooLarge = errors.New("sse: event exceeds size limit")

// Event is one server-sent event's data payload (its `data:` lines joined by
// "\n") and the monotonic time at which the read that delivered the event's
// terminating blank line returned.
type Event struct {
	Data []byte
	At   time.Time
}

// SSEReader reads server-sent events incrementally from a stream (an HTTP
// response body) without waiting for the whole body: each Next returns as
// soon as one event's bytes are in. Lines end in "\n", "\r\n" or "\r";
// comment lines (":...") and fields other than `data` are ignored, as the
// SSE specification says.
type SSEReader struct {
	r      io.Reader
	now    func() time.Time
	max    int
	buf    []byte // unconsumed bytes
	scan   int    // bytes of buf already scanned without finding a line end
	readAt time.Time
	data   []byte
	inData bool // at least one data line in the current event
	err    error
	chunk  []byte // backs buf
}

// NewSSEReader reads events from r, timestamping them with now (use a
// monotonic clock). maxEvent bounds one line and one event's data in bytes.
func NewSSEReader(r io.Reader, now func() time.Time, maxEvent int) *SSEReader {
	if maxEvent <= 0 {
		maxEvent = 1 << 20
	}
	return &SSEReader{r: r, now: now, max: maxEvent, chunk: make([]byte, 4096)}
}

// Next returns the next event. At the end of the stream it returns io.EOF
// when the stream ended on an event boundary and io.ErrUnexpectedEOF when it
// was cut inside an event (the partial event is discarded, as the SSE
// specification requires). Read errors are returned as they are.
func (s *SSEReader) Next() (Event, error) {
	for {
		line, ok, err := s.line()
		if err != nil {
			return Event{}, err
		}
		if !ok {
			continue
		}
		if len(line) == 0 {
			if !s.inData {
				continue // blank line with no data: nothing to dispatch
			}
			ev := Event{Data: s.data, At: s.readAt}
			s.data, s.inData = nil, false
			return ev, nil
		}
		if line[0] == ':' {
			continue // comment (keep-alive)
		}
		name, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			name, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		if string(name) != "data" {
			continue // event:, id:, retry: and unknown fields carry nothing for us
		}
		if s.inData {
			s.data = append(s.data, '\n')
		}
		if len(s.data)+len(value) > s.max {
			s.err = ErrEventTooLarge
			return Event{}, s.err
		}
		s.data = append(s.data, value...)
		s.inData = true
	}
}

// line returns the next complete line (without its terminator). ok is false
// when more input was read and the caller should simply ask again.
func (s *SSEReader) line() (line []byte, ok bool, err error) {
	if s.err != nil {
		return nil, false, s.err
	}
	for i := s.scan; i < len(s.buf); i++ {
		c := s.buf[i]
		if c != '\n' && c != '\r' {
			continue
		}
		end := i + 1
		if c == '\r' {
			if i+1 == len(s.buf) {
				// "\r" may be the first half of "\r\n": need one more byte.
				s.scan = i
				return nil, false, s.fill()
			}
			if s.buf[i+1] == '\n' {
				end++
			}
		}
		line = s.buf[:i:i]
		s.buf = s.buf[end:]
		s.scan = 0
		return line, true, nil
	}
	s.scan = len(s.buf)
	if len(s.buf) > s.max {
		s.err = ErrEventTooLarge
		return nil, false, s.err
	}
	return nil, false, s.fill()
}

// fill reads once from the underlying reader, stamping the time the bytes
// arrived. At EOF a trailing "\r" still ends its line; anything else left
// over means the stream was cut mid-event.
func (s *SSEReader) fill() error {
	// The unread bytes move to the front of the one buffer and the read
	// goes after them: a line Next got is already copied into its event
	// (the event's data is its own), so nothing still points at the bytes
	// this overwrites. The buffer grows only for a line longer than it.
	k := copy(s.chunk, s.buf)
	if k == len(s.chunk) {
		grown := make([]byte, 2*len(s.chunk))
		k = copy(grown, s.buf)
		s.chunk = grown
	}
	n, err := s.r.Read(s.chunk[k:])
	s.buf = s.chunk[:k+n]
	if n > 0 {
		s.readAt = s.now()
	}
	if err == nil {
		return nil
	}
	if !errors.Is(err, io.EOF) {
		s.err = err
		return err
	}
	if n > 0 {
		return nil // deliver the bytes first; the next read reports EOF again
	}
	if len(s.buf) > 0 && s.buf[len(s.buf)-1] == '\r' {
		s.buf = append(s.buf, '\n') // a final bare CR ends its line
		return nil
	}
	if len(s.buf) > 0 || s.inData {
		s.err = io.ErrUnexpectedEOF
	} else {
		s.err = io.EOF
	}
	return s.err
}
