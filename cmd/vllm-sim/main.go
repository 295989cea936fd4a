// Command vllm-sim is a simulated vLLM OpenAI-compatible server: a scheduler
// model (continuous batching, chunked prefill, paged KV cache with prefix
// caching, preemption) behind vLLM's API and /metrics exposition, with
// runtime-switchable scenarios, fault injection and a built-in load generator.
// See internal/vllmsim for the model.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "vllm-sim:", err)
		os.Exit(1)
	}
}

// options are the parsed command line.
type options struct {
	cfg         vllmsim.Config
	adminAddr   string
	logLevel    string
	rate, burst float64 // load overrides; 0 keeps the scenario's
	// multiPort serves each data-parallel rank on its own port, as vLLM's
	// --data-parallel-multi-port-external-lb, with a supervisor.
	multiPort      bool
	supervisorPort int
}

func run(args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	logger := level.NewFilter(log.NewLogfmtLogger(log.NewSyncWriter(os.Stderr)), level.Allow(level.ParseDefault(o.logLevel, level.InfoValue())))
	logger = log.With(logger, "ts", log.DefaultTimestampUTC)
	return serve(o, logger)
}

// parseFlags reads the command line; vLLM's own flags keep vLLM's names.
// It is long because it is the flag table.
func parseFlags(args []string) (options, error) {
	app := kingpin.New("vllm-sim", "Simulated vLLM server (API, /metrics, scheduler, scenarios, faults, load generator).")
	var (
		o         options
		prefix    bool
		buckets   string
		versioned bool
	)
	cfg, adminAddr, logLevel, rate, burst := &o.cfg, &o.adminAddr, &o.logLevel, &o.rate, &o.burst
	app.Flag("web.listen-address", "Address to serve the vLLM API, /metrics and /admin on.").Default("127.0.0.1:8000").StringVar(&cfg.Addr)
	app.Flag("admin.listen-address", "Optional second address serving the same routes, so /admin stays reachable while the main port is down.").StringVar(adminAddr)
	app.Flag("served-model-name", "Model name served; repeat for several models (each gets its own engines).").Default("meta-llama/Llama-3.1-8B-Instruct").StringsVar(&cfg.Models)
	app.Flag("data-parallel-size", "Engines per model (engine label 0..N-1).").Default("1").IntVar(&cfg.DataParallelSize)
	app.Flag("data-parallel-multi-port-external-lb", "Serve each data-parallel rank as its own API server on port+rank (one engine each, its own /metrics, /admin and faults), as vLLM does; a supervisor answers /health, /ready and /readyz.").BoolVar(&o.multiPort)
	app.Flag("data-parallel-supervisor-port", "Port of the supervisor with --data-parallel-multi-port-external-lb.").Default("9256").IntVar(&o.supervisorPort)
	app.Flag("api-server-count", "API server processes; > 1 switches V1 /metrics to multiprocess style (no _created, no python/process).").Default("1").IntVar(&cfg.APIServerCount)
	app.Flag("max-num-seqs", "Max running sequences per engine.").Default("128").IntVar(&cfg.MaxNumSeqs)
	app.Flag("max-num-batched-tokens", "Token budget per engine step (chunked prefill).").Default("8192").IntVar(&cfg.MaxNumBatchedTokens)
	app.Flag("num-gpu-blocks", "KV cache blocks per engine (v1 versions reserve one as vLLM's null block).").Default("4096").IntVar(&cfg.NumGPUBlocks)
	app.Flag("block-size", "Tokens per KV block.").Default("16").IntVar(&cfg.BlockSize)
	app.Flag("long-prefill-token-threshold", "Most prompt tokens one request may prefill in a step (0 = no cap), as vLLM's flag: long prompts share steps with short ones.").Default("0").IntVar(&cfg.LongPrefillTokenThreshold)
	app.Flag("max-model-len", "Max prompt+output tokens per request.").Default("8192").IntVar(&cfg.MaxModelLen)
	app.Flag("enable-prefix-caching", "Reuse KV blocks of shared prefixes (--no-enable-prefix-caching to disable).").Default("true").BoolVar(&prefix)
	app.Flag("stream-interval", "Tokens per SSE chunk (first token always alone).").Default("1").IntVar(&cfg.StreamInterval)
	app.Flag("metrics-version", "vLLM's exposition of /metrics: v1-0.33 (newest layout, late 2026), v1 (vLLM main 2026-08), v1-0.10 (0.10.2, deprecated names too) or v0 (0.7.3 multiprocess).").Default("v1").IsSetByUser(&versioned).EnumVar(&cfg.MetricsVersion, vllmsim.MetricsVersions()...)
	app.Flag("engine", "The inference server spoken: vllm, sglang (sglang: families at /metrics, /health_generate, /get_server_info) or trtllm (trtllm-serve: families at /prometheus/metrics, JSON iteration stats at /metrics, /health_generate; one model, one engine).").Default(vllmsim.EngineVLLM).EnumVar(&cfg.Engine, vllmsim.Engines()...)
	app.Flag("tp-size", "SGLang --tp-size: tensor-parallel ranks per data-parallel rank (their tp_rank labels).").Default("1").IntVar(&cfg.TensorParallelSize)
	app.Flag("enable-metrics-for-all-schedulers", "SGLang: every tensor-parallel rank writes its scheduler's state (repeated series by tp_rank).").BoolVar(&cfg.AllSchedulerMetrics)
	app.Flag("scheduling-policy", "Scheduler policy: fcfs or priority (requests' \"priority\" field orders the queue; v1-0.33 adds the priority label).").Default("fcfs").EnumVar(&cfg.SchedulingPolicy, vllmsim.PolicyFCFS, vllmsim.PolicyPriority)
	app.Flag("custom-histogram-buckets", "JSON object of bucket bounds per bucket family, as vLLM's flag (e.g. '{\"time_to_first_token\":[0.1,0.5,1]}'); v1-0.33 only.").StringVar(&buckets)
	app.Flag("spec-decode.num-speculative-tokens", "Speculative decoding: draft tokens per decode step (0 = off).").Default("0").IntVar(&cfg.SpecDecode.NumSpeculativeTokens)
	app.Flag("spec-decode.acceptance-rate", "Speculative decoding: chance each draft position is accepted given the previous one was.").Default("0.7").Float64Var(&cfg.SpecDecode.AcceptanceRate)
	app.Flag("enable-mfu-metrics", "Fill vllm:estimated_flops_per_gpu_total and the read/write byte counters (as vLLM --enable-mfu-metrics).").BoolVar(&cfg.EnableMFUMetrics)
	app.Flag("health-check-stall-timeout", "Stats-based /health (vLLM VLLM_HEALTH_CHECK_STALL_TIMEOUT): 503 once requests are pending and no step completed for this long; 0 = off (v1-0.33 only).").Default("0s").DurationVar(&cfg.HealthStallTimeout)
	app.Flag("enable-fault-tolerance", "Expose vllm:engine_healthy (as vLLM --enable-fault-tolerance; v1-0.33).").BoolVar(&cfg.EnableFaultTolerance)
	app.Flag("enable-prompt-tokens-details", "Report usage.prompt_tokens_details.cached_tokens (when non-zero, as vLLM).").BoolVar(&cfg.EnablePromptTokensDetails)
	app.Flag("api-key", "Require Authorization: Bearer <key> on /v1 routes.").Envar("VLLM_API_KEY").StringVar(&cfg.APIKey)
	app.Flag("seed", "Seed for generated tokens, EOS positions and the load generator.").Default("0").Int64Var(&cfg.Seed)
	app.Flag("scenario", "Initial scenario: "+strings.Join(vllmsim.Scenarios(), ", ")+".").Default("healthy").EnumVar(&cfg.Scenario, vllmsim.Scenarios()...)
	app.Flag("load-gen", "Run the built-in load generator (--no-load-gen for API traffic only).").Default("true").BoolVar(&cfg.LoadGen)
	app.Flag("load.rate", "Override the scenario's arrival rate (requests/s per model); 0 keeps the preset.").Default("0").Float64Var(rate)
	app.Flag("load.burstiness", "Override the scenario's burstiness (gamma shape; 1 = Poisson); 0 keeps the preset.").Default("0").Float64Var(burst)
	app.Flag("mean-output-tokens", "Mean output length of API requests without ignore_eos (geometric EOS).").Default("256").IntVar(&cfg.MeanOutputTokens)
	cfg.Cost = vllmsim.DefaultCost
	app.Flag("cost.step-base", "Step time model: seconds per engine step (weight read).").Default(fmt.Sprint(cfg.Cost.StepBase)).Float64Var(&cfg.Cost.StepBase)
	app.Flag("cost.per-seq", "Step time model: seconds per scheduled sequence.").Default(fmt.Sprint(cfg.Cost.PerSeq)).Float64Var(&cfg.Cost.PerSeq)
	app.Flag("cost.per-context-token", "Step time model: seconds per context token read (KV cache).").Default(fmt.Sprint(cfg.Cost.PerContextToken)).Float64Var(&cfg.Cost.PerContextToken)
	app.Flag("cost.per-prefill-token", "Step time model: seconds per uncached prompt token computed.").Default(fmt.Sprint(cfg.Cost.PerPrefillToken)).Float64Var(&cfg.Cost.PerPrefillToken)
	app.Flag("log.level", "Log level: debug, info, warn, error.").Default("info").EnumVar(logLevel, "debug", "info", "warn", "error")
	if _, err := app.Parse(args); err != nil {
		return o, err
	}
	cfg.DisablePrefixCaching = !prefix
	if cfg.Engine != vllmsim.EngineVLLM && !versioned {
		cfg.MetricsVersion = "" // the engine's own exposition
	}
	if buckets != "" {
		if err := json.Unmarshal([]byte(buckets), &cfg.CustomHistogramBuckets); err != nil {
			return o, fmt.Errorf("--custom-histogram-buckets: %w", err)
		}
	}
	if cfg.Cost.StepBase < 0 || cfg.Cost.PerSeq < 0 || cfg.Cost.PerContextToken < 0 || cfg.Cost.PerPrefillToken < 0 {
		return o, errors.New("--cost.* values must not be negative")
	}
	return o, nil
}

