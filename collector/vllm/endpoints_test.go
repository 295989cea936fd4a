package vllm

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

// pod is a simulated vLLM server with --data-parallel-multi-port-external-lb
// in virtual time: one API server per rank on its own loopback port, a
// supervisor, the exporter scraping them all (pod), and one scraper per
// rank scraping it alone (ranks), whose correctness the other tests
// establish: the pod must read as the sum of its ranks.
type pod struct {
	t     *testing.T
	rk    *vllmsim.Ranks
	pod   *Scraper
	ranks []*Scraper
	model string
	prev  *snapshot.VLLM // the pod's previous successful snapshot
}

func startPod(t *testing.T, n int) *pod {
	t.Helper()
	sims, addrs := make([]*vllmsim.Sim, n), make([]string, n)
	for r := range sims {
		sim, err := vllmsim.New(vllmsim.Config{VirtualClock: true, LoadGen: true, Seed: int64(11 + r)})
		if err != nil {
			t.Fatal(err)
		}
		sims[r], addrs[r] = sim, "127.0.0.1:0"
	}
	rk, err := vllmsim.StartRanks(sims, addrs, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rk.Close)
	p := &pod{t: t, rk: rk, model: sims[0].Config().Models[0]}
	var urls []string
	for _, s := range sims {
		urls = append(urls, s.URL())
		p.ranks = append(p.ranks, newTestScraper(t, s.URL(), nil))
	}
	p.pod = newTestScraper(t, "", func(o *Options) { o.URLs, o.Supervisor = urls, rk.SupervisorURL() })
	return p
}

// step advances every rank by d and scrapes, checking that no cumulative
// reading of the pod went down: a rank that goes down, restarts or
// appears late must not look like a reset of the server.
func (p *pod) step(n int) {
	p.t.Helper()
	for range n {
		for _, s := range p.rk.Sims {
			s.Advance(5 * time.Second)
		}
		now := p.rk.Sims[0].Now()
		for _, s := range append([]*Scraper{p.pod}, p.ranks...) {
			scrapeAt(s, now)
		}
		l := p.pod.Latest()
		if !l.Up {
			p.t.Fatalf("pod down at %v: %s", now, l.Error)
		}
		if p.prev != nil {
			monotonic(p.t, p.prev.Models[p.model], l.Models[p.model])
		}
		p.prev = l
	}
}

// monotonic fails where a counter or histogram of newer is below older's.
func monotonic(t *testing.T, older, newer *snapshot.Model) {
	t.Helper()
	for i := range families.Rows {
		f := &families.Rows[i]
		switch {
		case f.Type == families.Counter && f.Value != nil:
			if o, n := *f.Value(older), *f.Value(newer); o.OK && n.V < o.V {
				t.Errorf("%s went down: %v -> %v", f.Exported, o.V, n.V)
			}
		case f.Type == families.Counter && f.Map != nil:
			for k, o := range *f.Map(older) {
				if n := (*f.Map(newer))[k]; n < o {
					t.Errorf("%s{%q} went down: %v -> %v", f.Exported, k, o, n)
				}
			}
		case f.Hist != "":
			o, ok := older.Histograms.Lookup(f.Hist)
			if n := newer.Histograms.Get(f.Hist); ok && (n.Count < o.Count || n.Sum < o.Sum) {
				t.Errorf("%s went down: count %v -> %v", f.Exported, o.Count, n.Count)
			}
		}
	}
}

