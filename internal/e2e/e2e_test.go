package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
	"gopkg.in/yaml.v3"
)

// notification is one webhook call from Alertmanager.
type notification struct {
	Path     string
	Received time.Time
	Status   string `json:"status"`
	Receiver string `json:"receiver"`
	Alerts   []struct {
		Status      string            `json:"status"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"alerts"`
}

// webhook records what Alertmanager sends.
type webhook struct {
	mu   sync.Mutex
	seen []notification
	srv  *httptest.Server
}

func newWebhook(t *testing.T) *webhook {
	w := &webhook{}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var n notification
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		n.Path, n.Received = r.URL.Path, time.Now()
		w.mu.Lock()
		w.seen = append(w.seen, n)
		w.mu.Unlock()
	}))
	t.Cleanup(w.srv.Close)
	return w
}

// find returns the first notification at or after since carrying an alert
// with the given status whose labels include match.
func (w *webhook) find(since time.Time, status string, match map[string]string) (notification, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.seen {
		if n.Received.Before(since) {
			continue
		}
	alerts:
		for _, a := range n.Alerts {
			if a.Status != status {
				continue
			}
			for k, v := range match {
				if a.Labels[k] != v {
					continue alerts
				}
			}
			return n, true
		}
	}
	return notification{}, false
}

func (w *webhook) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for _, n := range w.seen {
		for _, a := range n.Alerts {
			fmt.Fprintf(&b, "%s %s %s %s slo=%s\n", n.Received.Format("15:04:05"), n.Path, a.Status, a.Labels["alertname"], a.Labels["slo"])
		}
	}
	return b.String()
}

// alertmanagerConfig is the shipped deploy/alertmanager/alertmanager.yml
// (routes by severity, inhibitions) with the receivers pointed at the test's
// webhook and the waits shortened from minutes to a second.
func alertmanagerConfig(t *testing.T, webhookURL string) []byte {
	return shippedAlertmanagerConfig(t, webhookURL, true)
}

// shippedAlertmanagerConfig is deploy/alertmanager/alertmanager.yml with the
// receivers pointed at webhookURL (same paths); fast shortens group_wait
// and group_interval to a second, otherwise the timing is as shipped.
func shippedAlertmanagerConfig(t *testing.T, webhookURL string, fast bool) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.ModuleRoot(t), "deploy", "alertmanager", "alertmanager.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	var shorten func(r map[string]any)
	shorten = func(r map[string]any) {
		for _, k := range []string{"group_wait", "group_interval"} {
			if _, ok := r[k]; ok || r["receiver"] != nil {
				r[k] = "1s"
			}
		}
		if subs, ok := r["routes"].([]any); ok {
			for _, s := range subs {
				shorten(s.(map[string]any))
			}
		}
	}
	if fast {
		shorten(cfg["route"].(map[string]any))
	}
	for _, rc := range cfg["receivers"].([]any) {
		for _, wc := range rc.(map[string]any)["webhook_configs"].([]any) {
			m := wc.(map[string]any)
			u, err := url.Parse(m["url"].(string))
			if err != nil {
				t.Fatal(err)
			}
			m["url"] = webhookURL + u.Path
		}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type promClient struct{ base string }

type promResult struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (p promClient) query(q string) ([]promResult, error) {
	body, err := getBody(p.base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s", r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %s, want vector", r.Data.ResultType)
	}
	var res []promResult
	err = json.Unmarshal(r.Data.Result, &res)
	return res, err
}

// finite reports whether any sample of res is a number (not NaN or Inf).
func finite(res []promResult) bool {
	for _, r := range res {
		s, _ := r.Value[1].(string)
		if v, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
			return true
		}
	}
	return false
}

