package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// histMode is one way Prometheus 3 stores the histograms it scrapes: the
// scrape-config fields that select it, and which representations of the
// exporter's two kinds of histograms it must hold (the probe histograms are
// exposed classic and native; vLLM's, re-exported, classic only).
type histMode struct {
	name   string
	scrape map[string]any
	// what the TSDB must hold: classic _bucket series and native
	// histograms, of a probe histogram and of a vLLM histogram
	probeClassic, probeNative, serverClassic, serverNative bool
}

// histModes are the modes every end-to-end test runs in.
var histModes = []histMode{
	{name: "classic", scrape: map[string]any{},
		probeClassic: true, serverClassic: true},
	{name: "native", scrape: map[string]any{"scrape_native_histograms": true},
		probeNative: true, serverClassic: true},
	{name: "native+classic", scrape: map[string]any{"scrape_native_histograms": true, "always_scrape_classic_histograms": true},
		probeClassic: true, probeNative: true, serverClassic: true},
	{name: "nhcb", scrape: map[string]any{"convert_classic_histograms_to_nhcb": true},
		probeNative: true, serverNative: true},
	{name: "nhcb+classic", scrape: map[string]any{"convert_classic_histograms_to_nhcb": true, "always_scrape_classic_histograms": true},
		probeClassic: true, probeNative: true, serverClassic: true, serverNative: true},
}

// checkStorage fails unless Prometheus holds exactly the representations
// the mode promises (so a run really exercises the mode it names).
func (m histMode) checkStorage(pc promClient) error {
	for _, c := range []struct {
		name              string
		classic, native   bool
		classicQ, nativeQ string
	}{
		{"probe", m.probeClassic, m.probeNative,
			`count(vllm_probe_time_to_first_token_seconds_bucket)`, `vllm_probe_time_to_first_token_seconds`},
		{"vLLM", m.serverClassic, m.serverNative,
			`count(vllm_time_to_first_token_seconds_bucket)`, `vllm_time_to_first_token_seconds`},
	} {
		res, err := pc.query(c.classicQ)
		if err != nil {
			return err
		}
		if got := len(res) > 0; got != c.classic {
			return fmt.Errorf("%s: %s histogram stored as classic buckets: %v, want %v", m.name, c.name, got, c.classic)
		}
		res, err = pc.query(c.nativeQ)
		if err != nil {
			return err
		}
		native := false
		for _, r := range res {
			native = native || r.Histogram != nil
		}
		if native != c.native {
			return fmt.Errorf("%s: %s histogram stored as a native histogram: %v, want %v (%d series)", m.name, c.name, native, c.native, len(res))
		}
	}
	return nil
}

// modeRun is one histogram mode's Prometheus and Alertmanager.
type modeRun struct {
	mode histMode
	hook *webhook
	a    *alerting
}

// startModes starts one Alertmanager (amCfg(webhook URL)) and Prometheus
// per histogram mode, each with its own webhook, all scraping targets, in
// parallel.
func startModes(t *testing.T, amCfg func(url string) []byte, global map[string]any, ruleFiles, targets []string, extra ...*proc) []*modeRun {
	t.Helper()
	runs := make([]*modeRun, len(histModes))
	for i, m := range histModes {
		hook := newWebhook(t)
		runs[i] = &modeRun{mode: m, hook: hook,
			a: startAlertingNoWait(t, m.name, hook, amCfg(hook.srv.URL), global, m.scrape, ruleFiles, targets, extra...)}
	}
	for _, r := range runs {
		r.a.waitReady(t)
	}
	return runs
}

// eachMode runs f for every mode concurrently and waits; f reports with
// t.Errorf (not Fatal: other goroutines than the test's).
func eachMode(runs []*modeRun, f func(r *modeRun)) {
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() { defer wg.Done(); f(r) }()
	}
	wg.Wait()
}

// poll calls cond every interval until it returns nil (true) or timeout
// passes (false, with its last error), or a process exits. The processes
// are real, out of testing/synctest's sight, hence the sleep between polls.
func poll(timeout time.Duration, procs []*proc, cond func() error) (time.Duration, error) {
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(start), nil
		}
		for _, p := range procs {
			if p.exited() {
				return time.Since(start), fmt.Errorf("%s exited: %v\n%s", p.name, err, tail(p.log, 20))
			}
		}
		if time.Since(start) > timeout {
			return time.Since(start), fmt.Errorf("not within %v: %w", timeout, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// matrix collects "row x mode -> text" cells and renders a table.
type matrix struct {
	mu    sync.Mutex
	rows  []string
	cells map[string]map[string]string
}

func (x *matrix) set(row, mode, v string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cells == nil {
		x.cells = map[string]map[string]string{}
	}
	if x.cells[row] == nil {
		x.cells[row] = map[string]string{}
		x.rows = append(x.rows, row)
	}
	x.cells[row][mode] = v
}

func (x *matrix) String() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "  %-22s", "")
	for _, m := range histModes {
		fmt.Fprintf(&b, " %15s", m.name)
	}
	for _, r := range x.rows {
		fmt.Fprintf(&b, "\n  %-22s", r)
		for _, m := range histModes {
			v := x.cells[r][m.name]
			if v == "" {
				v = "-"
			}
			fmt.Fprintf(&b, " %15s", v)
		}
	}
	return b.String()
}
