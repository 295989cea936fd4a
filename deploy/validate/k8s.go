package validate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Object is one decoded manifest document.
type Object struct {
	APIVersion string
	Kind       string
	Name       string
	Raw        map[string]any
	JSON       []byte
}

// SplitYAML decodes a multi-document YAML stream into objects, skipping
// empty documents.
func SplitYAML(data []byte) ([]Object, error) {
	var out []Object
	dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue
		}
		var raw map[string]any
		if err := json.Unmarshal(js, &raw); err != nil {
			return nil, err
		}
		o := Object{Raw: raw, JSON: js}
		o.APIVersion, _ = raw["apiVersion"].(string)
		o.Kind, _ = raw["kind"].(string)
		if md, ok := raw["metadata"].(map[string]any); ok {
			o.Name, _ = md["name"].(string)
		}
		out = append(out, o)
	}
}

// Validator checks objects against the Kubernetes API: built-in kinds
// against Kubernetes 1.29's OpenAPI schemas (types, required fields) and by
// strict decoding into client-go's types (unknown or duplicate fields are
// errors); custom resources against their CRD's openAPIV3Schema with unknown
// fields forbidden, as the API server's field validation does.
type Validator struct {
	decoder runtime.Decoder
	crds    map[string]*jsonschema.Schema // apiVersion/kind -> schema
}

// builtinSchemas are the Kubernetes API kinds the manifests use, by the
// name of their schema in testdata/kubernetes-1.29-schemas.json (the
// components of Kubernetes v1.29.0's published OpenAPI v3 documents, cut
// to these kinds and what they reference).
var builtinSchemas = map[string]string{
	"apps/v1/Deployment": "io.k8s.api.apps.v1.Deployment",
	"v1/Service":         "io.k8s.api.core.v1.Service",
	"v1/ConfigMap":       "io.k8s.api.core.v1.ConfigMap",
}

// NewValidator loads the Kubernetes schemas and the CRDs in crdDir
// (testdata/crds).
func NewValidator(crdDir string) (*Validator, error) {
	v := &Validator{
		decoder: serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer(),
		crds:    map[string]*jsonschema.Schema{},
	}
	k8s, err := os.ReadFile(filepath.Join(filepath.Dir(crdDir), "kubernetes-1.29-schemas.json"))
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(k8s))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("kubernetes.json", doc); err != nil {
		return nil, err
	}
	for kind, name := range builtinSchemas {
		s, err := c.Compile("kubernetes.json#/components/schemas/" + name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		v.crds[kind] = s
	}
	paths, _ := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if len(paths) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", crdDir)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var crd struct {
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Kind string `json:"kind"`
				} `json:"names"`
				Versions []struct {
					Name   string `json:"name"`
					Schema struct {
						OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(b, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		for _, ver := range crd.Spec.Versions {
			s := ver.Schema.OpenAPIV3Schema
			if s == nil {
				return nil, fmt.Errorf("%s: version %s has no schema", p, ver.Name)
			}
			closeObjects(s)
			id := crd.Spec.Group + "/" + ver.Name + "/" + crd.Spec.Names.Kind
			c := jsonschema.NewCompiler()
			if err := c.AddResource(id+".json", s); err != nil {
				return nil, err
			}
			compiled, err := c.Compile(id + ".json")
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			v.crds[crd.Spec.Group+"/"+ver.Name+"/"+crd.Spec.Names.Kind] = compiled
		}
	}
	return v, nil
}

// closeObjects forbids properties a structural schema does not declare,
// except where the CRD preserves unknown fields.
func closeObjects(s map[string]any) {
	if props, ok := s["properties"].(map[string]any); ok {
		_, has := s["additionalProperties"]
		if _, preserve := s["x-kubernetes-preserve-unknown-fields"]; !has && !preserve {
			s["additionalProperties"] = false
		}
		for _, p := range props {
			if m, ok := p.(map[string]any); ok {
				closeObjects(m)
			}
		}
	}
	for _, key := range []string{"items", "additionalProperties"} {
		if m, ok := s[key].(map[string]any); ok {
			closeObjects(m)
		}
	}
	for _, key := range []string{"allOf", "anyOf", "oneOf"} {
		if l, ok := s[key].([]any); ok {
			for _, x := range l {
				if m, ok := x.(map[string]any); ok {
					closeObjects(m)
				}
			}
		}
	}
}

// Validate reports why o is not a valid object of its kind, or nil.
func (v *Validator) Validate(o Object) error {
	if o.APIVersion == "" || o.Kind == "" {
		return errors.New("no apiVersion or kind")
	}
	if o.Name == "" {
		return fmt.Errorf("%s without metadata.name", o.Kind)
	}
	if len(o.Name) > 253 {
		return fmt.Errorf("%s name %q longer than 253 characters", o.Kind, o.Name)
	}
	if schema, ok := v.crds[o.APIVersion+"/"+o.Kind]; ok {
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(o.JSON))
		if err != nil {
			return err
		}
		if err := schema.Validate(inst); err != nil {
			return fmt.Errorf("%s %s: %v", o.Kind, o.Name, err)
		}
		if _, builtin := builtinSchemas[o.APIVersion+"/"+o.Kind]; !builtin {
			return nil
		}
	}
	if strings.Contains(o.APIVersion, ".") && !strings.HasSuffix(strings.SplitN(o.APIVersion, "/", 2)[0], ".k8s.io") {
		return fmt.Errorf("%s %s: no CRD for %s in testdata/crds", o.Kind, o.Name, o.APIVersion)
	}
	if _, _, err := v.decoder.Decode(o.JSON, nil, nil); err != nil {
		return fmt.Errorf("%s %s: %w", o.Kind, o.Name, err)
	}
	return nil
}
