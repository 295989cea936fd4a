//go:build cgo && !nonvml

package gpu

import (
	"os"
	"os/exec"
	"testing"
)

// TestBuildsWithoutNVML type-checks and builds this package (with its
// tests) the two cgo-free ways: CGO_ENABLED=0 and -tags nonvml. Both select
// the stub, so neither compiles go-nvml.
func TestBuildsWithoutNVML(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package twice")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"CGO_ENABLED=0", []string{"CGO_ENABLED=0"}, []string{"vet", "."}},
		{"-tags nonvml", nil, []string{"vet", "-tags", "nonvml", "."}},
	} {
		cmd := exec.Command(goBin, c.args...)
		cmd.Env = append(os.Environ(), c.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: go %v: %v\n%s", c.name, c.args, err, out)
		}
	}
}
