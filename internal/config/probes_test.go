package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestProbesDefaultFileMatchesDefaults(t *testing.T) {
	f := Default()
	if !reflect.DeepEqual(f.Probes, DefaultProbes()) {
		t.Fatalf("default.yml probes section differs from DefaultProbes():\n%+v\n%+v", f.Probes, DefaultProbes())
	}
}

func TestProbesProfileDefaultsAndStrictness(t *testing.T) {
	f, err := Parse([]byte(`
probes:
  max_requests_per_minute: 30
  profiles:
    - name: warm-long
      endpoint: completions
      input_tokens: 1024
      prefix: warm
      warm_prefix_tokens: 512
`), "t")
	if err != nil {
		t.Fatal(err)
	}
	p := f.Probes
	if p.MaxRequestsPerMinute != 30 || p.MaxTokensPerHour != DefaultProbes().MaxTokensPerHour {
		t.Fatalf("section defaults not kept: %+v", p)
	}
	if len(p.Profiles) != 1 {
		t.Fatalf("profiles = %d", len(p.Profiles))
	}
	pr := p.Profiles[0]
	if pr.OutputTokens != 32 || pr.Interval != 15*time.Second || pr.Timeout != 10*time.Second || pr.WarmPrefix() != 512 {
		t.Fatalf("profile defaults not applied: %+v", pr)
	}

	_, err = Parse([]byte("probes:\n  profiles:\n    - name: a\n      bogus: 1\n"), "t")
	if err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("unknown profile field accepted: %v", err)
	}
}

func TestProbesValidateNamesField(t *testing.T) {
	cases := map[string]string{
		"probes:\n  max_requests_per_minute: 0\n":                                                  "max_requests_per_minute",
		"probes:\n  max_requests_per_minute: 999999999999\n":                                       "max_requests_per_minute",
		"probes:\n  max_tokens_per_hour: 999999999999\n":                                           "max_tokens_per_hour",
		"probes:\n  max_tokens_per_hour: -1\n":                                                     "max_tokens_per_hour",
		"probes:\n  profiles:\n    - endpoint: chat\n":                                             "name",
		"probes:\n  profiles:\n    - name: a\n      endpoint: embeddings\n":                        "endpoint",
		"probes:\n  profiles:\n    - name: a\n      output_tokens: 1\n":                            "output_tokens",
		"probes:\n  profiles:\n    - name: a\n      prefix: hot\n":                                 "prefix",
		"probes:\n  profiles:\n    - name: a\n      warm_prefix_tokens: 4\n":                       "warm_prefix_tokens",
		"probes:\n  profiles:\n    - name: a\n      prefix: warm\n      warm_prefix_tokens: 999\n": "warm_prefix_tokens",
		"probes:\n  profiles:\n    - name: a\n      timeout: 20s\n":                                "timeout",
		"probes:\n  profiles:\n    - name: a\n      jitter: 10s\n":                                 "jitter",
		"probes:\n  profiles:\n    - name: a\n    - name: a\n":                                     "duplicate",
		"probes:\n  profiles:\n    - name: 'a b'\n":                                                "name",
		"probes:\n  max_tokens_per_hour: 100\n":                                                    "max_tokens_per_hour",
		"probes:\n  interval: 5s\n":                                                                "interval",
		"probes:\n  profiles:\n    - name: a\n      model: ' sql-lora'\n":                          "model",
		"probes:\n  profiles:\n    - name: a\n      model: \"sql\\nlora\"\n":                       "model",
		"models:\n  grace: -1m\n":                                                                  "models: grace",
		"models:\n  grace: 48h\n":                                                                  "models: grace",
	}
	for doc, want := range cases {
		_, err := Parse([]byte(doc), "t")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v does not name %q", doc, err, want)
		}
	}
}

// sqlLoraSLO is a probe SLO of the sql-lora profile alone.
const sqlLoraSLO = `
slos:
  - name: sql-lora-ttft
    source: probe
    kind: latency
    metric: ttft
    threshold: 1
    objective: 0.99
    profiles: [sql-lora]
`

// A profile can probe a LoRA adapter by name, and a probe SLO can select
// that profile alone: the adapter's own SLO.
func TestProbeProfileModelAndItsSLO(t *testing.T) {
	f, err := Parse([]byte(`
probes:
  profiles:
    - name: base
    - name: sql-lora
      model: sql-lora
`+sqlLoraSLO), "t")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Probes.Profiles[1]; got.Model != "sql-lora" || f.Probes.Profiles[0].Model != "" {
		t.Errorf("profiles %+v: want the second to probe sql-lora, the first the section's model", f.Probes.Profiles)
	}
	if got := f.SLOs[0].Profiles; len(got) != 1 || got[0] != "sql-lora" {
		t.Errorf("SLO profiles %v, want the adapter's profile", got)
	}
}

// A probe SLO's profiles must name probe profiles: one naming a profile
// that does not run is refused with the profiles there are, not left to
// count nothing forever.
func TestSLOProfilesNameExistingProfiles(t *testing.T) {
	for _, c := range []struct{ probes, want string }{
		{"probes:\n  profiles:\n    - name: base\n    - name: sql-lora-chat\n      model: sql-lora\n",
			`slos[0] (sql-lora-ttft): profiles[0]: "sql-lora" names no probe profile (probes.profiles has base, sql-lora-chat)`},
		{"", `"sql-lora" names no probe profile (probes.profiles has short-chat)`},
		{"probes:\n  profiles: []\n", `"sql-lora" names no probe profile (probes.profiles has none)`},
	} {
		_, err := Parse([]byte(c.probes+sqlLoraSLO), "t")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("probes %q: error %v, want it to contain %q", c.probes, err, c.want)
		}
	}
	if _, err := Parse([]byte("probes:\n  profiles:\n    - name: sql-lora\n      model: sql-lora\n"+sqlLoraSLO), "t"); err != nil {
		t.Errorf("an SLO naming an existing profile: %v", err)
	}
}
