package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzParse feeds arbitrary documents to the strict config parser (every
// section: probes, SLOs, bottleneck thresholds). It must never panic; what
// it accepts must validate, parse the same way twice, and survive a
// marshal/parse round trip unchanged (so what `--config.check` accepts and
// what a reload loads are one and the same configuration).
func FuzzParse(f *testing.F) {
	f.Add(DefaultYAML)
	// Every YAML file shipped in the repository's config testdata (each
	// section owner's examples) is a seed too.
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.y*ml"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"", "---\n", "probes: {}\n---\nslos: []\n", "slos:\n- name: a\n- name: a\n",
		"unknown: 1\n", "slos: &a [*a]\n", "probes: !!binary AAAA\n", "slos: [{name: \"\\xff\"}]\n",
		"a: &a [*a, *a, *a, *a]\nb: &b [*a, *a, *a, *a]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		cfg, err := Parse(data, "fuzz")
		cfg2, err2 := Parse(data, "fuzz")
		if (err == nil) != (err2 == nil) {
			t.Fatalf("parsing twice disagrees: %v vs %v", err, err2)
		}
		if err != nil {
			if cfg != nil {
				t.Fatalf("Parse returned a config together with error %v", err)
			}
			if !strings.HasPrefix(err.Error(), "fuzz") {
				t.Fatalf("error does not name its source: %v", err)
			}
			return
		}
		if !reflect.DeepEqual(cfg, cfg2) {
			t.Fatalf("parsing twice gives different configs:\n%+v\n%+v", cfg, cfg2)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("accepted config does not marshal: %v", err)
		}
		back, err := Parse(out, "fuzz")
		if err != nil {
			t.Fatalf("accepted config does not survive a round trip: %v\n%s", err, out)
		}
		// Compared in YAML form: a nil and an empty list mean the same.
		if out2, err := yaml.Marshal(back); err != nil || string(out2) != string(out) {
			t.Fatalf("round trip changed the config (%v):\n%s\n---\n%s", err, out, out2)
		}
	})
}
