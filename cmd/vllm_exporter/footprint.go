package main

import (
	"os"
	"runtime"
	"runtime/debug"
)

// defaultGCPercent is the exporter's GOGC when the environment sets none.
// The live heap of a healthy sidecar is a few MiB, so Go's default of 100
// lets the heap double before each collection; 50 keeps the idle heap about
// a quarter smaller, and at one scrape every few seconds the extra
// collections cost little CPU (scripts/footprint.sh prints both side by
// side with node_exporter). An operator's $GOGC wins; GOMEMLIMIT still caps
// the heap either way.
const defaultGCPercent = 50

// tuneRuntime applies the exporter's memory defaults before anything
// starts: the lower GOGC unless $GOGC is set, and no heap profiling unless
// --web.enable-pprof serves it. The runtime otherwise samples allocations
// into a 1.4 MiB bucket table that only /debug/pprof/heap would ever read.
func tuneRuntime(heapProfiling bool) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	if !heapProfiling {
		runtime.MemProfileRate = 0
	}
}
