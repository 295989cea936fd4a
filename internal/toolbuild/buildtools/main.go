// Command buildtools builds every pinned tool module under internal/tools
// (Prometheus and promtool of each pinned version, Alertmanager and amtool)
// into the test tool cache, in parallel, and prints how long each took.
// `make tools` and .ci/run run it before the tests, so no test waits for a
// build under its own timeout; a module already cached takes no time.
//
//	go run ./internal/toolbuild/buildtools [module ...]
package main

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/toolbuild"
)

func main() {
	mods := os.Args[1:]
	if len(mods) == 0 {
		var err error
		if mods, err = toolbuild.Modules(); err != nil {
			fmt.Fprintln(os.Stderr, "buildtools:", err)
			os.Exit(1)
		}
	}
	cache, err := toolbuild.CacheDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildtools:", err)
		os.Exit(1)
	}
	fmt.Printf("buildtools: %d tool modules into %s\n", len(mods), cache)
	start := time.Now()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed bool
	)
	for _, m := range mods {
		wg.Go(func() {
			t0 := time.Now()
			dir, err := toolbuild.Build(m)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = true
				fmt.Fprintf(os.Stderr, "buildtools: %s FAILED after %.0fs: %v\n", m, time.Since(t0).Seconds(), err)
				return
			}
			fmt.Printf("buildtools: %-20s %5.0fs  %s\n", m, time.Since(t0).Seconds(), dir)
		})
	}
	wg.Wait()
	fmt.Printf("buildtools: all in %.0fs\n", time.Since(start).Seconds())
	if failed {
		os.Exit(1)
	}
}
