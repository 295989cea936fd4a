package config

import (
	"fmt"
	"time"
)

// Models is the `models:` section: how the places under --vllm.max-models
// are shared among vLLM's model names. It follows reloads.
type Models struct {
	// Grace, when set, overrides --vllm.model-grace: a model name absent
	// from successful vLLM scrapes this long gives its place to a new name
	// when every place is taken. Zero (the default) keeps the flag's value;
	// a grace longer than --vllm.model-idle-timeout acts as the idle
	// timeout.
	Grace time.Duration `yaml:"grace"`
}

// MaxModelGrace bounds models.grace: past a day a gone model only holds a
// place a new one needs.
const MaxModelGrace = 24 * time.Hour

// Validate checks the section; errors name the field.
func (m *Models) Validate() error {
	if m.Grace < 0 || m.Grace > MaxModelGrace {
		return fmt.Errorf("grace: must be in [0, %s] (0 = --vllm.model-grace), got %s", MaxModelGrace, m.Grace)
	}
	return nil
}
