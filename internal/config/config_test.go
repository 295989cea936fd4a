package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHolderReloadKeepsRunningConfigOnError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yml")
	write := func(s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("slos:\n- {name: a, kind: availability, objective: 0.99}\n")
	h, err := NewHolder(p)
	if err != nil {
		t.Fatal(err)
	}
	var got []*File
	h.Subscribe(func(f *File) { got = append(got, f) })

	write("slos:\n- {name: a, kind: availability, objective: 2}\n")
	if err := h.Reload(); err == nil || !strings.Contains(err.Error(), "objective") {
		t.Fatalf("invalid reload: %v", err)
	}
	if h.LastReloadSuccessful() || h.Get().SLOs[0].Objective != 0.99 || len(got) != 0 {
		t.Fatal("invalid file replaced the running config")
	}
	write("slos:\n- {name: b, kind: availability, objective: 0.999}\n")
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	if !h.LastReloadSuccessful() || h.Get().SLOs[0].Name != "b" || len(got) != 1 {
		t.Fatalf("valid reload not applied: %+v", h.Get().SLOs)
	}
}

func TestParseRejectsUnknownFieldsAndMultipleDocuments(t *testing.T) {
	if _, err := Parse([]byte("slo: []\n"), "x"); err == nil || !strings.Contains(err.Error(), "field slo not found") {
		t.Fatalf("unknown top-level field: %v", err)
	}
	if _, err := Parse([]byte("slos: []\n---\nslos: []\n"), "x"); err == nil || !strings.Contains(err.Error(), "more than one YAML document") {
		t.Fatalf("two documents: %v", err)
	}
	if f, err := Parse(nil, "empty"); err != nil || len(f.SLOs) != 5 {
		t.Fatalf("empty file: %v %v", f, err)
	}
}
