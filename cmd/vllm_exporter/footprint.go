package main

import "runtime"

// tuneRuntime applies the exporter's one runtime default before anything
// starts: no heap profiling unless --web.enable-pprof serves it. The runtime
// otherwise samples allocations into a 1.4 MiB bucket table that only
// /debug/pprof/heap would ever read. Garbage collection is left to Go's
// defaults and the environment: the image and the chart set GOMEMLIMIT, and
// an operator's GOGC applies as Go documents it.
func tuneRuntime(heapProfiling bool) {
	if !heapProfiling {
		runtime.MemProfileRate = 0
	}
}
