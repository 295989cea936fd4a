package bottleneck

import (
	"context"
	"time"
)

// WatchOptions drive a bounded diagnosis run (`vllm_exporter diagnose`).
// Scrape, Probe and Tick are injected so the same loop drives the
// exporter's own components against a live server and in tests under a
// virtual clock.
type WatchOptions struct {
	Target   string
	Duration time.Duration // total watch time
	Interval time.Duration // scrape + tick period
	Scrape   func(ctx context.Context, now time.Time)
	Probe    func(ctx context.Context, now time.Time) // optional, every tick before the scrape
	// Tick evaluates after each scrape (the SLO watchdog, which ticks the
	// classifier as its hook); default the classifier's own Tick.
	Tick func(now time.Time)
	// SLOs returns a model's configured SLOs as evaluated (optional).
	SLOs func(model string) []SLOLine
	// Now and Sleep default to the wall clock; Sleep returns ctx's error
	// when cancelled.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// GPUHour is echoed into the report's cost line.
	GPUHour float64
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Watch scrapes, probes and ticks the classifier for o.Duration, then builds
// the report from the classifier's final state and the sources' latest
// snapshots. Cancelling ctx ends the watch early and still returns a report
// of what was seen.
func Watch(ctx context.Context, c *Classifier, o WatchOptions) Report {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	if o.Interval <= 0 {
		o.Interval = 5 * time.Second
	}
	if o.Tick == nil {
		o.Tick = c.Tick
	}
	rep := Report{Target: o.Target, Started: o.Now()}
	end := rep.Started.Add(o.Duration)
	// Scrape at the start and every interval up to and including the end,
	// so --duration=60s watches 60 s (13 scrapes at 5 s), not 55.
	for {
		now := o.Now()
		if o.Probe != nil {
			o.Probe(ctx, now)
		}
		if o.Scrape != nil {
			o.Scrape(ctx, now)
		}
		rep.Scrapes++
		if c.src.VLLM == nil {
			// nothing to read
		} else if v := c.src.VLLM.Latest(); v != nil {
			rep.Schema = v.Schema
			if !v.Up {
				rep.ScrapeErrors++
				rep.LastError = v.Error
			}
		}
		o.Tick(now)
		if now.Add(o.Interval).After(end) || ctx.Err() != nil {
			break
		}
		if o.Sleep(ctx, o.Interval) != nil {
			break
		}
	}
	rep.Duration = o.Now().Sub(rep.Started)
	if c.src.GPU != nil {
		rep.GPUs = GPULines(c.src.GPU.Latest())
	}
	if c.src.Probes != nil {
		rep.Probes = ProbeLines(c.src.Probes.Latest())
	}
	for _, st := range c.States() {
		var slos []SLOLine
		if o.SLOs != nil {
			slos = o.SLOs(st.Model)
		}
		rep.Models = append(rep.Models, ModelReportFrom(st, c.thresholds().Window, o.GPUHour, slos))
	}
	return rep
}
