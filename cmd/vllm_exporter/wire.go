package main

// The serving exporter's components and the one place they are built and
// wired (wire). Every component is a typed field of exporter; a component
// reads only fields wired before it, and wire says which in its arguments.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/vllm-exporter/vllm_exporter/collector"
	"github.com/vllm-exporter/vllm_exporter/collector/gpu"
	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/modelset"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmhealth"
	"github.com/vllm-exporter/vllm_exporter/probes"
	"github.com/vllm-exporter/vllm_exporter/slo"
	"github.com/vllm-exporter/vllm_exporter/slo/bottleneck"
)

// exporter is the running serving process.
type exporter struct {
	logger   log.Logger
	registry *prometheus.Registry
	config   *config.Holder
	health   *collector.Health // vllm_exporter_collector_{up,duration_seconds}
	// upstream is the one connection to vLLM (the vllm: section of
	// --config.file and the --vllm.* shortcuts) the scraper and the probes
	// share.
	upstream *upstream.Upstream
	// scrub is the process's one scrubber (flags.scrubber), following upstream.
	scrub   *upstream.Scrubber
	vllmURL string // base URL, also what probes talk to
	// vllmURLs and supervisorURL: a vLLM server of several API servers
	// (nil and "" for one).
	vllmURLs      []string
	supervisorURL string
	// models is the bound on model names shared by every per-model
	// structure (scraper, windows, SLO watchdog and its state file).
	models modelset.Limits

	// The components, in the order wire builds them. Nil: disabled (or, for
	// gpu, absent on this host).
	vllm       *vllm.Scraper
	gpu        *gpu.Sampler
	probes     *probes.Scheduler
	slo        *slo.Watchdog
	classifier *bottleneck.Classifier
	verdict    *vllmhealth.Tracker
	scrapes    *scrapeLog // the last scrapes of vLLM, for the status page

	loops []func(ctx context.Context)

	// handlers are HTTP routes (ServeMux pattern -> handler) beside the
	// core's, e.g. /debug/pprof/ behind --web.enable-pprof.
	handlers map[string]http.Handler
}

// goRun schedules a background loop; loops start once every component has
// been wired, and are stopped through ctx on shutdown.
func (x *exporter) goRun(loop func(ctx context.Context)) { x.loops = append(x.loops, loop) }

// handle adds an HTTP route beside the core's.
func (x *exporter) handle(pattern string, h http.Handler) {
	if x.handlers == nil {
		x.handlers = map[string]http.Handler{}
	}
	x.handlers[pattern] = h
}

// serveMain runs the serving exporter until ctx ends.
func serveMain(ctx context.Context, f *flags, logger log.Logger, slogger *slog.Logger) error {
	return serveWired(ctx, f, logger, slogger, nil)
}

// serveWired is serveMain with a look at the wired exporter before it
// serves: wired (tests) may register more collectors; its error stops it.
func serveWired(ctx context.Context, f *flags, logger log.Logger, slogger *slog.Logger, wired func(*exporter) error) error {
	x, stop, err := newExporter(ctx, f, logger)
	if err != nil {
		return err
	}
	defer stop()
	if err := x.wire(f); err != nil {
		return err
	}
	if wired != nil {
		if err := wired(x); err != nil {
			return err
		}
	}
	return x.serve(ctx, f, slogger)
}

