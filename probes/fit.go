package probes

import (
	"fmt"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
)

// chatTemplateReserve is what a chat profile leaves for the chat template
// when it is fitted to max_model_len before its first probe has shown the
// real prompt length (Llama 3 adds about 30 tokens to one user message).
const chatTemplateReserve = 64

// minFitInput is the shortest prompt a profile is shrunk to; a profile
// that cannot keep it (its output alone nearly fills the context) is
// refused instead.
const minFitInput = 16

type fitOutcome int

const (
	fitAsIs fitOutcome = iota
	fitShrunk
	fitRefused
)

// fitProfile fits a probe profile to the served model's max_model_len:
// unchanged when its input plus output fit, else its input is shrunk to
// what is left after the output (and, for chat, the template: the tokens
// the previous probe's usage showed the template adds, else
// chatTemplateReserve), keeping the output (TPOT and ITL need it);
// refused when fewer than minFitInput tokens would be left. promptSeen is
// usage.prompt_tokens of the profile's previous probe (0: none). msg
// states the decision for the log and diagnose's report.
func fitProfile(pc config.ProbeProfile, model string, maxLen, promptSeen int) (fit config.ProbeProfile, outcome fitOutcome, msg string) {
	if maxLen <= 0 {
		return pc, fitAsIs, ""
	}
	overhead := 0
	if pc.Endpoint == config.EndpointChat {
		overhead = chatTemplateReserve
		if promptSeen > pc.InputTokens {
			overhead = promptSeen - pc.InputTokens
		}
	}
	if pc.InputTokens+overhead+pc.OutputTokens <= maxLen {
		return pc, fitAsIs, ""
	}
	in := maxLen - pc.OutputTokens - overhead
	if in < minFitInput {
		return pc, fitRefused, fmt.Sprintf("probe profile %q is not sent: its %d output tokens plus a prompt of at least %d (and %d for the chat template) exceed model %q's max_model_len %d; lower output_tokens",
			pc.Name, pc.OutputTokens, minFitInput, overhead, model, maxLen)
	}
	fit = pc
	fit.InputTokens = in
	if fit.WarmPrefixTokens > in {
		fit.WarmPrefixTokens = in
	}
	return fit, fitShrunk, fmt.Sprintf("probe profile %q shrunk to fit model %q's max_model_len %d: input_tokens %d -> %d, output_tokens %d",
		pc.Name, model, maxLen, pc.InputTokens, in, pc.OutputTokens)
}
