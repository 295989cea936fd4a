package main

// Start-up validation of every serving flag, run right after parsing (and
// by --config.check), so that a bad value is refused at start with a
// message naming the flag instead of being replaced by a default, or
// failing later at every scrape or checkpoint.

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
)

// Bounds of the serving flags that have no natural one. They are far from
// any real deployment and exist so that a typo (an extra digit, a negative
// sign) is refused rather than obeyed.
const (
	// maxBodyBytesLimit: vLLM's largest real bodies are 140 KB, the
	// simulator's 16 models x 16 engines 8.2 MB; 1 GiB is a typo.
	maxBodyBytesLimit = 1 << 30
	// maxSeriesLimit: a series costs the cache about 250 bytes.
	maxSeriesLimit = 10_000_000
	// maxModelsLimit: every model costs its series in the scraper, its
	// windows and the SLO watchdog; a thousand is not a sidecar's job.
	maxModelsLimit = 1024
	// probe.max-event-bytes: a streamed chunk is a few hundred bytes; an
	// event smaller than 1 KiB cannot hold vLLM's usage block, one larger
	// than 64 MiB is not an SSE event.
	minEventBytes = 1 << 10
	maxEventBytes = 64 << 20
)

// validateFlags refuses every serving flag whose value the exporter would
// otherwise replace, ignore or fail on later; errors start with the flag's
// name. It also settles --vllm.timeout when it was not given: 4s, or the
// scrape interval when that is shorter (as Prometheus treats
// scrape_timeout).
func validateFlags(f *flags) error {
	if err := validateCoreFlags(f); err != nil {
		return err
	}
	if f.probe != nil {
		if n := f.probe.maxEventBytes; n < minEventBytes || n > maxEventBytes {
			return fmt.Errorf("--probe.max-event-bytes: must be in [%d, %d], got %d", minEventBytes, maxEventBytes, n)
		}
	}
	if f.slo != nil {
		if err := positiveDuration("slo.interval", *f.slo.interval); err != nil {
			return err
		}
		if *f.slo.checkpointInterval < 0 {
			return fmt.Errorf("--slo.checkpoint-interval: must be >= 0 (0: at every evaluation), got %s", *f.slo.checkpointInterval)
		}
		if *f.slo.stateFile != "" {
			if err := writableDir("slo.state-file", *f.slo.stateFile); err != nil {
				return err
			}
		}
	}
	if f.gpu != nil {
		if err := positiveDuration("collector.gpu.interval", *f.gpu.interval); err != nil {
			return err
		}
	}
	if f.bottleneck != nil {
		return f.bottleneck.validate()
	}
	return nil
}

func validateCoreFlags(f *flags) error {
	if err := validateWebFlags(f.web); err != nil {
		return err
	}
	if !f.demo {
		if _, err := f.resolveServers(config.Default()); err != nil {
			return err
		}
	}
	if err := positiveDuration("vllm.scrape-interval", f.interval); err != nil {
		return err
	}
	if !f.timeoutSet {
		f.timeout = min(vllm.DefaultTimeout, f.interval)
	}
	if err := positiveDuration("vllm.timeout", f.timeout); err != nil {
		return err
	}
	if f.timeoutSet && f.timeout >= f.interval {
		return fmt.Errorf("--vllm.timeout: must be shorter than --vllm.scrape-interval (%s), got %s", f.interval, f.timeout)
	}
	if f.maxBodyBytes <= 0 || f.maxBodyBytes > maxBodyBytesLimit {
		return fmt.Errorf("--vllm.max-body-bytes: must be in [1, %d], got %d", maxBodyBytesLimit, f.maxBodyBytes)
	}
	if f.maxSeries <= 0 || f.maxSeries > maxSeriesLimit {
		return fmt.Errorf("--vllm.max-series: must be in [1, %d], got %d", maxSeriesLimit, f.maxSeries)
	}
	if err := vllm.ValidateOptIn(optInList(f.optIn)); err != nil {
		return err
	}
	if _, err := parseWindows(f.windows, f.interval); err != nil {
		return err
	}
	if f.maxModels <= 0 || f.maxModels > maxModelsLimit {
		return fmt.Errorf("--vllm.max-models: must be in [1, %d], got %d", maxModelsLimit, f.maxModels)
	}
	if err := positiveDuration("vllm.model-idle-timeout", f.modelIdle); err != nil {
		return err
	}
	if err := positiveDuration("vllm.model-grace", f.modelGrace); err != nil {
		return err
	}
	if f.modelGrace > f.modelIdle {
		return fmt.Errorf("--vllm.model-grace: must not exceed --vllm.model-idle-timeout (%s), got %s", f.modelIdle, f.modelGrace)
	}
	if p := f.telemetryPath; !strings.HasPrefix(p, "/") || strings.ContainsAny(p, " \t{}") {
		return fmt.Errorf("--web.telemetry-path: must be a path starting with /, got %q", p)
	}
	return nil
}

