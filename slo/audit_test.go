package slo

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	tu "github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// The page and ticket conditions are exactly the SRE workbook's pairs that
// issue 6 names: page on 14.4x over 1h AND 5m or 6x over 6h AND 30m; ticket
// on 3x over 1d AND 2h or 1x over 3d AND 6h. For each pair a burn just above
// its factor in both of its windows sets the state; just below in either
// window, or above in only one of them, or exactly at it, does not.
func TestAlertPairsAreTheWorkbooks(t *testing.T) {
	ws := Windows(30 * 24 * time.Hour)
	describe := func(ps []AlertPair) string {
		var out []string
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%gx %s+%s", p.Factor, WindowName(ws[p.Long]), WindowName(ws[p.Short])))
		}
		return strings.Join(out, ", ")
	}
	if got, want := describe(PagePairs), "14.4x 1h+5m, 6x 6h+30m"; got != want {
		t.Errorf("page pairs %s, want %s", got, want)
	}
	if got, want := describe(TicketPairs), "3x 1d+2h, 1x 3d+6h"; got != want {
		t.Errorf("ticket pairs %s, want %s", got, want)
	}
	// Every window burns at 0 except the two given ones.
	burns := func(long, short int, bl, bs float64) []WindowResult {
		out := make([]WindowResult, len(ws))
		for i := range out {
			out[i] = WindowResult{Name: WindowName(ws[i]), Total: 1000, Enough: true,
				ErrorRatio: someV(0), BurnRate: someV(0)}
		}
		out[long].BurnRate, out[short].BurnRate = someV(bl), someV(bs)
		return out
	}
	for _, list := range []struct {
		name  string
		pairs []AlertPair
	}{{"page", PagePairs}, {"ticket", TicketPairs}} {
		for _, p := range list.pairs {
			hi, lo := p.Factor*1.01, p.Factor*0.99
			for _, c := range []struct {
				bl, bs float64
				want   bool
			}{
				{hi, hi, true}, {lo, hi, false}, {hi, lo, false}, {hi, 0, false}, {0, hi, false},
				// Exactly at the factor is not burning, like the generated rules' `>`.
				{p.Factor, p.Factor, false},
			} {
				if got := alerting(burns(p.Long, p.Short, c.bl, c.bs), list.pairs); got != c.want {
					t.Errorf("%s pair %gx: long %g short %g -> %v, want %v", list.name, p.Factor, c.bl, c.bs, got, c.want)
				}
			}
			// Too few events in either window: never burning.
			ws := burns(p.Long, p.Short, hi, hi)
			ws[p.Short].Enough = false
			if alerting(ws, list.pairs) {
				t.Errorf("%s pair %gx fired with the short window under min_events", list.name, p.Factor)
			}
		}
	}
}

func someV(v float64) snapshot.Value { return snapshot.Some(v) }

// The checkpoint is replaced atomically: a new file is written and renamed
// over the old one, so a reader that opened the old checkpoint keeps reading
// all of it (nothing is truncated or rewritten in place, which is what a
// crash mid-write would expose), and no temp file is left behind.
func TestCheckpointReplacedAtomically(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "slo.state")
	src, tr := &fakeVLLM{}, &traffic{}
	w := New(Options{StateFile: p}, holderFor(t, ttft99), Sources{VLLM: src}, nil)
	tickAt(w, src, tr, t0)
	oldBytes, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	tr.add(90, 10)
	tickAt(w, src, tr, t0.Add(time.Minute))
	got, err := io.ReadAll(old)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, oldBytes) {
		t.Fatalf("the open old checkpoint changed under its reader (written in place, not renamed):\n was %s\n now %s", oldBytes, got)
	}
	newBytes, err := os.ReadFile(p)
	if err != nil || bytes.Equal(newBytes, oldBytes) {
		t.Fatalf("no new checkpoint: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("files beside the checkpoint (temp file left?): %v", entries)
	}
}

