//go:build race

package probes

// raceEnabled: the race detector slows every goroutine handoff several-fold,
// so timing comparisons against the simulator are logged, not asserted.
const raceEnabled = true
