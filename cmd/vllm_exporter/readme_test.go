package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/probes"
)

// TestDocsDocumentEveryFlag keeps the documentation (README.md and docs/)
// true for a newcomer: every flag the binary accepts, on the serve command
// and on each subcommand, must be documented there as `--name`.
func TestDocsDocumentEveryFlag(t *testing.T) {
	readme := []byte(testutil.DocsText(t))
	model := newCLI().app.Model()
	check := func(where string, flags []*kingpin.FlagModel) {
		for _, f := range flags {
			if f.Hidden || f.Name == "help" || f.Name == "version" || f.Name == "help-long" || f.Name == "help-man" || f.Name == "completion-bash" || f.Name == "completion-script-bash" || f.Name == "completion-script-zsh" {
				continue
			}
			// --name, not a prefix of a longer flag (--vllm.url vs --vllm.url-x).
			documented := regexp.MustCompile(`--(\[no-\])?` + regexp.QuoteMeta(f.Name) + `([^a-z0-9._-]|$)`)
			if !documented.Match(readme) {
				t.Errorf("the docs (README.md, docs/) do not document %s flag --%s (%s)", where, f.Name, f.Help)
			}
		}
	}
	check("serve", model.Flags)
	for _, c := range model.Commands {
		check(c.Name, c.Flags)
		if !strings.Contains(string(readme), program+" "+c.Name) && c.Name != "serve" && c.Name != "help" {
			t.Errorf("the docs (README.md, docs/) do not show the %q subcommand (as `%s %s`)", c.Name, program, c.Name)
		}
	}
}

// tourStep is one numbered step of the README's tour: the minute it is
// read at, the series it names (with the label values it gives), and the
// --vllm.opt-in a sentence of it says a series needs.
type tourStep struct {
	minute int
	series []tourSeries
}

type tourSeries struct {
	name   string
	labels map[string]string
	optIn  string // "" at the defaults
}

// readmeTour parses the steps of the README's "A five-minute tour".
func readmeTour(t *testing.T) []tourStep {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.ModuleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, tour, ok := strings.Cut(string(b), "\n## A five-minute tour\n")
	if !ok {
		t.Fatal(`README.md has no "## A five-minute tour"`)
	}
	tour, _, _ = strings.Cut(tour, "\n## ")
	itemRE := regexp.MustCompile(`(?m)^\d+\. \*\*Minute (\d+)\b[^*]*\*\*`)
	seriesRE := regexp.MustCompile(`\b(vllm_[a-z0-9_]+)(\{[^}]*\})?`)
	optInRE := regexp.MustCompile("`--vllm\\.opt-in=([a-z0-9_,-]+)`")
	labelRE := regexp.MustCompile(`([a-z_]+)="([^"]*)"`)
	var steps []tourStep
	starts := itemRE.FindAllStringSubmatchIndex(tour, -1)
	for i, m := range starts {
		end := len(tour)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		text := tour[m[1]:end]
		if j := regexp.MustCompile(`\n\n\S`).FindStringIndex(text); j != nil {
			text = text[:j[0]] // the list item ends where unindented text starts
		}
		minute, _ := strconv.Atoi(tour[m[2]:m[3]])
		step := tourStep{minute: minute}
		for _, sentence := range regexp.MustCompile(`\.\s`).Split(text, -1) {
			optIn := ""
			if o := optInRE.FindStringSubmatch(sentence); o != nil {
				optIn = o[1]
			}
			for _, code := range regexp.MustCompile("`[^`]+`").FindAllString(sentence, -1) {
				for _, s := range seriesRE.FindAllStringSubmatch(code, -1) {
					ts := tourSeries{name: s[1], labels: map[string]string{}, optIn: optIn}
					for _, l := range labelRE.FindAllStringSubmatch(s[2], -1) {
						ts.labels[l[1]] = l[2]
					}
					step.series = append(step.series, ts)
				}
			}
		}
		steps = append(steps, step)
	}
	if len(steps) < 4 {
		t.Fatalf("found %d tour steps in README.md", len(steps))
	}
	return steps
}

