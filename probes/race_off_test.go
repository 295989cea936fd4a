//go:build !race

package probes

const raceEnabled = false
