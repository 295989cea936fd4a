package main

import (
	"context"
	"fmt"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/probes"
)

// The synthetic streaming probes (issue 4). Profiles, budgets and back-off
// come from the `probes:` section of --config.file and follow reloads; the
// vLLM URL and API key are the core's --vllm.url and --vllm.api-key-file
// ($VLLM_API_KEY), so probes can never be pointed anywhere else.
func init() {
	register(extension{name: "probes", order: 20, flags: addProbeFlags, start: startProbes})
}

var probeFlags struct {
	enabled       bool
	maxEventBytes int
}

func addProbeFlags(app *kingpin.Application) {
	app.Flag("probe.enabled", "Send low-rate synthetic streaming requests to the vLLM server (profiles and budgets in the probes: section of --config.file). Use --no-probe.enabled to turn them off.").
		Default("true").BoolVar(&probeFlags.enabled)
	app.Flag("probe.max-event-bytes", "Largest single SSE event a probe accepts from vLLM before abandoning the stream.").
		Default("1048576").IntVar(&probeFlags.maxEventBytes)
	addFlagCheck(func() error {
		if n := probeFlags.maxEventBytes; n < minEventBytes || n > maxEventBytes {
			return fmt.Errorf("--probe.max-event-bytes: must be in [%d, %d], got %d", minEventBytes, maxEventBytes, n)
		}
		return nil
	})
}

func startProbes(_ context.Context, x *exporter) error {
	if !probeFlags.enabled {
		return nil
	}
	if _, err := probes.BaseURL(x.vllmURL); err != nil {
		return err
	}
	sched := probes.New(probes.Options{
		URL:    x.vllmURL,
		Access: x.access,
		VLLM:   x.vllm.Latest,
		ServerTTFT: func(model string, w time.Duration) snapshot.Value {
			return serverMedianTTFT(x.vllm.Window(w), model)
		},
		MaxEventBytes: probeFlags.maxEventBytes,
		Health:        x.health,
	}, x.config, log.With(x.logger, "component", "probes"))
	x.registry.MustRegister(sched)
	x.probes = sched
	x.goRun(sched.Run)
	return nil
}

// serverMedianTTFT picks vLLM's windowed median TTFT for the probed model
// (or the only model served) from the scraper's derived windows.
func serverMedianTTFT(byModel map[string]*snapshot.Derived, model string) snapshot.Value {
	d, ok := byModel[model]
	if !ok && len(byModel) == 1 {
		for _, only := range byModel {
			d = only
		}
	}
	if d == nil {
		return snapshot.Value{}
	}
	return d.Quantiles[snapshot.TTFT][0.5]
}
