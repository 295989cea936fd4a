//go:build cgo && !nonvml

package e2e

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/go-kit/log"

	"github.com/vllm-exporter/vllm_exporter/collector/gpu"
)

// gpuNames returns the series the NVML GPU collector declares, built on
// go-nvml's mock of a DGX A100 (no GPU needed).
func gpuNames(t *testing.T) map[string]map[string]bool {
	t.Helper()
	srv := dgxa100.New()
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return &mock.EventSet{}, nvml.SUCCESS }
	srv.EventSetFreeFunc = func(nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	srv.GpmQueryDeviceSupportFunc = func(nvml.Device) (nvml.GpmSupport, nvml.Return) {
		return nvml.GpmSupport{Version: 1, IsSupportedDevice: 0}, nvml.SUCCESS
	}
	s := gpu.New(srv, gpu.Options{}, log.NewNopLogger())
	defer s.Close()
	return DescribedNames(t, s)
}
