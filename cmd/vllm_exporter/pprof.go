package main

import (
	"context"
	"net/http"
	"net/http/pprof"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log/level"
)

// pprof endpoints are off by default: profiles reveal internals (command
// line, symbol names) and a CPU or trace profile costs the sidecar CPU. They
// sit behind --web.config.file's TLS and basic auth like every other route.
//
// pprofEnabled is read by serveMain before anything starts: heap profiling
// is switched off unless these endpoints could serve it (footprint.go).
var pprofEnabled bool

func init() {
	register(extension{
		name:  "pprof",
		order: 90,
		flags: func(app *kingpin.Application) {
			app.Flag("web.enable-pprof", "Serve Go's profiling endpoints under /debug/pprof/ (off by default).").
				Default("false").BoolVar(&pprofEnabled)
		},
		start: func(_ context.Context, x *exporter) error {
			if !pprofEnabled {
				return nil
			}
			if x.handlers == nil {
				x.handlers = map[string]http.Handler{}
			}
			// Registered explicitly on our mux: the package's init only
			// fills http.DefaultServeMux, which the exporter never serves.
			x.handlers["GET /debug/pprof/"] = http.HandlerFunc(pprof.Index)
			x.handlers["GET /debug/pprof/cmdline"] = http.HandlerFunc(pprof.Cmdline)
			x.handlers["GET /debug/pprof/profile"] = http.HandlerFunc(pprof.Profile)
			x.handlers["GET /debug/pprof/symbol"] = http.HandlerFunc(pprof.Symbol)
			x.handlers["GET /debug/pprof/trace"] = http.HandlerFunc(pprof.Trace)
			level.Warn(x.logger).Log("msg", "pprof endpoints enabled", "path", "/debug/pprof/")
			return nil
		},
	})
}
