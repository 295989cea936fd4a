package config

// Probes is the `probes:` section. Owned by the probes work (issue 4).
type Probes struct {
}

// DefaultProbes returns the probe section used when the file has none.
func DefaultProbes() Probes { return Probes{} }

// Validate checks the section.
func (p *Probes) Validate() error { return nil }
