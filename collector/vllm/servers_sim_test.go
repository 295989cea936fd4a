package vllm

import (
	"reflect"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
)

// runServer scrapes a simulated server with the exporter's defaults (the
// server learnt, not named) for two minutes of load in virtual time.
func runServer(t *testing.T, cfg vllmsim.Config) (*vllmsim.Sim, *Scraper) {
	t.Helper()
	cfg.VirtualClock, cfg.LoadGen, cfg.Seed = true, true, 11
	sim := vllmsimtest.Start(t, cfg)
	s := newTestScraper(t, sim.URL(), nil)
	for range 25 {
		scrapeAt(s, sim.Now())
		sim.Advance(5 * time.Second)
	}
	scrapeAt(s, sim.Now())
	if l := s.Latest(); !l.Up || l.Schema != cfg.Engine {
		t.Fatalf("up %v schema %q error %q", l.Up, l.Schema, l.Error)
	}
	return sim, s
}

// finishedByReason counts the simulator's finished requests by reason.
func finishedByReason(sim *vllmsim.Sim) map[string]float64 {
	out := map[string]float64{}
	for _, r := range sim.Records() {
		out[r.FinishReason]++
	}
	return out
}

// SGLang with two data-parallel ranks of two tensor-parallel ranks each,
// every scheduler writing (--enable-metrics-for-all-schedulers): the
// repeated ranks are read once, so the model equals the same run with one
// scheduler per rank, and equals the engines' state; the per-token ITL and
// the missing TPOT histogram stay absent.
func TestSGLangAgainstSimulator(t *testing.T) {
	cfg := vllmsim.Config{Engine: vllmsim.EngineSGLang, DataParallelSize: 2}
	sim, s := runServer(t, cfg)
	cfg.TensorParallelSize, cfg.AllSchedulerMetrics = 2, true
	_, rep := runServer(t, cfg)
	model := sim.Config().Models[0]
	m, mr := s.Latest().Models[model], rep.Latest().Models[model]
	checkGauges(t, sim, m, 2)
	if !reflect.DeepEqual(m, mr) {
		t.Errorf("the schedulers' repeated ranks changed the reading:\n one %+v\nfour %+v", m, mr)
	}
	if _, ok := m.PerEngine["1"]; !ok {
		t.Errorf("per-engine view %v: want dp_rank 0 and 1", m.PerEngine)
	}
	want := finishedByReason(sim)
	total := 0.0
	for _, n := range want {
		total += n
	}
	if m.FinishedByReason["unknown"] != total || m.FinishedByReason["abort"] != want[vllmsim.FinishAbort] {
		t.Errorf("finished %v, want %v requests (aborts %v)", m.FinishedByReason, total, want[vllmsim.FinishAbort])
	}
	for _, h := range []snapshot.HistogramName{snapshot.InterTokenLatency, snapshot.RequestTPOT} {
		if m.Histograms.Has(h) {
			t.Errorf("%s read from SGLang", h)
		}
	}
	if !m.Histograms.Has(snapshot.QueueTime) || m.TokensAtCompletion || !m.Preemptions.OK || !m.PrefixHits.OK {
		t.Errorf("queue time %v, tokens at completion %v, retractions %+v, hits %+v", m.Histograms.Has(snapshot.QueueTime), m.TokensAtCompletion, m.Preemptions, m.PrefixHits)
	}
	if d := s.Window(time.Minute)[model]; d == nil || !d.PrefixCacheHitRatio.OK || !d.GenerationTokensPerSecond.OK {
		t.Errorf("window %+v: want the hit ratio and the generation rate", d)
	}
}

// trtllm-serve: the served model replaces model_name="undefined", the
// iteration gauges are those of the last completion, the finished
// requests by reason are the simulator's, and the families it lacks stay
// absent.
func TestTRTLLMAgainstSimulator(t *testing.T) {
	sim, s := runServer(t, vllmsim.Config{Engine: vllmsim.EngineTRTLLM})
	model := sim.Config().Models[0]
	l := s.Latest()
	m := l.Models[model]
	if m == nil || len(l.Models) != 1 {
		t.Fatalf("models %v: want %q only", l.Models, model)
	}
	body := sim.Metrics()
	wantValue(t, "running", m.Running, sumLines(t, body, "trtllm_num_requests_running", ""))
	wantValue(t, "kv usage", m.KVUsage, sumLines(t, body, "trtllm_kv_cache_utilization", ""))
	for reason, n := range finishedByReason(sim) {
		if m.FinishedByReason[reason] != n {
			t.Errorf("finished %v, want %v %s", m.FinishedByReason, n, reason)
		}
	}
	if !m.TokensAtCompletion || m.Preemptions.OK || m.Histograms.Has(snapshot.InterTokenLatency) || !m.Histograms.Has(snapshot.RequestTPOT) {
		t.Errorf("tokens at completion %v, preemptions %+v, ITL %v, TPOT %v", m.TokensAtCompletion, m.Preemptions,
			m.Histograms.Has(snapshot.InterTokenLatency), m.Histograms.Has(snapshot.RequestTPOT))
	}
	if st := s.state.Load().srv; st.path != "/prometheus/metrics" || st.name != families.ServerTRTLLM || st.version != "1.3.0" {
		t.Errorf("server %+v", st)
	}
}
