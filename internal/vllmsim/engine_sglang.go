package vllmsim

import (
	"strconv"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
)

// SGLang with --enable-metrics: its families (the family table's SGLang
// column) in prometheus_client's multiprocess exposition (labels sorted,
// _sum before the buckets, every value a float, no _created, no process
// families); scheduler families per data-parallel rank, tokenizer families
// per model; /metrics, /health_generate, /get_server_info.
var sglangVersion = &versionSpec{name: families.ServerSGLang, vllmVersion: "0.5.9", sumFirst: true, healthDead: 503,
	server: families.ServerSGLang, layout: serverLayout(families.ServerSGLang), labels: sglangLabels}

// sglangLabels are a child's labels: tokenizer families carry model_name
// only; a scheduler's carry its ranks, dp_rank with data parallelism, and
// with --enable-metrics-for-all-schedulers one set per tensor-parallel
// rank of the data-parallel rank (each repeating its state).
func sglangLabels(w *expoWriter, e *engine, perModel bool, _ string) [][]label {
	if perModel {
		return [][]label{{{"model_name", e.model}}}
	}
	c := &w.s.cfg
	ranks := 1
	if c.AllSchedulerMetrics {
		ranks = c.TensorParallelSize
	}
	out := make([][]label, 0, ranks)
	for r := range ranks {
		ls := []label{{"engine_type", "unified"}, {"model_name", e.model}, {"pp_rank", "0"},
			{"tp_rank", strconv.Itoa(e.index*c.TensorParallelSize + r)}}
		if c.DataParallelSize > 1 {
			ls = append(ls, label{"dp_rank", strconv.Itoa(e.index)})
		}
		out = append(out, ls)
	}
	return out
}

func init() {
	versions[sglangVersion.name] = sglangVersion
	sources["realtime_tokens"] = source{byLabel: func(e *engine, mode string) float64 {
		switch mode {
		case "prefill_compute":
			return e.stats.promptCompute
		case "prefill_cache":
			return e.stats.promptCacheHit
		}
		return e.stats.generationTokens
	}}
	sources["finished_requests"] = source{value: func(e *engine) float64 { return e.stats.hist[hE2E].count }}
	sources["aborted_requests"] = source{value: func(e *engine) float64 { return e.stats.success[FinishAbort] }}
	sources["kv_pool_tokens"] = source{value: func(e *engine) float64 {
		return float64(e.sim.cfg.usableBlocks() * e.sim.cfg.BlockSize)
	}}
}
