package vllm

import (
	"testing"
	"time"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/vllmsim"
)

// rolePod runs a simulated pod of one P/D role (v1-0.33) through a few
// requests and returns the exporter's view of its model, with --vllm.role
// set to flag.
func rolePod(t *testing.T, pd vllmsim.PD, flag string) *snapshot.Model {
	t.Helper()
	sim, err := vllmsim.New(vllmsim.Config{VirtualClock: true, Seed: 7, MetricsVersion: vllmsim.MetricsLatest})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	s := newTestScraper(t, sim.URL(), func(o *Options) { o.Role = flag })
	if pd.Role != vllmsim.RoleNone {
		if err := sim.SetPD(pd); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		if _, err := sim.Submit(vllmsim.Request{Prompt: vllmsim.Tokenize("a prompt whose KV a decode pod reads"), MaxTokens: 20, IgnoreEOS: true}); err != nil {
			t.Fatal(err)
		}
	}
	sim.Advance(10 * time.Second)
	scrapeAt(s, sim.Now())
	m := s.Latest().Models[sim.Config().Models[0]]
	if m == nil {
		t.Fatal("model not scraped")
	}
	return m
}

// The pod's role comes from the NIXL families when --vllm.role is auto: a
// pod that reads KV (nixl_xfer_time observed) is decode, one whose KV
// expired unread is prefill, a pod without the connector is both.
func TestPodRoleDetectedFromNIXLFamilies(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pd         vllmsim.PD
		role, from string
	}{
		{"aggregated", vllmsim.PD{}, snapshot.RoleBoth, snapshot.RoleSourceDefault},
		{"decode", vllmsim.PD{Role: vllmsim.RoleDecode, TransferSeconds: 0.2}, snapshot.RoleDecode, snapshot.RoleSourceDetected},
		{"prefill", vllmsim.PD{Role: vllmsim.RolePrefill, ExpireFraction: 0.5}, snapshot.RolePrefill, snapshot.RoleSourceDetected},
		// A prefill pod whose KV always reached its decode pod says nothing yet.
		{"prefill_quiet", vllmsim.PD{Role: vllmsim.RolePrefill}, snapshot.RoleBoth, snapshot.RoleSourceDefault},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := rolePod(t, tc.pd, RoleAuto)
			if m.Role != tc.role || m.RoleSource != tc.from {
				t.Errorf("role %q from %q, want %q from %q", m.Role, m.RoleSource, tc.role, tc.from)
			}
		})
	}
}

// --vllm.role overrides detection.
func TestPodRoleFlagOverridesDetection(t *testing.T) {
	m := rolePod(t, vllmsim.PD{Role: vllmsim.RoleDecode, TransferSeconds: 0.2}, snapshot.RolePrefill)
	if m.Role != snapshot.RolePrefill || m.RoleSource != snapshot.RoleSourceFlag {
		t.Errorf("role %q from %q, want prefill from flag", m.Role, m.RoleSource)
	}
}

// A prefill pod behind a P/D proxy generates one token per request; with
// the NIXL connector on that alone tells its role.
func TestPodRolePrefillFromOneTokenRequests(t *testing.T) {
	m := &snapshot.Model{KVTransferFailures: snapshot.Some(0), KVTransferExpiredRequests: snapshot.Some(0),
		FinishedByReason: map[string]float64{"length": 40}, GenerationTokens: snapshot.Some(40)}
	if got := detectRole(m); got != snapshot.RolePrefill {
		t.Errorf("detected %q, want prefill", got)
	}
	m.GenerationTokens = snapshot.Some(4000)
	if got := detectRole(m); got != "" {
		t.Errorf("a pod generating 100 tokens per request detected as %q, want undecided", got)
	}
	// Without the connector one-token requests (a classifier, a benchmark)
	// say nothing about P/D.
	if got := detectRole(&snapshot.Model{FinishedByReason: map[string]float64{"length": 40}, GenerationTokens: snapshot.Some(40)}); got != "" {
		t.Errorf("no NIXL connector, detected %q", got)
	}
}
