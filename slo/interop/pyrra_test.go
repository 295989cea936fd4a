package interop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/vllm-exporter/vllm_exporter/slo"
)

// pyrraCRDSchema compiles the openAPIV3Schema of Pyrra's published CRD
// (testdata/pyrra.dev_servicelevelobjectives.json, from the
// github.com/pyrra-dev/pyrra v0.9.5 module) as the Kubernetes API server
// applies it with strict field validation (kubectl apply
// --validate=strict): every object that lists its properties rejects
// unknown ones.
func pyrraCRDSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "pyrra.dev_servicelevelobjectives.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	crd, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	var schema any
	for _, v := range crd.(map[string]any)["spec"].(map[string]any)["versions"].([]any) {
		v := v.(map[string]any)
		if v["name"] == "v1alpha1" {
			schema = v["schema"].(map[string]any)["openAPIV3Schema"]
		}
	}
	if schema == nil {
		t.Fatal("CRD has no v1alpha1 schema")
	}
	var strict func(any)
	strict = func(n any) {
		switch n := n.(type) {
		case map[string]any:
			if props, ok := n["properties"].(map[string]any); ok {
				if _, set := n["additionalProperties"]; !set {
					n["additionalProperties"] = false
				}
				for _, p := range props {
					strict(p)
				}
			}
			if items, ok := n["items"]; ok {
				strict(items)
			}
		}
	}
	strict(schema)
	c := jsonschema.NewCompiler()
	if err := c.AddResource("pyrra-crd.json", schema); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("pyrra-crd.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// asJSON turns a YAML document into the JSON value the API server sees.
func asJSON(t *testing.T, doc []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPyrraMatchesTheCRDSchemaAndStatesTheSameSLOs(t *testing.T) {
	sch := pyrraCRDSchema(t)
	for _, fx := range fixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			b, err := Pyrra(fx.slos, fx.opts)
			if err != nil {
				t.Fatal(err)
			}
			docs := splitDocs(b)
			if len(docs) != len(fx.slos) {
				t.Fatalf("%d documents for %d SLOs", len(docs), len(fx.slos))
			}
			for i, doc := range docs {
				if err := sch.Validate(asJSON(t, doc)); err != nil {
					t.Errorf("document %d does not match Pyrra's CRD schema: %v\n%s", i, err, doc)
				}
				var got pyrraSLO
				if err := yaml.Unmarshal(doc, &got); err != nil {
					t.Fatal(err)
				}
				want := withDefaults(fx.slos[i])
				if got.APIVersion != "pyrra.dev/v1alpha1" || got.Kind != "ServiceLevelObjective" {
					t.Errorf("%s: %s %s", want.Name, got.APIVersion, got.Kind)
				}
				if target, err := strconv.ParseFloat(got.Spec.Target, 64); err != nil || target != percent(want.Objective) {
					t.Errorf("%s: target %q, want %v", want.Name, got.Spec.Target, percent(want.Objective))
				}
				if got.Spec.Window != shorthand(want.PeriodDuration()) {
					t.Errorf("%s: window %q, want %s", want.Name, got.Spec.Window, shorthand(want.PeriodDuration()))
				}
				// Pyrra reads the series the exporter's queries read, with
				// the same matchers: each selector is in the rules' ratio.
				q, err := slo.NewSLIQueries(want, fx.opts.Selector)
				if err != nil {
					t.Fatal(err)
				}
				ratio := q.Bad("5m") + q.Total("5m")
				var sels []string
				ind := got.Spec.Indicator
				switch {
				case ind.Latency != nil:
					bucket := ind.Latency.Success.Metric
					sels = []string{ind.Latency.Total.Metric, bucket[:strings.Index(bucket, "le=")]}
					if !strings.Contains(bucket, fmt.Sprintf(`le=%q`, strconv.FormatFloat(want.Threshold, 'g', -1, 64))) {
						t.Errorf("%s: success %s lacks le=%v", want.Name, bucket, want.Threshold)
					}
					if g := ind.Latency.Grouping; len(g) != 1 || g[0] != "model" {
						t.Errorf("%s: grouping %v", want.Name, g)
					}
				case ind.Ratio != nil:
					sels = []string{ind.Ratio.Errors.Metric, ind.Ratio.Total.Metric}
					if g := ind.Ratio.Grouping; len(g) != 1 || g[0] != "model" {
						t.Errorf("%s: grouping %v", want.Name, g)
					}
				default:
					t.Fatalf("%s: no indicator", want.Name)
				}
				for _, s := range sels {
					if !strings.Contains(ratio, s) {
						t.Errorf("%s: Pyrra selector %s is not in the exporter's query\n%s", want.Name, s, ratio)
					}
				}
			}
		})
	}
}

