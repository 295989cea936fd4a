package vllm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
)

// maxLineBytes is the longest line of a body the scraper looks at. A line
// of a family the exporter reads is at most a few hundred bytes (512-byte
// label values are already dropped); a longer one is skipped without being
// held in memory, and counted as dropped (line_too_long).
const maxLineBytes = 64 << 10

// errBodyTooLarge: the decompressed body passed --vllm.max-body-bytes;
// errParseTooLarge: the lines to parse passed the parse budget.
var (
	errBodyTooLarge  = errors.New("body exceeds --vllm.max-body-bytes")
	errParseTooLarge = errors.New("lines of families the exporter reads would take more memory to parse than the parse budget (1.5 x --vllm.max-body-bytes)")
)

// The parse budget bounds what parsing one body may hold in memory, which
// the body size does not: prometheus/common's text parser builds one
// protobuf message per series, label and bucket, so a body of short
// samples with many labels costs ten times its size, a real vLLM body
// about three times the lines it keeps (of the simulator's 16 models x 16
// engines, an 8.2 MB body: 5.1 MB kept, 11.3 MB parsed). parseCost
// estimates it while the body streams, from what the lines hold: their
// bytes (kept for the parser, then copied into strings), a series, its
// labels and each further bucket of a histogram series.
//
// The budget is 1.5 x the body limit (24 MiB at the default 16 MiB), at
// least minParseBudget: a body of the 16 x 16 simulator is estimated at
// 16.5 MB, two thirds of it, while the worst body (all short
// single-model samples) stays at what parsing 2.8 MB of them cost before
// the budget existed (internal/faulttest TestFaultMatrixPeakRSS keeps that
// under a 64 MiB container limit).
const (
	costPerSeries  = 185 // a dto.Metric and its value message
	costPerLabel   = 140 // a dto.LabelPair and its two string headers
	costPerBucket  = 150 // a further dto.Bucket (or _sum/_count line) of a histogram series
	minParseBudget = 4 << 20
)

// parseBudget is the most parseCost may reach for a body limit.
func parseBudget(limit int64) int64 { return max(limit/2*3, minParseBudget) }

// parseCost is the running estimate of the memory the kept lines take to
// parse. A line of a histogram or summary family that continues the
// previous line's series (the same labels but `le` or `quantile`) costs a
// bucket; any other sample a new series. Lines of one series that are not
// adjacent are counted as new series: the estimate errs high, never low.
type parseCost struct {
	total int64
	// family is the name of the current histogram or summary family (from
	// its TYPE line), nil under any other type.
	family  []byte
	key     []byte // the previous sample's labels without le/quantile
	scratch []byte
}

func (c *parseCost) add(line []byte) {
	end := 0
	if line[0] != '#' {
		end = labelSetEnd(line)
	}
	c.addEnd(line, end)
}

// addEnd is add for a line whose labelSetEnd is end (comments: any).
func (c *parseCost) addEnd(line []byte, end int) {
	c.total += int64(len(line))
	if line[0] == '#' {
		c.key = c.key[:0]
		if family, ok := costTypeLine(line); ok && family != nil {
			c.family = append(c.family[:0], family...)
		} else if ok {
			c.family = nil
		}
		return
	}
	name, _, _ := lineFamily(line)
	set := line[min(len(name), end):end]
	labels := 0
	c.scratch = c.scratch[:0]
	inQuote, pairStart, skip := false, 0, false
	for i := 0; i < len(set); i++ {
		switch ch := set[i]; {
		case inQuote && ch == '\\':
			i++
		case ch == '"':
			inQuote = !inQuote
		case !inQuote && ch == '=':
			labels++
			n := bytes.TrimLeft(set[pairStart:i], "{, \t")
			skip = string(n) == "le" || string(n) == "quantile"
		case !inQuote && (ch == ',' || ch == '}'):
			if !skip {
				c.scratch = append(c.scratch, set[pairStart:i+1]...)
			}
			pairStart, skip = i+1, false
		}
	}
	if c.family != nil && isSeriesOf(name, c.family) && len(c.key) > 0 && bytes.Equal(c.key, c.scratch) {
		c.total += costPerBucket
		return
	}
	c.total += costPerSeries + costPerLabel*int64(labels) + int64(len(set))
	c.key, c.scratch = c.scratch, c.key
}

// costTypeLine: the comment line is a TYPE line as parseCost reads one (it
// sets or clears the histogram or summary family); family is the name it
// declares a histogram or summary, nil for any other type.
func costTypeLine(line []byte) (family []byte, ok bool) {
	if len(line) == 0 || line[0] != '#' {
		return nil, false
	}
	var f [3][]byte
	var n int
	if !hasNonASCII(line) {
		n = fields(line[1:], f[:])
	} else {
		all := bytes.Fields(line[1:]) // Unicode blanks
		n = len(all)
		copy(f[:], all)
	}
	if n < 2 || string(f[0]) != "TYPE" {
		return nil, false
	}
	if n == 3 && (string(f[2]) == "histogram" || string(f[2]) == "summary") {
		return f[1], true
	}
	return nil, true
}

