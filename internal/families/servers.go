package families

import (
	"fmt"
	"slices"
	"strings"
)

// Server is an inference server the table reads: the rows' Names whose
// Server is its Name are its column. Its bodies are detected as schema
// Name (vLLM's as v0, v1-legacy, v1).
type Server struct {
	Name string // --vllm.server's value
	// MetricsPath serves its Prometheus text; VersionPath a JSON object
	// with its "version"; OwnedBy is what /v1/models says of its models.
	MetricsPath, VersionPath, OwnedBy string
	// Help says where its families come from, for the docs.
	Help string
}

// The servers (Server.Name).
const (
	ServerVLLM   = "vllm"
	ServerSGLang = "sglang"
	ServerTRTLLM = "trtllm"
	// ServerAuto is --vllm.server's default: learnt from the server.
	ServerAuto = "auto"
)

// Schemas of the other servers' bodies.
const (
	SchemaSGLang = ServerSGLang
	SchemaTRTLLM = ServerTRTLLM
)

// PlaceholderModel is the model_name trtllm-serve labels its series with
// when it is not told the served model; the model /v1/models lists
// replaces it.
const PlaceholderModel = "undefined"

// Servers are the servers the table has columns for, vLLM first.
var Servers = []Server{
	{Name: ServerVLLM, MetricsPath: "/metrics", VersionPath: "/version", OwnedBy: "vllm",
		Help: "vLLM's `vllm:` families"},
	{Name: ServerSGLang, MetricsPath: "/metrics", VersionPath: "/get_server_info", OwnedBy: "sglang",
		Help: "SGLang's `sglang:` families (`/metrics`, served with `--enable-metrics`)"},
	{Name: ServerTRTLLM, MetricsPath: "/prometheus/metrics", VersionPath: "/version", OwnedBy: "tensorrt_llm",
		Help: "trtllm-serve's `trtllm_` families (`/prometheus/metrics` with `return_perf_metrics: true`; its `/metrics` is JSON iteration stats)"},
}

// ServerNamed returns the server called name.
func ServerNamed(name string) (Server, bool) {
	for _, s := range Servers {
		if s.Name == name {
			return s, true
		}
	}
	return Server{}, false
}

// ServerOf is the server whose bodies have schema s.
func ServerOf(schema string) string {
	if schema == SchemaSGLang || schema == SchemaTRTLLM {
		return schema
	}
	return ServerVLLM
}

// Labels the servers' families carry that the readings need.
func priorityTotal(l Labels) bool { return l.Get("priority") == "" }

// localCache: SGLang's GPU (device) cache hits, or all hits where it does
// not split them by tier.
func localCache(l Labels) bool {
	s := l.Get("cache_source")
	return s == "" || s == "device" || s == "total"
}

// labelIs keeps the samples whose label has one of values.
func labelIs(label string, values ...string) func(Labels) bool {
	return func(l Labels) bool {
		v := l.Get(label)
		for _, x := range values {
			if v == x {
				return true
			}
		}
		return false
	}
}

// ServerTable renders the table for one server's section of docs/: each
// exported series, the server's families it is read from and how, or why
// it stays empty there.
func ServerTable(server string) string {
	var b strings.Builder
	b.WriteString("| exported series | " + server + " source (preferred first) | filled |\n|---|---|---|\n")
	for i := range Rows {
		f := &Rows[i]
		var src, notes []string
		for _, n := range f.Names {
			if n.ServerName() != server {
				continue
			}
			name := "`" + n.Name + "`"
			if n.Plus {
				name = "+ " + name
			}
			src = append(src, name)
			if n.Note != "" {
				notes = append(notes, n.Note)
			}
		}
		filled := "yes"
		if len(notes) > 0 {
			filled += ": " + strings.Join(notes, "; ")
		}
		if why := f.NotFrom[server]; len(src) == 0 {
			src, filled = []string{"–"}, "no: "+why
			switch {
			case strings.HasPrefix(why, "yes"): // derived from other rows
				filled = why
			case why == "":
				filled = "no: " + server + " has no such family"
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.Exported, strings.Join(src, ", "), filled)
	}
	return b.String()
}

// The other servers' label values and default bucket bounds the rows name
// (SGLang's metrics_collector.py, TensorRT-LLM's metrics/collector.py).
var (
	sglangTTFTBuckets  = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	sglangE2EBuckets   = append(slices.Clone(sglangTTFTBuckets), 600, 1200, 1800, 2400)
	sglangQueueBuckets = []float64{0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
		200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000}
	sglangITLBuckets      = []float64{0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1, 2, 4, 6, 8}
	trtllmPrefillBuckets  = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 640, 2560}
	trtllmFinishedReasons = []string{"stop", "length", "cancelled"}
)

// finishedReason keys a finished-request sample: its finish reason where
// the server labels one (trtllm's cancelled is vLLM's abort), else what
// the family counts: SGLang's finished requests carry no reason.
func finishedReason(fam string, l Labels) (string, bool) {
	switch fam {
	case "sglang:num_requests_total":
		return "unknown", true
	case "sglang:num_aborted_requests_total":
		return "abort", true
	case "trtllm_request_error_total":
		return "error", true
	}
	r, ok := l.Lookup("finished_reason")
	if !ok {
		r = l.Get("finish_reason") // trtllm's first collector
	}
	if r == "cancelled" {
		r = "abort"
	}
	return r, true
}

// waitingReason keys a waiting-request sample: SGLang's waiting queue
// waits for capacity, its P/D queues for a KV transfer (vLLM's deferred).
func waitingReason(fam string, l Labels) (string, bool) {
	switch {
	case fam == "sglang:num_queue_reqs":
		return "capacity", true
	case strings.HasPrefix(fam, "sglang:"):
		return "deferred", true
	}
	return l.Get("reason"), true
}
