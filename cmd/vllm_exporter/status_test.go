package main

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim/vllmsimtest"
	"github.com/vllm-exporter/vllm_exporter/probes"
	"github.com/vllm-exporter/vllm_exporter/slo/bottleneck"
)

// statusTables parses the status page and returns each table's rows (by
// the table's id; cells as text, the header row left out) and every link.
func statusTables(t *testing.T, page string) (map[string][][]string, []string) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("status page does not parse: %v", err)
	}
	tables, links := map[string][][]string{}, []string{}
	var text func(n *html.Node) string
	text = func(n *html.Node) string {
		if n.Type == html.TextNode {
			return n.Data
		}
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			b.WriteString(text(c))
		}
		return b.String()
	}
	attr := func(n *html.Node, key string) string {
		for _, a := range n.Attr {
			if a.Key == key {
				return a.Val
			}
		}
		return ""
	}
	var walk func(n *html.Node, table string)
	walk = func(n *html.Node, table string) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "table":
				table = attr(n, "id")
				tables[table] = [][]string{}
			case "a":
				links = append(links, attr(n, "href"))
			case "tr":
				var cells []string
				for c := n.FirstChild; c != nil; c = c.NextSibling {
					if c.Type == html.ElementNode && c.Data == "td" {
						cells = append(cells, strings.TrimSpace(text(c)))
					}
				}
				if len(cells) > 0 {
					tables[table] = append(tables[table], cells)
				}
				return
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, table)
		}
	}
	walk(doc, "")
	return tables, links
}

