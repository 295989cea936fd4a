package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

// TestExporterScrapesEveryRankAsOneServer: the exporter, wired from the
// command line and a config file naming three API servers and the
// supervisor (vllm: urls, supervisor_url), scrapes the three ranks of a
// simulated data-parallel server on their own ports as one server; with
// rank 0 killed it reports that rank down and vLLM still up, and the probes
// go to the first rank up (never to the third); a reload that would change
// the API servers fails and keeps them.
func TestExporterScrapesEveryRankAsOneServer(t *testing.T) {
	var sims []*vllmsim.Sim
	for r := range 3 {
		s, err := vllmsim.New(vllmsim.Config{Seed: int64(r + 1)})
		if err != nil {
			t.Fatal(err)
		}
		sims = append(sims, s)
	}
	rk, err := vllmsim.StartRanks(sims, []string{"127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rk.Close)
	cfg := func(urls ...string) string {
		return fmt.Sprintf("vllm:\n  urls: [%s]\n  supervisor_url: %s\nprobes:\n  max_requests_per_minute: 600\n  profiles:\n"+
			"    - {name: p, endpoint: completions, input_tokens: 8, output_tokens: 2, interval: 1s, timeout: 900ms, jitter: 0s}\n",
			strings.Join(urls, ", "), rk.SupervisorURL())
	}
	path := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(path, []byte(cfg(sims[0].URL(), sims[1].URL(), sims[2].URL())), 0o600); err != nil {
		t.Fatal(err)
	}
	h := hardStart(t, nil, append([]string{"--config.file=" + path, "--no-collector.gpu", "--web.enable-lifecycle"}, hardScrapeArgs...)...)
	h.waitMetric("every rank scraped", func(m hardMetrics) (bool, string) {
		for _, c := range []func(hardMetrics) (bool, string){
			hardIs("vllm_exporter_endpoint_up", 1, "endpoint", "0"), hardIs("vllm_exporter_endpoint_up", 1, "endpoint", "2"),
			hardIs("vllm_exporter_supervisor_healthy", 1), hardAtLeast("vllm_engine_requests_running", 0, "engine", "2"),
		} {
			if ok, why := c(m); !ok {
				return false, why
			}
		}
		return true, ""
	})

	if err := sims[0].InjectFault(vllmsim.FaultSpec{Kind: vllmsim.FaultDown}); err != nil {
		t.Fatal(err)
	}
	h.waitMetric("rank 0 down, the server up", func(m hardMetrics) (bool, string) {
		if ok, why := hardIs("vllm_exporter_endpoint_up", 0, "endpoint", "0")(m); !ok {
			return false, why
		}
		if _, ok := m.Value("vllm_engine_requests_running", "engine", "0"); ok {
			return false, "engine 0 still shown"
		}
		return hardIs("vllm_up", 1)(m)
	})
	probes := func(s *vllmsim.Sim) float64 {
		m, err := testutil.ParseMetrics(string(s.Metrics()))
		if err != nil {
			t.Fatal(err)
		}
		v, _ := m.Value("http_requests_total", "handler", "/v1/completions")
		return v
	}
	before := probes(sims[1])
	h.eventually("a probe reaches rank 1, the first up", func() (bool, string) {
		return probes(sims[1]) > before, fmt.Sprintf("rank 1 has %v probes", probes(sims[1]))
	})
	if n := probes(sims[2]); n != 0 {
		t.Errorf("rank 2 got %v probes; with rank 1 up it should get none", n)
	}

	if err := os.WriteFile(path, []byte(cfg(sims[1].URL(), sims[2].URL())), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := h.post("/-/reload"); code != http.StatusInternalServerError || !strings.Contains(body, "take effect at start only") {
		t.Errorf("reload changing the API servers: %d %s", code, body)
	}
}