// fields is bytes.Fields without allocating: it fills f with the first
// len(f) fields of b and returns how many fields b has, counting at most
// len(f)+1 (enough to tell "exactly len(f)" from "more").
func fields(b []byte, f [][]byte) int {
	n := 0
	for {
		for len(b) > 0 && asciiSpace(b[0]) {
			b = b[1:]
		}
		if len(b) == 0 {
			return n
		}
		end := 0
		for end < len(b) && !asciiSpace(b[end]) {
			end++
		}
		if n == len(f) {
			return n + 1
		}
		f[n] = b[:end]
		n++
		b = b[end:]
	}
}

// asciiSpace is bytes.Fields' notion of a blank for ASCII bytes (a line
// with other bytes goes to bytes.Fields, see parseCost.add).
func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func hasNonASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// isSeriesOf: name is family or one of its histogram/summary series.
func isSeriesOf(name, family []byte) bool {
	rest, ok := bytes.CutPrefix(name, family)
	if !ok {
		return false
	}
	if len(rest) == 0 {
		return true
	}
	for _, s := range histogramSuffixes {
		if bytes.Equal(rest, s) {
			return true
		}
	}
	return false
}

// streamed is what readNeeded found besides the kept lines.
type streamed struct {
	anyVLLM bool  // a vllm:* family was seen
	long    int   // lines of needed families skipped for length
	refused int   // sample lines of model names the model bound refused
	read    int64 // decompressed bytes read
	cost    int64 // parseCost of the kept lines
	kept    int64 // bytes of the kept lines

	// held is what keptSink made of the kept lines when it patched a
	// parse cache; nil when it held them all.
	held *heldLines
}

// heldLines is what keptSink held of a body it patched into the parse
// cache (see keptSink.finish).
type heldLines struct {
	patched  bool                         // the cache's families are the body's
	before   map[string]*dto.MetricFamily // the cache's families of the parts before the tail (all when patched)
	part     int                          // the tail's first part
	slot     int                          // the slot of its first line
	tailFrom int                          // where the tail starts in the held text
}

// rereadWhole says the held text is not enough and the body must be read
// again whole: a name of the tail belongs to an earlier part, so
// parseCache.before gave no families.
func (h *heldLines) rereadWhole() bool { return !h.patched && h.before == nil }

// modelFilter decides, while the body streams, whether the samples of a
// model_name may be kept (the scraper's model bound). Lines of a refused
// name never reach the parser, so a body of thousands of rotating names
// costs no more to parse than one of the admitted names.
type modelFilter struct {
	admit   func(name string) bool
	decided map[string]bool
}

func (f *modelFilter) keep(line []byte, end int) bool {
	if f == nil || f.admit == nil {
		return true
	}
	name, ok := modelNameOf(line, end)
	if !ok || bytes.IndexByte(name, '\\') >= 0 {
		return true // escaped values are left to the normalizer, which sees them unescaped
	}
	if keep, seen := f.decided[string(name)]; seen { // no allocation
		return keep
	}
	return f.keepName(string(name))
}

// keepName is keep for a raw model_name value, decided once per body.
func (f *modelFilter) keepName(name string) bool {
	if f == nil || f.admit == nil {
		return true
	}
	if keep, seen := f.decided[name]; seen {
		return keep
	}
	keep := f.admit(name)
	f.decided[name] = keep
	return keep
}

// modelNameOf returns the raw (still escaped) model_name label value of a
// sample line whose labelSetEnd is end, if it has one.
func modelNameOf(line []byte, end int) ([]byte, bool) {
	if end == 0 {
		return nil, false
	}
	set := line[:end]
	i := bytes.Index(set, []byte(`model_name="`))
	for i > 0 && set[i-1] != '{' && set[i-1] != ',' && set[i-1] != ' ' {
		// a label whose name ends in model_name (e.g. served_model_name)
		j := bytes.Index(set[i+1:], []byte(`model_name="`))
		if j < 0 {
			return nil, false
		}
		i += 1 + j
	}
	if i < 0 {
		return nil, false
	}
	v := set[i+len(`model_name="`):]
	for k := 0; k < len(v); k++ {
		switch v[k] {
		case '\\':
			k++
		case '"':
			return v[:k], true
		}
	}
	return nil, false
}

