package slo

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// The page and ticket conditions are exactly the SRE workbook's pairs:
// page on 14.4x over 1h AND 5m or 6x over 6h AND 30m; ticket
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