// TestReadmeTourSeriesExist: every series the README's tour names exists
// at the minute the tour names it, on the exporter at its defaults watching
// --demo's simulated vLLM through its tour of regimes (on a virtual clock,
// scraped at the default interval, the SLO watchdog and the classifier
// ticking with each scrape, the default probe profile run once in the
// first minute, as its 15 s interval would); a series the tour says needs
// a --vllm.opt-in is checked on an exporter started with it instead.
func TestReadmeTourSeriesExist(t *testing.T) {
	steps := readmeTour(t)
	cfg := demoConfig(1)
	cfg.VirtualClock = true
	sim, err := vllmsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The simulator's streams move only as its clock is advanced: a probe's
	// request is let through at once, and the clock advanced while vLLM
	// works on it (between arrived and answered), no further.
	arrived, answered := make(chan struct{}, 1), make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api := strings.HasSuffix(r.URL.Path, "/completions")
		if api {
			arrived <- struct{}{}
			defer func() { answered <- struct{}{} }()
		}
		sim.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	exporters := map[string]*exporter{}
	last := 0
	for _, st := range steps {
		last = max(last, st.minute)
		for _, s := range st.series {
			if _, ok := exporters[s.optIn]; !ok {
				args := []string{"--vllm.url=" + srv.URL}
				if s.optIn != "" {
					args = append(args, "--vllm.opt-in="+s.optIn, "--no-probe.enabled")
				}
				exporters[s.optIn], _ = wiredExporter(t, args...)
			}
		}
	}
	defaults := exporters[""]
	if defaults == nil || defaults.probes == nil {
		t.Fatal("the tour names no series of the default exporter, or it runs no probes")
	}
	if iv := defaults.config.Get().Probes.Profiles[0].Interval; iv > time.Minute {
		t.Fatalf("the default probe profile runs every %v: no probe in minute 1", iv)
	}
	ctx := context.Background()
	start := sim.Now()
	scenarioAt := func(d time.Duration) string {
		var total time.Duration
		for _, sc := range demoScenarios {
			total += sc.dur
		}
		d %= total
		for _, sc := range demoScenarios {
			if d < sc.dur {
				return sc.name
			}
			d -= sc.dur
		}
		return demoScenarios[0].name
	}
	probed := false
	checked := map[int]bool{}
	for sim.Now().Sub(start) <= time.Duration(last+1)*time.Minute {
		elapsed := sim.Now().Sub(start)
		if sc := scenarioAt(elapsed); sc != sim.Scenario().Name {
			if err := sim.SetScenario(sc); err != nil {
				t.Fatal(err)
			}
		}
		if !probed && elapsed >= 30*time.Second {
			probed = true
			done := make(chan probes.Result, 1)
			go func() { res, _ := defaults.probes.ProbeOnce(ctx, "short-chat"); done <- res }()
			select {
			case <-arrived:
				for len(answered) == 0 {
					sim.Advance(10 * time.Millisecond)
					runtime.Gosched()
				}
			case res := <-done:
				t.Fatalf("the probe sent no request: %s %s", res.Reason, res.Detail)
			}
			if res := <-done; res.Reason != "" {
				t.Fatalf("the probe failed: %s %s", res.Reason, res.Detail)
			}
			t.Logf("the probe took %v of the simulator's time", sim.Now().Sub(start)-elapsed)
		}
		for _, x := range exporters {
			x.vllm.ScrapeOnce(ctx, sim.Now())
			x.slo.Tick(sim.Now())
		}
		for _, st := range steps { // "minute M": by the last scrape within it
			if end := time.Duration(st.minute+1) * time.Minute; checked[st.minute] || elapsed+vllm.DefaultInterval < end {
				continue
			}
			checked[st.minute] = true
			pages := map[string]string{}
			for optIn, x := range exporters {
				mfs, err := x.registry.Gather()
				if err != nil {
					t.Fatal(err)
				}
				pages[optIn] = testutil.Encode(t, mfs)
			}
			for _, s := range st.series {
				if !tourSeriesIn(pages[s.optIn], s) {
					t.Errorf("README tour minute %d names %s%v (opt-in %q), absent at %v (scenario %s)", st.minute, s.name, s.labels, s.optIn, elapsed, sim.Scenario().Name)
				}
			}
		}
		sim.Advance(vllm.DefaultInterval)
	}
	for _, st := range steps {
		if !checked[st.minute] {
			t.Errorf("minute %d never checked", st.minute)
		}
	}
}

// tourSeriesIn reports whether the exposition text page has a sample of
// s.name (the series itself, or the _bucket/_sum/_count of a histogram)
// with s's label values.
func tourSeriesIn(page string, s tourSeries) bool {
	for line := range strings.Lines(page) {
		i := strings.IndexAny(line, "{ ")
		if strings.HasPrefix(line, "#") || i < 0 {
			continue
		}
		if name := line[:i]; name != s.name && name != s.name+"_bucket" && name != s.name+"_sum" && name != s.name+"_count" {
			continue
		}
		ok := true
		for k, v := range s.labels {
			ok = ok && strings.Contains(line[i:], k+`="`+v+`"`)
		}
		if ok {
			return true
		}
	}
	return false
}
