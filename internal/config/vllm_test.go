package config

import (
	"slices"
	"strings"
	"testing"
)

// TestVLLMSectionNamesServers: the vllm: section carries the API servers
// beside the HTTP client configuration, both strict.
func TestVLLMSectionNamesServers(t *testing.T) {
	f, err := Parse([]byte("vllm:\n  urls: [http://127.0.0.1:8000, http://127.0.0.1:8001]\n  supervisor_url: http://127.0.0.1:9256\n  follow_redirects: false\n  tls_config: {server_name: vllm}\n"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if v := f.VLLM; len(v.URLs) != 2 || v.SupervisorURL != "http://127.0.0.1:9256" || v.FollowRedirects || v.TLSConfig.ServerName != "vllm" || !v.EnableHTTP2 {
		t.Fatalf("vllm section: %+v", v)
	}
	for doc, want := range map[string]string{
		"vllm:\n  url: http://x:1\n":                                          "url",
		"vllm:\n  urls: [http://x:1, http://x:1]\n":                           "twice",
		"vllm:\n  urls: [http://x:1]\n  data_parallel_ranks: 65\n":            "[1, 64]",
		"vllm:\n  urls: [http://x:1, http://x:2]\n  supervisor_url: x:9256\n": "x:9256 is not an http(s)",
		"vllm:\n  urls: [http://x:1]\n  supervisor_url: http://x:9256\n":      "supervisor_url: a supervisor goes with several API servers",
		"vllm:\n  urls: [ftp://x:1]\n":                                        "not an http(s)",
	} {
		if _, err := Parse([]byte(doc), "t"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", doc, err, want)
		}
	}
}

// TestServersResolve: a rank count makes the one URL the first of that
// many consecutive ports (vLLM's port + rank), credentials and path kept.
func TestServersResolve(t *testing.T) {
	for _, c := range []struct {
		s    Servers
		want []string
		err  string
	}{
		{s: Servers{URLs: []string{"http://localhost:8000"}, DataParallelRanks: 3},
			want: []string{"http://localhost:8000", "http://localhost:8001", "http://localhost:8002"}},
		{s: Servers{URLs: []string{"http://u:p@[::1]:8000/v/"}, DataParallelRanks: 2},
			want: []string{"http://u:p@[::1]:8000/v/", "http://u:p@[::1]:8001/v/"}},
		{s: Servers{URLs: []string{"http://a:1", "http://b:1"}, DataParallelRanks: 1}, want: []string{"http://a:1", "http://b:1"}},
		{s: Servers{URLs: []string{"http://a:1", "http://b:1"}, DataParallelRanks: 2}, err: "exactly one URL"},
		{s: Servers{URLs: []string{"http://a"}, DataParallelRanks: 2}, err: "port"},
		{s: Servers{URLs: []string{"http://a:65535"}, DataParallelRanks: 2}, err: "room for 1 ports"},
	} {
		got, err := c.s.Resolve()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: error %v, want %q", c.s, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%+v: %v %v, want %v", c.s, got, err, c.want)
		}
	}
}
