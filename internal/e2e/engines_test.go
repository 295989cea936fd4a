package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
)

// An engine's simulated server in TestTimeToPage: its model and the
// server it speaks (vllm-sim --engine).
type engineServer struct{ model, server string }

// derived are the exporter's series computed from table rows, by the rows
// one of which they need (the classifier's decode measurement).
var derived = map[string][]string{
	"vllm_decode_measured_tokens_per_second": {"vllm_inter_token_latency_seconds", "vllm_request_time_per_output_token_seconds"},
}

// unfillable are the series a server has no family for (the table's rows
// without a name of its column, and what is derived from them only), as
// Prometheus stores them.
func unfillable(server string) map[string]bool {
	out := map[string]bool{}
	defer func() {
		for name, from := range derived {
			all := true
			for _, f := range from {
				all = all && out[f]
			}
			out[name] = all
		}
	}()
	for i := range families.Rows {
		f := &families.Rows[i]
		if len(f.NamesOf(server)) > 0 || strings.HasPrefix(f.NotFrom[server], "yes") {
			continue
		}
		for _, n := range []string{f.Exported, families.EngineSeries(f.Exported), f.ByPriority} {
			for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
				out[n+suffix] = true
			}
		}
	}
	return out
}

// recordingRule is one recording rule as Prometheus loaded it.
type recordingRule struct {
	Name, Query string
	Labels      map[string]string
}

func recordingRules(pc promClient) ([]recordingRule, error) {
	body, err := getBody(pc.base + "/api/v1/rules?type=record")
	if err != nil {
		return nil, err
	}
	var r struct {
		Data struct {
			Groups []struct {
				Rules []recordingRule `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, err
	}
	var out []recordingRule
	for _, g := range r.Data.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// engineGaps are the recording rules and dashboard panels that return data
// for the reference vLLM model ref but not for an engine's model, though
// every series they read (through the records they read) is one the
// engine's server fills: the shipped rules and dashboards must work for
// each engine wherever it can.
func engineGaps(pc promClient, ref string, engines []engineServer, panels []query) ([]string, error) {
	rules, err := recordingRules(pc)
	if err != nil {
		return nil, err
	}
	byName := map[string][]string{}
	for _, r := range rules {
		byName[r.Name] = append(byName[r.Name], r.Query)
	}
	// reads are the series an expression reads, through recording rules.
	var reads func(expr string, seen map[string]bool) []string
	reads = func(expr string, seen map[string]bool) []string {
		sels, _ := Selectors(expr)
		var out []string
		for _, s := range sels {
			if s.Name == "" || seen[s.Name] {
				continue
			}
			seen[s.Name] = true
			out = append(out, s.Name)
			for _, q := range byName[s.Name] {
				out = append(out, reads(q, seen)...)
			}
		}
		return out
	}
	type check struct{ where, expr func(model string) string }
	var checks []check
	for _, r := range rules {
		var ms []string
		for k, v := range r.Labels {
			ms = append(ms, fmt.Sprintf("%s=%q", k, v))
		}
		sort.Strings(ms)
		sel := r.Name + "{" + strings.Join(append(ms, ""), ",")
		checks = append(checks, check{func(string) string { return "record " + sel + "}" },
			func(m string) string { return sel + `model="` + m + `"}` }})
	}
	for _, p := range panels {
		if strings.Contains(p.Expr, "$model") {
			checks = append(checks, check{func(string) string { return p.Where },
				func(m string) string { return Substitute(strings.ReplaceAll(p.Expr, "$model", m)) }})
		}
	}
	var gaps []string
	for _, c := range checks {
		res, err := pc.query(c.expr(ref))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", c.where(ref), err)
		}
		if !finite(res) {
			continue
		}
		for _, e := range engines {
			missing := unfillable(e.server)
			lacks := false
			for _, name := range reads(c.expr(e.model), map[string]bool{}) {
				lacks = lacks || missing[name]
			}
			if lacks {
				continue
			}
			if res, err := pc.query(c.expr(e.model)); err != nil || !finite(res) {
				gaps = append(gaps, e.server+": "+c.where(e.model))
			}
		}
	}
	sort.Strings(gaps)
	return gaps, nil
}

// checkEngines, after TestTimeToPage's breach: each engine's exporter
// learnt its server with the defaults and its probes got answers; in
// classic and NHCB storage every recording rule and dashboard panel with
// data for slow-m (vLLM, the same breach) has data for the engine's model
// unless it reads a series the engine has no family for.
func checkEngines(t *testing.T, runs []*modeRun, engines []engineServer, targets []string) {
	t.Helper()
	panels, _ := dashboardQueries(t)
	pc := runs[0].a.pc
	for i, e := range engines {
		for what, q := range map[string]string{
			"server learnt":   `vllm_server_info{instance="` + targets[i] + `",server="` + e.server + `",source="detected"} == 1`,
			"probes answered": `vllm_probe_time_to_first_token_seconds_count{instance="` + targets[i] + `"} > 0`,
		} {
			if res, err := pc.query(q); err != nil || len(res) == 0 {
				t.Errorf("%s: %s: no %s (%v)", e.model, what, q, err)
			}
		}
	}
	eachMode(runs, func(r *modeRun) {
		if r.mode.name != "classic" && r.mode.name != "nhcb" {
			return
		}
		var gaps []string
		_, err := poll(time.Minute, r.a.procsAlive, func() error {
			var err error
			if gaps, err = engineGaps(r.a.pc, "slow-m", engines, panels); err == nil && len(gaps) > 0 {
				err = fmt.Errorf("%d without data:\n  %s", len(gaps), strings.Join(gaps, "\n  "))
			}
			return err
		})
		if err != nil {
			t.Errorf("%s: rules and panels an engine can fill: %v", r.mode.name, err)
		}
	})
}
