package testutil

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// ShippedReader reports whether a shipped alert, recording rule or
// dashboard (alerts/*.yml, dashboards/*.json) reads a metric family: the
// family's name, or a histogram's with _bucket, _sum or _count, as a whole
// metric name in their text. A family exported by default that none reads
// is opt-in (docs/cost.md).
func ShippedReader(t testing.TB) func(family string) bool {
	t.Helper()
	root := ModuleRoot(t)
	var text strings.Builder
	for _, pattern := range []string{"alerts/*.yml", "dashboards/*.json"} {
		paths, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil || len(paths) == 0 {
			t.Fatalf("no shipped files match %s (%v)", pattern, err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			text.Write(b)
			text.WriteByte('\n')
		}
	}
	shipped := text.String()
	return func(family string) bool {
		re := regexp.MustCompile(`(^|[^a-zA-Z0-9_:])` + regexp.QuoteMeta(family) + `(_bucket|_sum|_count)?($|[^a-zA-Z0-9_:])`)
		return re.MatchString(shipped)
	}
}