// wantSums checks every reading the family table sums over engines: the
// pod's equals the sum over ranks (those listed), its max and min rows the
// max and min.
func wantSums(t *testing.T, podModel *snapshot.Model, ranks map[int]*snapshot.Model) {
	t.Helper()
	for i := range families.Rows {
		f := &families.Rows[i]
		switch {
		case f.Hist != "":
			var want snapshot.Histogram
			for _, m := range ranks {
				if h, ok := m.Histograms.Lookup(f.Hist); ok {
					if want.Bounds == nil {
						want = snapshot.Histogram{Bounds: h.Bounds, Counts: slices.Clone(h.Counts)}
						want.Sum, want.Count = h.Sum, h.Count
					} else if !want.AddInPlace(h) {
						t.Fatalf("%s: ranks' buckets differ", f.Exported)
					}
				}
			}
			got := podModel.Histograms.Get(f.Hist)
			if !approx(got.Count, want.Count) || !approx(got.Sum, want.Sum) || !slices.Equal(got.Counts, want.Counts) {
				t.Errorf("%s: pod count %v sum %v buckets %v, ranks' %v %v %v", f.Exported, got.Count, got.Sum, got.Counts, want.Count, want.Sum, want.Counts)
			}
		case f.Map != nil && f.Agg == families.Sum:
			want := map[string]float64{}
			for _, m := range ranks {
				for k, v := range *f.Map(m) {
					want[k] += v
				}
			}
			for k, v := range want {
				if got := (*f.Map(podModel))[k]; !approx(got, v) {
					t.Errorf("%s{%q}: pod %v, ranks' sum %v", f.Exported, k, got, v)
				}
			}
		case f.Value != nil && f.Out == nil && (f.Agg == families.Sum || f.Agg == families.SumCount || f.Agg == families.Max || f.Agg == families.Min):
			var want snapshot.Value
			for _, m := range ranks {
				if v := *f.Value(m); v.OK {
					combine(f.Agg, &want, v.V)
				}
			}
			if got := *f.Value(podModel); got.OK != want.OK || !approx(got.V, want.V) {
				t.Errorf("%s: pod %+v, ranks' %s %+v", f.Exported, got, f.Agg, want)
			}
		}
	}
}

// wantEngines: each rank's engine is in the pod's per-engine view, as the
// rank has it, and no other.
func wantEngines(t *testing.T, podModel *snapshot.Model, ranks map[int]*snapshot.Model) {
	t.Helper()
	for r, m := range ranks {
		e := podModel.PerEngine[fmt.Sprint(r)]
		if e == nil || e.Running != m.Running || e.Waiting != m.Waiting || e.KVUsage != m.KVUsage {
			t.Errorf("engine %d: pod %+v, rank's running %v waiting %v kv %v", r, e, m.Running, m.Waiting, m.KVUsage)
		}
	}
	if len(podModel.PerEngine) != len(ranks) {
		t.Errorf("pod's engines %v, want %d", slices.Sorted(keys(podModel.PerEngine)), len(ranks))
	}
}

func keys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// wantWindowSums checks the pod's 1m window against its ranks' windows:
// histogram increases and finished requests per second add up.
func (p *pod) wantWindowSums(ranks ...int) {
	p.t.Helper()
	got := p.pod.Window(time.Minute)[p.model]
	if got == nil {
		p.t.Fatal("pod: no 1m window")
	}
	var finished float64
	deltas := map[snapshot.HistogramName]float64{}
	for _, r := range ranks {
		d := p.ranks[r].Window(time.Minute)[p.model]
		if d == nil {
			p.t.Fatalf("rank %d: no 1m window", r)
		}
		finished += sumValues(d.FinishedPerSecondByReason)
		for hn, h := range d.Deltas {
			deltas[hn] += h.Count
		}
	}
	if g := sumValues(got.FinishedPerSecondByReason); !approx(g, finished) {
		p.t.Errorf("1m finished/s: pod %v, ranks' %v", g, finished)
	}
	for hn, want := range deltas {
		if g := got.Deltas[hn].Count; !approx(g, want) {
			p.t.Errorf("1m increase of %s: pod %v, ranks' %v", hn, g, want)
		}
	}
}

// text is the pod scraper's exposition.
func (p *pod) text() string {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(p.pod)
	return string(gatherText(p.t, reg))
}

func (p *pod) rankModels(ranks ...int) map[int]*snapshot.Model {
	out := map[int]*snapshot.Model{}
	for _, r := range ranks {
		out[r] = p.ranks[r].Latest().Models[p.model]
	}
	return out
}

