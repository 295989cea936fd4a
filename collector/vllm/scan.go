package vllm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
)

// maxLineBytes is the longest line the scanner reads; a longer one is
// skipped unread (line_too_long when it is of a family the table reads).
const maxLineBytes = 64 << 10

// DefaultMaxSeries bounds the series of the families the exporter reads in
// one body (--vllm.max-series): room past the simulator's 16 models x 16
// engines (TestTwiceTheLargestBodyScrapes) within a 64 MiB container
// (TestFaultMatrixPeakRSS).
const DefaultMaxSeries = 100_000

var (
	errBodyTooLarge  = errors.New("body exceeds --vllm.max-body-bytes")
	errTooManySeries = errors.New("body holds more series of the families the exporter reads than --vllm.max-series")
)

// part is what a sample line is for its family.
type part uint8

const (
	partValue  part = iota // a gauge, counter, info or state-set sample
	partBucket             // a histogram's _bucket, with its le
	partSum
	partCount
)

// lineName is what the samples of one metric name are for: the family
// (famNames' index) and the part.
type lineName struct {
	fam  int
	part part
}

// famNames are the vLLM families the table reads, famIndex their places,
// and lineNames every sample name of them: a histogram's by its _bucket,
// _sum and _count suffixes, with or without a TYPE line (a token histogram
// read for _sum and _count only has no _bucket entry).
var famNames, famIndex, lineNames = func() ([]string, map[string]int, map[string]lineName) {
	var names []string
	index, lines := map[string]int{}, map[string]lineName{}
	for i := range families.Rows {
		f := &families.Rows[i]
		for _, nm := range f.Names {
			n := nm.Name
			fam, ok := index[n]
			if !ok {
				fam = len(names)
				index[n] = fam
				names = append(names, n)
			}
			switch f.Agg {
			case families.Buckets:
				lines[n+"_bucket"] = lineName{fam, partBucket}
				fallthrough
			case families.SumCount:
				lines[n+"_sum"] = lineName{fam, partSum}
				lines[n+"_count"] = lineName{fam, partCount}
			default:
				lines[n] = lineName{fam, partValue}
			}
		}
	}
	return names, index, lines
}()

// series is one series of the body the table reads, cached across scrapes.
type series struct {
	seen    uint32 // the scrape that last read it
	fam     uint16 // famNames' index
	part    part
	tooLong bool    // a label value is over MaxLabelValueBytes: every sample is dropped
	le      float64 // partBucket: the bound; NaN when missing or not a number
	v       float64 // this scrape's value
	// group, for a copy of one reading (repeatKey), is its family and
	// labels without what tells the copies apart: they are read as one,
	// never summed.
	group string
	// labels are a partValue series'; a histogram part's are its child's.
	labels families.Labels
	child  *child
}

// Copies of one reading: prometheus_client's multiprocess mode "all" writes
// a gauge once per process (label pid; a dead process's file lingers), and
// SGLang writes each data-parallel rank's scheduler state from every tensor,
// pipeline and expert rank with --enable-metrics-for-all-schedulers. A
// gauge's copies read as the largest, a counter's or histogram's as the
// first in the body (rank copies are equal; pid copies of a counter are
// distinct processes' counts, summed).
var rankLabels = []string{"tp_rank", "pp_rank", "moe_ep_rank"}

// repeatKey is the group of a series of family fam with labels ls and the
// labels it is read with (without pid where pid marks a copy); "" when ls
// marks no copy.
func repeatKey(fam int, ls families.Labels) (families.Labels, string) {
	n := len(ls.Offs)
	if _, ok := ls.Lookup("pid"); ok && !counterFamily[fam] {
		ls = ls.Without("pid")
	}
	rest := ls
	for _, r := range rankLabels {
		rest = rest.Without(r)
	}
	if len(rest.Offs) == n {
		return ls, ""
	}
	return ls, famNames[fam] + "\xff" + rest.Key()
}