// TestStatusPage: the page at / of a wired exporter scraping the simulator
// through a URL with a password shows the health verdict, the bottleneck
// class and evidence per model, a row per SLO and model with its alert
// state, burn rates and budget (and the young-period note), the last
// scrapes (a failed one with its reason among them) and the recent probes
// (a failed one with its reason and the server's text), each row as the
// components' snapshots hold it, and the password nowhere.
func TestStatusPage(t *testing.T) {
	sim := vllmsimtest.Start(t, vllmsim.Config{Seed: 9, LoadGen: true, MetricsVersion: vllmsim.MetricsLatest})
	const password = "pa55-W0rd-never-shown"
	u, _ := url.Parse(sim.URL())
	u.User = url.UserPassword("scraper", password)
	cfg := filepath.Join(t.TempDir(), "config.yml")
	os.WriteFile(cfg, []byte(`probes:
  max_requests_per_minute: 240
  profiles:
    - {name: quick, endpoint: completions, input_tokens: 16, output_tokens: 8, interval: 1s, timeout: 900ms, jitter: 0s}
slos:
  - {name: ttft-p99, source: server, kind: latency, metric: ttft, threshold: 1.0, objective: 0.99}
  - {name: probe-availability, source: probe, kind: availability, objective: 0.99}
`), 0o600)
	h := hardStart(t, nil, "--vllm.url="+u.String(), "--vllm.scrape-interval=250ms", "--slo.interval=250ms", "--config.file="+cfg)

	// A failed scrape and failed probes, then health again.
	ok := func(probesOK bool) func() (bool, string) {
		return func() (bool, string) {
			r := h.x.probes.Recent().Probes
			s := h.x.scrapes.entries()
			return len(r) > 0 && (r[0].Reason == "") == probesOK && len(s) > 0 && s[0].Reason == "" && len(h.x.slo.Status()) > 0 &&
				len(h.x.classifier.States()) > 0, "probes, scrapes, SLOs and classes"
		}
	}
	h.eventually("a successful probe, scrape, SLO evaluation and classification", ok(true))
	sim.InjectFault(vllmsim.FaultSpec{Kind: vllmsim.FaultGarbageMetrics})
	h.eventually("a failed scrape", func() (bool, string) {
		s := h.x.scrapes.entries()
		return len(s) > 0 && s[0].Reason != "", "scrapes"
	})
	sim.ClearFaults()
	sim.InjectFault(vllmsim.FaultSpec{Kind: vllmsim.FaultStreamError, AfterChunks: 2})
	h.eventually("a failed probe", ok(false))
	sim.ClearFaults()
	h.eventually("probes and scrapes succeed again", ok(true))

	before, verdict := h.x.probes.Recent().Probes, h.x.verdict.Latest()
	scrapesBefore, classes := h.x.scrapes.entries(), h.x.classifier.States()
	code, page := h.get("/")
	after, verdictAfter := h.x.probes.Recent().Probes, h.x.verdict.Latest()
	if code != 200 {
		t.Fatalf("status page: %d\n%s", code, page)
	}
	for _, secret := range []string{password, url.QueryEscape(password), base64.StdEncoding.EncodeToString([]byte("scraper:" + password))} {
		if strings.Contains(page, secret) {
			t.Fatalf("the status page shows the vLLM password (%q):\n%s", secret, page)
		}
	}
	tables, links := statusTables(t, page)
	for _, want := range []string{"/metrics", "/-/healthy", "/-/ready", "/-/vllm/healthy", "/-/vllm/ready"} {
		if !slices.Contains(links, want) {
			t.Errorf("status page links %v, not %s", links, want)
		}
	}
	if !strings.Contains(page, "scraper:xxxxx@"+u.Host) {
		t.Errorf("status page does not name the redacted target scraper:xxxxx@%s", u.Host)
	}

	// Verdict and bottleneck: the tracker's state, the classifier's class
	// per model with its evidence.
	if rows := tables["health"]; len(rows) != 1 || (rows[0][0] != string(verdict.State) && rows[0][0] != string(verdictAfter.State)) {
		t.Errorf("health verdict rows %v, want one: %s", rows, verdict.State)
	}
	if rows := tables["bottleneck"]; len(rows) != len(classes) {
		t.Errorf("bottleneck rows %v, want one per model of %v", rows, classes)
	} else {
		for i, st := range classes {
			if rows[i][0] != st.Model || rows[i][1] != string(st.Class) || !strings.Contains(rows[i][3], bottleneck.AdviceFor(st.Class).Summary) {
				t.Errorf("bottleneck row %v, want model %s class %s", rows[i], st.Model, st.Class)
			}
			for _, e := range st.Evidence() {
				if !strings.Contains(rows[i][4], e.Signal+" = ") {
					t.Errorf("bottleneck row %v lacks evidence %s", rows[i], e.Signal)
				}
			}
		}
	}

	// SLOs: one row per SLO and model, alert state, a burn rate per
	// window, the budget and the note that a young period is covered only
	// in part.
	slos := map[string][]string{}
	for _, r := range tables["slos"] {
		slos[r[0]+"/"+r[1]] = r
	}
	for _, key := range []string{"ttft-p99/" + simModelName, "probe-availability/"} {
		r, ok := slos[key]
		switch {
		case !ok:
			t.Errorf("no SLO row %s in %v", key, tables["slos"])
		case r[3] != "99%" || !slices.Contains([]string{"ok", "page", "ticket"}, r[4]) || !strings.Contains(r[5], "1h") || !strings.Contains(r[5], "3d"):
			t.Errorf("SLO row %v: want objective 99%%, an alert state, burn rates 1h..3d", r)
		case !strings.Contains(r[6], "covers only the part seen") || !strings.Contains(r[6], "30d"):
			t.Errorf("SLO row %v: the budget of a young 30d period does not say it covers only the part seen", r)
		}
	}

	// Scrapes: newest first, as logged, a failed one with its reason.
	rows := tables["scrapes"]
	if len(rows) == 0 || len(rows) > recentScrapes {
		t.Fatalf("%d scrape rows, want 1..%d", len(rows), recentScrapes)
	}
	failed := false
	for i, r := range rows {
		if i < len(scrapesBefore) && r[0] == scrapesBefore[i].Time.UTC().Format("15:04:05") && r[2] != scrapesBefore[i].Reason {
			t.Errorf("scrape row %v, logged as %+v", r, scrapesBefore[i])
		}
		if r[1] == "failed" {
			failed = failed || r[2] != ""
		} else if r[1] != "ok" || r[2] != "" {
			t.Errorf("scrape row %v: outcome ok or failed, a reason only when failed", r)
		}
	}
	if !failed {
		t.Errorf("no failed scrape with its reason among %v", rows)
	}

	// Probes: the profile's row, and each recent probe as the scheduler
	// recorded it (by request id), a stream_error with the server's text.
	if p := tables["probe-profiles"]; len(p) != 1 || p[0][0] != "quick" || p[0][4] == "– / –" {
		t.Errorf("probe profile rows %v, want quick with its TTFT quantiles", p)
	}
	byID := map[string]probes.ProbeRecord{}
	for _, r := range append(before, after...) {
		byID[r.RequestID] = r
	}
	rows = tables["probes"]
	if len(rows) == 0 || len(rows) > probes.RecentProbes {
		t.Fatalf("%d probe rows, want 1..%d", len(rows), probes.RecentProbes)
	}
	streamErr := false
	for _, r := range rows {
		rec, ok := byID[r[10]]
		want := rec.Reason
		if want == "" {
			want = "success"
		}
		ttft := "–"
		if rec.TTFT > 0 {
			ttft = fmt.Sprintf("%.1f ms", float64(rec.TTFT)/1e6)
		}
		if !ok || r[1] != "quick" || r[2] != simModelName || r[3] != want || r[5] != ttft {
			t.Errorf("probe row %v, recorded as %+v (found %v)", r, rec, ok)
		}
		streamErr = streamErr || (r[3] == probes.ReasonStreamError && strings.Contains(r[11], "simulated stream_error fault"))
	}
	if !streamErr {
		t.Errorf("no stream_error probe with the server's text among %v", rows)
	}
}

// simModelName is the simulator's default served model.
const simModelName = "meta-llama/Llama-3.1-8B-Instruct"
