// Command pyrracheck runs Pyrra's own admission validation (the webhook's
// ValidateCreate, warnings included) and rule generator on the
// ServiceLevelObjective documents read from stdin, and prints the recording
// rules Pyrra would load into Prometheus as a plain rule file. Any warning
// or error exits non-zero.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pyrra-dev/pyrra/kubernetes/api/v1alpha1"
	"sigs.k8s.io/yaml"
)

type rule struct {
	Record string            `json:"record,omitempty"`
	Alert  string            `json:"alert,omitempty"`
	Expr   string            `json:"expr"`
	For    string            `json:"for,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
}

type group struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []rule `json:"rules"`
}

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	var groups []group
	for i, doc := range bytes.Split(in, []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var obj v1alpha1.ServiceLevelObjective
		if err := yaml.UnmarshalStrict(doc, &obj); err != nil {
			fail(fmt.Errorf("document %d: %w", i, err))
		}
		if obj.APIVersion != "pyrra.dev/v1alpha1" || obj.Kind != "ServiceLevelObjective" {
			fail(fmt.Errorf("document %d: apiVersion %q kind %q", i, obj.APIVersion, obj.Kind))
		}
		if obj.Namespace == "" {
			obj.Namespace = "monitoring" // as kubectl apply -n monitoring would
		}
		warnings, err := obj.ValidateCreate(context.Background(), &obj)
		if len(warnings) > 0 {
			fail(fmt.Errorf("document %d (%s): warnings: %s", i, obj.Name, strings.Join(warnings, "; ")))
		}
		if err != nil {
			fail(fmt.Errorf("document %d (%s): %w", i, obj.Name, err))
		}
		o, err := obj.Internal()
		if err != nil {
			fail(fmt.Errorf("document %d (%s): %w", i, obj.Name, err))
		}
		for _, gen := range []func() (interface{}, error){
			func() (interface{}, error) { return o.IncreaseRules() },
			func() (interface{}, error) { return o.Burnrates() },
		} {
			g, err := gen()
			if err != nil {
				fail(fmt.Errorf("document %d (%s): %w", i, obj.Name, err))
			}
			b, err := yaml.Marshal(g)
			if err != nil {
				fail(err)
			}
			var pg group
			if err := yaml.Unmarshal(b, &pg); err != nil {
				fail(err)
			}
			groups = append(groups, pg)
		}
	}
	out, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		fail(err)
	}
	os.Stdout.Write(out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "pyrra:", err)
	os.Exit(1)
}