// TestEndToEnd runs the simulated vLLM, the exporter, a real Prometheus
// loaded with alerts/ and the SLO rules generated for a short-period SLO
// config, and a real Alertmanager with the shipped routing sending to a
// webhook served here. It proves every dashboard query returns data, that a
// hard TTFT breach pages within the expected time, and that the page
// resolves after recovery.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test takes minutes")
	}
	// beside TestTimeToPage and TestHeartbeatEveryMinute, which mostly
	// wait: the package stays well inside the 20m test timeout
	t.Parallel()
	promBin := RequireTool(t, "prometheus")
	amBin := RequireTool(t, "alertmanager")
	testStart := time.Now()
	s := startStack(t)
	dir := t.TempDir()

	// SLO rules for the short-period config, from the exporter's generator.
	sloRules := filepath.Join(dir, "e2e-slo-rules.yml")
	if err := os.WriteFile(sloRules, runCmd(t, s.exporterBin, "rules", "--config.file="+s.configPath), 0o644); err != nil {
		t.Fatal(err)
	}

	hook := newWebhook(t)
	amPort := freePort(t)
	amCfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(amCfg, alertmanagerConfig(t, hook.srv.URL), 0o644); err != nil {
		t.Fatal(err)
	}
	am := startProc(t, "alertmanager", amBin, "--config.file="+amCfg, "--storage.path="+filepath.Join(dir, "am"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", amPort), "--cluster.listen-address=", "--log.level=debug")
	amURL := fmt.Sprintf("http://127.0.0.1:%d", amPort)

	ruleFilesAll := append(ruleFiles(t), sloRules)
	promPort := freePort(t)
	promCfg := filepath.Join(dir, "prometheus.yml")
	cfg := map[string]any{
		"global":     map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
		"rule_files": ruleFilesAll,
		"alerting": map[string]any{"alertmanagers": []any{map[string]any{
			"static_configs": []any{map[string]any{"targets": []string{fmt.Sprintf("127.0.0.1:%d", amPort)}}}}}},
		"scrape_configs": []any{map[string]any{
			"job_name":       "vllm",
			"static_configs": []any{map[string]any{"targets": []string{strings.TrimPrefix(s.exporterURL, "http://")}}}}},
	}
	cb, _ := yaml.Marshal(cfg)
	if err := os.WriteFile(promCfg, cb, 0o644); err != nil {
		t.Fatal(err)
	}
	prom := startProc(t, "prometheus", promBin, "--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(dir, "prom"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort), "--rules.alert.resend-delay=1s", "--log.level=info")
	pc := promClient{base: fmt.Sprintf("http://127.0.0.1:%d", promPort)}
	procs := []*proc{s.sim, s.exporter, am, prom}
	waitFor(t, "alertmanager ready", 30*time.Second, procs, httpOK(amURL+"/-/ready"))
	waitFor(t, "prometheus ready", 30*time.Second, procs, httpOK(pc.base+"/-/ready"))
	waitFor(t, "exporter target up", 30*time.Second, procs, func() error {
		res, err := pc.query(`up{job="vllm"} == 1`)
		if err == nil && len(res) == 0 {
			err = fmt.Errorf("target not up yet")
		}
		return err
	})
	t.Logf("stack up after %v", time.Since(testStart).Round(time.Second))

	// Rules: every group of every file loaded, and no rule fails to evaluate.
	checkRules := func() {
		body, err := getBody(pc.base + "/api/v1/rules")
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Data struct {
				Groups []struct {
					Name  string `json:"name"`
					File  string `json:"file"`
					Rules []struct {
						Name      string `json:"name"`
						Health    string `json:"health"`
						LastError string `json:"lastError"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		files := map[string]bool{}
		for _, g := range r.Data.Groups {
			files[filepath.Base(g.File)] = true
			for _, rule := range g.Rules {
				if rule.Health == "err" {
					t.Errorf("rule %s in %s fails: %s", rule.Name, g.Name, rule.LastError)
				}
			}
		}
		for _, f := range ruleFilesAll {
			if !files[filepath.Base(f)] {
				t.Errorf("Prometheus did not load %s", f)
			}
		}
	}
	checkRules()

	// Every dashboard query must return data: most while healthy, the rest
	// (failure and bottleneck-evidence panels) during the breach below.
	panels, vars := dashboardQueries(t)
	gpuRes, _ := pc.query("vllm_gpu_info")
	hasGPU := len(gpuRes) > 0
	if !hasGPU {
		t.Log("no GPU collector in this run: GPU dashboard queries must evaluate, but cannot return data")
	}
	pending := map[string]bool{} // query.Where -> still without data
	for _, q := range panels {
		pending[q.Where] = true
	}
	for _, v := range vars {
		pending[v.Where] = true
	}
	// checkData evaluates every query still pending and returns how many
	// remain without data (GPU queries without a GPU only need to evaluate).
	checkData := func() []string {
		for _, q := range panels {
			if !pending[q.Where] {
				continue
			}
			res, err := pc.query(Substitute(q.Expr))
			if err != nil {
				t.Fatalf("%s: Prometheus rejects %q: %v", q.Where, Substitute(q.Expr), err)
			}
			if finite(res) || (q.Dashboard == "vllm-gpu.json" && !hasGPU) {
				delete(pending, q.Where)
			}
		}
		for _, v := range vars {
			if !pending[v.Where] {
				continue
			}
			sel, label, err := VariableQuery(v.Expr)
			if err != nil {
				t.Fatal(err)
			}
			res, err := pc.query(fmt.Sprintf("count by (%s) (%s)", label, sel))
			if err != nil {
				t.Fatalf("%s: %v", v.Where, err)
			}
			if len(res) > 0 || (v.Dashboard == "vllm-gpu.json" && !hasGPU) {
				delete(pending, v.Where)
			}
		}
		var left []string
		for w := range pending {
			left = append(left, w)
		}
		sort.Strings(left)
		return left
	}
	// Healthy: wait until every query has data, or the set still without
	// data has not changed for 30s (after at least a minute, so the 1m rate
	// windows and the 30s recording rules have filled), at most 4 minutes.
	var healthyLeft []string
	start, lastChange, prev := time.Now(), time.Now(), ""
	for {
		healthyLeft = checkData()
		if cur := strings.Join(healthyLeft, ","); cur != prev {
			prev, lastChange = cur, time.Now()
		}
		if len(healthyLeft) == 0 || (time.Since(start) > time.Minute && time.Since(lastChange) > 30*time.Second) || time.Since(start) > 4*time.Minute {
			break
		}
		time.Sleep(3 * time.Second)
	}
	t.Logf("healthy phase (%v): %d of %d queries returned data; left for the breach: %v",
		time.Since(start).Round(time.Second), len(panels)+len(vars)-len(healthyLeft), len(panels)+len(vars), healthyLeft)

	// The alerting pipeline works (Watchdog reaches the heartbeat receiver)
	// and nothing pages while healthy.
	waitFor(t, "Watchdog at the heartbeat receiver", time.Minute, procs, func() error {
		if _, ok := hook.find(testStart, "firing", map[string]string{"alertname": "Watchdog"}); !ok {
			return fmt.Errorf("no Watchdog notification yet")
		}
		return nil
	})
	if n, ok := hook.find(testStart, "firing", map[string]string{"severity": "critical"}); ok {
		t.Fatalf("paged while healthy: %+v\nall notifications:\n%s", n, hook.summary())
	}

	// Hard breach: every engine step 10x slower (deep power/thermal
	// throttling): TTFT of almost every request goes above 250 ms while
	// requests keep flowing, so the short windows see enough events.
	page := map[string]string{"alertname": "VLLMSLOBurnRatePage", "slo": "e2e-ttft", "severity": "critical"}
	breach := time.Now()
	s.setScenario(t, map[string]any{"scenario": "throttled", "step_factor": 10})
	// and a few seconds of cut streams, so probe failures exist
	s.fault(t, map[string]any{"fault": "stream_cut", "after_chunks": 1, "duration": "5s"})
	// Expected: the 90s (1h-equivalent) window crosses 14.4x after ~13s of
	// bad events, the 8s window at once; plus scrape, evaluation and
	// group_wait of a second each. Allow 4x for a loaded 2-core CI runner.
	const pageWithin = 2 * time.Minute
	var paged notification
	took := waitFor(t, "page for the TTFT breach at the webhook", pageWithin, procs, func() error {
		n, ok := hook.find(breach, "firing", page)
		if !ok {
			res, _ := pc.query(`slo:sli_error:ratio_rate1m30s{slo="e2e-ttft"}`)
			return fmt.Errorf("no page yet (90s error ratio %v)", res)
		}
		paged = n
		return nil
	})
	t.Logf("page reached the webhook %v after the breach started (path %s)", took.Round(time.Second), paged.Path)
	if paged.Path != "/pager" {
		t.Errorf("the page went to %s, want the pager receiver (/pager) of the shipped routing", paged.Path)
	}
	// The queries that had no data while healthy have it now.
	waitFor(t, "remaining dashboard queries return data during the breach", time.Minute, procs, func() error {
		if left := checkData(); len(left) > 0 {
			return fmt.Errorf("%d queries without data:\n  %s", len(left), strings.Join(left, "\n  "))
		}
		return nil
	})
	t.Logf("every dashboard query returned data (GPU dashboard: evaluated only=%v)", !hasGPU)
	// The exporter's own watchdog agrees with the Prometheus rules.
	waitFor(t, "exporter watchdog page state", time.Minute, procs, func() error {
		res, err := pc.query(`vllm_slo_alert_state{slo="e2e-ttft",severity="critical"} == 1`)
		if err == nil && len(res) == 0 {
			err = fmt.Errorf("vllm_slo_alert_state page not set")
		}
		return err
	})

	// Recovery: back to healthy; the page resolves once the short windows
	// are clean (45s window of the 6x pair is the slowest).
	recovered := time.Now()
	s.setScenario(t, map[string]any{"scenario": "healthy"})
	took = waitFor(t, "page resolved at the webhook", 3*time.Minute, procs, func() error {
		if _, ok := hook.find(recovered, "resolved", page); !ok {
			return fmt.Errorf("not resolved yet")
		}
		return nil
	})
	t.Logf("page resolved %v after recovery; total %v", took.Round(time.Second), time.Since(testStart).Round(time.Second))
	checkRules()
	if t.Failed() {
		t.Logf("notifications:\n%s", hook.summary())
	}
}