// resolveServers is where vLLM's API servers are: in the flags, or in the
// vllm: section of cf when it names them (then the flags must not).
func (f *flags) resolveServers(cf *config.File) (config.Servers, error) {
	s, name := config.Servers{URLs: f.vllmURLs, DataParallelRanks: f.ranks, SupervisorURL: f.supervisorURL}, "--vllm.url"
	if file := cf.VLLM.Servers; len(file.URLs) > 0 {
		if f.urlSet || f.ranksSet || f.supervisorURL != "" {
			return s, errors.New("--vllm.url, --vllm.data-parallel-ranks and --vllm.supervisor-url, or vllm.urls in --config.file: use one")
		}
		s, name = file, "vllm.urls"
	}
	urls, err := s.Resolve()
	if err != nil {
		return s, fmt.Errorf("%s: %w", name, err)
	}
	if err := s.CheckSupervisor(len(urls)); err != nil {
		return s, fmt.Errorf("--vllm.supervisor-url: %w", err)
	}
	s.URLs = urls
	return s, nil
}

// servers resolves the API servers for the running exporter (none with
// --demo): the first is f.vllmURL; several are returned with the
// supervisor. A reload that would change them fails: they take effect at
// start.
func (f *flags) servers(h *config.Holder) ([]string, string, error) {
	if f.demo {
		return nil, "", nil
	}
	s, err := f.resolveServers(h.Get())
	if err != nil {
		return nil, "", err
	}
	f.vllmURL = s.URLs[0]
	h.Check(func(cf *config.File) error {
		if now, err := f.resolveServers(cf); err != nil || !slices.Equal(now.URLs, s.URLs) || now.SupervisorURL != s.SupervisorURL {
			return errors.Join(err, errors.New("vllm: urls, data_parallel_ranks and supervisor_url take effect at start only; restart the exporter"))
		}
		return nil
	})
	if len(s.URLs) == 1 {
		return nil, "", nil
	}
	return s.URLs, s.SupervisorURL, nil
}

// validateWebFlags refuses a listen address that cannot be listened on and
// a web configuration file that does not load, before anything starts.
func validateWebFlags(w *web.FlagConfig) error {
	if w == nil {
		return nil
	}
	for _, addr := range *w.WebListenAddresses {
		_, port, err := net.SplitHostPort(addr)
		if err == nil {
			if n, nerr := strconv.Atoi(port); nerr == nil && (n < 0 || n > 65535) {
				err = fmt.Errorf("port %d is not in [0, 65535]", n)
			} else if nerr != nil {
				_, err = net.LookupPort("tcp", port) // a service name, from /etc/services
			}
		}
		if err != nil {
			return fmt.Errorf("--web.listen-address: %q: %v", addr, err)
		}
	}
	if wc := *w.WebConfigFile; wc != "" {
		if err := web.Validate(wc); err != nil {
			return fmt.Errorf("--web.config.file: %s: %v", wc, err)
		}
	}
	return nil
}

func positiveDuration(flag string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("--%s: must be a positive duration, got %s", flag, d)
	}
	return nil
}

func finiteNonNegative(flag string, v float64) error {
	if !(v >= 0) || math.IsInf(v, 0) {
		return fmt.Errorf("--%s: must be a finite number >= 0, got %v", flag, v)
	}
	return nil
}

// writableDir checks that file could be created: its directory exists, is
// a directory, and accepts a new file (probed with a temporary file that is
// removed at once). A checkpoint file that cannot be written would
// otherwise fail at every tick, from the first one on.
func writableDir(flag, file string) error {
	dir := filepath.Dir(file)
	st, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("--%s: directory %s: %w", flag, dir, errors.Unwrap(err))
	case !st.IsDir():
		return fmt.Errorf("--%s: %s is not a directory", flag, dir)
	}
	if st, err := os.Stat(file); err == nil && st.IsDir() {
		return fmt.Errorf("--%s: %s is a directory", flag, file)
	}
	probe, err := os.CreateTemp(dir, "."+filepath.Base(file)+".probe-*")
	if err != nil {
		return fmt.Errorf("--%s: directory %s is not writable: %w", flag, dir, errors.Unwrap(err))
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}
