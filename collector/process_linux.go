package collector

import (
	"bytes"
	"os"
	"strconv"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs"
)

// Process exports the four process_* series the Overview dashboard's
// exporter row reads (CPU, resident memory, open and maximum file
// descriptors) under client_golang's names and help. client_golang's
// process collector computes all of its eleven series at every /metrics
// scrape, reading /proc/stat (for the boot time behind the start time),
// /proc/self/net/netstat, /proc/self/limits through regular expressions
// and /proc/self/stat; that was 5 % of the exporter's CPU at rest
// (`perf record`, docs/cost.md). This reads getrusage, getrlimit,
// /proc/self/statm and the length of /proc/self/fd.
// --web.all-runtime-series uses client_golang's collector instead.
type Process struct {
	self                  procfs.Proc
	cpu, rss, fds, maxFDs *prometheus.Desc
	pageSize              float64
}

// NewProcess returns the collector; an error when /proc is not mounted.
func NewProcess() (prometheus.Collector, error) {
	self, err := procfs.Self()
	if err != nil {
		return nil, err
	}
	return &Process{
		self:     self,
		pageSize: float64(os.Getpagesize()),
		cpu:      prometheus.NewDesc("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", nil, nil),
		rss:      prometheus.NewDesc("process_resident_memory_bytes", "Resident memory size in bytes.", nil, nil),
		fds:      prometheus.NewDesc("process_open_fds", "Number of open file descriptors.", nil, nil),
		maxFDs:   prometheus.NewDesc("process_max_fds", "Maximum number of open file descriptors.", nil, nil),
	}, nil
}

// Describe implements prometheus.Collector.
func (p *Process) Describe(ch chan<- *prometheus.Desc) {
	ch <- p.cpu
	ch <- p.rss
	ch <- p.fds
	ch <- p.maxFDs
}

// Collect implements prometheus.Collector. A reading that fails is left
// out (the others still go out) and reported as an invalid metric.
func (p *Process) Collect(ch chan<- prometheus.Metric) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		ch <- prometheus.NewInvalidMetric(p.cpu, err)
	} else {
		ch <- prometheus.MustNewConstMetric(p.cpu, prometheus.CounterValue, tvSeconds(ru.Utime)+tvSeconds(ru.Stime))
	}
	if pages, err := residentPages(); err != nil {
		ch <- prometheus.NewInvalidMetric(p.rss, err)
	} else {
		ch <- prometheus.MustNewConstMetric(p.rss, prometheus.GaugeValue, pages*p.pageSize)
	}
	if n, err := p.self.FileDescriptorsLen(); err != nil {
		ch <- prometheus.NewInvalidMetric(p.fds, err)
	} else {
		ch <- prometheus.MustNewConstMetric(p.fds, prometheus.GaugeValue, float64(n))
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		ch <- prometheus.NewInvalidMetric(p.maxFDs, err)
	} else {
		ch <- prometheus.MustNewConstMetric(p.maxFDs, prometheus.GaugeValue, float64(lim.Cur))
	}
}

func tvSeconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}

// residentPages reads the second field of /proc/self/statm: the pages
// resident, what /proc/self/stat's rss field says.
func residentPages() (float64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, &strconv.NumError{Func: "statm", Num: string(b), Err: strconv.ErrSyntax}
	}
	return strconv.ParseFloat(string(f[1]), 64)
}
