package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// newWatchedHolder writes initial to a temporary config file and loads it
// into a Holder; write replaces the file's text, seen counts the
// configurations handed to subscribers since.
func newWatchedHolder(t *testing.T, initial string) (h *Holder, path string, write func(string), seen func() int) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "c.yml")
	write = func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(initial)
	h, err := NewHolder(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	h.Subscribe(func(*File) { n++ })
	return h, path, write, func() int { return n }
}

func TestHolderReloadKeepsRunningConfigOnError(t *testing.T) {
	h, _, write, seen := newWatchedHolder(t, "slos:\n- {name: a, kind: availability, objective: 0.99}\n")
	write("slos:\n- {name: a, kind: availability, objective: 2}\n")
	if err := h.Reload(); err == nil || !strings.Contains(err.Error(), "objective") {
		t.Fatalf("invalid reload: %v", err)
	}
	if h.LastReloadSuccessful() || h.Get().SLOs[0].Objective != 0.99 || seen() != 0 {
		t.Fatal("invalid file replaced the running config")
	}
	write("slos:\n- {name: b, kind: availability, objective: 0.999}\n")
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	if !h.LastReloadSuccessful() || h.Get().SLOs[0].Name != "b" || seen() != 1 {
		t.Fatalf("valid reload not applied: %+v", h.Get().SLOs)
	}
}

func TestParseRejectsUnknownFieldsAndMultipleDocuments(t *testing.T) {
	if _, err := Parse([]byte("slo: []\n"), "x"); err == nil || !strings.Contains(err.Error(), "x: slo: unknown field (line 1)") {
		t.Fatalf("unknown top-level field: %v", err)
	}
	if _, err := Parse([]byte("slos: []\n---\nslos: []\n"), "x"); err == nil || !strings.Contains(err.Error(), "more than one YAML document") {
		t.Fatalf("two documents: %v", err)
	}
	if f, err := Parse(nil, "empty"); err != nil || len(f.SLOs) != 5 {
		t.Fatalf("empty file: %v %v", f, err)
	}
}

// TestLoadSizeCap: a file larger than MaxFileBytes is refused with an error
// naming the file and the cap (without being read further); a valid file of
// exactly the cap loads.
func TestLoadSizeCap(t *testing.T) {
	dir := t.TempDir()
	valid := []byte("slos: []\n")
	pad := func(n int) []byte {
		b := append([]byte(nil), valid...)
		for len(b) < n {
			line := "# padding to reach the size cap of a configuration file\n"
			if rest := n - len(b); rest < len(line) {
				line = "#" + strings.Repeat("x", rest-2) + "\n"
			}
			b = append(b, line...)
		}
		return b
	}
	at := filepath.Join(dir, "at-cap.yml")
	over := filepath.Join(dir, "over-cap.yml")
	if err := os.WriteFile(at, pad(MaxFileBytes), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(over, pad(MaxFileBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(at); fi.Size() != MaxFileBytes {
		t.Fatalf("test file is %d bytes, want %d", fi.Size(), MaxFileBytes)
	}
	if _, err := Load(at); err != nil {
		t.Fatalf("a valid file of exactly the cap: %v", err)
	}
	_, err := Load(over)
	if err == nil || !strings.Contains(err.Error(), over) || !strings.Contains(err.Error(), "1024 KiB cap") {
		t.Fatalf("over the cap: %v, want an error naming the file and the cap", err)
	}
	h, err := NewHolder(at)
	if err != nil {
		t.Fatal(err)
	}
	running := h.Get()
	os.Rename(over, at)
	if err := h.Reload(); err == nil || h.Get() != running || h.LastReloadSuccessful() {
		t.Fatalf("reload of an oversize file: err %v, config kept %v", err, h.Get() == running)
	}
}

// TestHolderCheckVetsReloads: a check that needs more than the file (the
// vllm: section with the command line's shortcuts) fails a reload like a
// parse error: the running configuration stays and no subscriber runs.
func TestHolderCheckVetsReloads(t *testing.T) {
	h, p, write, seen := newWatchedHolder(t, "vllm:\n  follow_redirects: true\n")
	h.Check(func(f *File) error {
		if !f.VLLM.FollowRedirects {
			return errors.New("vllm: redirects are needed here")
		}
		return nil
	})
	write("vllm:\n  follow_redirects: false\n")
	if err := h.Reload(); err == nil || !strings.Contains(err.Error(), "redirects are needed") {
		t.Fatalf("reload past a failing check: %v", err)
	}
	if h.LastReloadSuccessful() || !h.Get().VLLM.FollowRedirects || seen() != 0 {
		t.Fatal("a configuration the check refused replaced the running one")
	}
	write("vllm:\n  follow_redirects: true\n  tls_config: {ca_file: ca.pem}\n")
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	// Relative file names are relative to the configuration file.
	if want := filepath.Join(filepath.Dir(p), "ca.pem"); h.Get().VLLM.TLSConfig.CAFile != want || seen() != 1 {
		t.Fatalf("ca_file %q, want %q; %d reloads seen", h.Get().VLLM.TLSConfig.CAFile, want, seen())
	}
}

// TestVLLMSectionDefaultsAndSecrets: no vllm: section is a direct
// connection that follows redirects; an inline credential is a Secret that
// prints as <secret>; unknown keys are errors.
func TestVLLMSectionDefaultsAndSecrets(t *testing.T) {
	f := Default()
	if !f.VLLM.FollowRedirects || f.VLLM.Authorization != nil || f.VLLM.ProxyFromEnvironment || f.VLLM.ProxyURL.URL != nil {
		t.Fatalf("default vllm section: %+v", f.VLLM)
	}
	f, err := Parse([]byte("vllm:\n  authorization: {credentials: sk-Inline9secret}\n"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if s := f.VLLM.String(); strings.Contains(s, "sk-Inline9secret") || !strings.Contains(s, "<secret>") {
		t.Fatalf("the inline credential prints: %s", s)
	}
	if _, err := Parse([]byte("vllm:\n  tls_confg: {ca_file: x}\n"), "t"); err == nil || !strings.Contains(err.Error(), "tls_confg") {
		t.Fatalf("a misspelt key was accepted: %v", err)
	}
}