// readNeeded reads a body from r through br (reset onto r) and hands only
// the lines the parser must see (keepLine) to a keptSink over dst: all of
// them are appended to dst, or, with a parse cache pc the body's lines
// can be written into (keptSink), their values are and dst holds a part.
// The body is never held whole: memory is dst (at most the lines the
// exporter reads, about 60 % of a real vLLM body) plus br's buffer,
// whatever r delivers. Reading stops with
// errBodyTooLarge as soon as more than limit bytes were read, so an endless
// body or a decompression bomb costs the limit in reading time, not memory,
// and with errParseTooLarge when the kept lines would cost more than
// parseBudget(limit) to parse.
func readNeeded(br *bufio.Reader, r io.Reader, limit int64, dst *bytes.Buffer, models *modelFilter, lc *lineCache, pc *parseCache) (st streamed, err error) {
	br.Reset(r)
	nr := needReader{br: br, limit: limit, budget: parseBudget(limit), sink: newKeptSink(dst, pc), models: models, lc: lc}
	matching := lc.start() // the lines so far are the cached body's
	defer func() {
		if err != nil {
			lc.reset()
		} else {
			lc.finish(nr.n)
		}
	}()
	for {
		line, err := br.ReadSlice('\n')
		if nr.st.read += int64(len(line)); nr.st.read > limit {
			return nr.st, errBodyTooLarge
		}
		if matching && len(line) > 0 {
			if e, ok := lc.match(nr.n, line, models); ok && err == nil {
				if err := nr.cached(line, e); err != nil {
					return nr.st, err
				}
				continue
			}
			// The rest goes through the filter, from the parse cost's
			// state at this line.
			matching = false
			if nr.n == 0 {
				lc.reset()
			}
			total := nr.cost.total
			nr.cost = replayCost(nr.sink.replayable())
			nr.cost.total = total
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			if err = nr.skipLong(line); err != nil && !errors.Is(err, io.EOF) {
				return nr.st, err
			}
		} else if len(line) > 0 {
			if err := nr.filter(line); err != nil {
				return nr.st, err
			}
		}
		switch {
		case err == io.EOF:
			nr.st.cost = nr.cost.total
			nr.sink.finish(&nr.st)
			return nr.st, nil
		case err != nil:
			return nr.st, err
		}
	}
}

// needReader is readNeeded's state while it reads one body: what it has
// read and kept, the parse cost so far and the line number n.
type needReader struct {
	br            *bufio.Reader
	limit, budget int64
	sink          keptSink
	models        *modelFilter
	lc            *lineCache
	st            streamed
	cost          parseCost
	n             int
}

// cached takes line n as the line cache described it in the last body.
func (nr *needReader) cached(line []byte, e cachedLine) error {
	nr.n++
	nr.st.anyVLLM = nr.st.anyVLLM || e.flags&lineVLLM != 0
	switch {
	case e.flags&lineRefused != 0:
		nr.st.refused++
	case e.flags&lineKeep != 0:
		if nr.cost.total += int64(len(line)) + int64(e.cost); nr.cost.total > nr.budget {
			nr.st.cost = nr.cost.total
			return errParseTooLarge
		}
		nr.keep(line)
	}
	return nil
}

// skipLong judges an overlong line by its start (line, the buffer's worth
// read so far) and skips the rest of it; it returns the read error that
// ended the line (nil, io.EOF or another), or errBodyTooLarge.
func (nr *needReader) skipLong(line []byte) error {
	keep, vllm := keepLine(line)
	nr.st.anyVLLM = nr.st.anyVLLM || vllm
	if keep {
		nr.st.long++
	}
	err := bufio.ErrBufferFull
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = nr.br.ReadSlice('\n')
		if nr.st.read += int64(len(line)); nr.st.read > nr.limit {
			return errBodyTooLarge
		}
	}
	nr.lc.never(nr.n)
	nr.n++
	return err
}

// filter judges line n (keepLine, the model bound), keeps it within the
// parse budget and tells the line cache what it decided.
func (nr *needReader) filter(line []byte) error {
	keep, vllm := keepLine(line)
	nr.st.anyVLLM = nr.st.anyVLLM || vllm
	end, refused, before := 0, false, nr.cost.total
	if keep && line[0] != '#' {
		end = labelSetEnd(line) // once for the model filter and the cost
		if !nr.models.keep(line, end) {
			keep, refused = false, true
			nr.st.refused++
		}
	}
	if keep {
		if nr.cost.addEnd(line, end); nr.cost.total > nr.budget {
			nr.st.cost = nr.cost.total
			return errParseTooLarge
		}
		nr.keep(line)
	}
	if line[len(line)-1] == '\n' {
		extra := int64(0) // the parse cost beyond the line's length
		if keep {
			extra = nr.cost.total - before - int64(len(line))
		}
		nr.lc.describe(nr.n, line, keep || refused, refused, vllm, end, extra)
	} else {
		nr.lc.never(nr.n)
	}
	nr.n++
	return nil
}

// keep hands a kept line (the last one of a body may lack its "\n") to the
// sink.
func (nr *needReader) keep(line []byte) {
	nr.st.kept += int64(len(line))
	if line[len(line)-1] == '\n' {
		line = line[:len(line)-1]
	}
	nr.sink.add(line)
}

// ParseBudget is the parse budget for a --vllm.max-body-bytes limit: a
// scrape whose kept lines are estimated (EstimateParseCost) above it fails
// with reason parse_too_large.
func ParseBudget(maxBodyBytes int64) int64 { return parseBudget(maxBodyBytes) }

// EstimateParseCost is the scraper's estimate of the memory parsing body
// takes, counting only the lines the exporter reads (scripts and tests
// size bodies with it).
func EstimateParseCost(body []byte) int64 {
	var dst bytes.Buffer
	// A limit whose budget no body reaches: the estimate of the whole body.
	st, _ := readNeeded(bufio.NewReaderSize(nil, maxLineBytes), bytes.NewReader(body), 1<<40, &dst, nil, nil, nil)
	return st.cost
}
