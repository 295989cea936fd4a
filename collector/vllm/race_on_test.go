//go:build race

package vllm

// raceEnabled: built with -race, where bytes.Buffer's growth allocates its
// new slice twice (the instrumented append does not elide the temporary).
const raceEnabled = true