// TestRanksOfOnePodReadAsOneServer: four ranks on four ports are one
// server: every per-model reading is the sum (max, min) over the ranks,
// each rank's engine is in the per-engine view, the windows add up,
// http_requests_total of the four API servers is summed, and each endpoint
// and the supervisor are reported up.
func TestRanksOfOnePodReadAsOneServer(t *testing.T) {
	p := startPod(t, 4)
	for r, sim := range p.rk.Sims {
		for range r + 1 {
			resp, err := http.Get(sim.URL() + "/v1/models")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	p.step(14)
	wantEngines(t, p.pod.Latest().Models[p.model], p.rankModels(0, 1, 2, 3))
	wantSums(t, p.pod.Latest().Models[p.model], p.rankModels(0, 1, 2, 3))
	p.wantWindowSums(0, 1, 2, 3)
	var http float64
	for _, r := range p.ranks {
		http += sumValues(r.Latest().HTTPRequests)
	}
	// 10 sent here, and each rank's own scraper's GET /v1/models when it
	// learnt the server
	if got := sumValues(p.pod.Latest().HTTPRequests); got != http || http != 10+4 {
		t.Errorf("http_requests_total: pod %v, ranks' %v", got, http)
	}
	for i := range 4 {
		if !p.pod.EndpointUp(i) {
			t.Errorf("endpoint %d not up", i)
		}
	}
	text := p.text()
	for _, want := range []string{`vllm_exporter_endpoint_up{endpoint="3"} 1`, "vllm_exporter_supervisor_healthy 1", "vllm_exporter_scrapes_total 56", `vllm_engine_requests_running{engine="3"`} {
		if !strings.Contains(text, want) {
			t.Errorf("no %s in:\n%s", want, grep(text, "endpoint|supervisor|scrapes_total|engine_requests_running"))
		}
	}
}

// TestRankDownAndRestarted: a rank down mid-run is that rank down (the pod
// up, its endpoint 0, its engine gone from the per-engine view, its gauges
// out of the sums, its counters held); back, it adds what it did
// meanwhile; restarted, it adds what it had counted before. No counter of
// the pod ever goes down (step), and the windows equal the ranks' across
// it all.
func TestRankDownAndRestarted(t *testing.T) {
	p := startPod(t, 4)
	p.step(13)
	if err := p.rk.Sims[2].InjectFault(vllmsim.FaultSpec{Kind: vllmsim.FaultDown}); err != nil {
		t.Fatal(err)
	}
	p.step(2)
	l := p.pod.Latest()
	m := l.Models[p.model]
	if !l.Up || p.pod.EndpointUp(2) || m.PerEngine["2"] != nil {
		t.Fatalf("rank 2 down: pod up %v, endpoint 2 up %v, its engine %+v", l.Up, p.pod.EndpointUp(2), m.PerEngine["2"])
	}
	others := p.rankModels(0, 1, 3)
	var running, tokens float64
	for _, o := range others {
		running, tokens = running+o.Running.V, tokens+o.GenerationTokens.V
	}
	if m.Running.V != running {
		t.Errorf("running with rank 2 down: %v, the others' %v", m.Running.V, running)
	}
	if last := p.ranks[2].history[len(p.ranks[2].history)-3].Models[p.model].GenerationTokens.V; !approx(m.GenerationTokens.V, tokens+last) {
		t.Errorf("generation tokens with rank 2 down: %v, the others' %v + rank 2's last %v", m.GenerationTokens.V, tokens, last)
	}
	if text := p.text(); !strings.Contains(text, `vllm_exporter_endpoint_up{endpoint="2"} 0`) ||
		!strings.Contains(text, "vllm_up 1") || !strings.Contains(text, "vllm_exporter_supervisor_healthy 0") {
		t.Errorf("rank 2 down:\n%s", grep(text, "vllm_up|endpoint_up|supervisor"))
	}
	if got := p.pod.errorsOf(ReasonConnect); got != 2 {
		t.Errorf("rank 2's failed scrapes counted %v, want 2", got)
	}
	p.step(2)
	p.rk.Sims[2].ClearFault(vllmsim.FaultDown)
	p.step(2)
	wantSums(t, p.pod.Latest().Models[p.model], p.rankModels(0, 1, 2, 3))
	wantEngines(t, p.pod.Latest().Models[p.model], p.rankModels(0, 1, 2, 3))
	p.wantWindowSums(0, 1, 2, 3)

	// Rank 1 restarts: its counters start again from 0.
	p.step(7) // the window's start after rank 2's outage, which its own scraper's windows do not span
	p.rk.Sims[1].Restart()
	p.step(4)
	p.wantWindowSums(0, 1, 2, 3)
	p.step(12)
	p.wantWindowSums(0, 1, 2, 3)
}

// TestLateRankCountsFromFirstSight: a rank that answers for the first time
// after the pod did adds nothing of what it counted before (its history
// would read as a burst of the whole server), only what it does from then
// on.
func TestLateRankCountsFromFirstSight(t *testing.T) {
	p := startPod(t, 3)
	if err := p.rk.Sims[2].InjectFault(vllmsim.FaultSpec{Kind: vllmsim.FaultDown}); err != nil {
		t.Fatal(err)
	}
	p.step(3)
	wantSums(t, p.pod.Latest().Models[p.model], p.rankModels(0, 1))
	p.rk.Sims[2].ClearFault(vllmsim.FaultDown)
	before := p.pod.Latest().Models[p.model].GenerationTokens.V
	p.step(1)
	var grown float64
	for r := range 2 {
		h := p.ranks[r].history
		grown += h[len(h)-1].Models[p.model].GenerationTokens.V - h[len(h)-2].Models[p.model].GenerationTokens.V
	}
	if got := p.pod.Latest().Models[p.model].GenerationTokens.V - before; !approx(got, grown) || grown == 0 {
		t.Errorf("late rank: the pod's generation tokens grew %v, the other ranks' %v", got, grown)
	}
	p.step(13)
	p.wantWindowSums(0, 1, 2)
}

func grep(text, re string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, w := range strings.Split(re, "|") {
			if strings.Contains(l, w) && !strings.HasPrefix(l, "#") {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// TestEndpointsShareOneDeadline: the endpoints are fetched at once, so two
// that hang past the scrape timeout do not keep the third from being read
// within it; with every endpoint failing, vLLM is down.
func TestEndpointsShareOneDeadline(t *testing.T) {
	body := fixture(t, "vllm-main-2026-08-v1.txt")
	hang := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	a, b, c := newFakeVLLM(t, nil, ""), newFakeVLLM(t, nil, ""), newFakeVLLM(t, body, "text/plain")
	a.set(nil, hang)
	b.set(nil, hang)
	s := newTestScraper(t, "", func(o *Options) { o.URLs, o.Timeout = []string{a.URL, b.URL, c.URL}, 300*time.Millisecond })
	scrapeAt(s, t0)
	if l := s.Latest(); !l.Up || s.EndpointUp(0) || s.EndpointUp(1) || !s.EndpointUp(2) {
		t.Fatalf("up %v endpoints %v", l.Up, s.state.Load().endpoints)
	}
	if got := s.errorsOf(ReasonTimeout); got != 2 {
		t.Errorf("timeouts counted %v, want 2", got)
	}
	c.set(nil, hang)
	scrapeAt(s, t0.Add(5*time.Second))
	if l := s.Latest(); l.Up || l.Error != ReasonTimeout {
		t.Errorf("every endpoint failing: up %v error %q", l.Up, l.Error)
	}
}

// TestSecondURLOfOneServerIsNotSummed: two URLs that reach one API server
// show the same engines; the second is left out and counted, not summed.
func TestSecondURLOfOneServerIsNotSummed(t *testing.T) {
	body := fixture(t, "vllm-late-2026-dp2-priority-spec.txt")
	a := newFakeVLLM(t, body, "text/plain")
	one := newTestScraper(t, a.URL, nil)
	two := newTestScraper(t, "", func(o *Options) { o.URLs = []string{a.URL, strings.Replace(a.URL, "127.0.0.1", "localhost", 1)} })
	for _, s := range []*Scraper{one, two} {
		scrapeAt(s, t0)
	}
	for name, m := range one.Latest().Models {
		wantSums(t, two.Latest().Models[name], map[int]*snapshot.Model{0: m})
	}
	if got := two.droppedOf(DropDuplicate); got == 0 {
		t.Error("the second URL's samples are not counted as duplicates")
	}
}

// errorsOf and droppedOf read the scraper's own counters.
func (s *Scraper) errorsOf(reason string) float64  { return s.state.Load().errors[reason] }
func (s *Scraper) droppedOf(reason string) float64 { return s.state.Load().dropped[reason] }

// TestMultiprocessBodyReadsAsOneProcess: vLLM with --api-server-count 2
// serves /metrics in prometheus_client's multiprocess mode (no _created, no
// process families, children only once written); the scraper reads the
// same server from it as from the single-process body.
func TestMultiprocessBodyReadsAsOneProcess(t *testing.T) {
	var scrapers [2]*Scraper
	var sims [2]*vllmsim.Sim
	for i, n := range []int{1, 2} {
		sim, err := vllmsim.New(vllmsim.Config{VirtualClock: true, LoadGen: true, Seed: 5, DataParallelSize: 2, APIServerCount: n})
		if err != nil {
			t.Fatal(err)
		}
		if err := sim.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sim.Close)
		sims[i], scrapers[i] = sim, newTestScraper(t, sim.URL(), nil)
	}
	if mp := string(sims[1].Metrics()); strings.Contains(mp, "_created") || strings.Contains(mp, "process_") {
		t.Fatal("the simulator's multiprocess body has _created or process families")
	}
	for range 12 {
		for i := range sims {
			sims[i].Advance(5 * time.Second)
			scrapeAt(scrapers[i], sims[i].Now())
		}
	}
	model := sims[0].Config().Models[0]
	single, multi := scrapers[0].Latest().Models[model], scrapers[1].Latest().Models[model]
	wantSums(t, multi, map[int]*snapshot.Model{0: single}) // one "rank": the same readings
	for e, g := range single.PerEngine {
		if *multi.PerEngine[e] != *g {
			t.Errorf("engine %s: %+v, single-process %+v", e, multi.PerEngine[e], g)
		}
	}
}

// TestPIDCopiesOfAGaugeAreOneReading: in multiprocess mode a gauge
// registered without a multiprocess_mode (prometheus_client's "all") has
// one series per API server process, with a pid label: copies of one
// reading, read as the largest of them, never summed.
func TestPIDCopiesOfAGaugeAreOneReading(t *testing.T) {
	body := `# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m",pid="101"} 3.0
vllm:num_requests_waiting{engine="0",model_name="m",pid="102"} 4.0
vllm:num_requests_waiting{engine="1",model_name="m",pid="101"} 1.0
vllm:num_requests_waiting{engine="1",model_name="m",pid="102"} 1.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
vllm:num_requests_running{engine="1",model_name="m"} 5.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m",pid="101"} 7.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m",pid="102"} 2.0
`
	f := newFakeVLLM(t, []byte(body), "text/plain")
	s := newTestScraper(t, f.URL, nil)
	scrapeAt(s, t0)
	m := s.Latest().Models["m"]
	if m == nil {
		t.Fatalf("no model: %+v", s.Latest())
	}
	wantValue(t, "waiting", m.Waiting, 5)
	wantValue(t, "engine 0 waiting", m.PerEngine["0"].Waiting, 4)
	wantValue(t, "running", m.Running, 7)
	// A counter with a pid label is each process's own count: summed.
	if got := m.FinishedByReason["stop"]; got != 9 {
		t.Errorf("finished %v, want 9", got)
	}
	// The copies changing order keep the reading.
	f.set([]byte(strings.Replace(body, `pid="102"} 4.0`, `pid="102"} 2.0`, 1)), nil)
	scrapeAt(s, t0.Add(5*time.Second))
	wantValue(t, "waiting after", s.Latest().Models["m"].Waiting, 4)
}
