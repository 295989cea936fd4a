package vllm

import (
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// RoleAuto is --vllm.role's default: learn the pod's role from what the
// server exports (detectRole), else both.
const RoleAuto = "auto"

// Roles are --vllm.role's values.
var Roles = []string{RoleAuto, snapshot.RolePrefill, snapshot.RoleDecode, snapshot.RoleBoth}

// prefillMaxTokensPerRequest: a pod whose finished requests generated at
// most this many tokens each, with the NIXL connector on, is a prefill pod
// (a P/D proxy sends the prefill side max_tokens=1).
const prefillMaxTokensPerRequest = 1.05

// prefillMinFinished is how many finished requests that test needs.
const prefillMinFinished = 10

// detectRole is the role the families a server exports reveal, "" when
// they do not tell. vLLM publishes no kv_role; but with the NIXL connector
// the decode side (kv_consumer) reads each request's KV from the prefill
// side, so only it observes vllm:nixl_xfer_time_seconds; a prefill side
// (kv_producer) observes none, and shows itself by the KV that expired
// there unread (vllm:nixl_num_kv_expired_reqs) or by requests that each
// generated a single token. A kv_both pod that has read KV reads as
// decode: it does own the transfer wait.
func detectRole(m *snapshot.Model) string {
	if !m.KVTransferFailures.OK && !m.KVTransferExpiredRequests.OK {
		if !m.Histograms.Has(snapshot.KVTransferTime) {
			return "" // no NIXL connector
		}
	}
	if h, ok := m.Histograms.Lookup(snapshot.KVTransferTime); ok && h.Count > 0 {
		return snapshot.RoleDecode
	}
	if m.KVTransferExpiredRequests.OK && m.KVTransferExpiredRequests.V > 0 {
		return snapshot.RolePrefill
	}
	finished := sumValues(m.FinishedByReason)
	if finished >= prefillMinFinished && m.GenerationTokens.OK && m.GenerationTokens.V <= prefillMaxTokensPerRequest*finished {
		return snapshot.RolePrefill
	}
	return ""
}

// assignRoles sets every model's Role and RoleSource: the flag's role when
// it names one, else the detected one, else both.
func assignRoles(v *snapshot.VLLM, flag string) {
	for _, m := range v.Models {
		switch {
		case flag != "" && flag != RoleAuto:
			m.Role, m.RoleSource = flag, snapshot.RoleSourceFlag
		default:
			if r := detectRole(m); r != "" {
				m.Role, m.RoleSource = r, snapshot.RoleSourceDetected
			} else {
				m.Role, m.RoleSource = snapshot.RoleBoth, snapshot.RoleSourceDefault
			}
		}
	}
}
