// Command vllm_exporter runs beside a vLLM server and exports stable,
// version-independent Prometheus series about it: vLLM's own metrics under
// names that survive vLLM upgrades, plus derived rates and windowed quantiles.
//
// main.go holds the command line (every flag, grouped by capability) and
// the process around the exporter (logging, signals, the HTTP server).
// wire.go constructs the components, in one function, in the order their
// dependencies dictate. Each capability (gpu.go, probes.go, slo.go,
// diagnose.go for the classifier, vllmhealth.go, pprof.go) has its own file
// with its flags and a constructor that registers its own collectors and
// handlers; subcommands (rules, diagnose, capacity) are listed in newCLI.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"
	sloggokit "github.com/tjhop/slog-gokit"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/modelset"
	"github.com/vllm-exporter/vllm_exporter/internal/ratelog"
	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
)

const program = "vllm_exporter"

// defaultListenAddress: 9470 clashes with none of vLLM (8000), Prometheus
// (9090), Alertmanager (9093), node_exporter (9100) or dcgm-exporter (9400).
const defaultListenAddress = ":9470"

// flags are the serving command line: the core's flags, then each
// capability's (subcommands read the ones they need, see command.uses).
type flags struct {
	web            *web.FlagConfig
	telemetryPath  string
	goMemStats     bool
	allRuntime     bool
	disableExpMets bool

	vllmURL      string
	interval     time.Duration
	timeout      time.Duration
	timeoutSet   bool // --vllm.timeout given: it must then be shorter than the interval
	maxBodyBytes int64
	maxSeries    int
	windows      string
	optIn        []string
	maxModels    int
	modelIdle    time.Duration
	modelGrace   time.Duration
	apiKeyFile   string
	basicUser    string
	basicPWFile  string
	proxyFromEnv bool

	// vllmURL is the first of vllmURLs (--vllm.url); *Set: given.
	vllmURLs         []string
	urlSet, ranksSet bool
	ranks            int
	supervisorURL    string

	enableLifecycle bool
	perPriority     bool
	role            string
	server          string

	configFile  string
	configCheck bool
	demo        bool

	logLevel, logFormat string

	gpu        *gpuFlags
	probe      *probeFlags
	slo        *sloFlags
	bottleneck *bottleneckFlags
	pprof      *bool

	scrub *upstream.Scrubber // see scrubber
}

// urlList is --vllm.url: repeatable, the first also kept alone.
type urlList struct {
	first *string
	all   *[]string
}

func (u urlList) Set(v string) error {
	if len(*u.all) == 0 {
		*u.first = v
	}
	*u.all = append(*u.all, v)
	return nil
}

func (u urlList) String() string     { return strings.Join(*u.all, ",") }
func (u urlList) IsCumulative() bool { return true }

// scrubber is what every output of the process (logs, errors, pages, the
// pprof command line) is scrubbed of secrets with; made once the command
// line is parsed.
func (f *flags) scrubber() *upstream.Scrubber {
	if f.scrub == nil {
		f.scrub = upstream.NewScrubber(f.vllmURL, os.Getenv("VLLM_API_KEY"))
	}
	return f.scrub
}

