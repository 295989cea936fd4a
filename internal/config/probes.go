package config

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
)

// Probe endpoints and prefix modes.
const (
	EndpointCompletions = "completions" // POST /v1/completions, prompt as token IDs
	EndpointChat        = "chat"        // POST /v1/chat/completions, prompt as text

	PrefixCold = "cold" // a unique random prompt each time: nothing can be cached
	PrefixWarm = "warm" // a fixed shared prefix of warm_prefix_tokens tokens

	// Which API server of several (vllm.urls) a probe goes to.
	APIServersFirstUp = "first_up" // the first whose last scrape succeeded (the first when none did)
	APIServersEach    = "each"     // each in turn: every rank's front end is probed, within the same budgets
)

// ProbeEndpoint is one kind of probe: the vLLM route it streams from and
// the prompt it sends.
type ProbeEndpoint struct {
	// Path is the route under the vLLM base URL.
	Path string
	// TokenPrompt: the prompt is a list of token IDs, so the prompt length
	// vLLM reports must equal input_tokens exactly. Otherwise it is a chat
	// message, which the chat template lengthens.
	TokenPrompt bool
}

// ProbeEndpoints are the probe kinds, by a profile's `endpoint` value: the
// one place the probes and the validation look them up.
var ProbeEndpoints = map[string]ProbeEndpoint{
	EndpointCompletions: {Path: "/v1/completions", TokenPrompt: true},
	EndpointChat:        {Path: "/v1/chat/completions"},
}

// Probes is the `probes:` section: synthetic streaming probe profiles and the
// budgets that keep them invisible to production. Owned by the probes work
// (issue 4).
type Probes struct {
	// Model is the served model name sent in every probe. Empty means the
	// first model listed by GET /v1/models.
	Model string `yaml:"model"`
	// MaxRequestsPerMinute caps probe requests over any sliding minute,
	// across all profiles.
	MaxRequestsPerMinute int `yaml:"max_requests_per_minute"`
	// MaxTokensPerHour caps prompt+completion tokens over any sliding hour,
	// across all profiles.
	MaxTokensPerHour int `yaml:"max_tokens_per_hour"`
	// BackoffMax caps the exponential back-off after consecutive failures
	// or a 503.
	BackoffMax time.Duration `yaml:"backoff_max"`
	// TTFTGapWindow is the window over which probe TTFT and vLLM's
	// server-side TTFT medians are compared (vllm_probe_ttft_gap_seconds).
	TTFTGapWindow time.Duration `yaml:"ttft_gap_window"`
	// TokenIDMin and TokenIDMax bound the token IDs used to build
	// completions prompts: [min, max). Keep them inside the model's
	// ordinary vocabulary (clear of special tokens).
	TokenIDMin int `yaml:"token_id_min"`
	TokenIDMax int `yaml:"token_id_max"`
	// APIServers says which of several API servers of the vLLM server
	// (--vllm.url repeated, --vllm.data-parallel-ranks) a probe goes to:
	// first_up or each.
	APIServers string `yaml:"api_servers"`

	Profiles []ProbeProfile `yaml:"profiles"`
}

// ProbeProfile is one kind of synthetic request sent on its own timer.
type ProbeProfile struct {
	Name     string `yaml:"name"`
	Endpoint string `yaml:"endpoint"` // completions | chat
	// Model is the served model name or LoRA adapter (vLLM serves each
	// --lora-modules adapter as a model id) this profile probes; empty
	// means the section's model.
	Model            string        `yaml:"model,omitempty"`
	InputTokens      int           `yaml:"input_tokens"`
	OutputTokens     int           `yaml:"output_tokens"`
	Prefix           string        `yaml:"prefix"`             // cold | warm
	WarmPrefixTokens int           `yaml:"warm_prefix_tokens"` // warm only; 0 = input_tokens
	Interval         time.Duration `yaml:"interval"`
	Timeout          time.Duration `yaml:"timeout"`
	Jitter           time.Duration `yaml:"jitter"` // each gap is interval ± a uniform draw in [0, jitter]
}

