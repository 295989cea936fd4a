package main

// The bottleneck classifier in the serving exporter (built by wire after
// the SLO watchdog, whose hook it is), and the `diagnose` and `capacity`
// subcommands, which watch vLLM like the exporter does.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/vllm-exporter/vllm_exporter/collector/gpu"
	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
	"github.com/vllm-exporter/vllm_exporter/probes"
	"github.com/vllm-exporter/vllm_exporter/slo"
	"github.com/vllm-exporter/vllm_exporter/slo/bottleneck"
)

// bottleneckFlags are the app-level flags shared by serve, diagnose and
// capacity (--model.*, --gpu.peak-*, --cost.*).
type bottleneckFlags struct {
	spec bottleneck.ModelSpec
	cost bottleneck.CostSpec
}

// diagnoseUses are the serving flags diagnose and capacity read: they watch
// vLLM like the exporter does (fromAppFlags).
var diagnoseUses = append([]string{"config.file", "collector.gpu", "probe.enabled", "model.", "cost."}, vllmAccessFlags...)

func newDiagnoseCommand(app *kingpin.Application, f *flags) command {
	c := command{name: "diagnose", help: "Watch a vLLM server for --duration, classify its bottleneck and print a report (SLOs, evidence, roofline, recommended knob).", uses: diagnoseUses}
	c.run = setupDiagnose(app.Command(c.name, c.help), f)
	return c
}

func newCapacityCommand(app *kingpin.Application, f *flags) command {
	c := command{name: "capacity", help: "Print the GPUs needed for a daily request volume (required = daily / 86,400; GPUs = ceil(required / per-GPU throughput) x headroom).", uses: diagnoseUses}
	c.run = setupCapacity(app.Command(c.name, c.help), f)
	return c
}

func addBottleneckFlags(app *kingpin.Application) *bottleneckFlags {
	b := &bottleneckFlags{}
	app.Flag("model.weight-bytes", "Bytes of model weights one decode step reads (decode roofline); overrides --model.parameters.").Float64Var(&b.spec.WeightBytes)
	app.Flag("model.parameters", "Model parameter count, with --model.bytes-per-parameter, when --model.weight-bytes is not given.").Float64Var(&b.spec.Parameters)
	app.Flag("model.bytes-per-parameter", "Bytes per parameter (2 for FP16/BF16, 1 for FP8, 0.5 for INT4).").Float64Var(&b.spec.BytesPerParameter)
	app.Flag("model.kv-cache-bytes", "KV-cache pool size in bytes; default: GPU memory x vLLM's gpu_memory_utilization - weights - 1.5 GB per GPU. Without weight flags it also lets the weights be read from vLLM's process GPU memory (minus this pool and 1.5 GB per GPU).").Float64Var(&b.spec.KVCacheBytes)
	app.Flag("model.memory-bandwidth", "Effective memory bandwidth in bytes/s for the roofline when no GPU is visible (with a GPU: its peak x bottleneck.bandwidth_efficiency).").Float64Var(&b.spec.MemoryBandwidth)
	app.Flag("model.kv-bytes-per-token", "KV-cache bytes one token occupies (2 x layers x KV heads x head dim x dtype bytes); with vLLM's stated kv_cache_size_tokens (≈0.24+) it sizes the KV pool for the roofline without memory arithmetic.").Float64Var(&b.spec.KVBytesPerToken)
	app.Flag("gpu.peak-flops", "One GPU's peak dense FLOP/s in the serving dtype (e.g. 989e12 for H100 SXM BF16); enables vllm_model_flops_utilization_ratio from vLLM's --enable-mfu-metrics counters.").Float64Var(&b.spec.PeakFLOPS)
	app.Flag("gpu.peak-memory-bandwidth", "One GPU's peak memory bandwidth in bytes/s for vllm_model_bandwidth_utilization_ratio (default: NVML's peak).").Float64Var(&b.spec.PeakMemoryBandwidth)
	app.Flag("cost.gpu-hour", "Price of one GPU-hour; enables vllm_cost_per_million_output_tokens.").Float64Var(&b.cost.GPUHour)
	app.Flag("cost.gpus", "GPUs serving this vLLM, for cost and capacity per GPU (default: the GPUs NVML sees, else 1).").IntVar(&b.cost.GPUs)
	return b
}

func (b *bottleneckFlags) validate() error {
	if err := b.spec.Validate(); err != nil {
		return err
	}
	if err := finiteNonNegative("cost.gpu-hour", b.cost.GPUHour); err != nil {
		return err
	}
	if b.cost.GPUs < 0 {
		return fmt.Errorf("--cost.gpus: must be >= 0, got %d", b.cost.GPUs)
	}
	return nil
}

