package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// VLLMBody returns the vLLM /metrics body collector/vllm/testdata/name.
// The real and simulated vLLM bodies are stored once, beside the parser
// they test; tests of other packages read them through here.
func VLLMBody(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ModuleRoot(t), "collector", "vllm", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
