// Package config loads the exporter's one configuration file: probe
// profiles, SLOs and bottleneck-classifier thresholds. Parsing is strict
// (unknown fields are errors naming the field), a new file only replaces the
// running one when it is wholly valid, and every section has defaults so an
// absent file or an absent section means "the shipped defaults".
package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"gopkg.in/yaml.v3"

	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
)

// DefaultYAML is the shipped default configuration, used when no
// --config.file is given. It is also the documented example.
//
//go:embed default.yml
var DefaultYAML []byte

// File is one parsed, validated configuration file.
type File struct {
	// VLLM is where vLLM's API servers are and how the exporter connects
	// to them (vllm.go).
	VLLM VLLM `yaml:"vllm"`

	Probes     Probes     `yaml:"probes"`
	SLOs       []SLO      `yaml:"slos"`
	Bottleneck Bottleneck `yaml:"bottleneck"`
	// Models shares the --vllm.max-models places (models.go).
	Models Models `yaml:"models"`
	// HistogramBuckets are the `le` bounds of vLLM's latency histograms
	// when vLLM runs with --custom-histogram-buckets, by SLO metric (ttft,
	// tpot, itl, e2e, queue); a metric left out keeps vLLM's default
	// bounds. Latency SLO thresholds are validated against them,
	// `vllm_exporter rules` generates from them, and the probe histograms
	// include them so probe and server SLOs compare on the same bounds.
	HistogramBuckets map[string][]float64 `yaml:"histogram_buckets,omitempty"`

	// Source names where this came from (a path, or "default").
	Source string `yaml:"-"`
}

// Parse decodes and validates a configuration document. Fields absent from
// the document keep their defaults.
func Parse(data []byte, source string) (*File, error) {
	f := &File{VLLM: VLLM{HTTPClientConfig: commoncfg.DefaultHTTPClientConfig}, Probes: DefaultProbes(), SLOs: DefaultSLOs(), Bottleneck: DefaultBottleneck(), Source: source}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", source, located(data, err))
	}
	// A second document in the stream is almost always a mistake.
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("%s: more than one YAML document", source)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return f, nil
}

// located names where in the document a decoding error is: yaml.v3 says
// where a type mismatch is by line only, and where a value's own
// unmarshaler failed (a duration, a URL, an SLO) not at all. It decodes each
// part of the document alone into the field it fills, depth first, and
// prefixes err with the path of the innermost part that fails.
func located(data []byte, err error) error {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return err
	}
	if path, why := locate(doc.Content[0], reflect.TypeFor[File](), ""); path != "" {
		return fmt.Errorf("%s: %s", path, upstream.Scrub(why)) // a URL's parse error quotes it
	}
	return err
}

// locate is the path of the first part of n (a t) that fails on its own,
// and why; "" when every part decodes.
func locate(n *yaml.Node, t reflect.Type, path string) (string, string) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	join := func(key string) string { return strings.TrimPrefix(path+"."+key, ".") }
	switch {
	case n.Kind == yaml.MappingNode && (t.Kind() == reflect.Struct || t.Kind() == reflect.Map):
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			ft, ok := t, true
			if t.Kind() == reflect.Map {
				ft = t.Elem()
			} else if ft, ok = yamlField(t, key.Value); !ok {
				return join(key.Value), fmt.Sprintf("unknown field (line %d)", key.Line)
			}
			if p, why := locate(val, ft, join(key.Value)); p != "" {
				return p, why
			}
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, item := range n.Content {
			if p, why := locate(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p, why
			}
		}
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return path, strings.Join(te.Errors, "; ")
		}
		return path, fmt.Sprintf("%v (line %d)", err, n.Line)
	}
	return "", ""
}

// yamlField is the type of t's field that key fills (inline fields
// included).
func yamlField(t reflect.Type, key string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case strings.Contains(opts, "inline"):
			if ft, ok := yamlField(f.Type, key); ok {
				return ft, true
			}
		case name == key || (name == "" && strings.ToLower(f.Name) == key):
			return f.Type, f.IsExported() && name != "-"
		}
	}
	return nil, false
}

// DefaultSLOs returns the `slos:` list of the shipped default file (a fresh
// copy each call). A file without a `slos:` key gets these; `slos: []`
// means no SLOs.
func DefaultSLOs() []SLO {
	var d struct {
		SLOs []SLO `yaml:"slos"`
	}
	if err := yaml.Unmarshal(DefaultYAML, &d); err != nil {
		panic("shipped default config is invalid: " + err.Error())
	}
	return d.SLOs
}

// Default returns the parsed shipped default configuration.
func Default() *File {
	f, err := Parse(DefaultYAML, "default")
	if err != nil {
		panic("shipped default config is invalid: " + err.Error())
	}
	return f
}

// MaxFileBytes caps a configuration file. The shipped default is 3 KiB and
// a file with a hundred SLOs and probe profiles stays under 100 KiB; a
// bigger one is a mistake (a log or data file named by --config.file), and
// parsing it would cost the exporter many times its size in memory.
const MaxFileBytes = 1 << 20

// Load reads and parses path; an empty path means the shipped default. A
// file larger than MaxFileBytes is an error, read no further than the cap.
func Load(path string) (*File, error) {
	if path == "" {
		return Default(), nil
	}
	data, err := readCapped(path, MaxFileBytes)
	if err != nil {
		return nil, err
	}
	f, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	f.VLLM.SetDirectory(filepath.Dir(path))
	return f, nil
}

