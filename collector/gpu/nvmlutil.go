//go:build cgo && !nonvml

package gpu

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

var retNames = map[nvml.Return]string{
	nvml.SUCCESS:                         "SUCCESS",
	nvml.ERROR_UNINITIALIZED:             "ERROR_UNINITIALIZED",
	nvml.ERROR_INVALID_ARGUMENT:          "ERROR_INVALID_ARGUMENT",
	nvml.ERROR_NOT_SUPPORTED:             "ERROR_NOT_SUPPORTED",
	nvml.ERROR_NO_PERMISSION:             "ERROR_NO_PERMISSION",
	nvml.ERROR_ALREADY_INITIALIZED:       "ERROR_ALREADY_INITIALIZED",
	nvml.ERROR_NOT_FOUND:                 "ERROR_NOT_FOUND",
	nvml.ERROR_INSUFFICIENT_SIZE:         "ERROR_INSUFFICIENT_SIZE",
	nvml.ERROR_INSUFFICIENT_POWER:        "ERROR_INSUFFICIENT_POWER",
	nvml.ERROR_DRIVER_NOT_LOADED:         "ERROR_DRIVER_NOT_LOADED",
	nvml.ERROR_TIMEOUT:                   "ERROR_TIMEOUT",
	nvml.ERROR_IRQ_ISSUE:                 "ERROR_IRQ_ISSUE",
	nvml.ERROR_LIBRARY_NOT_FOUND:         "ERROR_LIBRARY_NOT_FOUND",
	nvml.ERROR_FUNCTION_NOT_FOUND:        "ERROR_FUNCTION_NOT_FOUND",
	nvml.ERROR_CORRUPTED_INFOROM:         "ERROR_CORRUPTED_INFOROM",
	nvml.ERROR_GPU_IS_LOST:               "ERROR_GPU_IS_LOST",
	nvml.ERROR_RESET_REQUIRED:            "ERROR_RESET_REQUIRED",
	nvml.ERROR_OPERATING_SYSTEM:          "ERROR_OPERATING_SYSTEM",
	nvml.ERROR_LIB_RM_VERSION_MISMATCH:   "ERROR_LIB_RM_VERSION_MISMATCH",
	nvml.ERROR_IN_USE:                    "ERROR_IN_USE",
	nvml.ERROR_MEMORY:                    "ERROR_MEMORY",
	nvml.ERROR_NO_DATA:                   "ERROR_NO_DATA",
	nvml.ERROR_INSUFFICIENT_RESOURCES:    "ERROR_INSUFFICIENT_RESOURCES",
	nvml.ERROR_ARGUMENT_VERSION_MISMATCH: "ERROR_ARGUMENT_VERSION_MISMATCH",
	nvml.ERROR_DEPRECATED:                "ERROR_DEPRECATED",
	nvml.ERROR_NOT_READY:                 "ERROR_NOT_READY",
	nvml.ERROR_GPU_NOT_FOUND:             "ERROR_GPU_NOT_FOUND",
	nvml.ERROR_UNKNOWN:                   "ERROR_UNKNOWN",
}

// retName names an NVML return code without calling into the library
// (Return.Error may call nvmlErrorString, which must not run after a failed
// Init).
func retName(r nvml.Return) string {
	if n, ok := retNames[r]; ok {
		return n
	}
	return "NVML_RETURN_" + strconv.Itoa(int(r))
}

// fieldValue decodes an nvmlFieldValue_t's union by its value type.
func fieldValue(v nvml.FieldValue) (float64, bool) {
	b := v.Value[:]
	switch nvml.ValueType(v.ValueType) {
	case nvml.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), true
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(binary.LittleEndian.Uint32(b)), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(binary.LittleEndian.Uint64(b)), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.LittleEndian.Uint64(b))), true
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.LittleEndian.Uint32(b))), true
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(binary.LittleEndian.Uint16(b)), true
	}
	return 0, false
}

// NVML functions newer than some drivers still in use. go-nvml binds NVML
// lazily, and calling a function the loaded library lacks aborts the
// process, so these are looked up once after Init and skipped when absent.
const (
	symClocksEventReasons    = "nvmlDeviceGetCurrentClocksEventReasons"    // r535
	symClocksThrottleReasons = "nvmlDeviceGetCurrentClocksThrottleReasons" // its older name
	symMemoryBusWidth        = "nvmlDeviceGetMemoryBusWidth"               // r520
	symRemappedRows          = "nvmlDeviceGetRemappedRows"                 // r450
	symTotalEnergy           = "nvmlDeviceGetTotalEnergyConsumption"
	symGpmQuery              = "nvmlGpmQueryDeviceSupport" // r520, with the three below
	symGpmAlloc              = "nvmlGpmSampleAlloc"
	symGpmGet                = "nvmlGpmSampleGet"
	symGpmMetrics            = "nvmlGpmMetricsGet"
)

var guardedSymbols = []string{
	symClocksEventReasons, symClocksThrottleReasons, symMemoryBusWidth, symRemappedRows,
	symTotalEnergy, symGpmQuery, symGpmAlloc, symGpmGet, symGpmMetrics,
}

// missingSymbols returns the guarded NVML functions the loaded library lacks.
func missingSymbols(lib nvml.Interface) map[string]bool {
	missing := map[string]bool{}
	ext := lib.Extensions()
	for _, sym := range guardedSymbols {
		if ext == nil || ext.LookupSymbol(sym) != nil {
			missing[sym] = true
		}
	}
	return missing
}

// has reports whether the loaded NVML library has the function sym.
func (s *Sampler) has(sym string) bool { return !s.missing[sym] }