// startBottleneck is the classifier in the serving exporter over src,
// registered: a hook of the SLO watchdog w (ticked right after each SLO
// evaluation, with the watchdog's verdict gating capacity) when there is
// one, else on its own loop every interval.
func startBottleneck(b *bottleneckFlags, interval time.Duration, x *exporter, src bottleneck.Sources, w *slo.Watchdog) (*bottleneck.Classifier, error) {
	if err := b.validate(); err != nil {
		return nil, err
	}
	opts := bottleneck.Options{Model: b.spec, Cost: b.cost}
	if w != nil {
		opts.SLOHolds = sloHolds(w)
	}
	c := bottleneck.New(opts, x.config, src, log.With(x.logger, "component", "bottleneck"))
	if err := x.registry.Register(c); err != nil {
		return nil, err
	}
	if w != nil {
		w.AddHook(c)
		return c, nil
	}
	x.goRun(func(ctx context.Context) { c.Run(ctx, interval) })
	return c, nil
}

// sloHolds adapts the watchdog's results: a model's SLOs hold while every
// SLO of that model (and every probe SLO) burns its budget no faster than
// it accrues over the shortest alert window (burn rate <= 1). Unknown until
// one of them has enough events.
func sloHolds(w interface{ Status() []slo.Result }) func(model string, now time.Time) (bool, bool) {
	return func(model string, _ time.Time) (bool, bool) {
		holds, known := true, false
		for _, r := range w.Status() {
			if (r.Model != model && r.Model != "") || len(r.Windows) == 0 {
				continue
			}
			win := r.Windows[0]
			if !win.Enough || !win.BurnRate.OK {
				continue
			}
			known = true
			holds = holds && win.BurnRate.V <= 1
		}
		return holds, known
	}
}

