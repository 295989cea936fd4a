package e2e

import (
	"context"
	"fmt"
	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"io"
	"net/http"
	"net/http/httptest"
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
	// The production families (disaggregated prefill/decode, LoRA, KV
	// offload, residency, multimodal cache) as the scraper exports them
	// from real-shaped bodies (histograms' _bucket/_sum/_count too): the
	// stack's simulator turns most on, but a series only seen at some
	// moments (an adapter waiting) must not depend on the moment.
	for _, body := range []string{"vllm-late-2026-decode-lora-fragment.txt", "kv-offload-newer-fragment.txt", "vllm-late-2026-dp2-priority-spec.txt"} {
		merge(scrapedNames(t, testutil.VLLMBody(t, body), logger))
	}
	merge(gpuNames(t))
	if len(out) == 0 {
		t.Fatal(fmt.Errorf("no component declared any series"))
	}
	return out
}

// scrapedNames is what a scraper exports after two scrapes, a minute apart,
// of body.
func scrapedNames(t *testing.T, body string, logger log.Logger) map[string]map[string]bool {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	sc := vllm.New(vllm.Options{URL: srv.URL}, logger)
	now := time.Now()
	sc.ScrapeOnce(context.Background(), now)
	sc.ScrapeOnce(context.Background(), now.Add(time.Minute))
	if sc.Latest() == nil {
		t.Fatalf("scraping the %d-byte body failed", len(body))
	}
	return GatheredNames(t, sc)
}
