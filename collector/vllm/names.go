package vllm

import (
	"github.com/vllm-exporter/vllm_exporter/internal/families"
)

// Schemas the detector reports (vllm_exporter_vllm_schema_info{schema}).
const (
	SchemaV0       = families.SchemaV0
	SchemaV1Legacy = families.SchemaV1Legacy
	SchemaV1       = families.SchemaV1
	SchemaNone     = families.SchemaNone
)

// famServer is the server of each of famNames.
var famServer = func() []string {
	out := make([]string, len(famNames))
	for i := range families.Rows {
		for _, n := range families.Rows[i].Names {
			out[famIndex[n.Name]] = n.ServerName()
		}
	}
	return out
}()

// v1RunningHelp is V1's HELP for vllm:num_requests_running (V0 says "...
// currently running on GPU."); the only V1 marker in 0.8.0-0.8.2 bodies of an
// idle server, before the engine label and while prefix counters may be empty.
var v1RunningHelp = func() string { s, _ := families.Lookup("vllm:num_requests_running"); return s.Help }()

// schemaMarks tell the engine generation from a body (detectSchema), the
// first that matches winning: kv_cache_usage_perc marks the 0.9.2 renames;
// V1 always registers prefix-cache counters and labels engines from 0.8.3,
// V0 has neither.
var schemaMarks = []struct {
	schema string
	family string // the family is present ("": any vllm:* family whose first sample has label)
	label  string
	help   string // and has this HELP ("": any)
}{
	{schema: SchemaV1, family: "vllm:kv_cache_usage_perc"},
	{schema: SchemaV1Legacy, label: "engine"},
	{schema: SchemaV1Legacy, family: "vllm:prefix_cache_queries_total"},
	{schema: SchemaV1Legacy, family: "vllm:gpu_prefix_cache_queries_total"},
	{schema: SchemaV1Legacy, family: "vllm:num_requests_running", help: v1RunningHelp},
}

// helpMarks are the HELP texts schemaMarks compare, by family.
var helpMarks = func() map[string]string {
	m := map[string]string{}
	for _, mk := range schemaMarks {
		if mk.help != "" {
			m[mk.family] = mk.help
		}
	}
	return m
}()
