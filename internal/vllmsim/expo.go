package vllmsim

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
)

// versionSpec describes one vLLM version's /metrics and API.
type versionSpec struct {
	name        string
	vllmVersion string
	engineLabel bool
	created     bool // V1 single-process: _created gauge families
	sumFirst    bool // V0 multiprocess histogram order: _sum, buckets, _count
	// lazy: children appear only once written (V0 creates labelled
	// children on first use).
	lazy        bool
	nestedError bool // error body {"error":{...}} (>=0.10.1) vs flat
	healthDead  int  // /health status when the engine is dead
	main        bool // vLLM main-era API behaviour (2026-08 and later)
	// priorityLabel: finished-request families gain "priority" under the
	// priority policy (late 2026).
	priorityLabel bool
	// layout is the families in the order the version registers them.
	layout []entry
	// cacheConfig is the version's vllm:cache_config_info labels beyond
	// the ones every version has.
	cacheConfig func(c *Config) []label
	// splitsWaiting: vllm:num_requests_waiting counts deferred requests too
	// (≈0.20+, with num_requests_waiting_by_reason).
	splitsWaiting bool
	// openMetrics: the body is OpenMetrics 1.0 (counters' HELP and TYPE
	// without _total, # EOF), as the Rust front-end serves it.
	openMetrics bool
	// server is the inference server spoken (families.Server*; "" vLLM),
	// labels its children's labels (nil: vLLM's engineLabels).
	server string
	labels func(w *expoWriter, e *engine, perModel bool, typ string) [][]label
}

// entry is one family of a layout: a name the family table describes
// (families.Lookup), with this version's HELP or label values where they
// differ from the newest, or one of the simulator's own families that no
// row reads (python_*, process_*, http_* details).
type entry struct {
	name   string
	help   string
	values []string
	always bool // rendered whatever the table's When says
	own    func(w *expoWriter)
	// process: a default-registry collector, absent in multiprocess mode.
	process bool
}

// names are entries for table names, in order.
func names(ns ...string) []entry {
	out := make([]entry, len(ns))
	for i, n := range ns {
		out[i] = entry{name: n}
	}
	return out
}

// insertAfter is layout with extra entries after the one named at.
func insertAfter(layout []entry, at string, extra ...entry) []entry {
	i := slices.IndexFunc(layout, func(e entry) bool { return e.name == at })
	return slices.Concat(layout[:i+1], extra, layout[i+1:])
}

