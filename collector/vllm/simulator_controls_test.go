package vllm

import (
	"errors"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
)

// The simulator's /admin controls (v1-0.33) reach the exporter's
// series: admission rejections, a decode pod's KV transfers, LoRA
// adapters and offload traffic, end to end over HTTP.
func TestSimulatorControlsReachTheSeries(t *testing.T) {
	sim := vllmsimtest.Start(t, vllmsim.Config{VirtualClock: true, Seed: 7, MetricsVersion: vllmsim.MetricsLatest, DataParallelSize: 2})
	s := newTestScraper(t, sim.URL(), nil)
	model := sim.Config().Models[0]
	scrapeAt(s, sim.Now())

	for _, err := range []error{
		sim.SetAdmission(vllmsim.AdmissionLimit{MaxQueuedRequests: 1}),
		sim.SetPD(vllmsim.PD{Role: vllmsim.RoleDecode, TransferSeconds: 0.1, FailFraction: 0.5}),
		sim.SetLoRA(vllmsim.LoRAConfig{MaxLoRA: 2, Adapters: []string{"sql-lora"}}),
		sim.SetOffload(vllmsim.Offload{LoadBytesPerSecond: 1e9, StoreBytesPerSecond: 1e9, Layout: "both"}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	prompt := vllmsim.Tokenize("a prompt long enough to need a few KV blocks for its transfer")
	var rejected int
	for i := range 6 {
		m := ""
		if i%2 == 1 {
			m = "sql-lora"
		}
		if _, err := sim.Submit(vllmsim.Request{Model: m, Prompt: prompt, MaxTokens: 400, IgnoreEOS: true}); errors.Is(err, vllmsim.ErrAdmission) {
			rejected++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		sim.Advance(5 * time.Second)
		scrapeAt(s, sim.Now())
	}
	l := s.Latest()
	m := l.Models[model]
	if m == nil || !l.Up {
		t.Fatalf("up %v, models %v", l.Up, l.Models)
	}
	var got float64
	for _, v := range m.RejectedByReason {
		got += v
	}
	if rejected == 0 || got != float64(rejected) {
		t.Errorf("exporter counts %v rejections, the simulator refused %d", got, rejected)
	}
	admitted := 6 - rejected
	wantValue(t, "failed transfers", m.KVTransferFailures, float64(admitted/2))
	if h := m.Histograms.Get("kv_transfer_time"); h.Count != float64(admitted-admitted/2) {
		t.Errorf("%v transfers observed, want %d", h.Count, admitted-admitted/2)
	}
	if !m.LoRA.Known || m.LoRA.Max.V != 2 {
		t.Errorf("LoRA %+v, want max_lora 2", m.LoRA)
	}
	// 20 s of offload at 1 GB/s each way, both layouts present: counted once.
	if b := m.KVOffloadLoadBytes["cpu"]; b != 2e10 {
		t.Errorf("offload load bytes %v, want 2e10 (newer layout preferred, not added to the older)", b)
	}
	if len(l.Missing) != 0 {
		t.Errorf("missing: %v", l.Missing)
	}
}
