package interop

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/slo"
)

// slothWindowsOf extracts the AlertWindows file a document's head comment
// carries (the lines after "# apiVersion: sloth.slok.dev/v1"), as a user
// following the comment would.
func slothWindowsOf(doc []byte) string {
	var out []string
	in := false
	for _, l := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(l, "#") {
			if in {
				break
			}
			continue
		}
		l = strings.TrimPrefix(strings.TrimPrefix(l, "#"), " ")
		if strings.HasPrefix(l, "apiVersion: sloth.slok.dev/v1") {
			in = true
		}
		if in {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Sloth's own loader, validation and generator (v0.16.0) accept every
// document of the Sloth output, and the error ratios Sloth's rules record
// equal the exporter's, per model, on the same series in promtool.
func TestSlothGeneratesTheSameSLIsAsTheExporter(t *testing.T) {
	bin := tool(t, "slothcheck")
	for _, fx := range fixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			b, err := Sloth(fx.slos, fx.opts)
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]config.SLO{}
			for _, s := range fx.slos {
				byName[s.Name] = withDefaults(s)
			}
			rules := map[string][]byte{}
			var checks []sameRatio
			seen := map[string]bool{}
			var periods []time.Duration
			for i, doc := range splitDocs(b) {
				var spec slothSpec
				if err := yaml.Unmarshal(doc, &spec); err != nil {
					t.Fatal(err)
				}
				if spec.Version != "prometheus/v1" || len(spec.SLOs) == 0 {
					t.Fatalf("document %d: version %q with %d SLOs", i, spec.Version, len(spec.SLOs))
				}
				first := byName[spec.SLOs[0].Name]
				period := first.PeriodDuration()
				periods = append(periods, period)
				args := []string{period.String()}
				if w := slothWindowsOf(doc); w != "" {
					dir := t.TempDir()
					if err := os.WriteFile(filepath.Join(dir, "windows.yml"), []byte(w), 0o644); err != nil {
						t.Fatal(err)
					}
					args = append(args, dir)
				} else if period != config.DefaultSLOPeriod {
					t.Fatalf("document %d (period %s) carries no AlertWindows", i, period)
				}
				out := run(t, doc, bin, args...)
				rules[fmt.Sprintf("sloth-%d.yml", i)] = out
				ws := slo.Windows(period)
				for _, ss := range spec.SLOs {
					want, ok := byName[ss.Name]
					if !ok || seen[ss.Name] {
						t.Fatalf("document %d: unexpected or repeated SLO %q", i, ss.Name)
					}
					seen[ss.Name] = true
					if want.PeriodDuration() != period {
						t.Errorf("%s (period %s) is in the %s document", ss.Name, want.PeriodDuration(), period)
					}
					if ss.Objective != percent(want.Objective) {
						t.Errorf("%s: objective %v, want %v%%", ss.Name, ss.Objective, percent(want.Objective))
					}
					// Sloth's generated rules hold the exporter's queries
					// for every window, and its alerts the same budget
					// burn factors (for 30d Sloth's built-in windows).
					q, err := slo.NewSLIQueries(want, fx.opts.Selector)
					if err != nil {
						t.Fatal(err)
					}
					for _, w := range ws {
						n := slo.WindowName(w)
						if !strings.Contains(squash(string(out)), squash(q.Bad(n))) || !strings.Contains(squash(string(out)), squash(q.Total(n))) {
							t.Errorf("%s: Sloth's rules lack the exporter's %s queries", ss.Name, n)
						}
					}
					for _, pr := range append(append([]slo.AlertPair{}, slo.PagePairs...), slo.TicketPairs...) {
						long := regexp.MustCompile(regexp.QuoteMeta(fmt.Sprintf(`slo:sli_error:ratio_rate%s{sloth_id="%s-%s", sloth_service="%s", sloth_slo="%s"} > (`,
							slo.WindowName(ws[pr.Long]), spec.Service, ss.Name, spec.Service, ss.Name)) + `([0-9.e+-]+) \* ([0-9.e+-]+)\)`)
						m := long.FindStringSubmatch(string(out))
						if m == nil {
							t.Errorf("%s: Sloth's alerts have no condition over %s", ss.Name, slo.WindowName(ws[pr.Long]))
							continue
						}
						f, _ := strconv.ParseFloat(m[1], 64)
						budget, _ := strconv.ParseFloat(m[2], 64)
						if math.Abs(f-pr.Factor) > 1e-6*pr.Factor || math.Abs(budget-want.ErrorBudget()) > 1e-9 {
							t.Errorf("%s: Sloth burns at %s x %s over %s, want %v x %v", ss.Name, m[1], m[2], slo.WindowName(ws[pr.Long]), pr.Factor, want.ErrorBudget())
						}
					}
					checks = append(checks, sameRatio{
						ours:   fmt.Sprintf(`slo:sli_error:ratio_rate%s{slo=%q}`, slo.WindowName(ws[0]), ss.Name),
						theirs: fmt.Sprintf(`slo:sli_error:ratio_rate%s{sloth_slo=%q}`, slo.WindowName(ws[0]), ss.Name),
						models: modelsOf[fx.name][ss.Name],
					}, sameRatio{
						ours:   fmt.Sprintf(`slo:sli_error:ratio_rate%s{slo=%q}`, slo.WindowName(ws[1]), ss.Name),
						theirs: fmt.Sprintf(`slo:sli_error:ratio_rate%s{sloth_slo=%q}`, slo.WindowName(ws[1]), ss.Name),
						models: modelsOf[fx.name][ss.Name],
					})
				}
			}
			if len(seen) != len(fx.slos) {
				t.Fatalf("Sloth output holds %d of %d SLOs", len(seen), len(fx.slos))
			}
			for _, s := range byName {
				if s.PeriodDuration() == config.DefaultSLOPeriod && periods[0] != config.DefaultSLOPeriod {
					t.Errorf("the 30d document is not first: %v", periods)
				}
			}
			promtoolSame(t, fx, rules, checks)
		})
	}
}