func newApp() (*kingpin.Application, *flags, *kingpin.CmdClause) {
	app := kingpin.New(program, "Prometheus exporter for vLLM: stable series across vLLM versions, windowed rates and quantiles.")
	app.Version(version.Print(program))
	app.HelpFlag.Short('h')
	f := &flags{}
	f.web = kingpinflag.AddFlags(app, defaultListenAddress)
	app.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").StringVar(&f.telemetryPath)
	app.Flag("web.disable-exporter-metrics", "Exclude the exporter's own go_* and process_* metrics.").BoolVar(&f.disableExpMets)
	app.Flag("web.go-memstats", "Also export the Go runtime's go_memstats_* series (25); by default the exporter's heap is go_memory_classes_heap_objects_bytes + go_memory_classes_heap_unused_bytes.").BoolVar(&f.goMemStats)
	app.Flag("web.all-runtime-series", "Also export the Go runtime and process series no shipped panel reads (go_gc_duration_seconds, go_threads, go_info, go_gc_gogc_percent, go_sched_gomaxprocs_threads, process_start_time_seconds, process_virtual_memory_*, process_network_*, promhttp_metric_handler_errors_total); by default go_* and process_* are the eight the Overview dashboard's exporter row reads.").BoolVar(&f.allRuntime)
	app.Flag("vllm.url", "Base URL of the vLLM server (its /metrics is scraped; probes use the same server). Repeatable: the API servers of one vLLM server (--data-parallel-multi-port-external-lb: one per rank), scraped and exported as one server; see also --vllm.data-parallel-ranks.").Default("http://localhost:8000").IsSetByUser(&f.urlSet).SetValue(urlList{&f.vllmURL, &f.vllmURLs})
	app.Flag("vllm.data-parallel-ranks", "API servers of a vLLM server run with --data-parallel-multi-port-external-lb (its --data-parallel-size-local): --vllm.url is the first rank's, the others answer on the next ports; scraped and exported as one server, each reported in vllm_exporter_endpoint_up.").Default("1").IsSetByUser(&f.ranksSet).IntVar(&f.ranks)
	app.Flag("vllm.supervisor-url", "Base URL of vLLM's data-parallel supervisor (--data-parallel-supervisor-port, 9256 by default) with several API servers: its /health (200 while every rank's is) is asked at every scrape, as vllm_exporter_supervisor_healthy.").StringVar(&f.supervisorURL)
	app.Flag("vllm.scrape-interval", "How often to scrape vLLM's /metrics.").Default(vllm.DefaultInterval.String()).DurationVar(&f.interval)
	app.Flag("vllm.timeout", "Timeout of one scrape of vLLM's /metrics; must be shorter than --vllm.scrape-interval (default 4s, or the scrape interval when that is shorter).").Default(vllm.DefaultTimeout.String()).IsSetByUser(&f.timeoutSet).DurationVar(&f.timeout)
	app.Flag("vllm.max-body-bytes", "Largest /metrics body accepted, after gzip decompression (scrape error reason body_too_large).").Default(fmt.Sprint(vllm.DefaultMaxBodyBytes)).Int64Var(&f.maxBodyBytes)
	app.Flag("vllm.max-series", "Most series of the families the exporter reads in one /metrics body, which is what its series cache holds (scrape error reason too_many_series); the simulator's 16 models x 16 engines has about 56,000.").Default(fmt.Sprint(vllm.DefaultMaxSeries)).IntVar(&f.maxSeries)
	app.Flag("vllm.windows", "Comma-separated windows for derived rates and quantiles (the classifier and the probes read them; their series are exported only with --vllm.opt-in=window-series).").Default("1m,5m").StringVar(&f.windows)
	app.Flag("vllm.opt-in", "Also export series that are off by default because no shipped alert, panel or verdict reads them; repeatable or comma-separated: window-series (per --vllm.windows window: rates, ratios, window quantile summaries), expected-metric-present (vllm_exporter_expected_metric_missing 0 for present families), or the name of an opt-in vLLM family (vllm_request_inference_time_seconds, vllm_cache_config_info, vllm_estimated_flops_per_gpu_total, ...; docs/cost.md lists them).").StringsVar(&f.optIn)
	app.Flag("vllm.max-models", "Most vLLM model names (model_name label values) the exporter keeps state and series for, in the scraper, its windows, the SLO watchdog and its state file alike; samples of further names are dropped and counted.").Default(fmt.Sprint(modelset.DefaultMax)).IntVar(&f.maxModels)
	app.Flag("vllm.model-idle-timeout", "A model name absent from successful vLLM scrapes this long loses its state and series everywhere (its SLO error budget included), freeing its place under --vllm.max-models.").Default(modelset.DefaultIdleTimeout.String()).DurationVar(&f.modelIdle)
	app.Flag("vllm.model-grace", "A model name absent from successful vLLM scrapes this long gives its place under --vllm.max-models to a new name when every place is taken (its state is dropped then; failed scrapes do not count as absence). models.grace in --config.file overrides it.").Default(modelset.DefaultGrace.String()).DurationVar(&f.modelGrace)
	app.Flag("vllm.api-key-file", "File holding vLLM's API key, sent as a bearer token to /metrics and the probes (default: $VLLM_API_KEY).").StringVar(&f.apiKeyFile)
	app.Flag("vllm.basic-auth-username", "User name for HTTP basic auth to vLLM (an auth proxy in front of it); the password comes from --vllm.basic-auth-password-file. Keeps credentials out of --vllm.url and the process list.").StringVar(&f.basicUser)
	app.Flag("vllm.basic-auth-password-file", "File holding the basic-auth password for --vllm.basic-auth-username.").StringVar(&f.basicPWFile)
	app.Flag("vllm.proxy-from-environment", "Reach vLLM (scrapes and probes alike) through the proxy named by HTTP_PROXY/HTTPS_PROXY/NO_PROXY. Off by default: connections are direct, so no proxy sees the credentials.").BoolVar(&f.proxyFromEnv)
	app.Flag("web.enable-lifecycle", "Enable configuration reload over HTTP (POST /-/reload). Off by default; SIGHUP always reloads.").BoolVar(&f.enableLifecycle)
	app.Flag("vllm.per-priority", "Also export TTFT and e2e histograms per request priority (vLLM --scheduling-policy priority; at most 8 priority values).").BoolVar(&f.perPriority)
	app.Flag("vllm.server", "The inference server behind --vllm.url: vllm, sglang (its /metrics needs --enable-metrics), trtllm (trtllm-serve: Prometheus text at /prometheus/metrics with return_perf_metrics: true), or auto: learnt once from /v1/models and the metric names, again after 3 failed scrapes. Its metrics path, version and served model follow. Exported as vllm_server_info.").Default(vllm.Servers[0]).EnumVar(&f.server, vllm.Servers...)
	app.Flag("vllm.role", "The pod's role in disaggregated prefill/decode serving: prefill (no TPOT or ITL of its own: those SLOs and the decode-side bottleneck classes are skipped), decode (its TTFT includes the KV transfer from the prefill pod), both (aggregated serving), or auto: learnt from the NIXL families vLLM exports, else both. Exported as vllm_pod_role_info.").Default(vllm.RoleAuto).EnumVar(&f.role, vllm.Roles...)
	app.Flag("config.file", "YAML configuration file (probes, SLOs, bottleneck thresholds); empty = shipped defaults.").StringVar(&f.configFile)
	app.Flag("config.check", "Validate --config.file (and --web.config.file), print the result and exit.").BoolVar(&f.configCheck)
	app.Flag("demo", "Start a simulated vLLM in-process and export it (no vLLM needed).").BoolVar(&f.demo)
	app.Flag("log.level", "Only log messages with the given severity or above. One of: [debug, info, warn, error]").Default("info").EnumVar(&f.logLevel, "debug", "info", "warn", "error")
	app.Flag("log.format", "Output format of log messages. One of: [logfmt, json]").Default("logfmt").EnumVar(&f.logFormat, "logfmt", "json")
	f.gpu = registerGPUFlags(app)
	f.probe = addProbeFlags(app)
	f.slo = addSLOFlags(app)
	f.bottleneck = addBottleneckFlags(app)
	f.pprof = addPprofFlags(app)
	serve := app.Command("serve", "Run the exporter (the default command).").Default()
	return app, f, serve
}

