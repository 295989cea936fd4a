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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
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

// diagnoseUses are the serving flags diagnose and capacity read: they wire
// the exporter's own components (runDiagnose), so every flag that changes
// what the classifier sees is theirs too.
var diagnoseUses = append([]string{"config.file", "collector.gpu", "probe.enabled", "model.", "cost.", "gpu.peak-flops", "gpu.peak-memory-bandwidth",
	"vllm.scrape-interval", "vllm.windows", "vllm.role", "vllm.max-body-bytes"}, vllmAccessFlags...)

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

// diagnoseOpts is what a diagnose run adds to the exporter's flags.
type diagnoseOpts struct {
	duration time.Duration
	output   string
	// now/sleep: a virtual clock in tests; nil = wall clock.
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

func setupDiagnose(cmd *kingpin.CmdClause, f *flags) func(context.Context, log.Logger) error {
	o := &diagnoseOpts{}
	cmd.Flag("duration", "How long to watch (one scrape every --vllm.scrape-interval, as the exporter scrapes); at least bottleneck.window plus hold_ticks+1 scrapes for a verdict on full windows.").Default("90s").DurationVar(&o.duration)
	cmd.Flag("output", "Report format. One of: [text, json]").PlaceHolder("text|json").Default("text").EnumVar(&o.output, "text", "json")
	return func(ctx context.Context, logger log.Logger) error {
		_, err := runDiagnose(ctx, f, *o, os.Stdout, logger)
		return err
	}
}

// usageError is a command-line mistake: exit status 2, like a flag that
// does not parse.
type usageError struct{ error }

func (usageError) ExitCode() int { return 2 }

func (e usageError) Unwrap() error { return e.error }

// errNotDiagnosed is returned (exit status 1) after the report when no
// model could be diagnosed: every scrape failed or no model was served.
var errNotDiagnosed = errors.New("could not diagnose: no model was seen in a successful scrape")

// diagnoseFlags are the exporter's flags as diagnose wires them: no SLO
// checkpoint (the state file is the running exporter's), no pprof, no demo.
func diagnoseFlags(f *flags) *flags {
	df := *f
	sf, none, off := *f.slo, "", false
	sf.stateFile = &none
	df.slo, df.pprof, df.demo = &sf, &off, false
	return &df
}

// runDiagnose wires the serving exporter's own components from f (the same
// configuration, thresholds, SLOs, windows, hysteresis and probes) and,
// instead of serving them, drives them for o.duration: scrape every
// --vllm.scrape-interval, the GPUs sampled and the probes' schedule run at
// each scrape, the SLO watchdog (which ticks the classifier as its hook)
// evaluating each scrape as it lands. The report states what the running
// exporter would publish at the end of that time.
func runDiagnose(ctx context.Context, f *flags, o diagnoseOpts, w io.Writer, logger log.Logger) (bottleneck.Report, error) {
	if o.duration < 2*f.interval {
		return bottleneck.Report{}, usageError{fmt.Errorf("--duration (%v) must be at least 2 x --vllm.scrape-interval (%v): a rate needs two scrapes", o.duration, f.interval)}
	}
	df := diagnoseFlags(f)
	x, stop, err := newExporter(ctx, df, logger)
	if err != nil {
		return bottleneck.Report{}, err
	}
	defer stop()
	if err := x.wire(df); err != nil {
		return bottleneck.Report{}, err
	}
	if x.gpu != nil {
		defer x.gpu.Close()
	}
	cfg := x.config.Get()
	var notes []string
	th := cfg.Bottleneck
	if need := th.Window + time.Duration(th.HoldTicks+1)*f.interval; o.duration < need {
		notes = append(notes, fmt.Sprintf("the %v watch is shorter than %v (bottleneck.window %v and hold_ticks %d + 1 scrapes): the windowed rules and rates need a full window and a class hold_ticks ticks to be published, as in the exporter; this report shows what there was",
			o.duration, need, th.Window, th.HoldTicks))
	}
	probeCtx, cancelProbes := context.WithCancel(ctx)
	probes := backgroundProbes{sched: x.probes}
	defer probes.wait()
	defer cancelProbes() // probes still streaming at the end are abandoned, not recorded
	rep := bottleneck.Watch(ctx, x.classifier, bottleneck.WatchOptions{
		Target: df.vllmURL, Duration: o.duration, Interval: f.interval,
		Scrape: func(ctx context.Context, now time.Time) {
			if x.gpu != nil {
				x.gpu.SampleOnce(now)
			}
			x.vllm.ScrapeOnce(ctx, now)
		},
		Probe: func(_ context.Context, now time.Time) { probes.tick(probeCtx, now) },
		Tick:  x.slo.Tick,
		SLOs:  func(model string) []bottleneck.SLOLine { return sloLines(x.slo.Status(), cfg, model) },
		Now:   o.now, Sleep: o.sleep, GPUHour: f.bottleneck.cost.GPUHour,
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

// backgroundProbes runs the probe scheduler's due probes at each tick
// without holding the watch up (a probe streams for a while), one tick's
// probes at a time, as the scheduler's own loop runs them.
type backgroundProbes struct {
	sched *probes.Scheduler
	wg    sync.WaitGroup
	busy  atomic.Bool
}

func (b *backgroundProbes) tick(ctx context.Context, now time.Time) {
	if b.sched == nil || !b.busy.CompareAndSwap(false, true) {
		return
	}
	b.wg.Go(func() {
		defer b.busy.Store(false)
		b.sched.Tick(ctx, now)
	})
}

func (b *backgroundProbes) wait() { b.wg.Wait() }

// sloLines are the SLO watchdog's results for model (and the probe SLOs)
// with their configured objectives, over everything the watchdog saw.
func sloLines(results []slo.Result, cfg *config.File, model string) []bottleneck.SLOLine {
	byName := map[string]config.SLO{}
	for _, c := range cfg.SLOs {
		byName[c.Name] = c
	}
	var out []bottleneck.SLOLine
	for _, r := range results {
		if r.Model != model && r.Model != "" {
			continue
		}
		pw := r.PeriodWindow
		l := bottleneck.SLOLine{Name: r.SLO, Objective: sloObjective(byName[r.SLO]), Bad: pw.Bad, Total: pw.Total, Page: r.Page, Ticket: r.Ticket}
		if pw.BurnRate.OK {
			l.BurnRate = &pw.BurnRate.V
		}
		out = append(out, l)
	}
	return out
}

// sloObjective says what an SLO promises, e.g. "ttft <= 1 s for 99% of
// requests".
func sloObjective(c config.SLO) string {
	pct := strconv.FormatFloat(100*c.Objective, 'f', -1, 64) + "%"
	switch c.Kind {
	case "latency":
		return fmt.Sprintf("%s %s <= %s for %s of %s", c.Source, c.Metric, strconv.FormatFloat(c.Threshold, 'f', -1, 64)+" s", pct, sloEvents(c))
	case "preemption":
		return fmt.Sprintf("at most %s preemptions per finished request", strconv.FormatFloat(c.Threshold, 'f', -1, 64))
	}
	return fmt.Sprintf("%s %s good for %s of %s", c.Source, c.Kind, pct, sloEvents(c))
}

func sloEvents(c config.SLO) string {
	if c.Source == "probe" {
		return "probes"
	}
	return "requests"
}

func setupCapacity(cmd *kingpin.CmdClause, f *flags) func(context.Context, log.Logger) error {
	var daily, perGPU, headroom float64
	o := &diagnoseOpts{output: "text"}
	cmd.Flag("daily-requests", "Requests per day to plan for.").Required().Float64Var(&daily)
	cmd.Flag("requests-per-second-per-gpu", "Sustained requests/s one GPU serves within the SLOs (e.g. vllm_capacity_requests_per_second / GPUs); 0 = measure it by watching --vllm.url for --duration.").Float64Var(&perGPU)
	cmd.Flag("headroom", "Multiplier for traffic spikes (default: bottleneck.headroom, 2).").Float64Var(&headroom)
	cmd.Flag("duration", "How long to watch when measuring (as diagnose does).").Default("90s").DurationVar(&o.duration)
	return func(ctx context.Context, logger log.Logger) error {
		basis := ""
		if perGPU == 0 {
			m, err := measurePerGPU(ctx, f, *o, logger)
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
func measurePerGPU(ctx context.Context, f *flags, o diagnoseOpts, logger log.Logger) (perGPUMeasure, error) {
	rep, err := runDiagnose(ctx, f, o, io.Discard, logger)
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
		return perGPUMeasure{}, fmt.Errorf("no throughput was sustained within the SLOs while watching %s for %v (%d scrapes, %d failed); give --requests-per-second-per-gpu", f.vllmURL, o.duration, rep.Scrapes, rep.ScrapeErrors)
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
