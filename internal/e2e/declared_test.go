package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-exporter/vllm_exporter/collector/vllm"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/probes"
	"github.com/vllm-exporter/vllm_exporter/slo"
	"github.com/vllm-exporter/vllm_exporter/slo/bottleneck"
)

// componentNames builds the exporter's components in-process: the probe
// scheduler runs real probes against the simulator (so its histograms are
// seen with their buckets), and every component's declared series are read
// through Describe.
func componentNames(t *testing.T, s *stack) map[string]map[string]bool {
	t.Helper()
	holder, err := config.NewHolder(s.configPath)
	if err != nil {
		t.Fatal(err)
	}
	logger := log.NewNopLogger()
	out := map[string]map[string]bool{}
	merge := func(m map[string]map[string]bool) {
		for n, ls := range m {
			if out[n] == nil {
				out[n] = map[string]bool{}
			}
			for l := range ls {
				out[n][l] = true
			}
		}
	}
	sched := probes.New(probes.Options{URL: s.simURL}, holder, logger)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range holder.Get().Probes.Profiles {
		if _, err := sched.ProbeOnce(ctx, p.Name); err != nil {
			t.Logf("probe %s: %v", p.Name, err)
		}
	}
	merge(GatheredNames(t, sched))
	merge(DescribedNames(t, sched))
	merge(DescribedNames(t, bottleneck.New(bottleneck.Options{}, holder, bottleneck.Sources{}, logger)))
	merge(DescribedNames(t, slo.New(slo.Options{}, holder, slo.Sources{}, logger)))
	merge(DescribedNames(t, vllm.New(vllm.Options{URL: s.simURL}, logger)))
	merge(gpuNames(t))
	if len(out) == 0 {
		t.Fatal(fmt.Errorf("no component declared any series"))
	}
	return out
}