var (
	// Registration order of vLLM main (2026-08), PrometheusStatLogger.__init__.
	layoutMain = slices.Concat(processFamilies(), names(
		"vllm:estimated_flops_per_gpu_total", "vllm:estimated_read_bytes_per_gpu_total", "vllm:estimated_write_bytes_per_gpu_total",
		"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:num_requests_waiting_by_reason", "vllm:engine_sleep_state",
		"vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
		"vllm:external_prefix_cache_queries_total", "vllm:external_prefix_cache_hits_total", "vllm:mm_cache_queries_total", "vllm:mm_cache_hits_total",
		"vllm:num_preemptions_total", "vllm:prompt_tokens_total", "vllm:prompt_tokens_by_source_total", "vllm:prompt_tokens_cached_total",
		"vllm:generation_tokens_total", "vllm:request_success_total"),
		tokenHistograms, names("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds", "vllm:request_time_per_output_token_seconds"),
		phaseHistograms, names("vllm:request_prefill_kv_computed_tokens", "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
			"vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_accepted_tokens_per_pos_total", "vllm:cache_config_info"),
		httpFamilies())
	tokenHistograms = names("vllm:request_prompt_tokens", "vllm:request_generation_tokens", "vllm:iteration_tokens_total",
		"vllm:request_max_num_generation_tokens", "vllm:request_params_n", "vllm:request_params_max_tokens")
	phaseHistograms = names("vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds", "vllm:request_inference_time_seconds",
		"vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds")
	// V1 finished reasons before error (#26813) and repetition (#35451).
	oldFinishedReasons = []string{FinishStop, FinishLength, FinishAbort}

	// vLLM 0.10.2: the deprecated gpu_* names and TPOT beside their successors.
	layout010 = slices.Concat(processFamilies(), names(
		"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc",
		"vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_hits_total", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
		"vllm:num_preemptions_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total"),
		[]entry{{name: "vllm:request_success_total", values: oldFinishedReasons}},
		tokenHistograms, names("vllm:time_to_first_token_seconds", "vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"),
		phaseHistograms, names("vllm:cache_config_info"), httpFamilies())

	// vLLM 0.7.3's V0 multiprocess body, in its multiprocess files' order.
	layoutV0 = slices.Concat(
		names("vllm:iteration_tokens_total", "vllm:time_to_first_token_seconds"),
		[]entry{{name: "vllm:time_per_output_token_seconds", help: "Histogram of time per output token in seconds."},
			{name: "vllm:e2e_request_latency_seconds", help: "Histogram of end to end request latency in seconds."}},
		phaseHistograms[1:],
		names("vllm:time_in_queue_requests", "vllm:request_prompt_tokens", "vllm:request_generation_tokens", "vllm:request_params_n",
			"vllm:request_max_num_generation_tokens", "vllm:request_params_max_tokens", "vllm:num_preemptions_total",
			"vllm:prompt_tokens_total", "vllm:generation_tokens_total"),
		[]entry{{name: "vllm:request_success_total", values: oldFinishedReasons}, {name: "vllm:cache_config_info"},
			{name: "vllm:lora_requests_info", always: true},
			{name: "vllm:num_requests_running", help: "Number of requests currently running on GPU."},
			{name: "vllm:num_requests_swapped"}, {name: "vllm:num_requests_waiting"},
			{name: "vllm:gpu_cache_usage_perc", help: "GPU KV-cache usage. 1 means 100 percent usage."}},
		names("vllm:cpu_cache_usage_perc", "vllm:cpu_prefix_cache_hit_rate", "vllm:gpu_prefix_cache_hit_rate"))

	// The Rust front-end's registry (rust/src/metrics): main's engine and
	// request families less those it does not register, LoRA info and KV
	// block residency.
	layoutRust = slices.Concat(slices.DeleteFunc(slices.Clone(layoutMain[len(processFamilies()):]), func(e entry) bool {
		return slices.Contains([]string{"vllm:cache_config_info", "vllm:engine_sleep_state", "vllm:mm_cache_queries_total",
			"vllm:mm_cache_hits_total", "vllm:iteration_tokens_total"}, e.name)
	}), names("vllm:lora_requests_info", "vllm:kv_block_lifetime_seconds", "vllm:kv_block_idle_before_evict_seconds", "vllm:kv_block_reuse_gap_seconds"))

	// The newest layout (vLLM 0.30-0.33): main plus what came later, the
	// optional features' families after http_* (their registration order
	// could not be read), then every family of the table no older layout
	// has, in table order.
	layoutLatest = withNewRows(slices.Concat(
		insertAfter(insertAfter(insertAfter(layoutMain, "vllm:engine_sleep_state",
			names("vllm:engine_sleep_resource_state", "vllm:engine_fully_awake", "vllm:scheduler_policy_info")...),
			"vllm:request_params_max_tokens", names("vllm:request_num_preemptions", "vllm:request_priority")...),
			"vllm:cache_config_info", names("vllm:engine_healthy")...),
		names("vllm:admission_rejections_total", "vllm:nixl_xfer_time_seconds", "vllm:nixl_post_time_seconds",
			"vllm:nixl_bytes_transferred", "vllm:nixl_num_descriptors", "vllm:nixl_num_failed_transfers_total",
			"vllm:nixl_num_failed_notifications_total", "vllm:nixl_num_kv_expired_reqs_total",
			"vllm:kv_block_lifetime_seconds", "vllm:kv_block_idle_before_evict_seconds", "vllm:kv_block_reuse_gap_seconds",
			"vllm:lora_requests_info", "vllm:kv_offload_load_bytes_total", "vllm:kv_offload_load_time_total",
			"vllm:kv_offload_store_bytes_total", "vllm:kv_offload_store_time_total",
			"vllm:kv_offload_total_bytes_total", "vllm:kv_offload_total_time_total",
			"vllm:mooncake_store_operation_total", "vllm:mooncake_store_operation_keys_total",
			"vllm:mooncake_store_operation_bytes_total", "vllm:mooncake_store_operation_failed_keys_total",
			"vllm:mooncake_store_operation_time_seconds")))
)

