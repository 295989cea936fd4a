package slo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-kit/log/level"
)

// The checkpoint is JSON: a header naming the format and version, then per
// SLO (by name and definition fingerprint) and model the last cumulative
// counter reading and the non-empty ring buckets. It is written to a temp
// file in the same directory, synced, and renamed over the old one, so a
// crash leaves either the old or the new checkpoint, never half of one.
const (
	stateFormat  = "vllm_exporter/slo-state"
	stateVersion = 1
)

var stateErrorReasons = []string{"corrupt", "foreign", "version", "read", "write"}

type stateFile struct {
	Format  string     `json:"format"`
	Version int        `json:"version"`
	SavedAt time.Time  `json:"saved_at"`
	SLOs    []stateSLO `json:"slos,omitempty"` // encodeState writes the list itself
}

type stateSLO struct {
	Name        string        `json:"name"`
	Fingerprint string        `json:"fingerprint"`
	Series      []stateSeries `json:"series,omitempty"` // as SLOs
}

type stateSeries struct {
	Model    string     `json:"model"`
	HasLast  bool       `json:"has_last"`
	Last     cumulative `json:"last"`
	LastSeen time.Time  `json:"last_seen"`
	Fine     stateRing  `json:"fine"`
	// Medium is absent in checkpoints written when the fine ring spanned
	// every window: it is rebuilt from their fine ring.
	Medium *stateRing `json:"medium,omitempty"`
	Coarse stateRing  `json:"coarse"`
	// Fast is absent in checkpoints written before the fast tier existed.
	Fast *stateRing `json:"fast,omitempty"`
	// Since (first reading) is absent in older checkpoints: the oldest
	// bucket holding events stands in for it.
	Since *time.Time `json:"since,omitempty"`
}

// stateRing holds a ring sparsely: [absolute bucket index, bad, total].
type stateRing struct {
	WidthNS int64        `json:"width_ns"`
	Len     int          `json:"len"`
	Head    int64        `json:"head"`
	Init    bool         `json:"init"`
	Buckets [][3]float64 `json:"buckets"`
}

func encodeRing(r *ring) stateRing {
	sr := stateRing{WidthNS: int64(r.width), Len: len(r.bad), Head: r.head, Init: r.init, Buckets: [][3]float64{}}
	if !r.init {
		return sr
	}
	n := int64(len(r.bad))
	for i := r.head - n + 1; i <= r.head; i++ {
		s := r.slot(i)
		if r.bad[s] != 0 || r.total[s] != 0 {
			sr.Buckets = append(sr.Buckets, [3]float64{float64(i), float64(r.bad[s]), float64(r.total[s])})
		}
	}
	return sr
}

// decodeRing restores sr into r. r's buckets may be a whole number of
// sr's (an older checkpoint's fine ring fills the medium ring) and r may
// be shorter (the fine ring spanned 3 days before the medium ring existed):
// sr's buckets are summed into r's, those older than r spans are dropped.
// Any other geometry fails.
func decodeRing(sr stateRing, r *ring) error {
	w := int64(r.width)
	if sr.WidthNS <= 0 || w%sr.WidthNS != 0 || sr.Len < 1 {
		return fmt.Errorf("ring geometry %dns x %d, want %dns buckets or a divisor of it", sr.WidthNS, sr.Len, w)
	}
	if !sr.Init {
		return nil
	}
	r.init, r.head = true, floorDiv(sr.Head*sr.WidthNS, w)
	for i := range r.bad {
		r.bad[i], r.total[i] = 0, 0
	}
	n := int64(len(r.bad))
	for _, b := range sr.Buckets {
		i := int64(b[0])
		if i > sr.Head || i <= sr.Head-int64(sr.Len) || b[1] < 0 || b[2] < 0 {
			return fmt.Errorf("bucket %d outside ring or negative", i)
		}
		j := floorDiv(i*sr.WidthNS, w)
		if j <= r.head-n {
			continue
		}
		s := r.slot(j)
		r.bad[s] = float32(float64(r.bad[s]) + b[1])
		r.total[s] = float32(float64(r.total[s]) + b[2])
	}
	return nil
}

// SaveState writes the checkpoint now (Run calls it on shutdown).
func (w *Watchdog) SaveState() error {
	if w.opts.StateFile == "" {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.saveLocked(time.Now())
}

func (w *Watchdog) saveLocked(now time.Time) error {
	if err := writeAtomic(w.opts.StateFile, func(bw *bufio.Writer) error { return w.encodeState(bw, now) }); err != nil {
		w.self.stateErrors.add("write")
		return err
	}
	w.self.lastSave.Store(time.Now().UnixNano())
	return nil
}

// encodeState writes the checkpoint (a stateFile's JSON) to bw one series
// at a time, so the encoded file (megabytes with many models) is never held
// whole on top of the working heap. bw's errors are sticky: the caller's
// Flush reports them.
func (w *Watchdog) encodeState(bw *bufio.Writer, now time.Time) error {
	put := func(v any, open bool) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if open { // an object to continue: leave out its closing brace
			b = b[:len(b)-1]
		}
		_, err = bw.Write(b)
		return err
	}
	if err := put(stateFile{Format: stateFormat, Version: stateVersion, SavedAt: now.UTC()}, true); err != nil {
		return err
	}
	bw.WriteString(`,"slos":[`)
	for i, name := range slices.Sorted(maps.Keys(w.states)) {
		st := w.states[name]
		if i > 0 {
			bw.WriteByte(',')
		}
		if err := put(stateSLO{Name: name, Fingerprint: st.fp}, true); err != nil {
			return err
		}
		bw.WriteString(`,"series":[`)
		for j, m := range slices.Sorted(maps.Keys(st.series)) {
			if j > 0 {
				bw.WriteByte(',')
			}
			if err := put(st.series[m].state(m), false); err != nil {
				return err
			}
		}
		bw.WriteString("]}")
	}
	bw.WriteString("]}")
	return nil
}

