package main

import "runtime"

// tuneRuntime applies the exporter's one runtime default before anything
// starts: no heap profiling unless --web.enable-pprof serves it, since only
// /debug/pprof/heap would read the runtime's sample table. Garbage collection is left to Go's
// defaults and the environment: the image and the chart set GOMEMLIMIT, and
// an operator's GOGC applies as Go documents it.
func tuneRuntime(heapProfiling bool) {
	if !heapProfiling {
		runtime.MemProfileRate = 0
	}
}