// readCapped reads path, failing without reading on past max bytes.
func readCapped(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: configuration file larger than the %d KiB cap; is --config.file the right file?", path, max>>10)
	}
	return data, nil
}

// Validate checks every section; errors name the offending field.
func (f *File) Validate() error {
	if err := f.VLLM.Validate(); err != nil {
		return fmt.Errorf("vllm: %w", err)
	}
	if s := f.VLLM.Servers; len(s.URLs) == 0 && (s.DataParallelRanks != 0 || s.SupervisorURL != "") {
		return errors.New("vllm: data_parallel_ranks and supervisor_url go with urls")
	} else if slices.ContainsFunc(s.URLs, upstream.HasUserInfo) {
		return errors.New("vllm: urls: credentials go in basic_auth or authorization, not in a URL")
	} else if urls, err := s.Resolve(); err != nil {
		return fmt.Errorf("vllm: urls: %w", err)
	} else if err := s.CheckSupervisor(len(urls)); err != nil {
		return fmt.Errorf("vllm: supervisor_url: %w", err)
	}
	if err := f.Probes.Validate(); err != nil {
		return fmt.Errorf("probes: %w", err)
	}
	if err := validateBuckets(f.HistogramBuckets); err != nil {
		return fmt.Errorf("histogram_buckets: %w", err)
	}
	seen := map[string]bool{}
	for i := range f.SLOs {
		s := &f.SLOs[i]
		if err := s.ValidateWith(f.Buckets); err != nil {
			return fmt.Errorf("slos[%d] (%s): %w", i, s.Name, err)
		}
		if seen[s.Name] {
			return fmt.Errorf("slos[%d]: duplicate name %q", i, s.Name)
		}
		seen[s.Name] = true
		if err := f.checkProfiles(s); err != nil {
			return fmt.Errorf("slos[%d] (%s): %w", i, s.Name, err)
		}
	}
	if err := f.Bottleneck.Validate(); err != nil {
		return fmt.Errorf("bottleneck: %w", err)
	}
	if err := f.Models.Validate(); err != nil {
		return fmt.Errorf("models: %w", err)
	}
	return nil
}

// checkProfiles: every profile a probe SLO selects is one of the probe
// profiles (an SLO naming a profile that does not run would count nothing,
// forever, and never say why).
func (f *File) checkProfiles(s *SLO) error {
	names := make([]string, len(f.Probes.Profiles))
	for i, pr := range f.Probes.Profiles {
		names[i] = pr.Name
	}
	have := strings.Join(names, ", ")
	if have == "" {
		have = "none"
	}
	for j, pr := range s.Profiles {
		if !slices.Contains(names, pr) {
			return fmt.Errorf("profiles[%d]: %q names no probe profile (probes.profiles has %s)", j, pr, have)
		}
	}
	return nil
}

// Holder keeps the running configuration and swaps it atomically on reload.
// Readers call Get on their own tick; Subscribe is for components that must
// restart timers when the file changes (the probe scheduler).
type Holder struct {
	path    string
	current atomic.Pointer[File]

	mu          sync.Mutex
	checks      []func(*File) error
	subscribers []func(*File)
	lastOK      atomic.Bool
	lastReload  atomic.Int64 // unix nanoseconds of the last successful load
}

// NewHolder loads path (empty = default) and returns a Holder for it.
func NewHolder(path string) (*Holder, error) {
	f, err := Load(path)
	if err != nil {
		return nil, err
	}
	h := &Holder{path: path}
	h.current.Store(f)
	h.lastOK.Store(true)
	h.lastReload.Store(time.Now().UnixNano())
	return h, nil
}

// Get returns the running configuration. Never nil.
func (h *Holder) Get() *File { return h.current.Load() }

// Path is the configured file path ("" for the default).
func (h *Holder) Path() string { return h.path }

// Check registers fn to vet each reloaded configuration before it replaces
// the running one: a check that needs more than the file (the vllm:
// section resolved with command-line flags) fails the reload like a parse
// error does.
func (h *Holder) Check(fn func(*File) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks = append(h.checks, fn)
}

// Subscribe registers fn to be called with each newly loaded configuration.
func (h *Holder) Subscribe(fn func(*File)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subscribers = append(h.subscribers, fn)
}

// Reload re-reads the file. On error the running configuration is kept and
// the error returned; LastReloadSuccessful reports false until a reload works.
func (h *Holder) Reload() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, err := Load(h.path)
	for _, check := range h.checks {
		if err == nil {
			err = check(f)
		}
	}
	if err != nil {
		h.lastOK.Store(false)
		return err
	}
	h.current.Store(f)
	h.lastOK.Store(true)
	h.lastReload.Store(time.Now().UnixNano())
	for _, fn := range h.subscribers {
		fn(f)
	}
	return nil
}

// LastReloadSuccessful reports whether the most recent (re)load worked.
func (h *Holder) LastReloadSuccessful() bool { return h.lastOK.Load() }

// LastReloadSuccessTime is when a configuration was last loaded successfully.
func (h *Holder) LastReloadSuccessTime() time.Time { return time.Unix(0, h.lastReload.Load()) }
