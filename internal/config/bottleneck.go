package config

// Bottleneck is the `bottleneck:` section: classifier thresholds. Owned by
// the bottleneck work (issue 7).
type Bottleneck struct {
}

// DefaultBottleneck returns the seeds' thresholds.
func DefaultBottleneck() Bottleneck { return Bottleneck{} }

// Validate checks the section.
func (b *Bottleneck) Validate() error { return nil }
