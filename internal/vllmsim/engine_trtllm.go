package vllmsim

import (
	"net/http"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
)

// trtllm-serve with return_perf_metrics (and enable_iter_perf_stats): its
// families (the family table's TensorRT-LLM column) at /prometheus/metrics
// in multiprocess exposition, labelled model_name="undefined" and
// engine_type="undefined" as the releases read do, gauges with a pid label
// (prometheus_client's default multiprocess mode); the iteration gauges as
// of the last request completion; /metrics answers JSON iteration stats.
var trtllmVersion = &versionSpec{name: families.ServerTRTLLM, vllmVersion: "1.3.0", sumFirst: true, healthDead: 500,
	server: families.ServerTRTLLM, layout: serverLayout(families.ServerTRTLLM), labels: trtllmLabels}

// hTTFTAtFinish is TTFT observed when the request finishes, as
// trtllm-serve logs every per-request metric.
const hTTFTAtFinish = "ttft_at_finish"

// trtllmPID is the server process's pid label.
const trtllmPID = "4211"

func trtllmLabels(_ *expoWriter, _ *engine, _ bool, typ string) [][]label {
	ls := []label{{"engine_type", "undefined"}, {"model_name", families.PlaceholderModel}}
	if typ == "gauge" {
		ls = append(ls, label{"pid", trtllmPID})
	}
	return [][]label{ls}
}

// handleIterationStats is trtllm-serve's /metrics: the iteration stats
// queued since the last call, as JSON (one per engine here).
func (s *Sim) handleIterationStats(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	var stats []map[string]any
	for _, e := range s.allEngines() {
		stats = append(stats, map[string]any{"numActiveRequests": len(e.running), "numQueuedRequests": len(e.waiting),
			"kvCacheStats": map[string]any{"maxNumBlocks": e.pool.usable, "usedNumBlocks": e.pool.usable - e.pool.numFree,
				"tokensPerBlock": s.cfg.BlockSize}})
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, stats)
}

func init() {
	versions[trtllmVersion.name] = trtllmVersion
	atFinish := func(i int) source { return source{value: func(e *engine) float64 { return e.atFinish[i] }} }
	sources["running_at_finish"], sources["waiting_at_finish"], sources["kv_at_finish"] = atFinish(0), atFinish(1), atFinish(2)
	sources["trtllm_success"] = source{byLabel: func(e *engine, reason string) float64 {
		if reason == "cancelled" {
			reason = FinishAbort
		}
		return e.stats.success[reason]
	}}
}
