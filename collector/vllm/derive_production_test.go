package vllm

import (
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// vLLM creates an admission_rejections_total child on the first rejection
// of its reason: a window whose start has no such child counts it from 0,
// so the first rejections show at once. A server without the family has
// no rejection rate at all; the NIXL failure and expiry counters give
// their rates over the window.
func TestWindowRatesOfProductionCounters(t *testing.T) {
	at := func(s int, m *snapshot.Model) *snapshot.VLLM {
		m.Name = "m"
		return &snapshot.VLLM{Up: true, Time: t0.Add(time.Duration(s) * time.Second), Models: map[string]*snapshot.Model{"m": m}}
	}
	span := []*snapshot.VLLM{
		at(0, &snapshot.Model{KVTransferFailures: snapshot.Some(2), KVTransferExpiredRequests: snapshot.Some(0)}),
		at(30, &snapshot.Model{RejectedByReason: map[string]float64{"max_num_queued_reqs": 6}}),
		at(60, &snapshot.Model{RejectedByReason: map[string]float64{"max_num_queued_reqs": 9, "max_num_queued_tokens": 3},
			KVTransferFailures: snapshot.Some(8), KVTransferExpiredRequests: snapshot.Some(3)}),
	}
	dv := derive(time.Minute, span)["m"]
	wantValue(t, "rejections per second", dv.RejectedPerSecond, 12.0/60)
	wantValue(t, "transfer failures per second", dv.KVTransferFailuresPerSecond, 6.0/60)
	wantValue(t, "expired per second", dv.KVTransferExpiredPerSecond, 3.0/60)
	none := derive(time.Minute, []*snapshot.VLLM{at(0, &snapshot.Model{}), at(60, &snapshot.Model{})})["m"]
	wantAbsent(t, "rejections per second without admission control", none.RejectedPerSecond)
}