// cli is the whole command line: the serving flags and the subcommands.
type cli struct {
	app      *kingpin.Application
	flags    *flags
	serve    *kingpin.CmdClause
	commands []command
}

// newCLI builds the command line. The subcommands are listed here; each
// adds its own flags and reads the serving flags it names in uses.
func newCLI() *cli {
	app, f, serve := newApp()
	c := &cli{app: app, flags: f, serve: serve}
	c.commands = []command{
		newDiagnoseCommand(app, f),
		newCapacityCommand(app, f),
		newRulesCommand(app, f),
	}
	app.UsageTemplate(usageTemplate)
	app.UsageFuncs(usageFuncs(c.commands))
	return c
}

func main() {
	fillVersionFromBuildInfo()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	c, name, err := parseArgs(args, stdout, stderr)
	f := c.flags
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", program, f.scrubber().Scrub(err.Error()))
		return 2
	}
	logger, slogger := newLogger(f.logLevel, f.logFormat, stderr, f.scrubber())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if cmd := findCommand(c.commands, name); cmd != nil {
		return runCommand(ctx, cmd, logger)
	}
	if f.configCheck {
		return checkConfig(f, stdout, stderr)
	}
	if err := serveMain(ctx, f, logger, slogger); err != nil {
		level.Error(logger).Log("msg", "exporter failed", "err", err)
		return 1
	}
	return 0
}

