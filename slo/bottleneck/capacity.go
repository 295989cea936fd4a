package bottleneck

import (
	"fmt"
	"math"
)

const secondsPerDay = 86400

// GPUPlan is the seed's capacity-planning arithmetic for a daily volume.
type GPUPlan struct {
	DailyRequests           float64
	RequiredPerSecond       float64 // daily / 86,400
	PerGPURequestsPerSecond float64
	GPUs                    int     // ceil(required / per GPU)
	Headroom                float64 // spike multiplier (seed: 2x)
	GPUsWithHeadroom        int     // ceil(GPUs × headroom)
}

// PlanGPUs applies "required throughput = daily volume / 86,400; GPUs needed =
// required / throughput per GPU", rounded up, then the spike headroom. The
// seed's example: 5,000,000/day at 35 req/s per GPU → 57.9 req/s → 2 GPUs,
// 4 with 2x headroom.
func PlanGPUs(dailyRequests, perGPURequestsPerSecond, headroom float64) (GPUPlan, error) {
	switch {
	case !(dailyRequests > 0) || math.IsInf(dailyRequests, 0):
		return GPUPlan{}, fmt.Errorf("daily requests must be > 0, got %v", dailyRequests)
	case !(perGPURequestsPerSecond > 0) || math.IsInf(perGPURequestsPerSecond, 0):
		return GPUPlan{}, fmt.Errorf("throughput per GPU must be > 0 requests/s, got %v", perGPURequestsPerSecond)
	case !(headroom >= 1) || math.IsInf(headroom, 0):
		return GPUPlan{}, fmt.Errorf("headroom must be >= 1, got %v", headroom)
	}
	p := GPUPlan{
		DailyRequests:           dailyRequests,
		RequiredPerSecond:       dailyRequests / secondsPerDay,
		PerGPURequestsPerSecond: perGPURequestsPerSecond,
		Headroom:                headroom,
	}
	p.GPUs = int(math.Ceil(p.RequiredPerSecond / perGPURequestsPerSecond))
	p.GPUsWithHeadroom = int(math.Ceil(float64(p.GPUs) * headroom))
	return p, nil
}

// CostPerMillionOutputTokens is what a million generated tokens cost when
// gpus GPUs at gpuHour each produce outputTokensPerSecond.
func CostPerMillionOutputTokens(gpuHour float64, gpus int, outputTokensPerSecond float64) (float64, error) {
	switch {
	case !(gpuHour > 0) || math.IsInf(gpuHour, 0):
		return 0, fmt.Errorf("GPU-hour price must be > 0, got %v", gpuHour)
	case gpus < 1:
		return 0, fmt.Errorf("GPU count must be >= 1, got %d", gpus)
	case !(outputTokensPerSecond > 0) || math.IsInf(outputTokensPerSecond, 0):
		return 0, fmt.Errorf("output tokens/s must be > 0, got %v", outputTokensPerSecond)
	}
	perHour := outputTokensPerSecond * 3600
	return gpuHour * float64(gpus) / perHour * 1e6, nil
}