// child is one histogram child: the buckets, _sum and _count series of a
// family that share their labels but le, in any order.
type child struct {
	seen    uint32
	labels  families.Labels
	buckets []bucket // this scrape's, in body order
	sum     float64
	count   float64
	has     uint8 // hasSum, hasCount
	dup     bool  // a second _sum or _count of this scrape (another label order)
	group   string
}

const (
	hasSum uint8 = 1 << iota
	hasCount
)

type bucket struct{ le, v float64 }

// scanner reads /metrics bodies into a cache of the series the table reads,
// keyed by each series' bytes as the body prints them (name and label set),
// as Prometheus's scrape cache is: a series of the last scrape costs one
// lookup and parsing its value; its labels were parsed when it was new.
// Series a scrape does not read leave the cache at its end, so the cache
// holds one body's series.
type scanner struct {
	br       *bufio.Reader
	series   map[string]*series
	children map[string]*child
	gen      uint32 // the scrape being read
	read     int    // series of this scrape
	// What this scrape read, by family: samples in body order, and
	// histogram children in the order they first appear.
	values  [][]*series
	kids    [][]*child
	bad     [][]*series        // samples that are no reading (badValue)
	copies  map[string]*series // by group: the first copy of this scrape
	kidCopy map[string]*child  // the same for histogram children
	anyVLLM bool               // a vllm:* family was named
	helps   map[string]bool    // families whose HELP this scrape had, for schema detection
	line    int
	bytes   int // the cache's key bytes
}

func newScanner() *scanner {
	return &scanner{
		br:       bufio.NewReaderSize(nil, maxLineBytes),
		series:   map[string]*series{},
		children: map[string]*child{},
		values:   make([][]*series, len(famNames)),
		kids:     make([][]*child, len(famNames)),
		bad:      make([][]*series, len(famNames)),
		copies:   map[string]*series{},
		kidCopy:  map[string]*child{},
		helps:    map[string]bool{},
	}
}

