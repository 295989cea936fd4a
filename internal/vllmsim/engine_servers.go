package vllmsim

import (
	"net/http"
	"slices"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
)

// The engines (Config.Engine).
const (
	EngineVLLM   = families.ServerVLLM
	EngineSGLang = families.ServerSGLang
	EngineTRTLLM = families.ServerTRTLLM
)

// Engines Config.Engine accepts: the inference servers the simulator
// speaks, each with its own /metrics (the family table's column of names
// of that server) and API routes.
func Engines() []string {
	return []string{EngineVLLM, EngineSGLang, EngineTRTLLM}
}

// serverLayout is a server's families in table order: every name of its
// column the simulator fills (the table describes no registration order).
func serverLayout(server string) []entry {
	var out []entry
	for _, sp := range families.Specs() {
		if sp.Server == server && sp.Sim.Source != "" {
			out = append(out, entry{name: sp.Name.Name})
		}
	}
	return out
}

// serverRoutes registers the routes of the server spoken that differ
// between servers: where /metrics is, the version and the generation
// health check.
func (s *Sim) serverRoutes(mux *http.ServeMux) {
	version := func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": s.version.vllmVersion})
	}
	switch s.version.server {
	case families.ServerSGLang:
		mux.HandleFunc("GET /metrics", s.handleMetrics)
		mux.HandleFunc("GET /get_server_info", func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"version": s.version.vllmVersion, "model_path": s.cfg.Models[0],
				"served_model_name": s.cfg.Models[0], "dp_size": s.cfg.DataParallelSize, "tp_size": s.cfg.TensorParallelSize,
				"enable_metrics": true, "enable_metrics_for_all_schedulers": s.cfg.AllSchedulerMetrics})
		})
		mux.HandleFunc("GET /health_generate", s.handleHealthGenerate)
	case families.ServerTRTLLM:
		mux.HandleFunc("GET /prometheus/metrics", s.handleMetrics)
		mux.HandleFunc("GET /metrics", s.handleIterationStats)
		mux.HandleFunc("GET /version", version)
		mux.HandleFunc("GET /health_generate", s.handleHealthGenerate)
	default:
		mux.HandleFunc("GET /metrics", s.handleMetrics)
		mux.HandleFunc("GET /version", version)
	}
}

// ownedBy is what /v1/models says of the served models.
func (s *Sim) ownedBy() string {
	if srv, ok := families.ServerNamed(s.version.server); ok {
		return srv.OwnedBy
	}
	return families.ServerVLLM
}

// handleHealthGenerate is SGLang's and trtllm-serve's /health_generate: a
// one-token generation, so it fails while the engine is dead or hung
// (where /health may still answer 200).
func (s *Sim) handleHealthGenerate(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	stalled := s.scen.Stalled
	s.mu.Unlock()
	if _, dead := s.fault(Fault5xx); dead || stalled {
		http.Error(w, "Generation health check failed", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("Generation health check OK"))
}

// serverChildren are a family's children on a server other than vLLM: one
// per data-parallel engine (SGLang's schedulers, repeated on every rank
// with --enable-metrics-for-all-schedulers), or one per model summed over
// its engines (Sim.PerModel: SGLang's tokenizer process; trtllm-serve).
func (w *expoWriter) serverChildren(sp families.Spec, src source, values []string) []child {
	perModel := sp.Sim.PerModel || w.v.server == families.ServerTRTLLM
	var out []child
	for _, m := range w.s.cfg.Models {
		groups := [][]*engine{w.s.models[m]}
		if !perModel {
			groups = nil
			for _, e := range w.s.models[m] {
				groups = append(groups, []*engine{e})
			}
		}
		for _, g := range groups {
			sum := func(f func(e *engine) float64) float64 {
				t := 0.0
				for _, e := range g {
					t += f(e)
				}
				return t
			}
			for _, base := range w.v.labels(w, g[0], perModel, sp.Type) {
				switch {
				case src.byLabel != nil:
					for _, x := range values {
						v := sum(func(e *engine) float64 { return src.byLabel(e, x) })
						out = append(out, child{ls: append(slices.Clone(base), label{sp.Sim.Label, x}), v: v})
					}
					continue
				case sp.Sim.Label != "":
					base = append(slices.Clone(base), label{sp.Sim.Label, values[0]})
				}
				if src.value != nil {
					out = append(out, child{ls: base, v: sum(src.value)})
				} else {
					out = append(out, child{ls: base, h: mergedHistogram(g, sp.Sim.Source)})
				}
			}
		}
	}
	return out
}

// mergedHistogram is the engines' histogram of source summed.
func mergedHistogram(g []*engine, source string) *histogram {
	if len(g) == 1 {
		return g[0].stats.hist[source]
	}
	first := g[0].stats.hist[source]
	h := newHistogram(first.bounds)
	for _, e := range g {
		x := e.stats.hist[source]
		for i, c := range x.counts {
			h.counts[i] += c
		}
		h.sum += x.sum
		h.count += x.count
	}
	return h
}

// Per finished request (the tokenizer side of SGLang, trtllm-serve): the
// finished-request histograms' sums are the token counters.
func finishedSum(key string) source {
	return source{value: func(e *engine) float64 { return e.stats.hist[key].sum }}
}

func init() {
	for name, src := range map[string]source{
		"finished_prompt_tokens":     finishedSum(hReqPrompt),
		"finished_generation_tokens": finishedSum(hReqGen),
		"finished_cached_tokens": {value: func(e *engine) float64 {
			return e.stats.hist[hReqPrompt].sum - e.stats.hist[hPrefillKV].sum
		}},
	} {
		sources[name] = src
	}
}
