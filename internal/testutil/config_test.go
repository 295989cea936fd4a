package testutil

import (
	"os"
	"strings"
	"testing"
)

func TestConfigHolderLoadsTheFile(t *testing.T) {
	h, path := ConfigHolder(t, "slos:\n- {name: a, kind: availability, objective: 0.99}\n")
	if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), "name: a") {
		t.Fatalf("file at %s: %v", path, err)
	}
	if s := h.Get().SLOs; len(s) != 1 || s[0].Name != "a" {
		t.Fatalf("holder: %+v", s)
	}
}
