package e2e

import (
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// readmeNames returns the vllm_* series names a Markdown text mentions. A name
// written with a placeholder (`vllm_<h>_window_seconds`) stands for every
// fill that the text itself lists as a code span (`time_to_first_token`);
// `{a,b}` alternatives are expanded.
func readmeNames(readme string) (literal map[string]bool, templates []*regexp.Regexp) {
	literal = map[string]bool{}
	codeSpans := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z0-9_]+)`").FindAllStringSubmatch(readme, -1) {
		codeSpans[m[1]] = true
	}
	var fills []string
	for f := range codeSpans {
		fills = append(fills, regexp.QuoteMeta(f))
	}
	sort.Strings(fills)
	fill := "(?:" + strings.Join(fills, "|") + ")"
	for _, tok := range regexp.MustCompile(`vllm_(?:[a-z0-9_<>]|\{[a-z0-9_]*(?:,[a-z0-9_]*)+\})*[a-z0-9>}]`).FindAllString(readme, -1) {
		for _, name := range expandBraces(tok) {
			if !strings.Contains(name, "<") {
				literal[name] = true
				continue
			}
			parts := regexp.MustCompile(`<[a-z_]+>`).Split(name, -1)
			for i := range parts {
				parts[i] = regexp.QuoteMeta(parts[i])
			}
			if re, err := regexp.Compile("^" + strings.Join(parts, fill) + "$"); err == nil {
				templates = append(templates, re)
			}
		}
	}
	return literal, templates
}

// expandBraces turns "a_{x,y}_b" into "a_x_b", "a_y_b".
func expandBraces(s string) []string {
	i := strings.Index(s, "{")
	j := strings.Index(s, "}")
	if i < 0 || j < i {
		return []string{strings.NewReplacer("{", "", "}", "").Replace(s)}
	}
	var out []string
	for _, alt := range strings.Split(s[i+1:j], ",") {
		out = append(out, expandBraces(s[:i]+alt+s[j+1:])...)
	}
	return out
}

// family maps a series name to its metric family: histogram and summary
// sample names (_bucket, _sum, _count) to the family name.
func family(name string, cat *catalog) string {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suf)
		if !ok {
			continue
		}
		_, hasSum := cat.names[base+"_sum"]
		_, hasCount := cat.names[base+"_count"]
		if hasSum && hasCount {
			return base
		}
	}
	return name
}

// TestDocsMentionEverySeries keeps the documentation true: every vllm_*
// series family the exporter really exports (the catalog of a real run
// against the simulated vLLM plus every component's declared series) is
// mentioned in README.md or docs/. vLLM's own vllm:* names are not ours.
func TestDocsMentionEverySeries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the exporter and the simulator")
	}
	literal, templates := readmeNames(testutil.DocsText(t))
	cat := seriesCatalog(t)
	missing := map[string]string{}
	checked := 0
	for n, src := range cat.source {
		if !strings.HasPrefix(n, "vllm_") || (src != srcExporter && src != srcComponents) {
			continue
		}
		f := family(n, cat)
		if _, ok := missing[f]; ok {
			continue
		}
		checked++
		if literal[f] || literal[n] {
			continue
		}
		matched := false
		for _, re := range templates {
			if re.MatchString(f) {
				matched = true
				break
			}
		}
		if !matched {
			missing[f] = src
		}
	}
	if checked == 0 {
		t.Fatal("the catalog holds no vllm_* series of the exporter")
	}
	var names []string
	for f := range missing {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		t.Errorf("no doc (README.md, docs/) mentions series %s (seen in: %s); document it in the owning area's page under docs/", f, missing[f])
	}
}

func TestReadmeNames(t *testing.T) {
	lit, tmpl := readmeNames("| `vllm_gpu_pcie_{tx,rx}_bytes_per_second` | `vllm_<h>_window_seconds` |\n" +
		"`<h>` is each of `time_to_first_token`, `e2e_request_latency`.\nAlso vllm_up and `vllm_probe_skipped_total{reason=\"budget\"}`.")
	for _, n := range []string{"vllm_gpu_pcie_tx_bytes_per_second", "vllm_gpu_pcie_rx_bytes_per_second", "vllm_up", "vllm_probe_skipped_total"} {
		if !lit[n] {
			t.Errorf("%s not found in %v", n, lit)
		}
	}
	match := func(n string) bool {
		for _, re := range tmpl {
			if re.MatchString(n) {
				return true
			}
		}
		return false
	}
	if !match("vllm_time_to_first_token_window_seconds") || !match("vllm_e2e_request_latency_window_seconds") {
		t.Errorf("template fills not matched: %v", tmpl)
	}
	if match("vllm_request_queue_time_window_seconds") || match("vllm_window_seconds") {
		t.Errorf("template matched a fill README does not list: %v", tmpl)
	}
}