// parseArgs parses the command line and, for serving, checks every flag's
// value (validate.go); an error names the flag.
func parseArgs(args []string, stdout, stderr io.Writer) (*cli, string, error) {
	c := newCLI()
	c.app.UsageWriter(stdout)
	c.app.ErrorWriter(stderr)
	c.app.Terminate(func(code int) { os.Exit(code) })
	name, err := c.app.Parse(args)
	if err != nil {
		err = namedFlagError(c.app, args, err)
	}
	if err == nil {
		err = checkCommandFlags(c.app, c.commands, name, args)
	}
	if err == nil && name == c.serve.FullCommand() {
		err = validateFlags(c.flags)
	}
	return c, name, err
}

// namedFlagError names the flag whose value kingpin refused: its errors say
// what is wrong with a value (an enum's choices, a duration's syntax), not
// whose. Setting each given value again finds the one that fails.
func namedFlagError(app *kingpin.Application, args []string, err error) error {
	ctx, cerr := app.ParseContext(args)
	if cerr != nil {
		return err // unknown flags and the like: kingpin names them
	}
	for _, el := range ctx.Elements {
		if fc, ok := el.Clause.(*kingpin.FlagClause); ok && el.Value != nil {
			if m := fc.Model(); m.Value.Set(*el.Value) != nil {
				return fmt.Errorf("--%s: %w", m.Name, err)
			}
		}
	}
	return err
}

// runCommand runs a subcommand and maps its error to the exit status.
func runCommand(ctx context.Context, cmd *command, logger log.Logger) int {
	err := cmd.run(ctx, logger)
	if err == nil {
		return 0
	}
	level.Error(logger).Log("msg", "command failed", "command", cmd.name, "err", err)
	// A command may say which exit status its failure means (2: a usage
	// error, as for unparsable flags).
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	return 1
}

// newLogger builds the go-kit logger used everywhere, and the *slog.Logger
// view of it that exporter-toolkit wants. Every value of every line passes
// through scrub, under the level filter (filtered lines cost nothing).
func newLogger(lvl, format string, w io.Writer, scrub *upstream.Scrubber) (log.Logger, *slog.Logger) {
	var logger log.Logger
	if format == "json" {
		logger = log.NewJSONLogger(log.NewSyncWriter(w))
	} else {
		logger = log.NewLogfmtLogger(log.NewSyncWriter(w))
	}
	logger = scrub.Logger(logger)
	allow := map[string]level.Option{"debug": level.AllowDebug(), "info": level.AllowInfo(), "warn": level.AllowWarn(), "error": level.AllowError()}[lvl]
	logger = level.NewFilter(logger, allow)
	slevel := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}[lvl]
	// slog records carry their own time and source; only go-kit calls get ts and caller added.
	slogger := slog.New(sloggokit.NewGoKitHandler(logger, slevel))
	return log.With(logger, "ts", log.DefaultTimestampUTC, "caller", log.DefaultCaller), slogger
}