// A checkpoint that cannot be written is counted (reason "write") and
// logged; the watchdog keeps evaluating.
func TestCheckpointWriteFailureIsCounted(t *testing.T) {
	p := filepath.Join(t.TempDir(), "missing-dir", "slo.state")
	src, tr := &fakeVLLM{}, &traffic{}
	w := New(Options{StateFile: p}, holderFor(t, ttft99), Sources{VLLM: src}, nil)
	tickAt(w, src, tr, t0)
	tr.add(90, 10)
	tickAt(w, src, tr, t0.Add(time.Minute))
	if r := only(t, w); win(t, r, "5m").Total != 100 {
		t.Fatalf("evaluation stopped after a failed checkpoint: %v", r)
	}
	want := `
# HELP vllm_exporter_slo_state_errors_total SLO state checkpoint problems by reason (corrupt, foreign, version, read, write); a bad file is set aside, not trusted.
# TYPE vllm_exporter_slo_state_errors_total counter
vllm_exporter_slo_state_errors_total{reason="corrupt"} 0
vllm_exporter_slo_state_errors_total{reason="foreign"} 0
vllm_exporter_slo_state_errors_total{reason="read"} 0
vllm_exporter_slo_state_errors_total{reason="version"} 0
vllm_exporter_slo_state_errors_total{reason="write"} 2
`
	if err := testutil.CollectAndCompare(w, strings.NewReader(want), "vllm_exporter_slo_state_errors_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(w, "vllm_exporter_slo_state_last_save_timestamp_seconds"); n != 0 {
		t.Fatalf("last save timestamp exported without a successful save")
	}
}

// A preemption SLO counts preemptions (bad) against finished requests
// (total), so bad is not a subset of total: a window can hold preemptions
// and no finished request (an engine thrashing without completing
// anything). The watchdog has no ratio for an empty window and never burns
// on it, even with min_events: 0; the generated rules, where the ratio is
// +Inf, must not page either. Same input series for both.
func TestPreemptionWithoutFinishedRequestsAgrees(t *testing.T) {
	const cfg = `
slos:
  - {name: preempt, kind: preemption, threshold: 0.01, min_events: 0}
`
	src := &fakeVLLM{}
	w := New(Options{}, holderFor(t, cfg), Sources{VLLM: src}, nil)
	tr := &traffic{good: 100}
	var finished, preempt []float64
	for k := 0; k <= 60; k++ {
		if k > 0 {
			tr.preemptions += 10
		}
		now := t0.Add(time.Duration(k) * time.Minute)
		tickAt(w, src, tr, now)
		if r := only(t, w); r.Page || r.Ticket {
			t.Fatalf("watchdog alerted on preemptions without finished requests: %v", r)
		}
		finished = append(finished, tr.good)
		preempt = append(preempt, tr.preemptions)
	}
	h, err := holderFromPath(writeTemp(t, "c.yml", cfg))
	if err != nil {
		t.Fatal(err)
	}
	b, err := GenerateRules(h.Get().SLOs, RuleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules := writeTemp(t, "rules.yml", string(b))
	var checks []tu.ExprTest
	for _, m := range []int{10, 30, 60} {
		checks = append(checks, tu.ExprTest{Expr: `ALERTS{slo="preempt"}`, EvalTime: tu.Duration(time.Duration(m) * time.Minute)})
	}
	// A sample every 30 s (the watchdog's minutes, interpolated): every
	// window, the fast tier's [1m] included, holds two samples or more on
	// Prometheus 3's left-open ranges.
	test := tu.WriteRuleTest(t, t.TempDir(), "test.yml", tu.RuleTestFile{
		RuleFiles:          []string{rules},
		EvaluationInterval: tu.Duration(time.Minute),
		Tests: []tu.RuleTest{{
			Interval: tu.Duration(30 * time.Second),
			InputSeries: []tu.InputSeries{
				{Series: `vllm_requests_finished_total{model="m",finished_reason="stop"}`, Values: tu.Samples(tu.Interpolate(finished, 2))},
				{Series: `vllm_preemptions_total{model="m"}`, Values: tu.Samples(tu.Interpolate(preempt, 2))},
			},
			ExprTests: checks,
		}},
	})
	tu.RunRuleTests(t, test)
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
