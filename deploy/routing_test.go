package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vllm-exporter/vllm_exporter/alerts"
	"github.com/vllm-exporter/vllm_exporter/internal/e2e"
)

// shippedAlerts returns every alert of alerts/*.yml with its static labels
// (one entry per alert and slo).
func shippedAlerts(t *testing.T) []map[string]string {
	t.Helper()
	var out []map[string]string
	for name, b := range alerts.RuleFiles() {
		var rf struct {
			Groups []struct {
				Rules []struct {
					Alert  string            `yaml:"alert"`
					Labels map[string]string `yaml:"labels"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(b, &rf); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				ls := map[string]string{"alertname": r.Alert}
				for k, v := range r.Labels {
					ls[k] = v
				}
				out = append(out, ls)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no alerts in alerts/*.yml")
	}
	return out
}

// Every shipped alert reaches the receiver its severity promises in the
// example Alertmanager routing: critical pages, warning tickets, the
// Watchdog goes to the heartbeat (amtool evaluates the real routing tree).
func TestAlertmanagerRoutesEveryAlert(t *testing.T) {
	amtool := e2e.RequireTool(t, "amtool")
	for _, ls := range shippedAlerts(t) {
		want := map[string]string{"critical": "pager", "warning": "tickets"}[ls["severity"]]
		if ls["alertname"] == "Watchdog" {
			want = "heartbeat"
		}
		if want == "" {
			t.Errorf("alert %s has severity %q, which the routing has no receiver for", ls["alertname"], ls["severity"])
			continue
		}
		args := []string{"config", "routes", "test", "--config.file=alertmanager/alertmanager.yml"}
		keys := make([]string, 0, len(ls))
		for k := range ls {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			args = append(args, k+"="+ls[k])
		}
		out, err := exec.Command(amtool, args...).Output()
		if err != nil {
			t.Fatalf("amtool %s: %v", strings.Join(args, " "), err)
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("alert %v routes to %q, want %q", ls, got, want)
		}
	}
}

// Every alertname an inhibition rule matches on is a shipped alert, so a
// renamed alert cannot silently disable an inhibition.
func TestAlertmanagerInhibitionsNameShippedAlerts(t *testing.T) {
	b, err := os.ReadFile("alertmanager/alertmanager.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		InhibitRules []struct {
			Source []string `yaml:"source_matchers"`
			Target []string `yaml:"target_matchers"`
			Equal  []string `yaml:"equal"`
		} `yaml:"inhibit_rules"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	shipped := map[string]bool{}
	for _, ls := range shippedAlerts(t) {
		shipped[ls["alertname"]] = true
	}
	name := regexp.MustCompile(`^alertname\s*=(~?)\s*"([^"]*)"$`)
	n := 0
	for i, r := range cfg.InhibitRules {
		if len(r.Equal) == 0 {
			t.Errorf("inhibit rule %d has no equal labels: it would inhibit across every replica", i)
		}
		for _, m := range append(append([]string{}, r.Source...), r.Target...) {
			sm := name.FindStringSubmatch(strings.TrimSpace(m))
			if sm == nil {
				continue
			}
			names := []string{sm[2]}
			if sm[1] == "~" {
				names = strings.Split(sm[2], "|")
			}
			for _, a := range names {
				n++
				if !shipped[a] {
					t.Errorf("inhibit rule %d matches alertname %q, which no rule in alerts/*.yml defines", i, a)
				}
			}
		}
	}
	if n == 0 {
		t.Error("no inhibition names an alert")
	}
}
