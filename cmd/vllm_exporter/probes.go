package main

import (
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
	"github.com/vllm-exporter/vllm_exporter/probes"
)

// The synthetic streaming probes (issue 4). Profiles, budgets and back-off
// come from the `probes:` section of --config.file and follow reloads; the
// vLLM URL and connection (TLS, credentials, proxy) are the scraper's, so
// probes can never be pointed anywhere else.

// probeFlags are the --probe.* flags.
type probeFlags struct {
	enabled       bool
	maxEventBytes int
}

func addProbeFlags(app *kingpin.Application) *probeFlags {
	f := &probeFlags{}
	app.Flag("probe.enabled", "Send low-rate synthetic streaming requests to the vLLM server (profiles and budgets in the probes: section of --config.file). Use --no-probe.enabled to turn them off.").
		Default("true").BoolVar(&f.enabled)
	app.Flag("probe.max-event-bytes", "Largest single SSE event a probe accepts from vLLM before abandoning the stream.").
		Default("1048576").IntVar(&f.maxEventBytes)
	return f
}

// startProbes is the probe scheduler (nil with --no-probe.enabled),
// registered and scheduled. It probes x.vllmURL over up and reads the
// scraper for stalls and vLLM's own TTFT.
func startProbes(f *probeFlags, x *exporter, up *upstream.Upstream, scraper *vllm.Scraper) (*probes.Scheduler, error) {
	if !f.enabled {
		return nil, nil
	}
	if _, err := probes.BaseURL(x.vllmURL); err != nil {
		return nil, err
	}
	sched := probes.New(probes.Options{
		URL:      x.vllmURL,
		URLs:     x.vllmURLs,
		Up:       scraper.EndpointUp,
		Upstream: up,
		VLLM:     scraper.Latest,
		ServerTTFT: func(model string, w time.Duration) snapshot.Value {
			return serverMedianTTFT(scraper.Window(w), model)
		},
		MaxEventBytes: f.maxEventBytes,
		Health:        x.health,
	}, x.config, log.With(x.logger, "component", "probes"))
	if err := x.registry.Register(sched); err != nil {
		return nil, err
	}
	x.goRun(sched.Run)
	return sched, nil
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
