package main

import (
	"context"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/vllmhealth"
	"github.com/vllm-exporter/vllm_exporter/slo"
)

// startVLLMHealth is the health verdict (/-/vllm/healthy, /-/vllm/ready,
// vllm_health_verdict) over src, registered with its routes. It is
// recomputed after each watchdog tick (which follows each scrape, and the
// classifier's tick), or on each scrape when there is no watchdog.
func startVLLMHealth(x *exporter, src vllmhealth.Sources, w *slo.Watchdog) (*vllmhealth.Tracker, error) {
	t := vllmhealth.New(src)
	if err := x.registry.Register(t); err != nil {
		return nil, err
	}
	x.handle("GET /-/vllm/healthy", t.LiveHandler())
	x.handle("GET /-/vllm/ready", t.ReadyHandler())
	if w != nil {
		w.AddHook(t)
		return t, nil
	}
	x.goRun(func(ctx context.Context) {
		ch, cancel := x.vllm.Subscribe()
		defer cancel()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				t.Tick(time.Now())
			}
		}
	})
	return t, nil
}
