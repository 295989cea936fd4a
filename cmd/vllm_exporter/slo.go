package main

// The SLO watchdog (built by wire after its sources: the scraper, the GPU
// sampler and the probes; the classifier and the health verdict are its
// hooks) and the `rules` subcommand.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vllm-exporter/vllm_exporter/alerts"
	"github.com/vllm-exporter/vllm_exporter/deploy"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/modelset"
	"github.com/vllm-exporter/vllm_exporter/slo"
	"github.com/vllm-exporter/vllm_exporter/slo/interop"
)

// startSLO is the SLO watchdog over src, registered and scheduled.
func startSLO(f *sloFlags, x *exporter, src slo.Sources) (*slo.Watchdog, error) {
	w, err := setupSLO(f, x.config, src, x.models, x.logger)
	if err != nil {
		return nil, err
	}
	if err := x.registry.Register(w); err != nil {
		return nil, fmt.Errorf("registering the SLO watchdog: %w", err)
	}
	x.goRun(w.Run)
	return w, nil
}

// newRulesCommand is `vllm_exporter rules`; it reads --config.file.
func newRulesCommand(app *kingpin.Application, f *flags) command {
	c := command{
		name: "rules",
		help: "Write Prometheus recording and alerting rules equivalent to the SLO watchdog for the SLOs of --config.file (default: the shipped SLOs) and exit.",
		uses: []string{"config.file"},
	}
	rc := addRulesFlags(app.Command(c.name, c.help))
	c.run = func(context.Context, log.Logger) error { return rc.run(f.configFile, os.Stdout) }
	return c
}

// sloFlags are the --slo.* flags.
type sloFlags struct {
	interval           *time.Duration
	stateFile          *string
	checkpointInterval *time.Duration
	windowEvents       *bool
	periodWindowSeries *bool
	errorRatioSeries   *bool
}

func addSLOFlags(app *kingpin.Application) *sloFlags {
	return &sloFlags{
		interval: app.Flag("slo.interval", "Longest the SLO watchdog waits for a new vLLM scrape before it evaluates anyway (it evaluates every scrape as it lands).").
			Default(slo.DefaultInterval.String()).Duration(),
		stateFile: app.Flag("slo.state-file",
			"File where the SLO watchdog checkpoints its window state every --slo.checkpoint-interval and on shutdown, restored at start (empty: no checkpoint; budgets restart with the process).").
			Default("").String(),
		checkpointInterval: app.Flag("slo.checkpoint-interval",
			"Least time between two writes of --slo.state-file (also written on shutdown). Each write encodes every window ring (about 64 KB per model with the shipped SLOs once 3 days of traffic fill them) and fsyncs. After a crash the events since the last write are still counted from vLLM's counters, in the restart's time bucket (probe events since then are lost). 0: at every evaluation.").
			Default("1m").Duration(),
		windowEvents: app.Flag("slo.window-events",
			"Also export vllm_slo_events (the events in each window; 1 series per SLO, model and window). Off by default: no shipped alert, panel or verdict reads it.").
			Default("false").Bool(),
		periodWindowSeries: app.Flag("slo.period-window-series",
			"Also export vllm_slo_error_ratio and vllm_slo_burn_rate (and with --slo.window-events vllm_slo_events) for the SLO period's window (30d). Off by default: no shipped alert burns over the period; vllm_slo_error_budget_remaining_ratio carries it.").
			Default("false").Bool(),
		errorRatioSeries: app.Flag("slo.error-ratio-series",
			"Also export vllm_slo_error_ratio per window. Off by default: it is vllm_slo_burn_rate x (1 - vllm_slo_objective_ratio), and the shipped dashboard computes it so.").
			Default("false").Bool(),
	}
}

// setupSLO creates the watchdog (restoring its state file) and returns it;
// the caller registers it and runs w.Run(ctx).
func setupSLO(f *sloFlags, holder *config.Holder, src slo.Sources, models modelset.Limits, logger log.Logger) (*slo.Watchdog, error) {
	if *f.interval <= 0 {
		return nil, fmt.Errorf("--slo.interval must be positive, got %s", *f.interval)
	}
	w := slo.New(slo.Options{Interval: *f.interval, StateFile: *f.stateFile, CheckpointInterval: *f.checkpointInterval, Models: models,
		WindowEvents: *f.windowEvents, PeriodWindowSeries: *f.periodWindowSeries, ErrorRatioSeries: *f.errorRatioSeries}, holder, src,
		log.With(logger, "component", "slo"))
	level.Info(logger).Log("msg", "SLO watchdog ready", "slos", len(holder.Get().SLOs), "interval", *f.interval, "state_file", *f.stateFile)
	return w, nil
}