// scan reads one body from r: at most limit bytes, at most maxSeries series
// of the families the table reads. Drops go to res.
func (s *scanner) scan(r io.Reader, limit int64, maxSeries int, res *result) error {
	s.gen++
	s.read, s.line = 0, 0
	s.forget()
	s.br.Reset(r)
	defer s.br.Reset(nil) // keep no response body reachable
	var n int64
	for {
		line, err := s.br.ReadSlice('\n')
		s.line++
		if n += int64(len(line)); n > limit {
			return errBodyTooLarge
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			if name, _, _ := seriesKey(bytes.TrimLeft(line, " \t")); isRead(name) {
				res.dropLine(DropLineTooLong, s.line, name, "longer than 64 KiB")
			}
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = s.br.ReadSlice('\n')
				if n += int64(len(line)); n > limit {
					return errBodyTooLarge
				}
			}
			line = nil
		}
		if len(line) > 0 {
			eof, lerr := s.sample(line, maxSeries, int(limit), res)
			if lerr != nil {
				return fmt.Errorf("line %d: %w", s.line, lerr)
			}
			if eof {
				break
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if s.read < len(s.series) {
		s.evict()
	}
	return nil
}

// forget empties what the last scrape read.
func (s *scanner) forget() {
	s.anyVLLM = false
	clear(s.helps)
	clear(s.copies)
	clear(s.kidCopy)
	for i := range s.values {
		// Cleared, not only cut: the backing arrays would keep evicted
		// series reachable.
		clear(s.values[i])
		clear(s.kids[i])
		clear(s.bad[i])
		s.values[i], s.kids[i], s.bad[i] = s.values[i][:0], s.kids[i][:0], s.bad[i][:0]
	}
}

func isRead(name []byte) bool { _, ok := lineNames[string(name)]; return ok }

// evict drops the series (and children) this scrape has not read.
func (s *scanner) evict() {
	for k, e := range s.series {
		if e.seen != s.gen {
			delete(s.series, k)
			s.bytes -= len(k)
		}
	}
	for k, c := range s.children {
		if c.seen != s.gen {
			delete(s.children, k)
		}
	}
}

// sample reads one line; eof is OpenMetrics' "# EOF".
func (s *scanner) sample(line []byte, maxSeries, maxBytes int, res *result) (eof bool, err error) {
	line = bytes.TrimRight(line, "\r\n")
	line = bytes.TrimLeft(line, " \t")
	if len(line) == 0 {
		return false, nil
	}
	if line[0] == '#' {
		return s.comment(line[1:]), nil
	}
	name, end, err := seriesKey(line)
	if err != nil {
		return false, err
	}
	s.anyVLLM = s.anyVLLM || bytes.HasPrefix(name, []byte("vllm:"))
	ln, ok := lineNames[string(name)]
	if !ok {
		_, err := sampleValue(line[end:])
		return false, err // a family the table does not read: skipped once it parses
	}
	e := s.series[string(line[:end])]
	if e == nil {
		if e, err = s.add(string(line[:end]), line[0] == '{', ln, maxSeries, maxBytes); err != nil {
			return false, err
		}
	}
	v, err := sampleValue(line[end:])
	if err != nil {
		return false, err
	}
	if e.seen == s.gen {
		res.dropLine(DropDuplicate, s.line, line[:end], "a series already read; the first is kept")
		return false, nil
	}
	e.seen = s.gen
	s.read++
	if e.tooLong {
		res.dropLine(DropLabelTooLong, s.line, line[:end], "a label value is longer than 512 bytes")
		return false, nil
	}
	e.v = v
	if e.part == partValue {
		if bad := badValue(int(e.fam), v); bad != "" {
			res.dropLine(bad, s.line, line[:end], "a value that is no reading")
			s.bad[e.fam] = append(s.bad[e.fam], e)
		} else if first := s.copies[e.group]; e.group != "" && first != nil {
			if !counterFamily[e.fam] {
				first.v = max(first.v, v)
			}
		} else {
			if e.group != "" {
				s.copies[e.group] = e
			}
			s.values[e.fam] = append(s.values[e.fam], e)
		}
		return false, nil
	}
	c := e.child
	if c.seen != s.gen {
		c.seen, c.buckets, c.sum, c.count, c.has, c.dup = s.gen, c.buckets[:0], 0, 0, 0, false
		if c.group == "" || s.kidCopy[c.group] == nil {
			s.kidCopy[c.group] = c
			s.kids[e.fam] = append(s.kids[e.fam], c)
		}
	}
	switch e.part {
	case partBucket:
		c.buckets = append(c.buckets, bucket{e.le, v})
	case partSum:
		c.dup = c.dup || c.has&hasSum != 0
		c.sum, c.has = v, c.has|hasSum
	case partCount:
		c.dup = c.dup || c.has&hasCount != 0
		c.count, c.has = v, c.has|hasCount
	}
	return false, nil
}

// add parses a series new to the cache. key is its name and label set as
// the body prints them (quoted: the name inside the set). The cache holds
// at most maxSeries series and about one body's bytes (maxBytes): past
// either, the last body's series not read again go first.
func (s *scanner) add(key string, quoted bool, ln lineName, maxSeries, maxBytes int) (*series, error) {
	if len(s.series) >= maxSeries || s.bytes+len(key) > maxBytes {
		s.evict()
		if len(s.series) >= maxSeries {
			return nil, errTooManySeries
		}
	}
	ls, err := parseLabels(key, quoted)
	if err != nil {
		return nil, err
	}
	e := &series{fam: uint16(ln.fam), part: ln.part, le: math.NaN()}
	s.series[key] = e
	s.bytes += len(key)
	for _, v := range ls.All() {
		if len(v) > MaxLabelValueBytes {
			e.tooLong = true // refused before it can take a model's place
			return e, nil
		}
	}
	if ln.part == partValue {
		e.labels, e.group = repeatKey(ln.fam, ls)
		return e, nil
	}
	if le, ok := ls.Lookup("le"); ok && ln.part == partBucket {
		if v, err := parseFloat([]byte(le)); err == nil {
			e.le = v
		}
	}
	own := ls.Without("le")
	ck := famNames[ln.fam] + "\xff" + own.Key()
	if e.child = s.children[ck]; e.child == nil {
		_, g := repeatKey(ln.fam, own)
		e.child = &child{labels: own, group: g}
		s.children[ck] = e.child
	}
	return e, nil
}

// comment reads a comment line (without its '#'): a HELP line of a family
// schema detection reads, a vllm:* family's HELP or TYPE, or "# EOF".
func (s *scanner) comment(c []byte) (eof bool) {
	c = bytes.TrimLeft(c, " \t")
	kw, rest, _ := bytes.Cut(c, []byte(" "))
	if string(kw) == "EOF" {
		return len(bytes.TrimSpace(rest)) == 0
	}
	if string(kw) != "HELP" && string(kw) != "TYPE" {
		return false
	}
	rest = bytes.TrimLeft(rest, " \t")
	var name []byte
	if len(rest) > 0 && rest[0] == '"' {
		end := quotedEnd(rest, 0)
		if end < 0 {
			return false
		}
		name, rest = rest[1:end-1], rest[end:]
	} else {
		n := nameEnd(rest)
		name, rest = rest[:n], rest[n:]
	}
	s.anyVLLM = s.anyVLLM || bytes.HasPrefix(name, []byte("vllm:"))
	if help, ok := helpMarks[string(name)]; ok && string(kw) == "HELP" && string(bytes.TrimSpace(rest)) == help {
		s.helps[string(name)] = true
	}
	return false
}

// seriesKey finds a sample line's metric name and where its series key
// (name and label set) ends; the name also when the label set does not
// end. Text 1.0.0 may quote the name as the label set's first item:
// {"name",label="v"}.
func seriesKey(line []byte) (name []byte, end int, err error) {
	if len(line) > 0 && line[0] == '{' {
		if i := skipBlank(line, 1); i < len(line) && line[i] == '"' {
			if q := quotedEnd(line, i); q > 0 {
				if j := skipBlank(line, q); j < len(line) && (line[j] == ',' || line[j] == '}') {
					name = line[i+1 : q-1]
				}
			}
		}
		if end, err = labelSetEnd(line, 0); err == nil && name == nil {
			err = errors.New("a label set without a metric name")
		}
		return name, end, err
	}
	n := nameEnd(line)
	if n == 0 {
		return nil, 0, fmt.Errorf("%q is not a metric name", clip(line))
	}
	if i := skipBlank(line, n); i < len(line) && line[i] == '{' {
		end, err = labelSetEnd(line, i)
		return line[:n], end, err
	}
	return line[:n], n, nil
}

// nameEnd is the length of the legacy metric name b starts with.
func nameEnd(b []byte) int {
	n := 0
	for n < len(b) {
		c := b[n]
		if c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || n > 0 && c >= '0' && c <= '9' {
			n++
			continue
		}
		break
	}
	return n
}

func skipBlank[T string | []byte](b T, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	return i
}

// quotedEnd is the index just past the quoted string starting at b[i], -1
// when it does not end.
func quotedEnd[T string | []byte](b T, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// labelSetEnd is the index just past the label set opening at line[open].
func labelSetEnd(line []byte, open int) (int, error) {
	for i := open + 1; i < len(line); i++ {
		switch line[i] {
		case '"':
			if i = quotedEnd(line, i); i < 0 {
				return 0, errors.New("an unterminated label value")
			}
			i--
		case '}':
			return i + 1, nil
		}
	}
	return 0, errors.New("an unterminated label set")
}

// parseLabels parses the label set of a series key (quoted: text 1.0.0's
// name inside the set).
func parseLabels(key string, quoted bool) (families.Labels, error) {
	l := families.Labels{Text: key}
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return l, nil
	}
	escaped := false
	for i, first := i+1, true; ; first = false {
		if i = skipBlank(key, i); i < len(key) && key[i] == '}' {
			break
		}
		ns, ne := i, i
		if key[i] == '"' {
			if i = quotedEnd(key, i); i < 0 {
				return l, errors.New("an unterminated label name")
			}
			ns, ne = ns+1, i-1
			if j := skipBlank(key, i); first && quoted && j < len(key) && key[j] != '=' {
				if i = j; key[i] == ',' { // the quoted metric name
					i++
				}
				continue
			}
		} else {
			for ne < len(key) && (key[ne] == '_' || key[ne] >= 'a' && key[ne] <= 'z' || key[ne] >= 'A' && key[ne] <= 'Z' || ne > ns && key[ne] >= '0' && key[ne] <= '9') {
				ne++
			}
			if ne == ns {
				return l, fmt.Errorf("invalid label name in %q", clip(key))
			}
			i = ne
		}
		if i = skipBlank(key, i); i >= len(key) || key[i] != '=' {
			return l, fmt.Errorf("label %q without a value", key[ns:ne])
		}
		if i = skipBlank(key, i+1); i >= len(key) || key[i] != '"' {
			return l, fmt.Errorf("label %q: value not quoted", key[ns:ne])
		}
		vs, next := i+1, quotedEnd(key, i)
		if next < 0 {
			return l, errors.New("an unterminated label value")
		}
		ve := next - 1
		escaped = escaped || strings.IndexByte(key[ns:ve], '\\') >= 0
		l.Offs = append(l.Offs, uint16(ns), uint16(ne), uint16(vs), uint16(ve))
		if i = skipBlank(key, next); i < len(key) && key[i] == ',' {
			i++
		} else if i >= len(key) || key[i] != '}' {
			return l, fmt.Errorf("invalid label set %q", clip(key))
		}
	}
	if escaped {
		var text []byte
		var err error
		for k := 0; k < len(l.Offs) && err == nil; k += 2 {
			start := len(text)
			text, err = unescape(text, key[l.Offs[k]:l.Offs[k+1]])
			l.Offs[k], l.Offs[k+1] = uint16(start), uint16(len(text))
		}
		if err != nil {
			return l, err
		}
		l.Text = string(text)
	}
	for n, v := range l.All() {
		if !utf8.ValidString(v) || !utf8.ValidString(n) {
			return l, fmt.Errorf("label %q: not UTF-8", n)
		}
		if twice := l.Without(n); len(twice.Offs) < len(l.Offs)-4 {
			return l, fmt.Errorf("label %q twice", n)
		}
	}
	return l, nil
}

// unescape appends raw, a quoted string's content, with the text format's
// escapes (\\, \" and \n) undone.
func unescape(dst []byte, raw string) ([]byte, error) {
	for j := 0; j < len(raw); j++ {
		c := raw[j]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		if j++; j < len(raw) {
			switch raw[j] {
			case '\\', '"':
				dst = append(dst, raw[j])
				continue
			case 'n':
				dst = append(dst, '\n')
				continue
			}
		}
		return dst, errors.New("an invalid escape in a quoted string")
	}
	return dst, nil
}

// sampleValue reads what follows a series key: the value, an optional
// timestamp and an optional OpenMetrics exemplar (" # {...} v").
func sampleValue(rest []byte) (float64, error) {
	tok, rest := nextToken(rest)
	if len(tok) == 0 {
		return 0, errors.New("a sample without a value")
	}
	v, err := parseFloat(tok)
	if err != nil {
		return 0, err
	}
	if tok, rest = nextToken(rest); len(tok) > 0 && tok[0] != '#' {
		if _, err := parseFloat(tok); err != nil {
			return 0, fmt.Errorf("timestamp: %w", err)
		}
		tok, _ = nextToken(rest)
	}
	if len(tok) > 0 && tok[0] != '#' {
		return 0, fmt.Errorf("%q after a sample's value", clip(tok))
	}
	return v, nil
}

// token splits off b's first blank-separated token.
func nextToken(b []byte) (tok, rest []byte) {
	i := skipBlank(b, 0)
	j := i
	for j < len(b) && b[j] != ' ' && b[j] != '\t' {
		j++
	}
	return b[i:j], b[j:]
}

// parseFloat reads a sample value or le as the text format writes them
// (strconv's hexadecimal and underscore forms are not among them).
func parseFloat(b []byte) (float64, error) {
	if bytes.ContainsAny(b, "pP_") {
		return 0, fmt.Errorf("%q is not a number", clip(b))
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", clip(b))
	}
	return v, nil
}

func clip[T string | []byte](b T) T { return b[:min(len(b), 80)] }
