//go:build cgo && !nonvml

package gpu

import (
	"context"
	"slices"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-kit/log/level"
)

// watchEvents waits for Xid events until ctx ends. Each wait is bounded by
// Options.EventWait so cancellation is noticed promptly; a failing wait backs
// off for one interval instead of spinning.
func (s *Sampler) watchEvents(ctx context.Context) {
	for ctx.Err() == nil {
		if !s.waitEvent(s.opts.EventWait) {
			select {
			case <-ctx.Done():
			case <-time.After(s.opts.Interval):
			}
		}
	}
}

// waitEvent waits up to timeout for one event and records it. It returns
// false when waiting failed (not a timeout).
func (s *Sampler) waitEvent(timeout time.Duration) bool {
	s.mu.Lock()
	set, closed := s.eventSet, s.closed
	s.mu.Unlock()
	if set == nil || closed {
		return false
	}
	data, ret := s.lib.EventSetWait(set, uint32(timeout/time.Millisecond))
	switch ret {
	case nvml.SUCCESS:
		s.recordEvent(data)
		return true
	case nvml.ERROR_TIMEOUT:
		return true
	default:
		s.mu.Lock()
		s.warnOnce("eventwait:"+retName(ret), "msg", "waiting for NVML events failed", "err", retName(ret))
		s.mu.Unlock()
		return false
	}
}

// recordEvent counts an Xid critical error against the GPU it came from.
func (s *Sampler) recordEvent(data nvml.EventData) {
	if data.EventType&nvml.EventTypeXidCriticalError == 0 {
		return
	}
	now := s.clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	// By handle, else by UUID (a handle re-acquired since the event).
	i := slices.IndexFunc(s.devs, func(d *device) bool { return data.Device != nil && d.dev == data.Device })
	if i < 0 && data.Device != nil {
		if uuid, ret := data.Device.GetUUID(); ret == nvml.SUCCESS {
			i = slices.IndexFunc(s.devs, func(d *device) bool { return d.uuid == uuid })
		}
	}
	if i < 0 {
		level.Warn(s.logger).Log("msg", "Xid event from an unknown GPU", "xid", data.EventData)
		return
	}
	target := s.devs[i]
	if target.xid == nil {
		target.xid = map[uint64]float64{}
	}
	target.xid[data.EventData]++
	target.lastXid = now
	level.Warn(s.logger).Log("msg", "GPU Xid event", "gpu", target.index, "uuid", target.uuid, "xid", data.EventData)
}