// withNewRows appends to latest every name the family table fills that no
// layout lists: a family added to the table is rendered by the newest
// layout without naming it twice.
func withNewRows(latest []entry) []entry {
	listed := map[string]bool{}
	for _, l := range [][]entry{latest, layoutMain, layout010, layoutV0} {
		for _, e := range l {
			listed[e.name] = true
		}
	}
	for _, sp := range families.Specs() {
		if !listed[sp.Name.Name] && sp.Sim.Source != "" && sp.Server == "" {
			latest = append(latest, entry{name: sp.Name.Name})
			listed[sp.Name.Name] = true
		}
	}
	return latest
}

var versions = map[string]*versionSpec{
	MetricsV1: {name: MetricsV1, vllmVersion: "0.25.0", engineLabel: true, created: true, nestedError: true,
		healthDead: 503, main: true, layout: layoutMain, cacheConfig: cacheConfigMain},
	MetricsLatest: {name: MetricsLatest, vllmVersion: "0.33.0", engineLabel: true, created: true, nestedError: true,
		healthDead: 503, main: true, priorityLabel: true, layout: layoutLatest, cacheConfig: cacheConfigMain},
	MetricsRust: {name: MetricsRust, vllmVersion: "0.25.0", engineLabel: true, nestedError: true, healthDead: 503, main: true,
		openMetrics: true, layout: layoutRust},
	MetricsV1_0_10: {name: MetricsV1_0_10, vllmVersion: "0.10.2", engineLabel: true, created: true, nestedError: true,
		healthDead: 500, layout: layout010, cacheConfig: func(*Config) []label {
			return []label{{"calculate_kv_scales", "False"}, {"cpu_offload_gb", "0"}, {"kv_sharing_fast_prefill", "False"},
				{"mamba_cache_dtype", "auto"}, {"mamba_ssm_cache_dtype", "auto"}, {"num_cpu_blocks", "None"},
				{"prefix_caching_hash_algo", "builtin"}, {"swap_space", "4"}}
		}},
	MetricsV0: {name: MetricsV0, vllmVersion: "0.7.3", sumFirst: true, lazy: true, healthDead: 500, layout: layoutV0,
		cacheConfig: func(*Config) []label {
			return []label{{"calculate_kv_scales", "False"}, {"cpu_offload_gb", "0"}, {"num_cpu_blocks", "2048"},
				{"swap_space_bytes", "4294967296"}}
		}},
}

func init() {
	for _, v := range versions {
		v.splitsWaiting = slices.ContainsFunc(v.layout, func(e entry) bool { return e.name == "vllm:num_requests_waiting_by_reason" })
		for _, e := range v.layout {
			if _, ok := families.Lookup(e.name); !ok && e.own == nil {
				panic("vllmsim: layout " + v.name + " names " + e.name + ", which the family table does not describe")
			}
		}
	}
}

// cacheConfigMain is main's vllm:cache_config_info (#42206 adds the pool's
// size and concurrency).
func cacheConfigMain(c *Config) []label {
	tokens := c.NumGPUBlocks * c.BlockSize
	return []label{{"kv_cache_dtype_skip_layers", "[]"},
		{"kv_cache_max_concurrency", fmt.Sprintf("%.2f", float64(tokens)/float64(c.MaxModelLen))},
		{"kv_cache_memory_bytes", "None"}, {"kv_cache_size_tokens", fmt.Sprint(tokens)},
		{"kv_offloading_backend", "native"}, {"kv_offloading_size", "None"}, {"kv_sharing_fast_prefill", "False"},
		{"mamba_block_size", "None"}, {"mamba_cache_dtype", "auto"}, {"mamba_cache_mode", "none"},
		{"mamba_page_size_padded", "None"}, {"mamba_ssm_cache_dtype", "auto"}, {"num_cpu_blocks", "0"},
		{"prefix_cache_retention_interval", "0"}, {"prefix_caching_hash_algo", "sha256"}, {"prefix_match_unit", "None"},
		{"replayssm_buffer_len", "16"}, {"skip_page_size_padded", "None"}, {"use_kda_recoverssm", "False"},
		{"use_replayssm", "False"}, {"user_specified_block_size", "False"}, {"user_specified_mamba_block_size", "False"}}
}

