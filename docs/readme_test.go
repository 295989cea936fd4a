package docs

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// The README stays a front door: short, with a picture, the set-up, the
// demo tour, one paragraph per way to deploy, and the way into docs/; the
// docs index reaches every page under docs/.
func TestReadmeIsAFrontDoor(t *testing.T) {
	root := testutil.ModuleRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	if n := strings.Count(readme, "\n"); n > 300 {
		t.Errorf("README.md has %d lines; keep it at most 300 and move reference material to docs/", n)
	}
	img := regexp.MustCompile(`!\[[^\]]+\]\((docs/images/[^)]+\.(?:svg|png))\)`).FindStringSubmatch(readme)
	if img == nil {
		t.Error("README.md shows no picture from docs/images/")
	} else if strings.HasSuffix(img[1], ".svg") {
		svg, err := os.ReadFile(filepath.Join(root, img[1]))
		if err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(bytes.NewReader(svg))
		for {
			if _, err := dec.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s is not well-formed XML: %v", img[1], err)
			}
		}
	}
	for _, want := range []string{"--demo", "# run every test", "**Helm**", "**Kustomize**", "**Docker**", "**systemd**", "(docs/README.md)", "(LICENSE)", "(CHANGELOG.md)"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md lacks %q", want)
		}
	}

	index, err := os.ReadFile(filepath.Join(root, "docs", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, p := range pages {
		name := filepath.Base(p)
		if name != "README.md" && !strings.Contains(string(index), "]("+name) {
			t.Errorf("docs/README.md does not link %s", name)
		}
	}
	for _, section := range []string{"## Operator's guide", "## Developer's guide"} {
		if !strings.Contains(string(index), section) {
			t.Errorf("docs/README.md lacks %q", section)
		}
	}
}
