package config

// SLO is one entry of the `slos:` list. Owned by the SLO work (issue 6).
type SLO struct {
	Name string `yaml:"name"`
}

// Validate checks one SLO.
func (s *SLO) Validate() error { return nil }