// state is s as model's checkpoint entry.
func (s *series) state(model string) stateSeries {
	return stateSeries{Model: model, HasLast: s.hasLast, Last: s.last, LastSeen: s.lastSeen.UTC(),
		Fine: encodeRing(s.fine), Medium: ptr(encodeRing(s.medium)), Coarse: encodeRing(s.coarse), Fast: ptr(encodeRing(s.fast)), Since: ptr(s.since.UTC())}
}

func ptr[T any](v T) *T { return &v }

// writeAtomic writes path through write: a temp file in the same
// directory, synced, renamed over path, and the directory synced.
func writeAtomic(path string, write func(*bufio.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 64<<10)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// errSetAside marks state files that must not be trusted.
type stateError struct {
	reason string
	err    error
}

func (e *stateError) Error() string { return e.reason + ": " + e.err.Error() }

// restore loads the checkpoint at path into the freshly reconciled states.
// Entries whose SLO is no longer configured or whose definition changed are
// skipped; a file that is not a valid checkpoint is renamed aside.
func (w *Watchdog) restore(path string) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		w.self.stateErrors.add("read")
		level.Error(w.logger).Log("msg", "cannot read SLO state file; starting with empty windows", "file", path, "err", err)
		return
	}
	sf, perr := parseState(data)
	if perr == nil {
		perr = w.apply(sf)
	}
	if perr != nil {
		var se *stateError
		reason := "corrupt"
		if errors.As(perr, &se) {
			reason = se.reason
		}
		w.self.stateErrors.add(reason)
		aside := fmt.Sprintf("%s.%s-%s", path, reason, time.Now().UTC().Format("20060102T150405Z"))
		if rerr := os.Rename(path, aside); rerr != nil {
			level.Error(w.logger).Log("msg", "SLO state file is not trusted and could not be set aside", "file", path, "reason", reason, "err", perr, "rename_err", rerr)
		} else {
			level.Error(w.logger).Log("msg", "SLO state file is not trusted; set aside, starting with empty windows", "file", path, "moved_to", aside, "reason", reason, "err", perr)
		}
		// Drop anything partially applied.
		for name, st := range w.states {
			w.states[name] = newSLOState(st.cfg)
		}
		w.models = w.newModelSet()
		return
	}
	w.self.restored.Store(true)
	level.Info(w.logger).Log("msg", "SLO state restored", "file", path, "saved_at", sf.SavedAt)
}

func parseState(data []byte) (*stateFile, error) {
	var hdr struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(data, &hdr); err != nil {
		return nil, &stateError{"corrupt", err}
	}
	if hdr.Format != stateFormat {
		return nil, &stateError{"foreign", fmt.Errorf("format %q is not %q", hdr.Format, stateFormat)}
	}
	if hdr.Version != stateVersion {
		return nil, &stateError{"version", fmt.Errorf("version %d, this exporter reads %d", hdr.Version, stateVersion)}
	}
	var sf stateFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sf); err != nil {
		return nil, &stateError{"corrupt", err}
	}
	return &sf, nil
}

func (w *Watchdog) apply(sf *stateFile) error {
	skipped := 0
	defer func() {
		if skipped > 0 {
			level.Info(w.logger).Log("msg", "SLO state entries not restored: model idle longer than --vllm.model-idle-timeout or beyond --vllm.max-models", "entries", skipped)
		}
	}()
	for _, ss := range sf.SLOs {
		st := w.states[ss.Name]
		if st == nil || st.fp != ss.Fingerprint {
			level.Info(w.logger).Log("msg", "SLO state entry skipped: SLO removed or redefined", "slo", ss.Name)
			continue
		}
		for _, se := range ss.Series {
			// The model bound holds across restarts: a model already idle
			// when the file was saved, or one past --vllm.max-models, is
			// not restored (a file from a larger bound is trimmed).
			if se.Model != probeModel && !w.models.Restore(se.Model, se.LastSeen, sf.SavedAt) {
				skipped++
				continue
			}
			s := st.newSeries(se.Model)
			medium := se.Medium
			if medium == nil {
				medium = &se.Fine
			}
			for _, r := range []struct {
				name string
				sr   *stateRing
				r    *ring
			}{{"fine", &se.Fine, s.fine}, {"medium", medium, s.medium}, {"coarse", &se.Coarse, s.coarse}, {"fast", se.Fast, s.fast}} {
				if r.sr == nil {
					continue // no fast ring in the file
				}
				if err := decodeRing(*r.sr, r.r); err != nil {
					return &stateError{"corrupt", fmt.Errorf("slo %s model %q %s ring: %w", ss.Name, se.Model, r.name, err)}
				}
			}
			s.hasLast, s.last, s.lastSeen = se.HasLast, se.Last, se.LastSeen
			if se.Since != nil {
				s.since = *se.Since
			} else if len(se.Coarse.Buckets) > 0 {
				s.since = time.Unix(0, int64(se.Coarse.Buckets[0][0])*se.Coarse.WidthNS)
			}
			st.series[se.Model] = s
		}
	}
	return nil
}
