package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
)

// /metrics answered by several clients at once, in the text and the
// protobuf format, while vLLM is scraped and the SLOs tick: each answer
// renders the state the loops publish meanwhile, so a render that read
// state being written would show it (and the race detector would). Every
// answer must decode, name each family once and each series once, and
// after the first scrape hold vLLM's series and every model's SLO series.
func TestMetricsAnsweredWhileScraping(t *testing.T) {
	sim := vllmsimtest.Start(t, vllmsim.Config{VirtualClock: true, LoadGen: true, Seed: 5,
		Models: []string{"model-a", "model-b"}, DataParallelSize: 2})
	x, f := wiredExporter(t, "--vllm.url="+sim.URL(), "--no-collector.gpu", "--no-probe.enabled")
	h, err := x.routes(f)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	sim.Advance(15 * time.Second)
	x.vllm.ScrapeOnce(context.Background(), sim.Now())
	x.slo.Tick(sim.Now())

	var stop atomic.Bool
	var answers atomic.Int64
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for i := range 4 {
		accept := "text/plain"
		if i%2 == 1 {
			accept = string(expfmt.NewFormat(expfmt.TypeProtoDelim))
		}
		wg.Go(func() {
			for !stop.Load() {
				if err := checkMetricsAnswer(srv.URL, accept); err != nil {
					errs <- fmt.Errorf("%s: %w", accept, err)
					return
				}
				answers.Add(1)
			}
		})
	}
	for range 40 {
		// A few answers between scrapes (the requests run through them,
		// whatever the machine's speed), unless one already failed.
		for n := answers.Load(); answers.Load() < n+3 && len(errs) == 0; {
			time.Sleep(100 * time.Microsecond)
		}
		sim.Advance(5 * time.Second)
		x.vllm.ScrapeOnce(context.Background(), sim.Now())
		x.slo.Tick(sim.Now())
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d answers over 40 scrapes", answers.Load())
}

// checkMetricsAnswer GETs /metrics in one format and checks the answer is
// whole: decodable, each family and each series once, vLLM's and both
// models' SLO series present.
func checkMetricsAnswer(base, accept string) error {
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("status %d: %.300s", resp.StatusCode, b)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	families := map[string]bool{}
	models := map[string]bool{}
	up := false
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("decoding: %w", err)
		}
		name := mf.GetName()
		if name == "" || families[name] {
			return fmt.Errorf("family %q named twice or empty", name)
		}
		families[name] = true
		if len(mf.Metric) == 0 {
			return fmt.Errorf("family %s without series", name)
		}
		seen := map[string]bool{}
		for _, m := range mf.Metric {
			var key strings.Builder
			for _, l := range m.Label {
				key.WriteString(l.GetName() + "=" + l.GetValue() + ",")
				if name == "vllm_slo_objective_ratio" && l.GetName() == "model" {
					models[l.GetValue()] = true
				}
			}
			if seen[key.String()] {
				return fmt.Errorf("series %s{%s} twice", name, key.String())
			}
			seen[key.String()] = true
			if name == "vllm_up" && m.GetGauge().GetValue() == 1 {
				up = true
			}
		}
	}
	if !up || !families["vllm_time_to_first_token_seconds"] || !models["model-a"] || !models["model-b"] {
		return fmt.Errorf("an answer lacks vLLM's or the SLOs' series: vllm_up 1 %v, TTFT %v, SLO models %v (%d families)",
			up, families["vllm_time_to_first_token_seconds"], models, len(families))
	}
	return nil
}