// The schema check is not vacuous: unknown or mistyped fields fail it.
func TestPyrraCRDSchemaRejectsABrokenDocument(t *testing.T) {
	sch := pyrraCRDSchema(t)
	fx := fixtures(t)[0]
	b, err := Pyrra(fx.slos, fx.opts)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(splitDocs(b)[0])
	for _, c := range []struct{ from, to string }{
		{"  target: \"99\"", "  target: 99"},
		{"  window: 30d", "  windo: 30d"},
		{"grouping:", "groupBy:"},
	} {
		broken := strings.Replace(doc, c.from, c.to, 1)
		if broken == doc {
			t.Fatalf("%q not in\n%s", c.from, doc)
		}
		if err := sch.Validate(asJSON(t, []byte(broken))); err == nil {
			t.Errorf("the CRD schema accepts %q", c.to)
		}
	}
}

// pyrraGaps are the models, per fixture and SLO, whose events Pyrra's
// selectors cannot see (docs/slo.md, "SLO interop"): a model on a vLLM
// without the per-request TPOT histogram, and an availability SLO of a model
// that has no failure series yet (Pyrra's ratio also leaves out refused
// requests, which count as failures in the exporter's rules).
var pyrraGaps = map[string]map[string][]string{
	"default": {"tpot-p99": {"b"}, "availability": {"b"}},
	"custom":  {"probe-availability": {"b"}},
}

// Pyrra's own admission validation (the webhook, warnings fatal) and rule
// generator (v0.9.5) accept every document, and the error ratios Pyrra's
// rules record equal the exporter's, per model, on the same series in
// promtool, except for the documented gaps.
func TestPyrraGeneratesTheSameSLIsAsTheExporter(t *testing.T) {
	bin := tool(t, "pyrracheck")
	for _, fx := range fixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			b, err := Pyrra(fx.slos, fx.opts)
			if err != nil {
				t.Fatal(err)
			}
			out := run(t, b, bin)
			var rf struct {
				Groups []struct {
					Name  string `yaml:"name"`
					Rules []struct {
						Record string            `yaml:"record"`
						Labels map[string]string `yaml:"labels"`
					} `yaml:"rules"`
				} `yaml:"groups"`
			}
			if err := yaml.Unmarshal(out, &rf); err != nil {
				t.Fatal(err)
			}
			// The shortest burn-rate record of each SLO (Pyrra's windows
			// differ from the exporter's; the series' rates are constant, so
			// any window's ratio must be equal).
			shortest := map[string]string{}
			for _, g := range rf.Groups {
				for _, r := range g.Rules {
					if s := r.Labels["slo"]; strings.Contains(r.Record, ":burnrate") && shortest[s] == "" {
						shortest[s] = r.Record
					}
				}
			}
			var checks []sameRatio
			for _, s := range fx.slos {
				s = withDefaults(s)
				// Kubernetes names have no '_': Pyrra's slo label is the
				// resource name.
				id := strings.ReplaceAll(s.Name, "_", "-")
				rec := shortest[id]
				if rec == "" {
					t.Fatalf("Pyrra generated no burn-rate record for %s:\n%s", s.Name, out)
				}
				var models []string
				for _, m := range modelsOf[fx.name][s.Name] {
					if !slices.Contains(pyrraGaps[fx.name][s.Name], m) {
						models = append(models, m)
					}
				}
				checks = append(checks, sameRatio{
					ours:   fmt.Sprintf(`slo:sli_error:ratio_rate%s{slo=%q}`, slo.WindowName(slo.Windows(s.PeriodDuration())[0]), s.Name),
					theirs: fmt.Sprintf(`%s{slo=%q}`, rec, id),
					models: models,
				})
			}
			promtoolSame(t, fx, map[string][]byte{"pyrra.yml": out}, checks)
		})
	}
}

// Pyrra's validation is not vacuous: it refuses a latency SLO whose bucket
// matcher is the regex the exporter's own rules use.
func TestPyrraValidationRejectsALeRegex(t *testing.T) {
	bin := tool(t, "pyrracheck")
	fx := fixtures(t)[0]
	b, err := Pyrra(fx.slos[:1], fx.opts)
	if err != nil {
		t.Fatal(err)
	}
	broken := bytes.Replace(b, []byte(`le="1"`), []byte(`le=~"1|1\\.0"`), 1)
	if bytes.Equal(broken, b) {
		t.Fatalf("no le=\"1\" in\n%s", b)
	}
	cmd := exec.Command(bin)
	cmd.Stdin = bytes.NewReader(broken)
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("Pyrra accepts a le regex:\n%s", out)
	}
}
