//go:build !cgo || nonvml

package gpu

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestStub: a build without NVML has no GPU collector, says so clearly, and
// its inert Sampler methods are safe.
func TestStub(t *testing.T) {
	s, err := NewFromLibrary(Options{}, nil)
	if s != nil || !errors.Is(err, ErrBuiltWithoutNVML) || Available {
		t.Fatalf("NewFromLibrary = %v, %v", s, err)
	}
	var z *Sampler
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	z.Run(ctx)
	z.Close()
	if z.SampleOnce(time.Now()) != nil {
		t.Fatal("stub sampled")
	}
	if z.Latest() != nil || z.Up() {
		t.Fatal("stub reports a sample")
	}
	if n := testutil.CollectAndCount(z); n != 0 {
		t.Fatalf("stub collected %d metrics", n)
	}
}
