package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
	"github.com/vllm-exporter/vllm_exporter/slo/bottleneck"
)

// diagnose pointed at SGLang and trtllm-serve with the defaults (the server,
// its metrics path and model learnt): the same verdict as for vLLM in the
// same regime, and the classes whose input the server has no family for
// listed unavailable with the reason; SGLang's tpot-p99 shows no events
// rather than a verdict from zeros.
func TestDiagnoseEachServer(t *testing.T) {
	for _, c := range []struct {
		engine, scenario string
		want             bottleneck.Class
		lacks            bottleneck.Class
		reason           string
	}{
		{vllmsim.EngineSGLang, "kv_exhausted", bottleneck.KVCacheExhausted, bottleneck.MemoryBoundDecode, bottleneck.ReasonNoTPOT},
		{vllmsim.EngineTRTLLM, "queueing", bottleneck.Queueing, bottleneck.TooManySequences, bottleneck.ReasonNoPreemptions},
	} {
		t.Run(c.engine, func(t *testing.T) {
			s := vllmsimtest.Start(t, vllmsim.Config{Engine: c.engine, VirtualClock: true, LoadGen: true, Seed: 3, Scenario: c.scenario})
			s.Advance(30 * time.Second)
			var out bytes.Buffer
			rep, err := runDiagnose(context.Background(), parseFlags(t, diagnoseArgs(s)...), onVirtualClock(s, 90*time.Second, "text"), &out, log.NewNopLogger())
			if err != nil {
				t.Fatal(err)
			}
			if rep.Schema != c.engine || rep.ScrapeErrors != 0 || len(rep.Models) != 1 || rep.Models[0].Model != s.Config().Models[0] {
				t.Fatalf("schema %q, scrape errors %d, models %+v", rep.Schema, rep.ScrapeErrors, rep.Models)
			}
			m := rep.Models[0]
			if m.Class != c.want {
				t.Errorf("class %s, want %s (evidence %v)", m.Class, c.want, m.Evidence)
			}
			found := false
			for _, u := range m.Unavailable {
				found = found || u.Class == c.lacks && u.Reason == c.reason
			}
			if !found || !strings.Contains(out.String(), c.reason) {
				t.Errorf("unavailable %v: want %s (%s), in the text too", m.Unavailable, c.lacks, c.reason)
			}
			for _, l := range m.SLOs {
				if c.engine == vllmsim.EngineSGLang && l.Name == "tpot-p99" && (l.Total != 0 || l.BurnRate != nil) {
					t.Errorf("SGLang's tpot-p99 from no histogram: %+v", l)
				}
			}
		})
	}
}