// serve runs the simulator (and the admin listener) until SIGINT/SIGTERM.
func serve(o options, logger log.Logger) error {
	cfg, adminAddr := o.cfg, o.adminAddr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.multiPort {
		rk, err := startRanks(o)
		if err != nil {
			return err
		}
		defer rk.Close()
		level.Info(logger).Log("msg", "vllm-sim listening, one API server per rank", "ranks", len(rk.Sims), "first", rk.Sims[0].URL(), "supervisor", rk.SupervisorURL())
		<-ctx.Done()
		return nil
	}
	sim, err := newSim(cfg, o)
	if err != nil {
		return err
	}
	if err := sim.Start(); err != nil {
		return err
	}
	defer sim.Close()
	level.Info(logger).Log("msg", "vllm-sim listening", "url", sim.URL(), "scenario", sim.Scenario().Name,
		"metrics_version", cfg.MetricsVersion, "models", strings.Join(sim.Config().Models, ","), "load_gen", cfg.LoadGen)

	admin, err := serveAdmin(sim, adminAddr, logger)
	if err != nil {
		return err
	}
	<-ctx.Done()
	level.Info(logger).Log("msg", "shutting down")
	if admin != nil {
		_ = admin.Close()
	}
	return nil
}

// newSim builds a simulator with the load overrides applied.
func newSim(cfg vllmsim.Config, o options) (*vllmsim.Sim, error) {
	sim, err := vllmsim.New(cfg)
	if err != nil || (o.rate <= 0 && o.burst <= 0) {
		return sim, err
	}
	sc := sim.Scenario()
	if o.rate > 0 {
		sc.Load.Rate = o.rate
	}
	if o.burst > 0 {
		sc.Load.Burstiness = o.burst
	}
	return sim, sim.ApplyScenario(sc)
}

