// Package docs holds the operator's and developer's guides. Its test keeps
// every relative link of the repository's Markdown pointing somewhere real.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

var (
	linkRE    = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	anchorRE  = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	codeRE    = regexp.MustCompile("`[^`]*`")
)

// slug is GitHub's heading anchor: lower case, letters, digits, '-' and '_'
// kept, spaces turned into '-', everything else dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// page is a Markdown file's links and anchors, code blocks left out.
type page struct {
	links   []string
	anchors map[string]bool
}

func readPage(path string) (page, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return page{}, err
	}
	p := page{anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range anchorRE.FindAllStringSubmatch(line, -1) {
			p.anchors[m[1]] = true
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			// Markdown links in a heading keep only their text in the anchor.
			text := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(m[1], "$1")
			s := slug(text)
			if n := seen[s]; n > 0 {
				p.anchors[s+"-"+strconv.Itoa(n)] = true
			} else {
				p.anchors[s] = true
			}
			seen[s]++
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeRE.ReplaceAllString(line, ""), -1) {
			p.links = append(p.links, m[1])
		}
	}
	return p, nil
}

// markdownFiles lists the repository's own Markdown: everything but .git,
// testdata (fixtures quote other projects) and hidden folders.
func markdownFiles(t *testing.T, root string) []string {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin" || d.Name() == "dist") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRelativeLinksResolve: every relative link and image of every Markdown
// file points at a file or folder that exists, and a #fragment names a
// heading (or an explicit anchor) of the Markdown page it points at.
func TestRelativeLinksResolve(t *testing.T) {
	root := testutil.ModuleRoot(t)
	files := markdownFiles(t, root)
	pages := map[string]page{}
	load := func(p string) (page, error) {
		if pg, ok := pages[p]; ok {
			return pg, nil
		}
		pg, err := readPage(p)
		if err == nil {
			pages[p] = pg
		}
		return pg, err
	}
	checked := 0
	for _, f := range files {
		pg, err := load(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, link := range pg.links {
			if regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(link) {
				continue // http:, https:, mailto: ...
			}
			checked++
			target, frag, _ := strings.Cut(link, "#")
			dest := f
			if target != "" {
				dest = filepath.Join(filepath.Dir(f), filepath.FromSlash(target))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %q: %s does not exist", rel, link, target)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			tp, err := load(dest)
			if err != nil {
				t.Errorf("%s: link %q: %v", rel, link, err)
				continue
			}
			if !tp.anchors[frag] {
				t.Errorf("%s: link %q: no heading or anchor #%s in %s", rel, link, frag, target)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the link test is not looking at the docs")
	}
}

// TestSlug pins the anchor rule on headings the docs really use.
func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Exporter core (`collector/vllm`, `collector`)": "exporter-core-collectorvllm-collector",
		"SLOs: error budgets and burn rates":            "slos-error-budgets-and-burn-rates",
		"vllm_exporter rules --format":                  "vllm_exporter-rules---format",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}
