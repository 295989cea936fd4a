//go:build !race

package vllm

const raceEnabled = false