// rulesCommand is `vllm_exporter rules`: print Prometheus recording and
// alerting rules equivalent to the watchdog for the SLOs of --config.file,
// or (--rules.output-dir, --format=prometheusrule) every shipped rule file
// linked with the given runbook and dashboard URLs, or (--format=sloth,
// pyrra, openslo) the same SLOs for another SLO tool (slo/interop).
type rulesCommand struct {
	output    *string
	outputDir *string
	selector  *string
	runbook   *string
	dashboard *string
	format    *string
}

// Output formats of `vllm_exporter rules`.
const (
	formatPrometheus     = "prometheus"
	formatPrometheusRule = "prometheusrule"
)

func addRulesFlags(c *kingpin.CmdClause) *rulesCommand {
	return &rulesCommand{
		output:    c.Flag("rules.output", "Write the output to this file instead of stdout.").Default("").String(),
		outputDir: c.Flag("rules.output-dir", "Write every rule file (hand-written alerts, recording rules, SLO rules) into this directory instead of the SLO rules to stdout (format prometheus only).").Default("").String(),
		selector:  c.Flag("rules.selector", `Extra label matchers for every series the rules read, e.g. job="vllm".`).Default("").String(),
		runbook:   c.Flag("rules.runbook-url", "Runbook document the alerts link to (annotation runbook_url; the alert's anchor is appended).").Default(slo.DefaultRunbookURL).String(),
		dashboard: c.Flag("rules.dashboard-url", "Grafana base URL the alerts link to (annotation dashboard_url: /d/<dashboard uid>?var-... is appended).").Default(alerts.DefaultDashboardURL).String(),
		format: c.Flag("format", "Output format: prometheus (the SLO rule file; every rule file with --rules.output-dir), prometheusrule (one Kubernetes PrometheusRule holding every rule file); "+
			"the same SLOs for another SLO tool: sloth (a Sloth prometheus/v1 spec), pyrra (Pyrra ServiceLevelObjectives), openslo (OpenSLO v1 documents).").
			Default(formatPrometheus).Enum(append([]string{formatPrometheus, formatPrometheusRule}, interop.Formats...)...),
	}
}

// run generates the rules; main logs the error it returns (once).
func (r *rulesCommand) run(configFile string, stdout io.Writer) error {
	f, err := config.Load(configFile)
	if err != nil {
		return err
	}
	files, err := alerts.Generate(alerts.Options{SLOs: f.SLOs, SLOSource: configFile, RunbookURL: *r.runbook,
		DashboardURL: *r.dashboard, Selector: *r.selector, Buckets: f.Buckets})
	if err != nil {
		return err
	}
	var out []byte
	switch {
	case *r.outputDir != "" && *r.format != formatPrometheus:
		return fmt.Errorf("--rules.output-dir writes format %s only", formatPrometheus)
	case *r.outputDir != "":
		for _, fl := range files {
			if err := os.WriteFile(filepath.Join(*r.outputDir, fl.Name), fl.Data, 0o644); err != nil {
				return err
			}
		}
		return nil
	case slices.Contains(interop.Formats, *r.format):
		src := "the shipped default SLOs"
		if configFile != "" {
			src = configFile
		}
		out, err = interop.Generate(*r.format, f.SLOs, interop.Options{Selector: *r.selector, RunbookURL: *r.runbook,
			Header: fmt.Sprintf("Code generated by `vllm_exporter rules --format=%s` from %s; DO NOT EDIT.", *r.format, src)})
		if err != nil {
			return err
		}
	case *r.format == formatPrometheusRule:
		m := map[string][]byte{}
		for _, fl := range files {
			m[fl.Name] = fl.Data
		}
		if out, err = deploy.PrometheusRule(m); err != nil {
			return err
		}
	default:
		for _, fl := range files {
			if fl.Name == "slo-rules.yml" {
				out = fl.Data
			}
		}
	}
	if *r.output == "" {
		_, err = stdout.Write(out)
		return err
	}
	return os.WriteFile(*r.output, out, 0o644)
}