func checkConfig(f *flags, stdout, stderr io.Writer) int {
	failed := func(format string, args ...any) int {
		fmt.Fprintln(stderr, f.scrubber().Scrub(fmt.Sprintf(format, args...)))
		return 1
	}
	cfg, err := config.Load(f.configFile)
	if err != nil {
		return failed("--config.file: %v", err)
	}
	if wc := *f.web.WebConfigFile; wc != "" {
		if err := web.Validate(wc); err != nil {
			return failed("--web.config.file: %s: %v", wc, err)
		}
		fmt.Fprintf(stdout, "web config %s is valid\n", wc)
	}
	if _, err := f.resolveServers(cfg); err != nil && !f.demo {
		return failed("%v", err)
	}
	if _, err := connectVLLM(cfg, f); err != nil {
		return failed("%v", err) // names its flag or vllm: key
	}
	fmt.Fprintf(stdout, "config %s is valid (%d SLOs)\n", cfg.Source, len(cfg.SLOs))
	return 0
}

// parseWindows reads --vllm.windows. A window must span at least two
// scrape intervals: a shorter one holds a single increase, and its "1s"
// label would be a lie about the interval it really covers.
func parseWindows(s string, interval time.Duration) ([]time.Duration, error) {
	var out []time.Duration
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		d, err := model.ParseDuration(part)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("--vllm.windows: bad window %q", part)
		}
		if time.Duration(d) < 2*interval {
			return nil, fmt.Errorf("--vllm.windows: window %q is shorter than two --vllm.scrape-interval (%v)", part, interval)
		}
		out = append(out, time.Duration(d))
	}
	if len(out) == 0 {
		return nil, errors.New("--vllm.windows: no window given")
	}
	return out, nil
}

// newHTTPServer bounds every phase of a connection, so slow or stuck
// clients cannot pin goroutines and file descriptors. Its error lines (TLS
// handshakes that fail) go to logger, rate-limited, not to stderr.
func newHTTPServer(h http.Handler, logger log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ErrorLog:          stdlog.New(newErrorLog(logger), "", 0),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}

// configReloadCollectors exports the two reload gauges blackbox_exporter has.
// startTimeGauge exports when this exporter started. Unlike
// process_start_time_seconds it stays with --web.disable-exporter-metrics,
// because alerts need it: VLLMDown's grace for a vLLM that never came up.
func startTimeGauge(t time.Time) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vllm_exporter_start_time_seconds",
		Help: "Unix time at which this exporter process started serving.",
	})
	g.Set(float64(t.UnixNano()) / 1e9)
	return g
}

func configReloadCollectors(h *config.Holder) [2]prometheus.Collector {
	return [2]prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "vllm_exporter_config_last_reload_successful",
			Help: "1 if the last configuration (re)load succeeded, else 0.",
		}, func() float64 {
			if h.LastReloadSuccessful() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "vllm_exporter_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful configuration (re)load.",
		}, func() float64 { return float64(h.LastReloadSuccessTime().UnixNano()) / 1e9 }),
	}
}

func reloadOnSIGHUP(ctx context.Context, h *config.Holder, logger log.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			reload(h, logger)
		}
	}
}

func reload(h *config.Holder, logger log.Logger) error {
	if err := h.Reload(); err != nil {
		level.Error(logger).Log("msg", "config reload failed; keeping the running configuration", "file", h.Path(), "err", err)
		return err
	}
	level.Info(logger).Log("msg", "config reloaded", "file", h.Path())
	return nil
}

