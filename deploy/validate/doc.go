// Package validate checks the deployment artefacts (the Helm chart, the
// Kubernetes manifests and the examples) against the tools and schemas they
// are meant for: Helm's own linter and renderer, Kubernetes' API types with
// strict decoding, the Prometheus Operator's and KEDA's CRD schemas, and the
// Compose specification's loader.
//
// It is a module of its own so that Helm, client-go and compose-go stay out
// of the exporter's dependency graph; `make test` runs it
// (cd deploy/validate && go test ./...).
package validate
