//go:build !linux

package collector

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewProcess is client_golang's process collector where there is no
// /proc (process_linux.go says why Linux gets its own).
func NewProcess() (prometheus.Collector, error) {
	return collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), nil
}