// DefaultProbeProfile is the shipped short-chat profile; fields a profile in
// the file leaves out take these values.
func DefaultProbeProfile() ProbeProfile {
	return ProbeProfile{
		Name:         "short-chat",
		Endpoint:     EndpointChat,
		InputTokens:  128,
		OutputTokens: 32,
		Prefix:       PrefixCold,
		Interval:     15 * time.Second,
		Timeout:      10 * time.Second,
		Jitter:       1500 * time.Millisecond,
	}
}

// DefaultProbes returns the probe section used when the file has none.
func DefaultProbes() Probes {
	return Probes{
		MaxRequestsPerMinute: 12,
		MaxTokensPerHour:     200000,
		BackoffMax:           5 * time.Minute,
		TTFTGapWindow:        5 * time.Minute,
		TokenIDMin:           1000,
		TokenIDMax:           20000,
		APIServers:           APIServersFirstUp,
		Profiles:             []ProbeProfile{DefaultProbeProfile()},
	}
}

// UnmarshalYAML fills a profile's absent fields from DefaultProbeProfile
// (except the name, which is required). It uses the decoder's own unmarshal
// callback so unknown fields stay errors. A model given empty is refused:
// absent means the section's model, and "" would say it by accident.
func (p *ProbeProfile) UnmarshalYAML(unmarshal func(any) error) error {
	type plain ProbeProfile
	d := DefaultProbeProfile()
	d.Name = ""
	var given map[string]any
	if err := unmarshal((*plain)(&d)); err != nil {
		return err
	}
	if err := unmarshal(&given); err != nil {
		return err
	}
	if _, ok := given["model"]; ok && d.Model == "" {
		return errors.New(`model: "" names no model (omit model to probe probes.model)`)
	}
	*p = ProbeProfile(d)
	return nil
}

// maxModelNameLen bounds a profile's model name (vLLM's served names and
// adapter names are Hugging Face ids or short names).
const maxModelNameLen = 256

var profileNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// Upper bounds of the probe budgets. Probes are a few requests a minute
// that production must not notice: ten a second is already load, and a
// hundred million tokens an hour is a whole node's output. A larger value
// is a typo (an extra digit), not a budget.
const (
	MaxProbeRequestsPerMinute = 600
	MaxProbeTokensPerHour     = 100_000_000
)

// Validate checks the section; errors name the offending field.
func (p *Probes) Validate() error {
	if p.Model != "" {
		if err := validModel(p.Model); err != nil {
			return err
		}
	}
	if p.MaxRequestsPerMinute <= 0 || p.MaxRequestsPerMinute > MaxProbeRequestsPerMinute {
		return fmt.Errorf("max_requests_per_minute: must be in [1, %d], got %d", MaxProbeRequestsPerMinute, p.MaxRequestsPerMinute)
	}
	if p.MaxTokensPerHour <= 0 || p.MaxTokensPerHour > MaxProbeTokensPerHour {
		return fmt.Errorf("max_tokens_per_hour: must be in [1, %d], got %d", MaxProbeTokensPerHour, p.MaxTokensPerHour)
	}
	if p.BackoffMax <= 0 {
		return fmt.Errorf("backoff_max: must be > 0, got %s", p.BackoffMax)
	}
	if p.TTFTGapWindow < time.Minute {
		return fmt.Errorf("ttft_gap_window: must be >= 1m, got %s", p.TTFTGapWindow)
	}
	if p.TokenIDMin < 0 || p.TokenIDMax-p.TokenIDMin < 100 {
		return fmt.Errorf("token_id_min/token_id_max: need 0 <= min and at least 100 IDs in [min, max), got [%d, %d)", p.TokenIDMin, p.TokenIDMax)
	}
	if p.APIServers != APIServersFirstUp && p.APIServers != APIServersEach {
		return fmt.Errorf("api_servers: %q must be %q or %q", p.APIServers, APIServersFirstUp, APIServersEach)
	}
	seen := map[string]bool{}
	for i := range p.Profiles {
		pr := &p.Profiles[i]
		if err := pr.Validate(); err != nil {
			return fmt.Errorf("profiles[%d] (%s): %w", i, pr.Name, err)
		}
		if seen[pr.Name] {
			return fmt.Errorf("profiles[%d]: duplicate name %q", i, pr.Name)
		}
		seen[pr.Name] = true
		if t := pr.InputTokens + pr.OutputTokens; t > p.MaxTokensPerHour {
			return fmt.Errorf("profiles[%d] (%s): input_tokens+output_tokens = %d exceeds max_tokens_per_hour %d, it could never run", i, pr.Name, t, p.MaxTokensPerHour)
		}
	}
	return nil
}

