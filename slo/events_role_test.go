package slo

import (
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// A prefill pod of a disaggregated pair has no TPOT or ITL of its own: its
// decode SLOs count nothing there (not even as unmeasurable), while TTFT
// is still judged; a decode or aggregated pod keeps them.
func TestPrefillPodHasNoDecodeSLOs(t *testing.T) {
	h := snapshot.Histogram{Bounds: []float64{0.05, 0.1}, Counts: []float64{8, 9}, Count: 10, Sum: 0.6}
	pod := func(role string) *snapshot.VLLM {
		return &snapshot.VLLM{Up: true, Models: map[string]*snapshot.Model{"m": {Name: "m", Role: role,
			Histograms: map[snapshot.HistogramName]snapshot.Histogram{snapshot.TTFT: h, snapshot.InterTokenLatency: h, snapshot.RequestTPOT: h}}}}
	}
	for _, metric := range []string{"tpot", "itl", "ttft"} {
		s := &config.SLO{Name: metric, Kind: config.KindLatency, Metric: metric, Threshold: 0.05}
		for _, role := range []string{snapshot.RolePrefill, snapshot.RoleDecode, snapshot.RoleBoth} {
			out, errs := serverEvents(s, pod(role))
			want := !(role == snapshot.RolePrefill && metric != "ttft")
			if _, got := out["m"]; got != want || len(errs) != 0 {
				t.Errorf("%s on a %s pod: measured %v (errors %v), want %v", metric, role, got, errs, want)
			}
		}
	}
}

// Admission rejections (503) are failed events of the availability SLO:
// from http_requests_total's 5xx where the server has it (they are among
// those answers, so never added twice), else from
// vllm:admission_rejections_total.
func TestAvailabilityCountsAdmissionRejections(t *testing.T) {
	s := &config.SLO{Name: "avail", Kind: config.KindAvailability}
	m := &snapshot.Model{Name: "m", FinishedByReason: map[string]float64{"stop": 90, "abort": 2},
		RejectedByReason: map[string]float64{"max_num_queued_reqs": 6, "max_num_queued_tokens": 2}}
	v := &snapshot.VLLM{Up: true, Models: map[string]*snapshot.Model{"m": m}}
	out, _ := serverEvents(s, v)
	if c := out["m"]; c.Bad != 10 || c.Total != 100 || c.Series != "finished+rejected" {
		t.Errorf("without http_requests_total: %+v, want 10 bad of 100 (2 aborted + 8 rejected)", c)
	}
	v.HTTPRequests = map[string]float64{"2xx": 92, "5xx": 8}
	out, _ = serverEvents(s, v)
	if c := out["m"]; c.Bad != 10 || c.Total != 100 || c.Series != "finished+refused" {
		t.Errorf("with http_requests_total (the 8 rejections are its 5xx): %+v, want 10 bad of 100", c)
	}
}
