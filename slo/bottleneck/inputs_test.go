package bottleneck

import (
	"maps"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// A class whose rule reads a series the server has no family for is
// reported unavailable, with why: the decode-side classes on SGLang (no
// TPOT histogram), too_many_sequences on trtllm-serve (no preemption
// counter); on vLLM none.
func TestMissingInputsOfEachServer(t *testing.T) {
	tpot := map[Class]string{Throttled: ReasonNoTPOT, CommunicationBound: ReasonNoTPOT, MemoryBoundDecode: ReasonNoTPOT, DecodeOverhead: ReasonNoTPOT}
	for schema, want := range map[string]map[Class]string{
		families.SchemaV1:     {},
		families.SchemaV0:     {},
		families.SchemaSGLang: tpot,
		families.SchemaTRTLLM: {TooManySequences: ReasonNoPreemptions},
	} {
		if got := MissingInputs(schema); !maps.Equal(got, want) {
			t.Errorf("%s: %v, want %v", schema, got, want)
		}
	}
}

// The classifier reports them for an SGLang scrape before the inputs it
// lacks for other reasons (no GPU), which no flag would cure there.
func TestClassifierReportsMissingInputs(t *testing.T) {
	f := &fakeSources{vllm: &snapshot.VLLM{Time: time.Unix(1e9, 0), Up: true, Schema: families.SchemaSGLang,
		Models: map[string]*snapshot.Model{"m": {Name: "m", Running: snapshot.Some(1), Waiting: snapshot.Some(0), KVUsage: snapshot.Some(0.2)}}}}
	c := New(Options{}, nil, Sources{VLLM: f}, nil)
	c.Tick(f.vllm.Time)
	st, ok := c.State("m")
	if !ok {
		t.Fatal("no state")
	}
	if st.Unavailable[MemoryBoundDecode] != ReasonNoTPOT || st.Unavailable[Throttled] != ReasonNoTPOT || st.Unavailable[GPUFault] != ReasonNoGPU {
		t.Errorf("unavailable %v", st.Unavailable)
	}
}

// A server that counts tokens at completion (trtllm-serve) leaves its
// counters still while a long request runs: the scrape side does not call
// that a stall (the probes still can).
func TestTokensCountedAtCompletionAreNoStall(t *testing.T) {
	th := defaultTh()
	m := &snapshot.Model{Name: "m", Running: snapshot.Some(3), Waiting: snapshot.Some(0)}
	in := Inputs{Now: time.Unix(1e9, 0), Model: m, NoProgress: snapshot.Some(10 * th.StallAfter.Seconds())}
	if f := (rules{in: in, th: th}).engineStalled(); !f.Holds {
		t.Fatalf("per-step counters still for 10x stall_after: %+v", f)
	}
	m.TokensAtCompletion = true
	if f := (rules{in: in, th: th}).engineStalled(); f.Holds {
		t.Errorf("counters at completion read as a stall: %+v", f)
	}
	in.Probes = &snapshot.Probes{EngineStalled: true}
	if f := (rules{in: in, th: th}).engineStalled(); !f.Holds {
		t.Errorf("the probes' stall verdict ignored: %+v", f)
	}
}
