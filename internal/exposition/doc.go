// Package exposition writes a collector's series straight into the
// exposition's data model (dto metric families) for /metrics, instead of as
// const metrics that a registry gathers, hashes and copies at every request.
//
// Why: at 16 models x 8 engines one gather through a registry allocated
// 1.4 MB in 24,000 allocations for the vLLM families and as much again for
// the SLO watchdog's and classifier's 1,500 gauges (a const metric, its
// label pairs and their strings, then a dto.Metric, its value and a hash
// per series). The collector's marks often fall in a /metrics request (its
// allocations start them), and what a request allocates during a mark
// counts as live for the next heap goal: RssAnon moved by a few MiB with
// whether a mark caught a gather. Written straight, the same families take
// a handful of blocks per type, sized from the last gather, and no hashing.
//
// The output is a registry's, family for family and series for series:
// families sorted by name, series by label values, label pairs by name, and
// a series repeated within a family dropped with an error, as the registry
// drops it. Each collector that writes this way keeps a Collect that sends
// the same series as const metrics (Sink has both modes), and its tests
// hold the two equal. A registry still checks the Descs once, when the
// collector's descriptors are registered.
package exposition