// startRanks serves --data-parallel-size ranks, rank r on port+r of
// --web.listen-address (port 0: each on a free port) with seed+r, and the
// supervisor.
func startRanks(o options) (*vllmsim.Ranks, error) {
	host, port, err := net.SplitHostPort(o.cfg.Addr)
	first, perr := strconv.Atoi(port)
	if err != nil || perr != nil || o.adminAddr != "" || o.cfg.DataParallelSize < 2 {
		return nil, errors.New("--data-parallel-multi-port-external-lb needs --web.listen-address with a port, --data-parallel-size >= 2 and no --admin.listen-address (each rank serves its own /admin)")
	}
	sims, addrs := make([]*vllmsim.Sim, o.cfg.DataParallelSize), make([]string, o.cfg.DataParallelSize)
	for r := range sims {
		cfg := o.cfg
		cfg.DataParallelSize, cfg.Seed = 1, o.cfg.Seed+int64(r)
		if sims[r], err = newSim(cfg, o); err != nil {
			return nil, err
		}
		if addrs[r] = o.cfg.Addr; first > 0 {
			addrs[r] = net.JoinHostPort(host, strconv.Itoa(first+r))
		}
	}
	return vllmsim.StartRanks(sims, addrs, net.JoinHostPort(host, strconv.Itoa(o.supervisorPort)))
}

// serveAdmin serves the simulator's routes on a second address too (nil
// without one), so /admin stays reachable while the main port is down.
func serveAdmin(sim *vllmsim.Sim, addr string, logger log.Logger) (*http.Server, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listener: %w", err)
	}
	admin := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			level.Error(logger).Log("msg", "admin listener stopped", "err", err)
		}
	}()
	level.Info(logger).Log("msg", "admin listening", "addr", ln.Addr().String())
	return admin, nil
}