// diagnoseOpts is one diagnose run.
type diagnoseOpts struct {
	url, configFile    string
	server             string // --vllm.server
	upstream           *upstream.Upstream
	timeout            time.Duration
	duration, interval time.Duration
	window             time.Duration
	output             string
	spec               bottleneck.ModelSpec
	cost               bottleneck.CostSpec
	// gpu is sampled once per tick when set (NVML, or a mock in tests).
	gpu gpuSampler
	// probes sends a cold/warm probe pair every probeEvery ticks.
	probes     bool
	probeEvery int
	// now/sleep: a virtual clock in tests; nil = wall clock.
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

// gpuSampler is what diagnose needs of collector/gpu's Sampler.
type gpuSampler interface {
	SampleOnce(now time.Time) *snapshot.GPU
	Latest() *snapshot.GPU
}

// diagnoseGPU opens NVML unless --no-collector.gpu; nil when there is no
// GPU collector in this build. NVML failing to initialise is not an error:
// the sampler reports down and the report says which classes need a GPU.
func diagnoseGPU(f *gpuFlags, logger log.Logger) (*gpu.Sampler, error) {
	if !*f.enabled {
		return nil, nil
	}
	s, err := gpu.NewFromLibrary(gpu.Options{}, log.With(logger, "component", "gpu"))
	if errors.Is(err, gpu.ErrBuiltWithoutNVML) {
		return nil, nil
	}
	return s, err
}

func setupDiagnose(cmd *kingpin.CmdClause, f *flags) func(context.Context, log.Logger) error {
	o := &diagnoseOpts{}
	cmd.Flag("duration", "How long to watch.").Default("60s").DurationVar(&o.duration)
	cmd.Flag("interval", "Scrape and classify every this long.").Default("5s").DurationVar(&o.interval)
	cmd.Flag("window", "Window for rates and quantiles (overrides bottleneck.window; shortened to --duration when longer).").Default("30s").DurationVar(&o.window)
	cmd.Flag("output", "Report format. One of: [text, json]").PlaceHolder("text|json").Default("text").EnumVar(&o.output, "text", "json")
	cmd.Flag("probe-every", "Send the cold/warm probe pair every this many ticks (--no-probe.enabled: never).").Default("2").IntVar(&o.probeEvery)
	o.probes = true
	return func(ctx context.Context, logger log.Logger) error {
		done, err := fromAppFlags(o, f, logger)
		if err != nil {
			return err
		}
		defer done()
		_, err = runDiagnose(ctx, *o, os.Stdout, logger)
		return err
	}
}

// fromAppFlags fills o from the app-level flags (core's --vllm.*,
// --config.file, --collector.gpu, --probe.enabled and ours) and opens NVML;
// done releases it.
func fromAppFlags(o *diagnoseOpts, f *flags, logger log.Logger) (done func(), err error) {
	if err := f.bottleneck.validate(); err != nil {
		return nil, err
	}
	o.url, o.configFile, o.server = f.vllmURL, f.configFile, f.server
	o.timeout = f.timeout
	if o.timeout <= 0 {
		o.timeout = vllm.DefaultTimeout
	}
	cfg, err := config.Load(o.configFile)
	if err != nil {
		return nil, err
	}
	if o.upstream, err = connectVLLM(cfg, f); err != nil {
		return nil, err
	}
	o.spec, o.cost = f.bottleneck.spec, f.bottleneck.cost
	o.probes = o.probes && f.probe.enabled
	g, err := diagnoseGPU(f.gpu, logger)
	if err != nil || g == nil {
		return func() {}, err
	}
	o.gpu = g
	return g.Close, nil
}

// usageError is a command-line mistake: exit status 2, like a flag that
// does not parse.
type usageError struct{ error }

func (usageError) ExitCode() int { return 2 }

func (e usageError) Unwrap() error { return e.error }

// errNotDiagnosed is returned (exit status 1) after the report when no
// model could be diagnosed: every scrape failed or no model was served.
var errNotDiagnosed = errors.New("could not diagnose: no model was seen in a successful scrape")

// diagnoseThresholds is the config's bottleneck section with the window
// fitted to the watch: a --window longer than --duration is shortened to
// it (the note says so) rather than refused.
func diagnoseThresholds(configFile string, o diagnoseOpts) (config.Bottleneck, []string, error) {
	cfg, err := config.Load(configFile)
	if err != nil {
		return config.Bottleneck{}, nil, err
	}
	th := cfg.Bottleneck
	var notes []string
	switch {
	case o.interval <= 0 || o.duration <= 0 || o.window <= 0:
		return th, nil, usageError{errors.New("--interval, --duration and --window must be positive")}
	case o.duration < 2*o.interval:
		return th, nil, usageError{fmt.Errorf("--duration (%v) must be at least 2 x --interval (%v): a rate needs two scrapes", o.duration, o.interval)}
	}
	window := o.window
	if window > o.duration {
		window = o.duration
		notes = append(notes, fmt.Sprintf("--window %v is longer than --duration; rates and quantiles use the whole %v watch", o.window, o.duration))
	}
	if window < 2*o.interval {
		window = 2 * o.interval
		notes = append(notes, fmt.Sprintf("--window %v is shorter than 2 x --interval; rates and quantiles use %v", o.window, window))
	}
	th.Window = window
	th.BaselineWindow = max(o.duration, window+o.interval)
	// One verdict per tick is what a one-shot report states (see
	// bottleneck.OneShotClass); hysteresis is for a live exporter.
	return th, notes, nil
}

// runDiagnose watches o.url and writes the report to w.
func runDiagnose(ctx context.Context, o diagnoseOpts, w io.Writer, logger log.Logger) (bottleneck.Report, error) {
	th, notes, err := diagnoseThresholds(o.configFile, o)
	if err != nil {
		return bottleneck.Report{}, err
	}
	scraper := vllm.New(vllm.Options{
		URL: o.url, Interval: o.interval, Timeout: o.timeout, Upstream: o.upstream, Server: o.server,
		// The classifier reads th.Window only; its baseline is its own.
		Windows: []time.Duration{th.Window},
	}, log.With(logger, "component", "vllm"))
	src := bottleneck.Sources{VLLM: scraper}
	scrape := scraper.ScrapeOnce
	if o.gpu != nil {
		src.GPU = o.gpu
		scrape = func(ctx context.Context, now time.Time) {
			o.gpu.SampleOnce(now)
			scraper.ScrapeOnce(ctx, now)
		}
	}
	var probe func(context.Context, time.Time)
	if o.probes {
		pair, err := newProbePair(o, scraper, logger)
		if err != nil {
			return bottleneck.Report{}, err
		}
		defer pair.wait()
		src.Probes, probe = pair.sched, pair.send
	}
	c := bottleneck.New(bottleneck.Options{Model: o.spec, Cost: o.cost, Thresholds: &th}, nil,
		src, log.With(logger, "component", "bottleneck"))
	rep := bottleneck.Watch(ctx, c, bottleneck.WatchOptions{
		Target: o.url, Duration: o.duration, Interval: o.interval,
		Scrape: scrape, Probe: probe, ProbeEvery: o.probeEvery, Now: o.now, Sleep: o.sleep,
		Window: th.Window, GPUHour: o.cost.GPUHour,
	})
	rep.Notes = append(notes, rep.Notes...)
	render := bottleneck.RenderText
	if o.output == "json" {
		render = bottleneck.RenderJSON
	}
	if err := render(w, rep); err != nil {
		return rep, err
	}
	if len(rep.Models) == 0 {
		return rep, errNotDiagnosed
	}
	return rep, nil
}

// The cold/warm probe pair diagnose sends: identical lengths, the warm one
// repeating one fixed prompt (a prefix cache serves it after the first), the
// cold one unique each time. A warm TTFT no better than the cold one is the
// prefix_cache_miss signal.
const (
	diagnoseCold = "diagnose-cold"
	diagnoseWarm = "diagnose-warm"
)

const probePairYAML = `probes:
  model: %q
  max_requests_per_minute: 60
  token_id_min: %d
  token_id_max: %d
  profiles:
    - {name: %s, endpoint: completions, input_tokens: 1024, output_tokens: 8, prefix: cold, interval: 1h, timeout: 10s}
    - {name: %s, endpoint: completions, input_tokens: 1024, output_tokens: 8, prefix: warm, interval: 1h, timeout: 10s}
`

type probePair struct {
	sched *probes.Scheduler
	wg    sync.WaitGroup
	busy  atomic.Bool
}

// newProbePair builds a probe scheduler for the pair only (the model and
// token range come from --config.file's probes section). Probes are sent on
// demand, never on the scheduler's own timers.
func newProbePair(o diagnoseOpts, scraper *vllm.Scraper, logger log.Logger) (*probePair, error) {
	cfg, err := config.Load(o.configFile)
	if err != nil {
		return nil, err
	}
	// config.Holder loads from a file only: write the pair's section to one.
	f, err := os.CreateTemp("", "vllm_exporter-diagnose-*.yml")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	_, err = fmt.Fprintf(f, probePairYAML, cfg.Probes.Model, cfg.Probes.TokenIDMin, cfg.Probes.TokenIDMax, diagnoseCold, diagnoseWarm)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	holder, err := config.NewHolder(f.Name())
	if err != nil {
		return nil, fmt.Errorf("diagnose probe profiles: %w", err)
	}
	sched := probes.New(probes.Options{URL: o.url, Upstream: o.upstream, VLLM: scraper.Latest}, holder, log.With(logger, "component", "probes"))
	return &probePair{sched: sched}, nil
}

// send starts the pair in the background unless it is still running: cold,
// then warm, one after the other. Sent together they would share one engine
// step and so one first-token time, hiding any prefix-cache gain.
func (p *probePair) send(ctx context.Context, _ time.Time) {
	if !p.busy.CompareAndSwap(false, true) {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer p.busy.Store(false)
		for _, name := range []string{diagnoseCold, diagnoseWarm} {
			_, _ = p.sched.ProbeOnce(ctx, name) // failures are counted in the scheduler's snapshot
		}
	}()
}

func (p *probePair) wait() { p.wg.Wait() }

func setupCapacity(cmd *kingpin.CmdClause, f *flags) func(context.Context, log.Logger) error {
	var daily, perGPU, headroom float64
	o := &diagnoseOpts{output: "text"}
	cmd.Flag("daily-requests", "Requests per day to plan for.").Required().Float64Var(&daily)
	cmd.Flag("requests-per-second-per-gpu", "Sustained requests/s one GPU serves within the SLOs (e.g. vllm_capacity_requests_per_second / GPUs); 0 = measure it by watching --vllm.url for --duration.").Float64Var(&perGPU)
	cmd.Flag("headroom", "Multiplier for traffic spikes (default: bottleneck.headroom, 2).").Float64Var(&headroom)
	cmd.Flag("duration", "How long to watch when measuring.").Default("60s").DurationVar(&o.duration)
	cmd.Flag("interval", "Scrape every this long when measuring.").Default("5s").DurationVar(&o.interval)
	cmd.Flag("window", "Rate window when measuring.").Default("30s").DurationVar(&o.window)
	return func(ctx context.Context, logger log.Logger) error {
		basis := ""
		if perGPU == 0 {
			done, err := fromAppFlags(o, f, logger)
			if err != nil {
				return err
			}
			defer done()
			m, err := measurePerGPU(ctx, *o, logger)
			if err != nil {
				return err
			}
			perGPU, basis = m.perGPU, m.basis
		}
		return runCapacity(os.Stdout, f.configFile, daily, perGPU, headroom, f.bottleneck.cost.GPUHour, basis)
	}
}

// perGPUMeasure is a per-GPU request throughput and how it was obtained.
type perGPUMeasure struct {
	perGPU float64
	// basis is "" for a figure the operator gave or one measured at
	// saturation; otherwise it says how the extrapolation was made.
	basis string
}

// measurePerGPU watches the server like diagnose and returns the highest
// request throughput per GPU it sustained while the SLOs held (summed over
// the models it serves). When the server was not saturated that is only
// its offered load: the figure becomes the KV-capacity extrapolation, and
// basis says so.
func measurePerGPU(ctx context.Context, o diagnoseOpts, logger log.Logger) (perGPUMeasure, error) {
	rep, err := runDiagnose(ctx, o, io.Discard, logger)
	if err != nil && !errors.Is(err, errNotDiagnosed) {
		return perGPUMeasure{}, err
	}
	var m perGPUMeasure
	var extrapolated, lower []string
	for _, mr := range rep.Models {
		c := mr.Capacity
		if c.RequestsPerSecond == nil || c.GPUs <= 0 {
			continue
		}
		g := float64(c.GPUs)
		kv := "unknown"
		if c.KVUsage != nil {
			kv = fmt.Sprintf("%.1f%%", 100**c.KVUsage)
		}
		switch {
		case c.Saturated:
			m.perGPU += *c.RequestsPerSecond / g
		case c.ExtrapolatedRequestsPerSecond != nil:
			m.perGPU += *c.ExtrapolatedRequestsPerSecond / g
			extrapolated = append(extrapolated, fmt.Sprintf("%s: %.3g req/s per GPU offered at KV usage %s", mr.Model, *c.RequestsPerSecond/g, kv))
		default:
			m.perGPU += *c.RequestsPerSecond / g
			lower = append(lower, fmt.Sprintf("%s: %.3g req/s per GPU offered at KV usage %s", mr.Model, *c.RequestsPerSecond/g, kv))
		}
	}
	if m.perGPU == 0 {
		return perGPUMeasure{}, fmt.Errorf("no throughput was sustained within the SLOs while watching %s for %v (%d scrapes, %d failed); give --requests-per-second-per-gpu", o.url, o.duration, rep.Scrapes, rep.ScrapeErrors)
	}
	switch {
	case len(lower) > 0:
		m.basis = "LOWER BOUND, not a capacity: the server was not saturated (nothing waiting, no preemption) and too far from it to extrapolate (" +
			strings.Join(append(lower, extrapolated...), "; ") + "); the offered load is used, so GPUs needed is an upper bound. Load-test (vllm bench serve) for a real figure"
	case len(extrapolated) > 0:
		m.basis = "EXTRAPOLATION, not a measurement: the server was not saturated (nothing waiting, no preemption) (" + strings.Join(extrapolated, "; ") +
			"); the figure is offered load / KV usage, an upper estimate assuming throughput grows with KV-cache occupancy until the cache is full. Latency rises before that: load-test before sizing on it"
	}
	return m, nil
}

func runCapacity(w io.Writer, configFile string, daily, perGPU, headroom, gpuHour float64, basis string) error {
	if headroom == 0 {
		cfg, err := config.Load(configFile)
		if err != nil {
			return err
		}
		headroom = cfg.Bottleneck.Headroom
	}
	p, err := bottleneck.PlanGPUs(daily, perGPU, headroom)
	if err != nil {
		return err
	}
	if basis != "" {
		fmt.Fprintf(w, "per-GPU throughput: %s\n", basis)
	}
	fmt.Fprintf(w, "daily requests:        %.0f\n", p.DailyRequests)
	fmt.Fprintf(w, "required throughput:   %.2f req/s (daily / 86,400)\n", p.RequiredPerSecond)
	label := "per-GPU throughput:  "
	if basis != "" {
		label = "per-GPU (" + strings.SplitN(basis, ",", 2)[0] + "):"
	}
	fmt.Fprintf(w, "%s %.3g req/s\n", label, p.PerGPURequestsPerSecond)
	bound := ""
	if strings.HasPrefix(basis, "LOWER BOUND") {
		bound = ", at most"
	}
	fmt.Fprintf(w, "GPUs needed:           %d (ceil(required / per GPU)%s)\n", p.GPUs, bound)
	fmt.Fprintf(w, "with %.1fx headroom:    %d GPUs\n", p.Headroom, p.GPUsWithHeadroom)
	if gpuHour > 0 {
		fmt.Fprintf(w, "cost:                  %.2f per day at %.2f per GPU-hour\n", float64(p.GPUsWithHeadroom)*24*gpuHour, gpuHour)
	}
	return nil
}