// newExporter checks the core flags and builds what every component needs:
// the configuration, the connection to vLLM (a simulated one with --demo),
// health reporting and the registry with the exporter's own series. stop
// ends the demo simulator.
func newExporter(ctx context.Context, f *flags, logger log.Logger) (*exporter, func(), error) {
	level.Info(logger).Log("msg", "starting "+program, "version", version.Info(), "build_context", version.BuildContext())
	tuneRuntime(*f.pprof)
	if err := checkCoreFlags(f); err != nil {
		return nil, nil, err
	}
	holder, err := config.NewHolder(f.configFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--config.file: %w", err)
	}
	urls, supervisor, err := f.servers(holder)
	if err != nil {
		return nil, nil, err
	}
	up, err := connectVLLM(holder.Get(), f)
	if err != nil {
		return nil, nil, err
	}
	f.scrubber().Follow(up)
	x := &exporter{
		logger:   logger,
		scrub:    f.scrubber(),
		registry: prometheus.NewRegistry(),
		config:   holder,
		health:   collector.NewHealth(),
		upstream: up,
		vllmURL:  f.vllmURL,
		models: modelset.Limits{Max: f.maxModels, IdleTimeout: f.modelIdle, Grace: f.modelGrace, Stats: modelset.NewStats(),
			GraceOverride: func() time.Duration { return holder.Get().Models.Grace }},
	}
	x.vllmURLs, x.supervisorURL = urls, supervisor
	followReloads(holder, up, f, logger)
	stop := func() {}
	if f.demo {
		url, stopDemo, err := startDemo(ctx, log.With(logger, "component", "demo"))
		if err != nil {
			return nil, nil, fmt.Errorf("--demo: %w", err)
		}
		x.vllmURL, x.vllmURLs, stop = url, nil, stopDemo
		level.Info(logger).Log("msg", "demo mode: scraping the simulated vLLM", "url", url)
	}
	reloadGauges := configReloadCollectors(holder)
	x.registry.MustRegister(versioncollector.NewCollector(program), x.health, x.models.Stats, reloadGauges[0], reloadGauges[1], startTimeGauge(time.Now()))
	if !f.disableExpMets {
		x.registry.MustRegister(goCollector(f.goMemStats), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return x, stop, nil
}

// checkCoreFlags rejects flag values the exporter cannot run with
// (validate.go; run() has already called it, tests that wire directly
// have not).
func checkCoreFlags(f *flags) error { return validateFlags(f) }

// wire builds the components in dependency order; each registers its own
// collectors (and routes) and schedules its loops:
//
//	vllm scraper                  <- upstream, config (baseline window)
//	gpu sampler                   (independent)
//	probe scheduler               <- upstream, vllm (stalls, server TTFT)
//	slo watchdog                  <- vllm, gpu, probes
//	bottleneck classifier         <- vllm, gpu, probes; hook of the watchdog
//	health verdict                <- vllm, probes, classifier; hook of the watchdog
//	pprof routes                  (independent)
func (x *exporter) wire(f *flags) error {
	var err error
	if x.vllm, err = startScraper(f, x); err != nil {
		return fmt.Errorf("vllm: %w", err)
	}
	if x.gpu, err = startGPU(f.gpu, x); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	if x.probes, err = startProbes(f.probe, x, x.upstream, x.vllm); err != nil {
		return fmt.Errorf("probes: %w", err)
	}
	if x.slo, err = startSLO(f.slo, x, sloSources(x.vllm, x.gpu, x.probes)); err != nil {
		return fmt.Errorf("slo: %w", err)
	}
	if x.classifier, err = startBottleneck(f.bottleneck, *f.slo.interval, x, classifierSources(x.vllm, x.gpu, x.probes), x.slo); err != nil {
		return fmt.Errorf("bottleneck: %w", err)
	}
	if x.verdict, err = startVLLMHealth(x, verdictSources(x.vllm, x.probes, x.classifier), x.slo); err != nil {
		return fmt.Errorf("vllmhealth: %w", err)
	}
	startPprof(f, x)
	return nil
}

// present is v as the source interface I, or I's nil when v is a nil
// pointer: a component that does not run must reach its consumers as a nil
// interface, not as a nil pointer inside one.
func present[I any, T comparable](v T) I {
	var none T
	if v == none {
		var absent I
		return absent
	}
	return any(v).(I)
}

func sloSources(v *vllm.Scraper, g *gpu.Sampler, p *probes.Scheduler) slo.Sources {
	return slo.Sources{VLLM: v, GPU: present[slo.GPUSource](g), Probes: present[slo.ProbeSource](p)}
}

func classifierSources(v *vllm.Scraper, g *gpu.Sampler, p *probes.Scheduler) bottleneck.Sources {
	return bottleneck.Sources{VLLM: v, GPU: present[bottleneck.GPUSource](g), Probes: present[bottleneck.ProbeSource](p)}
}

func verdictSources(v *vllm.Scraper, p *probes.Scheduler, c *bottleneck.Classifier) vllmhealth.Sources {
	src := vllmhealth.Sources{VLLM: v, Probes: present[interface{ Latest() *snapshot.Probes }](p)}
	if c != nil {
		src.Classes = func() map[string]string {
			out := map[string]string{}
			for _, st := range c.States() {
				out[st.Model] = string(st.Class)
			}
			return out
		}
	}
	return src
}

// optInList splits --vllm.opt-in's values at commas (the flag is also
// repeatable).
func optInList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// startScraper builds the vLLM scraper on the shared connection and
// registers it; the windows its readers ask for (windowReaders) set how far
// back its history reaches, also after a reload.
func startScraper(f *flags, x *exporter) (*vllm.Scraper, error) {
	windows, err := parseWindows(f.windows, f.interval)
	if err != nil {
		return nil, err
	}
	x.scrapes = &scrapeLog{next: x.health, scrub: x.scrub.Scrub}
	s := vllm.New(vllm.Options{
		URL:          x.vllmURL,
		URLs:         x.vllmURLs,
		Supervisor:   x.supervisorURL,
		Interval:     f.interval,
		Timeout:      f.timeout,
		MaxBodyBytes: f.maxBodyBytes,
		MaxSeries:    f.maxSeries,
		Windows:      windows,
		Upstream:     x.upstream,
		Models:       x.models,
		Health:       x.scrapes,
		PerPriority:  f.perPriority,
		OptIn:        optInList(f.optIn),
		Role:         f.role,
		Server:       f.server,
		Readers:      windowReaders(x.config.Get()),
	}, log.With(x.logger, "component", "vllm"))
	x.scrapes.latest = s.Latest
	x.config.Subscribe(func(cf *config.File) { s.SetReaders(windowReaders(cf)...) })
	if err := x.registry.Register(s); err != nil {
		return nil, err
	}
	x.goRun(s.Run)
	return s, nil
}

// windowReaders are the windows read from the scraper's history besides
// --vllm.windows: the classifier's (bottleneck.window, at each tick) and the
// probes' TTFT gap (probes.ttft_gap_window, vLLM's median TTFT beside each
// probe's). The scraper derives them once per scrape and keeps history back
// to the longest; at the defaults both are among --vllm.windows, so nothing
// more is derived or kept. The classifier's baseline_window is not one: it
// keeps its own high-water mark of the windowed hit ratio. Holding 15
// minutes of snapshots for it (as before) kept 40 thinned snapshots on top
// of the 63 the 5m window needs, for no reader.
func windowReaders(cf *config.File) []time.Duration {
	return []time.Duration{cf.Bottleneck.Window, cf.Probes.TTFTGapWindow}
}

// shortcuts are the --vllm.* flags (and $VLLM_API_KEY) that fill the HTTP
// client configuration of the vllm: section.
func (f *flags) shortcuts() upstream.Shortcuts {
	return upstream.Shortcuts{
		APIKeyFile:            f.apiKeyFile,
		APIKey:                os.Getenv("VLLM_API_KEY"),
		BasicAuthUsername:     f.basicUser,
		BasicAuthPasswordFile: f.basicPWFile,
		ProxyFromEnvironment:  f.proxyFromEnv,
	}
}

// connectVLLM is the connection to vLLM that cf's vllm: section and the
// --vllm.* shortcuts describe.
func connectVLLM(cf *config.File, f *flags) (*upstream.Upstream, error) {
	cfg, err := upstream.Resolve(cf.VLLM.HTTPClientConfig, f.vllmURL, f.shortcuts())
	if err != nil {
		return nil, err
	}
	return upstream.New(cfg)
}

// followReloads applies a reloaded vllm: section to the running connection.
// A section that does not build (an unreadable CA file, credentials set
// twice) fails the reload, and the running connection stays.
func followReloads(h *config.Holder, up *upstream.Upstream, f *flags, logger log.Logger) {
	h.Check(func(cf *config.File) error {
		_, err := connectVLLM(cf, f)
		return err
	})
	h.Subscribe(func(cf *config.File) {
		cfg, err := upstream.Resolve(cf.VLLM.HTTPClientConfig, f.vllmURL, f.shortcuts())
		if err == nil {
			err = up.Apply(cfg)
		}
		if err != nil {
			level.Error(logger).Log("msg", "vLLM connection not reloaded; keeping the running one", "err", err)
		}
	})
}

// serve starts the loops and the HTTP server, and stops both on ctx's end
// or the listener's failure.
func (x *exporter) serve(ctx context.Context, f *flags, slogger *slog.Logger) error {
	// Every way out of here (a signal, or the listener failing) must stop
	// the loops before waiting for them: deferred calls run last-in first-out.
	loopCtx, stopLoops := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, loop := range x.loops {
		wg.Go(func() { loop(loopCtx) })
	}
	defer wg.Wait()
	defer stopLoops()

	go reloadOnSIGHUP(ctx, x.config, x.logger)

	handler, err := x.routes(f)
	if err != nil {
		return err
	}
	srv := newHTTPServer(handler, x.logger)
	errc := make(chan error, 1)
	go func() { errc <- web.ListenAndServe(srv, f.web, slogger) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
		level.Info(x.logger).Log("msg", "shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}

// runtimeSeriesRead are the Go runtime and process series the shipped
// Overview dashboard's exporter row reads (CPU, memory against GOMEMLIMIT,
// goroutines, file descriptors); the other go_*, process_* and promhttp_*
// series client_golang produces are exported only with
// --web.all-runtime-series (docs/cost.md).
var runtimeSeriesRead = map[string]bool{
	"go_goroutines":                        true,
	"go_memory_classes_heap_objects_bytes": true,
	"go_memory_classes_heap_unused_bytes":  true,
	"go_gc_gomemlimit_bytes":               true,
	"process_cpu_seconds_total":            true,
	"process_resident_memory_bytes":        true,
	"process_open_fds":                     true,
	"process_max_fds":                      true,
}

// runtimeFilter drops, from what g gathers, the runtime and process
// families no shipped panel reads, unless all is set; go_memstats_* pass
// only when they were asked for (memStats, --web.go-memstats).
func runtimeFilter(g prometheus.Gatherer, all, memStats bool) prometheus.Gatherer {
	if all {
		return g
	}
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := g.Gather()
		return slices.DeleteFunc(mfs, func(mf *dto.MetricFamily) bool {
			name := mf.GetName()
			switch {
			case runtimeSeriesRead[name]:
				return false
			case strings.HasPrefix(name, "go_memstats_"):
				return !memStats
			}
			return strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_")
		}), err
	})
}

// goCollector is the Go runtime collector: client_golang's base set
// (goroutines, threads, GC pauses, GOGC, GOMEMLIMIT, GOMAXPROCS) and the
// heap in use as two runtime/metrics classes (their sum is memstats'
// HeapInuse); go_memstats_* (25 series nothing shipped reads) only with
// --web.go-memstats.
func goCollector(memStats bool) prometheus.Collector {
	if memStats {
		return collectors.NewGoCollector()
	}
	return collectors.NewGoCollector(collectors.WithGoCollectorMemStatsMetricsDisabled(),
		collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{
			Matcher: regexp.MustCompile(`^/memory/classes/heap/(objects|unused):bytes$`),
		}))
}
