package vllm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// maxLineBytes is the longest line of a body the scraper looks at. A line
// of a family the exporter reads is at most a few hundred bytes (512-byte
// label values are already dropped); a longer one is skipped without being
// held in memory, and counted as dropped (line_too_long).
const maxLineBytes = 64 << 10

// errBodyTooLarge: the decompressed body passed the limit; errKeptTooLarge:
// the lines to parse passed theirs.
var (
	errBodyTooLarge = errors.New("body exceeds --vllm.max-body-bytes")
	errKeptTooLarge = errors.New("lines of families the exporter reads exceed a third of --vllm.max-body-bytes")
)

// keptShare: at most limit/keptShare bytes of a body may be lines the
// exporter parses. Parsing costs about ten times their size in memory at
// its peak (prometheus/common's text parser builds one protobuf message per
// sample, five times the text, plus what the normalizer builds from them),
// so this, not the body size, is what bounds the parse: 2.7 MiB of the
// default 8 MiB, which keeps the worst case under a 64 MiB container limit
// (internal/faulttest TestFaultMatrixPeakRSS). A real
// vLLM body is a third to a half such lines (the
// simulator's 16 models x 8 engines: 4.1 MB -> 2.4 MB).
const keptShare = 3

// keptFloor: a limit of 1 MiB or less may be parsed whole (a third of a
// small limit could be less than a real body's parsed part, which is up to
// half of it; parsing 1 MiB costs little).
const keptFloor = 1 << 20

// streamed is what readNeeded found besides the kept lines.
type streamed struct {
	anyVLLM bool  // a vllm:* family was seen
	long    int   // lines of needed families skipped for length
	refused int   // sample lines of model names the model bound refused
	read    int64 // decompressed bytes read
}

// modelFilter decides, while the body streams, whether the samples of a
// model_name may be kept (the scraper's model bound). Lines of a refused
// name never reach the parser, so a body of thousands of rotating names
// costs no more to parse than one of the admitted names.
type modelFilter struct {
	admit   func(name string) bool
	decided map[string]bool
}

func (f *modelFilter) keep(line []byte) bool {
	if f == nil || f.admit == nil {
		return true
	}
	name, ok := modelNameOf(line)
	if !ok || bytes.IndexByte(name, '\\') >= 0 {
		return true // escaped values are left to the normalizer, which sees them unescaped
	}
	if keep, seen := f.decided[string(name)]; seen {
		return keep
	}
	keep := f.admit(string(name))
	f.decided[string(name)] = keep
	return keep
}

// modelNameOf returns the raw (still escaped) model_name label value of a
// sample line, if it has one.
func modelNameOf(line []byte) ([]byte, bool) {
	end := labelSetEnd(line)
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

// readNeeded reads a body from r through br (reset onto r) and appends to
// dst only the lines the parser must see (keepLine). The body is never held
// whole: memory is dst (the lines the exporter reads, a third of a real
// vLLM body) plus br's buffer, whatever r delivers. Reading stops with
// errBodyTooLarge as soon as more than limit bytes were read, so an endless
// body or a decompression bomb costs the limit in reading time, not memory,
// and with errKeptTooLarge when the kept lines pass limit/keptShare.
func readNeeded(br *bufio.Reader, r io.Reader, limit int64, dst *bytes.Buffer, models *modelFilter) (streamed, error) {
	keptLimit := max(limit/keptShare, min(limit, keptFloor))
	var st streamed
	br.Reset(r)
	for {
		line, err := br.ReadSlice('\n')
		st.read += int64(len(line))
		if st.read > limit {
			return st, errBodyTooLarge
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			// Judge an overlong line by its start, then skip the rest.
			keep, vllm := keepLine(line)
			st.anyVLLM = st.anyVLLM || vllm
			if keep {
				st.long++
			}
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				st.read += int64(len(line))
				if st.read > limit {
					return st, errBodyTooLarge
				}
			}
		} else if len(line) > 0 {
			keep, vllm := keepLine(line)
			st.anyVLLM = st.anyVLLM || vllm
			if keep && line[0] != '#' && !models.keep(line) {
				keep = false
				st.refused++
			}
			if keep {
				if int64(dst.Len()+len(line)) > keptLimit {
					return st, errKeptTooLarge
				}
				dst.Write(line)
				if line[len(line)-1] != '\n' {
					dst.WriteByte('\n')
				}
			}
		}
		switch {
		case err == io.EOF:
			return st, nil
		case err != nil:
			return st, err
		}
	}
}
