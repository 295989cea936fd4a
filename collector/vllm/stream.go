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
	errKeptTooLarge = errors.New("lines of families the exporter reads exceed half of --vllm.max-body-bytes")
)

// keptShare: at most limit/keptShare bytes of a body may be lines the
// exporter parses. Parsing costs about five times their size in memory
// (prometheus/common's text parser builds one protobuf message per
// sample), so this, not the body size, is what bounds the parse. A real
// vLLM body is a third to a half such lines (60 KB -> 20 KB; the
// simulator's 16 models x 8 engines: 4.1 MB -> 2.4 MB).
const keptShare = 2

// streamed is what readNeeded found besides the kept lines.
type streamed struct {
	anyVLLM bool  // a vllm:* family was seen
	long    int   // lines of needed families skipped for length
	read    int64 // decompressed bytes read
}

// readNeeded reads a body from r through br (reset onto r) and appends to
// dst only the lines the parser must see (keepLine). The body is never held
// whole: memory is dst (the lines the exporter reads, a third of a real
// vLLM body) plus br's buffer, whatever r delivers. Reading stops with
// errBodyTooLarge as soon as more than limit bytes were read, so an endless
// body or a decompression bomb costs the limit in reading time, not memory,
// and with errKeptTooLarge when the kept lines pass limit/keptShare.
func readNeeded(br *bufio.Reader, r io.Reader, limit int64, dst *bytes.Buffer) (streamed, error) {
	keptLimit := limit / keptShare
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