// bucketsFor is every simulated histogram's bounds (by source) under a
// version and config: the table's defaults, V0's shorter lists, and
// --custom-histogram-buckets.
func bucketsFor(v *versionSpec, c *Config) map[string][]float64 {
	out := map[string][]float64{}
	// vLLM's bounds for every histogram the engines keep, then the
	// server's own for those it renders.
	var specs []families.Spec
	for _, server := range slices.Compact([]string{"", v.server}) {
		for _, sp := range families.Specs() {
			if sp.Server == server {
				specs = append(specs, sp)
			}
		}
	}
	for _, sp := range specs {
		if sp.Type != "histogram" || sp.Sim.Source == "" {
			continue
		}
		b := sp.Sim.Buckets
		switch {
		case sp.Sim.Tokens:
			b = build125(c.MaxModelLen)
		case v.name == MetricsV0:
			b = v0Buckets(sp.Sim.Custom, b, c.MaxNumSeqs)
		}
		if custom, ok := c.CustomHistogramBuckets[sp.Sim.Custom]; ok {
			b = slices.Clone(custom)
		}
		out[sp.Sim.Source] = b
	}
	return out
}

// v0Buckets are 0.7.3's bounds: shorter latency lists (extended in 0.8.4)
// and cudagraph capture sizes for the iteration tokens ([1,2,4] and
// 8,16,... up to max_num_seqs, at most 512).
func v0Buckets(custom string, b []float64, maxSeqs int) []float64 {
	switch custom {
	case "time_to_first_token":
		return b[:16]
	case "inter_token_latency":
		return b[:13]
	case "request_latency":
		return b[:15]
	case "iteration_tokens":
		out := []float64{1, 2, 4}
		for i := 8; i <= maxSeqs && i <= 512; i += 8 {
			out = append(out, float64(i))
		}
		return out
	}
	return b
}

