package main

import (
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log/level"
)

// pprof endpoints are off by default: profiles reveal internals (command
// line, symbol names) and a CPU or trace profile costs the sidecar CPU. They
// sit behind --web.config.file's TLS and basic auth like every other route.
// The flag is also read before anything starts: heap profiling is switched
// off unless these endpoints could serve it (footprint.go).
func addPprofFlags(app *kingpin.Application) *bool {
	return app.Flag("web.enable-pprof", "Serve Go's profiling endpoints under /debug/pprof/ (off by default).").
		Default("false").Bool()
}

// startPprof adds the profiling routes when enabled. The command line is
// served scrubbed: pprof's own handler would show a password in --vllm.url.
func startPprof(f *flags, x *exporter) {
	if !*f.pprof {
		return
	}
	// Registered explicitly on our mux: the package's init only fills
	// http.DefaultServeMux, which the exporter never serves.
	x.handle("GET /debug/pprof/", http.HandlerFunc(pprof.Index))
	x.handle("GET /debug/pprof/cmdline", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		args := make([]string, len(os.Args))
		for i, a := range os.Args {
			args[i] = f.scrubber().Scrub(a)
		}
		fmt.Fprint(w, strings.Join(args, "\x00"))
	}))
	x.handle("GET /debug/pprof/profile", http.HandlerFunc(pprof.Profile))
	x.handle("GET /debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
	x.handle("GET /debug/pprof/trace", http.HandlerFunc(pprof.Trace))
	level.Warn(x.logger).Log("msg", "pprof endpoints enabled", "path", "/debug/pprof/")
}