// Validate checks one profile.
func (pr *ProbeProfile) Validate() error {
	switch {
	case pr.Name == "":
		return errors.New("name: required")
	case !profileNameRE.MatchString(pr.Name):
		return fmt.Errorf("name: %q must match %s", pr.Name, profileNameRE)
	}
	if _, ok := ProbeEndpoints[pr.Endpoint]; !ok {
		return fmt.Errorf("endpoint: %q must be one of %q", pr.Endpoint, slices.Sorted(maps.Keys(ProbeEndpoints)))
	}
	if pr.Model != "" {
		if err := validModel(pr.Model); err != nil {
			return err
		}
	}
	if pr.InputTokens < 1 || pr.InputTokens > 1<<20 {
		return fmt.Errorf("input_tokens: must be in [1, 1048576], got %d", pr.InputTokens)
	}
	// TPOT needs at least two output tokens.
	if pr.OutputTokens < 2 || pr.OutputTokens > 1<<16 {
		return fmt.Errorf("output_tokens: must be in [2, 65536], got %d", pr.OutputTokens)
	}
	switch pr.Prefix {
	case PrefixCold:
		if pr.WarmPrefixTokens != 0 {
			return errors.New("warm_prefix_tokens: only allowed with prefix: warm")
		}
	case PrefixWarm:
		if pr.WarmPrefixTokens < 0 || pr.WarmPrefixTokens > pr.InputTokens {
			return fmt.Errorf("warm_prefix_tokens: must be in [0, input_tokens=%d], got %d", pr.InputTokens, pr.WarmPrefixTokens)
		}
	default:
		return fmt.Errorf("prefix: %q must be %q or %q", pr.Prefix, PrefixCold, PrefixWarm)
	}
	if pr.Interval < time.Second {
		return fmt.Errorf("interval: must be >= 1s, got %s", pr.Interval)
	}
	if pr.Timeout <= 0 || pr.Timeout >= pr.Interval {
		return fmt.Errorf("timeout: must be > 0 and < interval (%s), got %s", pr.Interval, pr.Timeout)
	}
	if pr.Jitter < 0 || pr.Jitter > pr.Interval/2 {
		return fmt.Errorf("jitter: must be in [0, interval/2 = %s], got %s", pr.Interval/2, pr.Jitter)
	}
	return nil
}

// validModel checks a served model name or LoRA adapter a probe sends.
func validModel(m string) error {
	if len(m) > maxModelNameLen || strings.TrimSpace(m) != m || strings.ContainsFunc(m, unicode.IsControl) {
		return fmt.Errorf("model: %q is not a served model name or LoRA adapter (at most %d characters, no surrounding spaces or control characters)", m, maxModelNameLen)
	}
	return nil
}

// WarmPrefix is the number of fixed leading tokens of a warm profile's
// prompt (warm_prefix_tokens, or the whole prompt when 0); 0 for cold.
func (pr *ProbeProfile) WarmPrefix() int {
	if pr.Prefix != PrefixWarm {
		return 0
	}
	if pr.WarmPrefixTokens == 0 {
		return pr.InputTokens
	}
	return pr.WarmPrefixTokens
}
