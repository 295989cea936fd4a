package families

import "testing"

// Every vLLM name is described once (HELP, how the simulator fills it),
// by its first row or by the ignored list, never by both; a histogram the
// simulator fills has bounds.
func TestEveryNameIsDescribedOnce(t *testing.T) {
	described := map[string]string{}
	describe := func(n Name, where string) {
		if n.Help == "" && n.Sim.Source == "" {
			return
		}
		if n.Help == "" {
			t.Errorf("%s (%s): a simulator source without vLLM's HELP", n.Name, where)
		}
		if prev, ok := described[n.Name]; ok {
			t.Errorf("%s described twice: %s and %s", n.Name, prev, where)
		}
		described[n.Name] = where
	}
	named := map[string]bool{}
	for i := range Rows {
		for _, n := range Rows[i].Names {
			named[n.Name] = true
			describe(n, Rows[i].Exported)
		}
	}
	for _, u := range Ignored {
		if named[u.Name.Name] {
			t.Errorf("%s is both read and ignored", u.Name.Name)
		}
		if u.Why == "" || u.Type == "" {
			t.Errorf("%s: an ignored family needs its TYPE and why", u.Name.Name)
		}
		describe(u.Name, "ignored")
	}
	for n := range named {
		if _, ok := described[n]; !ok {
			t.Errorf("%s: no row describes it", n)
		}
	}
	for _, sp := range Specs() {
		if sp.Type == "histogram" && sp.Sim.Source != "" && len(sp.Sim.Buckets) == 0 && !sp.Sim.Tokens {
			t.Errorf("%s: a simulated histogram without bounds", sp.Name.Name)
		}
		if got, ok := Lookup(sp.Name.Name); !ok || got.Help != sp.Help {
			t.Errorf("Lookup(%s) = %+v, %v", sp.Name.Name, got, ok)
		}
	}
}