// build125 is vLLM's build_1_2_5_buckets(max): 1,2,5,10,20,50,... <= max.
func build125(max int) []float64 {
	var out []float64
	for m := 1; ; m *= 10 {
		for _, k := range []int{1, 2, 5} {
			if k*m > max {
				return out
			}
			out = append(out, float64(k*m))
		}
	}
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// expoWriter renders one scrape.
type expoWriter struct {
	s       *Sim
	v       *versionSpec
	b       []byte  // the body so far
	sorted  []label // scratch of appendLabels
	les     map[float64]string
	created int // children rendered so far: spaces _created timestamps apart
	// servers are the API server processes of multiprocess mode (1 else).
	servers int
}

func (w *expoWriter) header(name, typ, help string) {
	if w.v.openMetrics && typ == "counter" {
		name = strings.TrimSuffix(name, "_total")
	}
	w.b = append(w.b, "# HELP "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, ' ')
	w.b = append(w.b, helpEscaper.Replace(help)...)
	w.b = append(w.b, "\n# TYPE "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, ' ')
	w.b = append(w.b, typ...)
	w.b = append(w.b, '\n')
}

// sample writes one sample line.
func (w *expoWriter) sample(name string, ls []label, v float64) {
	w.sampleWith(name, ls, label{}, v)
}

// sampleWith writes one sample line; extra, when its name is set, is one
// more label (a histogram bucket's le).
func (w *expoWriter) sampleWith(name string, ls []label, extra label, v float64) {
	w.b = append(w.b, name...)
	w.sorted = append(w.sorted[:0], ls...)
	if extra.name != "" {
		w.sorted = append(w.sorted, extra)
	}
	w.b = appendLabels(w.b, w.sorted)
	w.b = append(w.b, ' ')
	w.b = appendGoFloat(w.b, v)
	w.b = append(w.b, '\n')
}

// createdValue is the creation time of the next child: process start plus
// 21.2µs per child (prometheus_client children are created one after another).
func (w *expoWriter) createdValue() float64 {
	w.created++
	return unixSeconds(w.s.started) + float64(w.created)*21.2e-6
}

func (w *expoWriter) engineLabels(e *engine) []label {
	ls := []label{{"model_name", e.model}}
	if w.v.engineLabel {
		ls = append(ls, label{"engine", fmt.Sprint(e.index)})
	}
	return ls
}

// child is one series of a family: a value or a histogram, and its
// _created time where the simulator knows it (0: the next createdValue).
type child struct {
	ls      []label
	v       float64
	h       *histogram
	created float64
}

// family renders one layout entry.
func (w *expoWriter) family(en entry) {
	if en.own != nil {
		en.own(w)
		return
	}
	sp, _ := families.Lookup(en.name)
	src := sources[sp.Sim.Source]
	if feat := features[sp.Sim.When]; !en.always && feat != nil && !feat(w.s) {
		return
	}
	if en.help != "" {
		sp.Help = en.help
	}
	if en.values != nil {
		sp.Sim.Values = en.values
	}
	var children []child
	if src.custom != nil {
		children = src.custom(w)
	} else {
		children = w.engineChildren(sp, src)
	}
	if sp.Sim.PerProcess && w.servers > 1 {
		children = perProcess(children, w.servers)
	}
	w.render(sp.Name.Name, sp.Type, sp.Help, children)
}

// engineChildren are a family's children on every engine: one per engine,
// or per engine and label value.
func (w *expoWriter) engineChildren(sp families.Spec, src source) []child {
	values := sp.Sim.Values
	if src.values != nil {
		values = src.values(w.s)
	}
	if w.v.labels != nil {
		return w.serverChildren(sp, src, values)
	}
	var children []child
	for _, e := range w.s.allEngines() {
		base := w.engineLabels(e)
		if w.v.priorityLabel && e.priorityPolicy() && (slices.Contains(finishedHists, sp.Sim.Source) || src.prio != nil) {
			children = append(children, w.priorityChildren(sp, src, e, base, values)...)
			continue
		}
		switch {
		case src.byLabel != nil:
			for _, x := range values {
				v := src.byLabel(e, x)
				if w.v.lazy && v == 0 {
					continue
				}
				children = append(children, child{ls: append(slices.Clone(base), label{sp.Sim.Label, x}), v: v})
			}
		case src.value != nil:
			children = append(children, child{ls: base, v: src.value(e)})
		default:
			h := e.stats.hist[sp.Sim.Source]
			if w.v.lazy && h.count == 0 {
				continue
			}
			children = append(children, child{ls: base, h: h})
		}
	}
	return children
}

// priorityChildren are a finished-request family's children under the
// priority policy: one per priority label seen on this engine, in
// priorityLabels order (vLLM creates a priority child when a request with
// that priority finishes; no child exists before).
func (w *expoWriter) priorityChildren(sp families.Spec, src source, e *engine, base []label, values []string) []child {
	var out []child
	for _, pl := range priorityLabels {
		ps := e.stats.prio[pl]
		if ps == nil {
			continue
		}
		ls := append(slices.Clone(base), label{"priority", pl})
		if src.prio == nil {
			out = append(out, child{ls: ls, h: ps.hist[sp.Sim.Source]})
			continue
		}
		for _, x := range values {
			out = append(out, child{ls: append(slices.Clone(ls), label{sp.Sim.Label, x}), v: src.prio(ps, x)})
		}
	}
	return out
}

// perProcess is children as a gauge of multiprocess mode "all" shows them:
// each API server's own series, labelled with its pid.
func perProcess(children []child, servers int) []child {
	out := make([]child, 0, len(children)*servers)
	for _, c := range children {
		for i := range servers {
			d := c
			d.ls = append(slices.Clone(c.ls), label{"pid", strconv.Itoa(firstPID + i)})
			out = append(out, d)
		}
	}
	return out
}

// firstPID is the pid of the first simulated API server.
const firstPID = 4100

// render writes a family's children (none: nothing, as prometheus_client
// writes no family without children) and, V1 single-process, the _created
// gauge family of a counter or histogram after it.
func (w *expoWriter) render(name, typ, help string, children []child) {
	if len(children) == 0 {
		return
	}
	w.header(name, typ, help)
	for _, c := range children {
		if c.h != nil {
			w.histogram(name, c.ls, c.h)
		} else {
			w.sample(name, c.ls, c.v)
		}
	}
	if !w.v.created || typ == "gauge" {
		return
	}
	cn := name + "_created"
	if typ == "counter" { // prometheus_client names a counter's without its _total
		cn = strings.TrimSuffix(name, "_total") + "_created"
	}
	w.header(cn, "gauge", help)
	for _, c := range children {
		at := c.created
		if at == 0 {
			at = w.createdValue()
		}
		w.sample(cn, c.ls, at)
	}
}

func (w *expoWriter) histogram(name string, ls []label, h *histogram) {
	if w.v.sumFirst {
		w.sample(name+"_sum", ls, h.sum)
	}
	bucket := name + "_bucket"
	var c float64
	for i, n := range h.counts {
		c += n
		le := math.Inf(1)
		if i < len(h.bounds) {
			le = h.bounds[i]
		}
		w.sampleWith(bucket, ls, label{"le", w.leString(le)}, c)
	}
	w.sample(name+"_count", ls, h.count)
	if !w.v.sumFirst {
		w.sample(name+"_sum", ls, h.sum)
	}
}

// leString is goFloat(le), made once per bound and render.
func (w *expoWriter) leString(le float64) string {
	if s, ok := w.les[le]; ok {
		return s
	}
	s := goFloat(le)
	w.les[le] = s
	return s
}

// renderMetricsLocked renders the whole /metrics body.
func (s *Sim) renderMetricsLocked() []byte {
	// One slice the size of the last body: large bodies never regrow.
	w := &expoWriter{s: s, v: s.version, b: make([]byte, 0, s.lastMetricsLen+s.lastMetricsLen/8+4096), servers: 1,
		les: map[float64]string{}}
	mp := s.cfg.APIServerCount > 1 && s.version.name != MetricsV0
	if mp {
		// --api-server-count > 1: prometheus_client multiprocess mode.
		v := *s.version
		v.created, v.sumFirst = false, true
		w.v, w.servers = &v, s.cfg.APIServerCount
	}
	for _, en := range s.version.layout {
		if mp && en.process {
			continue
		}
		w.family(en)
	}
	if s.version.openMetrics {
		w.b = append(w.b, "# EOF\n"...)
	}
	s.lastMetricsLen = len(w.b)
	return w.b
}

// Metrics renders /metrics as the configured vLLM version would, at Now.
func (s *Sim) Metrics() []byte {
	s.lockNow()
	defer s.mu.Unlock()
	return s.renderMetricsLocked()
}

// WriteMetrics writes Metrics() to out.
func (s *Sim) WriteMetrics(out io.Writer) error {
	_, err := out.Write(s.Metrics())
	return err
}

// processFamilies are prometheus_client's default collectors (V1
// single-process mode). Values are plausible and grow with uptime.
func processFamilies() []entry {
	up := func(w *expoWriter) float64 { return math.Max(0, w.s.now.Sub(w.s.started).Seconds()) }
	perGen := func(name, help string, base, perSec [3]float64) entry {
		return entry{name: name, process: true, own: func(w *expoWriter) {
			w.header(name, "counter", help)
			for i, g := range []string{"0", "1", "2"} {
				w.sample(name, []label{{"generation", g}}, math.Floor(base[i]+perSec[i]*up(w)))
			}
		}}
	}
	one := func(name, typ, help string, v func(w *expoWriter) float64) entry {
		return entry{name: name, process: true, own: func(w *expoWriter) {
			w.header(name, typ, help)
			w.sample(name, nil, v(w))
		}}
	}
	return []entry{
		perGen("python_gc_objects_collected_total", "Objects collected during gc", [3]float64{12286, 1244, 1326}, [3]float64{2.1, 0.3, 0.05}),
		perGen("python_gc_objects_uncollectable_total", "Uncollectable objects found during GC", [3]float64{}, [3]float64{}),
		perGen("python_gc_collections_total", "Number of times this generation was collected", [3]float64{1203, 109, 7}, [3]float64{0.25, 0.02, 0.001}),
		{name: "python_info", process: true, own: func(w *expoWriter) {
			w.header("python_info", "gauge", "Python platform information")
			w.sample("python_info", []label{{"implementation", "CPython"}, {"major", "3"}, {"minor", "12"}, {"patchlevel", "11"}, {"version", "3.12.11"}}, 1)
		}},
		one("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", func(*expoWriter) float64 { return 1.576312832e+10 }),
		one("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", func(*expoWriter) float64 { return 2.14308864e+09 }),
		one("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", func(w *expoWriter) float64 {
			return math.Round(unixSeconds(w.s.started)*100) / 100
		}),
		one("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", func(w *expoWriter) float64 {
			return math.Round((31.5+0.35*up(w))*100) / 100
		}),
		one("process_open_fds", "gauge", "Number of open file descriptors.", func(*expoWriter) float64 { return 118 }),
		one("process_max_fds", "gauge", "Maximum number of open file descriptors.", func(*expoWriter) float64 { return 1048576 }),
	}
}
