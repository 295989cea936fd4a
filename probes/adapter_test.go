package probes

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
)

// A profile with `model: <adapter>` probes a LoRA adapter the simulator
// serves as a model id (as vLLM does with --lora-modules): the request
// names the adapter, the profile's series say which model they measure
// (vllm_probe_target_info), the profile is fitted to the base model's
// max_model_len (adapters list none). A profile naming an adapter the
// server does not serve fails unknown_model without sending, naming what
// is served, and works once the adapter is loaded.
func TestProfileProbesALoRAAdapter(t *testing.T) {
	sim := vllmsimtest.Start(t, vllmsim.Config{Seed: 11, MaxModelLen: 512})
	if err := sim.SetLoRA(vllmsim.LoRAConfig{MaxLoRA: 2, Adapters: []string{"sql-lora"}}); err != nil {
		t.Fatal(err)
	}
	base := sim.Config().Models[0]
	h, _ := writeConfig(t, probesYAML("",
		profile("base", "completions", 16, 4, ""),
		profile("sql", "completions", 600, 4, ", model: sql-lora"),
		profile("summarize", "completions", 16, 4, ", model: summarize-lora")))
	s := New(Options{URL: sim.URL()}, h, nil)
	ctx := context.Background()
	probe := func(name string) Result {
		t.Helper()
		res, err := s.ProbeOnce(ctx, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	if res := probe("base"); res.Reason != "" {
		t.Fatalf("base model probe: %s %s", res.Reason, res.Detail)
	}
	// 600 input tokens do not fit 512: fitted to the base model's context.
	if res := probe("sql"); res.Reason != "" {
		t.Fatalf("adapter probe: %s %s", res.Reason, res.Detail)
	}
	if note := s.Latest().Profiles["sql"].FitNote; !strings.Contains(note, "512") {
		t.Errorf("adapter profile not fitted to the base model's max_model_len 512: %q", note)
	}
	for profile, model := range map[string]string{"base": base, "sql": "sql-lora"} {
		if v := testutil.ToFloat64(s.m.target.WithLabelValues(profile, model)); v != 1 {
			t.Errorf("vllm_probe_target_info{profile=%q,model=%q} = %v, want 1", profile, model, v)
		}
	}
	if n := testutil.CollectAndCount(s.m.target); n != 2 {
		t.Errorf("%d vllm_probe_target_info series, want 2 (the unknown adapter was never probed)", n)
	}
	res := probe("summarize")
	if res.Reason != ReasonUnknownModel || !strings.Contains(res.Detail, `"summarize-lora" is not served`) || !strings.Contains(res.Detail, "sql-lora") {
		t.Fatalf("unserved adapter: reason %q, detail %q; want unknown_model naming it and the served ones", res.Reason, res.Detail)
	}
	if res.StatusCode != 0 {
		t.Errorf("a probe for an unserved adapter was sent (HTTP %d)", res.StatusCode)
	}
	if v := testutil.ToFloat64(s.m.failures.WithLabelValues("summarize", ReasonUnknownModel)); v != 1 {
		t.Errorf("unknown_model failures %v, want 1", v)
	}
	// Loaded while vLLM runs (vLLM's /v1/load_lora_adapter): the next
	// probe asks /v1/models again and succeeds.
	if err := sim.SetLoRA(vllmsim.LoRAConfig{MaxLoRA: 2, Adapters: []string{"sql-lora", "summarize-lora"}}); err != nil {
		t.Fatal(err)
	}
	if res := probe("summarize"); res.Reason != "" {
		t.Fatalf("adapter after loading: %s %s", res.Reason, res.Detail)
	}
}
