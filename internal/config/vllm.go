package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"

	commoncfg "github.com/prometheus/common/config"

	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
)

// MaxServers bounds the API servers scraped as one vLLM server.
const MaxServers = 64

// VLLM is the `vllm:` section: where vLLM's API servers are (the file's
// --vllm.url, --vllm.data-parallel-ranks and --vllm.supervisor-url, taken
// at start only) and how the exporter connects to them, for scrapes and
// probes alike: Prometheus' HTTP client configuration (tls_config,
// authorization, basic_auth, proxy_url, ...), which the
// --vllm.api-key-file, --vllm.basic-auth-* and --vllm.proxy-from-environment
// flags fill too. Relative file names are relative to the file.
type VLLM struct {
	Servers                    `yaml:",inline"`
	commoncfg.HTTPClientConfig `yaml:",inline"`
}

// Servers are the API servers of one vLLM server: several with vLLM's
// --data-parallel-multi-port-external-lb (one per rank, on port + rank).
type Servers struct {
	URLs []string `yaml:"urls,omitempty"`
	// DataParallelRanks > 1 makes the one URL the first of this many on
	// consecutive ports.
	DataParallelRanks int `yaml:"data_parallel_ranks,omitempty"`
	// SupervisorURL is vLLM's data-parallel supervisor (9256 by default).
	SupervisorURL string `yaml:"supervisor_url,omitempty"`
}

// UnmarshalYAML decodes both parts; HTTPClientConfig's own would
// otherwise be promoted and refuse the servers' keys. What the section
// held before are the defaults.
func (v *VLLM) UnmarshalYAML(unmarshal func(any) error) error {
	p := struct {
		S Servers                    `yaml:",inline"`
		H commoncfg.HTTPClientConfig `yaml:",inline"`
	}{v.Servers, v.HTTPClientConfig}
	err := unmarshal(&p)
	v.Servers, v.HTTPClientConfig = p.S, p.H
	return err
}

// Resolve is the list of API servers: URLs, or with DataParallelRanks > 1
// the one URL and the next ranks-1 ports. A URL carries credentials only
// when it is the only one given (for several, basic_auth or authorization
// serves all). Errors say what is wrong; the caller names the flag or key.
func (s Servers) Resolve() ([]string, error) {
	urls := s.URLs
	if s.DataParallelRanks < 0 || s.DataParallelRanks > MaxServers {
		return nil, fmt.Errorf("data-parallel ranks must be in [1, %d], got %d", MaxServers, s.DataParallelRanks)
	}
	for _, u := range urls {
		if err := upstream.ValidateURL(u); err != nil {
			return nil, err
		}
		if len(urls) > 1 && upstream.HasUserInfo(u) {
			return nil, fmt.Errorf("%s: credentials in a URL only with a single URL; for several API servers set them once (basic_auth, authorization, --vllm.basic-auth-*)", upstream.Redact(u))
		}
	}
	if s.DataParallelRanks > 1 {
		if len(urls) != 1 {
			return nil, fmt.Errorf("%d data-parallel ranks need exactly one URL (the first rank's), got %d", s.DataParallelRanks, len(urls))
		}
		u, _ := url.Parse(urls[0])
		port, err := strconv.Atoi(u.Port())
		if err != nil || port+s.DataParallelRanks-1 > 65535 {
			return nil, fmt.Errorf("%s: data-parallel ranks need the first rank's port in the URL, and room for %d ports after it", upstream.Redact(urls[0]), s.DataParallelRanks-1)
		}
		urls = make([]string, s.DataParallelRanks)
		for r := range urls {
			u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(port+r))
			urls[r] = u.String()
		}
	}
	for i, u := range urls {
		if slices.Contains(urls[:i], u) {
			return nil, fmt.Errorf("%s twice", upstream.Redact(u))
		}
	}
	if len(urls) > MaxServers {
		return nil, fmt.Errorf("%d API servers: at most %d", len(urls), MaxServers)
	}
	return urls, nil
}

// CheckSupervisor checks SupervisorURL for n API servers.
func (s Servers) CheckSupervisor(n int) error {
	switch {
	case s.SupervisorURL == "":
		return nil
	case n < 2:
		return errors.New("a supervisor goes with several API servers (vLLM's --data-parallel-multi-port-external-lb)")
	}
	return upstream.ValidateURL(s.SupervisorURL)
}
