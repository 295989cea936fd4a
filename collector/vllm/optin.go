package vllm

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
)

// Series that are off by default because no shipped alert, dashboard
// panel or verdict reads them (docs/cost.md); --vllm.opt-in turns each on.
const (
	// OptInWindowSeries exports the series derived over each
	// --vllm.windows window (rates, ratios, window quantile summaries).
	// The windows are derived either way: the classifier and the probes'
	// server-side comparison read them in process.
	OptInWindowSeries = "window-series"
	// OptInExpectedPresent exports vllm_exporter_expected_metric_missing
	// as 0 for every expected family that is present, not only 1 for the
	// absent ones.
	OptInExpectedPresent = "expected-metric-present"
)

// OptInNames are the values --vllm.opt-in accepts: the two above and the
// exported name of every opt-in family.
func OptInNames() []string {
	out := []string{OptInWindowSeries, OptInExpectedPresent}
	for i := range families.Rows {
		if families.Rows[i].OptIn {
			out = append(out, families.Rows[i].Exported)
		}
	}
	return out
}

// ValidateOptIn refuses a name --vllm.opt-in does not know.
func ValidateOptIn(names []string) error {
	known := OptInNames()
	for _, n := range names {
		if !slices.Contains(known, n) {
			return fmt.Errorf("--vllm.opt-in: unknown series %q (known: %s)", n, strings.Join(known, ", "))
		}
	}
	return nil
}

func optInSet(names []string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

// exported reports whether the row's series are exported under optIn.
func exported(f *families.Family, optIn map[string]bool) bool {
	return !f.OptIn || optIn[f.Exported]
}
