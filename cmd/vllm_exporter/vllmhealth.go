package main

import (
	"context"
	"net/http"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/vllmhealth"
)

// The health verdict (/-/vllm/healthy, /-/vllm/ready, vllm_health_verdict)
// starts after the classifier (order 40) so that it can read its classes,
// and is recomputed after each watchdog tick (which follows each scrape),
// or on each scrape when the watchdog is off.
func init() {
	register(extension{name: "vllmhealth", order: 50, start: startVLLMHealth})
}

func startVLLMHealth(_ context.Context, x *exporter) error {
	src := vllmhealth.Sources{VLLM: x.vllm}
	if x.probes != nil {
		src.Probes = x.probes
	}
	if c := bnFlags.classifier; c != nil {
		src.Classes = func() map[string]string {
			out := map[string]string{}
			for _, st := range c.States() {
				out[st.Model] = string(st.Class)
			}
			return out
		}
	}
	t := vllmhealth.New(src)
	if err := x.registry.Register(t); err != nil {
		return err
	}
	if x.handlers == nil {
		x.handlers = map[string]http.Handler{}
	}
	x.handlers["GET /-/vllm/healthy"] = t.LiveHandler()
	x.handlers["GET /-/vllm/ready"] = t.ReadyHandler()
	if sloWatchdog != nil {
		sloWatchdog.AddHook(t)
		return nil
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
	return nil
}
