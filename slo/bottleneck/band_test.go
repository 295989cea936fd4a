package bottleneck

import (
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// batch_too_small enters at its thresholds and, once it is the class,
// holds until the signal passes them by batchBand: a light load whose
// level sits on the threshold does not flip the class every few windows.
func TestBatchTooSmallHoldsWithinItsBand(t *testing.T) {
	th := config.DefaultBottleneck()
	low := th.GPUUtilizationLow
	at := func(util float64, current Class) Class {
		in := Inputs{Now: time.Unix(0, 0), Current: current,
			Model: &snapshot.Model{Running: snapshot.Some(3), Waiting: snapshot.Some(0), KVUsage: snapshot.Some(0.2)},
			GPU:   &snapshot.GPU{Up: true, Devices: []snapshot.GPUDevice{{Up: true, UtilGPU: snapshot.Some(util)}}}}
		class, _ := Evaluate(in, th)
		return class
	}
	for _, c := range []struct {
		util    float64
		current Class
		want    Class
	}{
		{low * 0.9, "", BatchTooSmall},
		{low * 0.9, NearOptimal, BatchTooSmall},
		{low * 1.1, NearOptimal, NearOptimal},
		{low * 1.1, BatchTooSmall, BatchTooSmall}, // inside the band: holds
		{low * (1 + batchBand) * 1.05, BatchTooSmall, NearOptimal},
	} {
		if got := at(c.util, c.current); got != c.want {
			t.Errorf("GPU utilization %.3f (threshold %.2f) with current class %q: %s, want %s", c.util, low, c.current, got, c.want)
		}
	}
}