// routes builds the HTTP handler: metrics, landing page, health, readiness
// and reload.
func (x *exporter) routes(f *flags) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.Handle("GET "+f.telemetryPath, promhttp.HandlerFor(runtimeFilter(x.registry, f.allRuntime, f.goMemStats), promhttp.HandlerOpts{
		ErrorLog:            newErrorLog(x.logger),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 10,
		// No promhttp Timeout: it wraps the handler in http.TimeoutHandler,
		// which buffers each whole response (a copy of the body per
		// concurrent scrape). Rendering never waits on vLLM, GPUs or probes
		// (it reads the latest snapshots), and the server's WriteTimeout
		// still bounds a slow client.
		Registry: x.registry,
	}))
	mux.HandleFunc("GET /-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "Healthy")
	})
	mux.HandleFunc("GET /-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !x.vllm.Ready() {
			http.Error(w, "Not ready: no vLLM scrape attempted yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "Ready")
	})
	mux.HandleFunc("/-/reload", func(w http.ResponseWriter, r *http.Request) {
		// Like Prometheus: off unless --web.enable-lifecycle (without a web
		// config the endpoint is unauthenticated, and a cross-site form can
		// POST to it); POST or PUT only, so a crawler cannot reload.
		if !f.enableLifecycle {
			http.Error(w, "Lifecycle API is not enabled: start with --web.enable-lifecycle, or send SIGHUP.", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodPost && r.Method != http.MethodPut {
			w.Header().Set("Allow", "POST, PUT")
			http.Error(w, "This endpoint requires a POST or PUT request.", http.StatusMethodNotAllowed)
			return
		}
		if err := reload(x.config, x.logger); err != nil {
			http.Error(w, "reload failed: "+f.scrubber().Scrub(err.Error()), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "Reloaded")
	})
	for pattern, h := range x.handlers {
		mux.Handle(pattern, h)
	}
	if f.telemetryPath != "/" && f.telemetryPath != "" {
		// Link only what is served: the profiling links only with
		// --web.enable-pprof (startPprof adds the route).
		links := []pageLink{{f.telemetryPath, "Metrics"}, {"/-/healthy", "Health"}, {"/-/ready", "Readiness"}}
		if _, ok := x.handlers["GET /-/vllm/healthy"]; ok {
			links = append(links, pageLink{"/-/vllm/healthy", "vLLM health verdict"}, pageLink{"/-/vllm/ready", "vLLM readiness"})
		}
		if _, ok := x.handlers["GET /debug/pprof/"]; ok {
			links = append(links, pageLink{"/debug/pprof/", "Profiling"})
		}
		mux.Handle("GET /{$}", x.statusHandler(links))
	}
	return mux, nil
}

// errorLogEvery: how often a library's error of one kind is logged.
const errorLogEvery = time.Minute

// errorLog writes the error lines of promhttp (its Println) and of
// net/http's server (a log.Logger's output) at error level, rate-limited:
// a client that drops its connection makes promhttp log an error for every
// family it could not write, and every port scan or plain-HTTP health check
// of a TLS listener one handshake error, the same text but for the
// connection's address. Lines are limited per text without its digits: the
// first is logged, the next after errorLogEvery with the number held back.
type errorLog struct {
	logger log.Logger
	now    func() time.Time
	mu     sync.Mutex
	limit  *ratelog.Limiter
}

func newErrorLog(logger log.Logger) *errorLog {
	return &errorLog{logger: logger, now: time.Now, limit: ratelog.New(errorLogEvery)}
}

func (l *errorLog) Println(v ...any) { l.log(fmt.Sprintln(v...)) }

func (l *errorLog) Write(p []byte) (int, error) {
	l.log(string(p))
	return len(p), nil
}

func (l *errorLog) log(msg string) {
	msg = strings.TrimSuffix(msg, "\n")
	key := strings.Map(func(r rune) rune {
		if unicode.IsDigit(r) {
			return -1
		}
		return r
	}, msg)
	l.mu.Lock()
	ok, suppressed := l.limit.Allow(key[:min(len(key), 120)], l.now())
	l.mu.Unlock()
	if ok {
		level.Error(l.logger).Log("msg", msg, "suppressed", suppressed)
	}
}
