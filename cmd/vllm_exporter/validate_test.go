package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// errAccepted stops serveWired once everything is wired: the input it was
// given was accepted.
var errAccepted = errors.New("accepted: wired and about to serve")

// startRefusal is what starting the exporter with args says: the error of
// parsing and checking the flags (as run), else that of building and wiring
// every component; errAccepted when all of it worked (nothing is served).
func startRefusal(t *testing.T, args []string) error {
	t.Helper()
	var out bytes.Buffer
	c, _, err := parseArgs(args, &out, &out)
	if err != nil {
		return err
	}
	logger, slogger := newLogger("error", "logfmt", &out, c.flags.scrubber())
	return serveWired(context.Background(), c.flags, logger, slogger, func(*exporter) error { return errAccepted })
}

// TestBadInputRefusedNamingIt: every bad flag value and every bad value of
// each section of --config.file is refused, by --config.check and at start
// alike, with an error that names the flag or the field's path. None is
// replaced by a default or obeyed.
func TestBadInputRefusedNamingIt(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good.yml", "slos: []\n")
	empty := file("empty", " \n")
	key := file("key", "sk-some-key-0042\n")
	brokenWeb := file("web.yml", "basic_auth_users:\n  x: not-a-bcrypt-hash\ntls_server_config:\n  cert_file: /nonexistent\n")
	missing := filepath.Join(dir, "missing")
	// profile is a valid probe profile with extra lines.
	profile := func(extra string) string {
		return "probes:\n  profiles:\n  - name: p\n    endpoint: chat\n" + extra
	}
	slo := func(fields string) string { return "slos:\n- {name: s, " + fields + "}\n" }

	flagCases := []struct {
		args []string
		want string
	}{
		{[]string{"--log.level=verbose"}, "--log.level: enum value must be one of debug,info,warn,error, got 'verbose'"},
		{[]string{"--log.format=xml"}, "--log.format: enum value must be one of logfmt,json"},
		{[]string{"--vllm.role=bogus"}, "--vllm.role: enum value must be one of"},
		{[]string{"--no-such-flag"}, "unknown long flag '--no-such-flag'"},
		{[]string{"--web.config.file=" + missing}, "--web.config.file: " + missing},
		{[]string{"--web.config.file=" + brokenWeb}, "--web.config.file: " + brokenWeb},
		{[]string{"--web.listen-address=127.0.0.1:99999"}, `--web.listen-address: "127.0.0.1:99999": port 99999 is not in [0, 65535]`},
		{[]string{"--web.listen-address=127.0.0.1"}, `--web.listen-address: "127.0.0.1": address 127.0.0.1: missing port in address`},
		{[]string{"--web.listen-address=:no-such-service"}, `--web.listen-address: ":no-such-service"`},
		{[]string{"--web.telemetry-path=metrics"}, `--web.telemetry-path: must be a path starting with /, got "metrics"`},
		{[]string{"--vllm.url=http://u:p@ss/w#rd@127.0.0.1:18104"}, "--vllm.url: http://xxxxx@127.0.0.1:18104: its user info is not percent-encoded (an '@' after the host); percent-encode the user name and password ('@' as %40, '/' as %2F, '#' as %23, '?' as %3F"},
		{[]string{"--vllm.url=http://user:Pa/ss#w0rd@vllm.example:8000"}, "--vllm.url: http://xxxxx@vllm.example:8000: its user info is not percent-encoded"},
		{[]string{"--vllm.url=http://vllm:8000/?api_key=sk-in-the-query-0042"}, "--vllm.url: http://vllm:8000/?… has a query"},
		{[]string{"--vllm.url=http://vllm:8000/#fragment"}, "--vllm.url: http://vllm:8000/#… has a fragment"},
		{[]string{"--vllm.url=http://vllm:99999"}, "--vllm.url: http://vllm:99999: port 99999 is not in [1, 65535]"},
		{[]string{"--vllm.url=http://vllm example:8000"}, "--vllm.url: http://vllm example:8000 does not parse"},
		{[]string{"--vllm.url=vllm:8000"}, "--vllm.url: vllm:8000 is not an http(s)://host[:port] URL"},
		{[]string{"--vllm.url=ftp://vllm:8000"}, "--vllm.url: ftp://vllm:8000 is not an http(s)://host[:port] URL"},
		{[]string{"--vllm.url=http://:8000"}, "--vllm.url: http://:8000 is not an http(s)://host[:port] URL"},
		{[]string{"--vllm.url=http://a:1", "--vllm.url=http://a:1"}, "--vllm.url: http://a:1 twice"},
		{[]string{"--vllm.url=http://a:1", "--vllm.url=http://b:1", "--vllm.data-parallel-ranks=2"}, "--vllm.url: 2 data-parallel ranks need exactly one URL (the first rank's), got 2"},
		{[]string{"--vllm.url=http://a", "--vllm.data-parallel-ranks=2"}, "--vllm.url: http://a: data-parallel ranks need the first rank's port in the URL"},
		{[]string{"--vllm.data-parallel-ranks=65"}, "--vllm.url: data-parallel ranks must be in [1, 64], got 65"},
		{[]string{"--vllm.url=http://u:p@a:1", "--vllm.url=http://b:1"}, "@a:1: credentials in a URL only with a single URL"},
		{[]string{"--vllm.supervisor-url=http://a:9256"}, "--vllm.supervisor-url: a supervisor goes with several API servers"},
		{[]string{"--vllm.url=http://a:1", "--config.file=" + file("urls.yml", "vllm:\n  urls: [http://a:1, http://a:2]\n")}, "--vllm.url, --vllm.data-parallel-ranks and --vllm.supervisor-url, or vllm.urls in --config.file: use one"},
		{[]string{"--vllm.data-parallel-ranks=2", "--vllm.supervisor-url=a:9256"}, "--vllm.supervisor-url: a:9256 is not an http(s)://host[:port] URL"},
		{[]string{"--vllm.scrape-interval=0s"}, "--vllm.scrape-interval: must be a positive duration, got 0s"},
		{[]string{"--vllm.scrape-interval=-5s"}, "--vllm.scrape-interval: must be a positive duration, got -5s"},
		{[]string{"--vllm.scrape-interval=fast"}, `--vllm.scrape-interval: time: invalid duration "fast"`},
		{[]string{"--vllm.timeout=-1s"}, "--vllm.timeout: must be a positive duration, got -1s"},
		{[]string{"--vllm.timeout=5s"}, "--vllm.timeout: must be shorter than --vllm.scrape-interval (5s), got 5s"},
		{[]string{"--vllm.timeout=60s", "--vllm.scrape-interval=1s"}, "--vllm.timeout: must be shorter than --vllm.scrape-interval (1s), got 1m0s"},
		{[]string{"--vllm.max-body-bytes=-1"}, "--vllm.max-body-bytes: must be in [1, 1073741824], got -1"},
		{[]string{"--vllm.max-body-bytes=0"}, "--vllm.max-body-bytes: must be in [1, 1073741824], got 0"},
		{[]string{"--vllm.max-body-bytes=2147483648"}, "--vllm.max-body-bytes: must be in [1, 1073741824], got 2147483648"},
		{[]string{"--vllm.max-body-bytes=lots"}, "--vllm.max-body-bytes: "},
		{[]string{"--vllm.windows=0s"}, `--vllm.windows: bad window "0s"`},
		{[]string{"--vllm.windows=5s"}, `--vllm.windows: window "5s" is shorter than two --vllm.scrape-interval (5s)`},
		{[]string{"--vllm.windows=1m,abc"}, `--vllm.windows: bad window "abc"`},
		{[]string{"--vllm.windows= "}, "--vllm.windows: no window given"},
		{[]string{"--vllm.opt-in=window-series,vllm_ttft"}, `--vllm.opt-in: unknown series "vllm_ttft"`},
		{[]string{"--vllm.max-models=0"}, "--vllm.max-models: must be in [1, 1024], got 0"},
		{[]string{"--vllm.max-models=100000"}, "--vllm.max-models: must be in [1, 1024], got 100000"},
		{[]string{"--vllm.model-idle-timeout=-1h"}, "--vllm.model-idle-timeout: must be a positive duration, got -1h0m0s"},
		{[]string{"--vllm.model-grace=0s"}, "--vllm.model-grace: must be a positive duration, got 0s"},
		{[]string{"--vllm.model-grace=2h"}, "--vllm.model-grace: must not exceed --vllm.model-idle-timeout (1h0m0s), got 2h0m0s"},
		{[]string{"--vllm.api-key-file=" + missing}, "--vllm.api-key-file: open " + missing},
		{[]string{"--vllm.api-key-file=" + empty}, "--vllm.api-key-file: " + empty + " is empty"},
		{[]string{"--vllm.basic-auth-username=u"}, "--vllm.basic-auth-username and --vllm.basic-auth-password-file go together"},
		{[]string{"--vllm.basic-auth-password-file=" + key}, "--vllm.basic-auth-username and --vllm.basic-auth-password-file go together"},
		{[]string{"--vllm.basic-auth-username=u", "--vllm.basic-auth-password-file=" + empty}, "--vllm.basic-auth-password-file: " + empty + " is empty"},
		{[]string{"--vllm.api-key-file=" + key, "--vllm.basic-auth-username=u", "--vllm.basic-auth-password-file=" + key}, "--vllm.api-key-file and --vllm.basic-auth-username both set credentials"},
		{[]string{"--vllm.url=http://a:b@127.0.0.1:1", "--vllm.basic-auth-username=u", "--vllm.basic-auth-password-file=" + key}, "--vllm.url carries credentials and basic auth is configured"},
		{[]string{"--probe.max-event-bytes=0"}, "--probe.max-event-bytes: must be in [1024, 67108864], got 0"},
		{[]string{"--probe.max-event-bytes=-1"}, "--probe.max-event-bytes: must be in [1024, 67108864], got -1"},
		{[]string{"--slo.interval=0s"}, "--slo.interval: must be a positive duration, got 0s"},
		{[]string{"--slo.checkpoint-interval=-1m"}, "--slo.checkpoint-interval: must be >= 0 (0: at every evaluation), got -1m0s"},
		{[]string{"--slo.state-file=" + filepath.Join(missing, "slo.state")}, "--slo.state-file: directory " + missing + ": no such file or directory"},
		{[]string{"--slo.state-file=" + dir}, "--slo.state-file: " + dir + " is a directory"},
		{[]string{"--slo.state-file=" + good + "/slo.state"}, "--slo.state-file: " + good + " is not a directory"},
		{[]string{"--collector.gpu.interval=-1s"}, "--collector.gpu.interval: must be a positive duration, got -1s"},
		{[]string{"--collector.gpu.interval=0s"}, "--collector.gpu.interval: must be a positive duration, got 0s"},
		{[]string{"--cost.gpu-hour=-1"}, "--cost.gpu-hour: must be a finite number >= 0, got -1"},
		{[]string{"--cost.gpu-hour=NaN"}, "--cost.gpu-hour: must be a finite number >= 0, got NaN"},
		{[]string{"--cost.gpus=-2"}, "--cost.gpus: must be >= 0, got -2"},
		{[]string{"--model.bytes-per-parameter=-2"}, "--model.bytes-per-parameter: must be a finite number >= 0, got -2"},
		{[]string{"--gpu.peak-flops=+Inf"}, "--gpu.peak-flops: must be a finite number >= 0, got +Inf"},
	}
	configCases := []struct{ yaml, want string }{
		// probes:
		{"probes:\n  model: \"   \"\n", `probes: model: "   " is not a served model name`},
		{"probes:\n  max_requests_per_minute: 999999999999\n", "probes: max_requests_per_minute: must be in [1, 600], got 999999999999"},
		{"probes:\n  max_requests_per_minute: 0\n", "probes: max_requests_per_minute: must be in [1, 600], got 0"},
		{"probes:\n  max_tokens_per_hour: 999999999999\n", "probes: max_tokens_per_hour: must be in [1, 100000000], got 999999999999"},
		{"probes:\n  backoff_max: 0s\n", "probes: backoff_max: must be > 0, got 0s"},
		{"probes:\n  backoff_max: soon\n", "probes.backoff_max: line 2: cannot unmarshal !!str `soon` into time.Duration"},
		{"probes:\n  ttft_gap_window: 30s\n", "probes: ttft_gap_window: must be >= 1m, got 30s"},
		{"probes:\n  token_id_min: 500\n  token_id_max: 550\n", "probes: token_id_min/token_id_max: need 0 <= min and at least 100 IDs"},
		{"probes:\n  max_requests: 5\n", "probes.max_requests: unknown field (line 2)"},
		{profile(`    model: ""` + "\n"), `probes.profiles[0]: model: "" names no model`},
		{profile("    model: \" m\"\n"), `probes: profiles[0] (p): model: " m" is not a served model name`},
		{profile("    interval: 500ms\n    timeout: 100ms\n    jitter: 0s\n"), "probes: profiles[0] (p): interval: must be >= 1s, got 500ms"},
		{profile("    interval: 10s\n    timeout: 10s\n"), "probes: profiles[0] (p): timeout: must be > 0 and < interval (10s), got 10s"},
		{profile("    interval: 10s\n    timeout: 5s\n    jitter: 6s\n"), "probes: profiles[0] (p): jitter: must be in [0, interval/2 = 5s], got 6s"},
		{profile("    interval: every-minute\n"), "probes.profiles[0].interval: line 5: cannot unmarshal !!str `every-m...` into time.Duration"},
		{"probes:\n  profiles:\n  - {name: p, endpoint: grpc}\n", `probes: profiles[0] (p): endpoint: "grpc" must be one of ["chat" "completions"]`},
		{profile("    prefix: hot\n"), `probes: profiles[0] (p): prefix: "hot" must be "cold" or "warm"`},
		{profile("    warm_prefix_tokens: 10\n"), "probes: profiles[0] (p): warm_prefix_tokens: only allowed with prefix: warm"},
		{profile("    prefix: warm\n    warm_prefix_tokens: 999\n"), "probes: profiles[0] (p): warm_prefix_tokens: must be in [0, input_tokens=128], got 999"},
		{profile("    output_tokens: 1\n"), "probes: profiles[0] (p): output_tokens: must be in [2, 65536], got 1"},
		{profile("    input_tokens: 0\n"), "probes: profiles[0] (p): input_tokens: must be in [1, 1048576], got 0"},
		{profile("    input_tokens: many\n"), "probes.profiles[0].input_tokens: line 5: cannot unmarshal !!str `many` into int"},
		{profile("    intervall: 15s\n"), "probes.profiles[0].intervall: unknown field (line 5)"},
		{"probes:\n  profiles:\n  - {name: \"bad name!\"}\n", `probes: profiles[0] (bad name!): name: "bad name!" must match`},
		{"probes:\n  profiles:\n  - {endpoint: chat}\n", "probes: profiles[0] (): name: required"},
		{"probes:\n  profiles:\n  - {name: p}\n  - {name: p}\n", `probes: profiles[1]: duplicate name "p"`},
		{"probes:\n  max_tokens_per_hour: 100\n  profiles:\n  - {name: p}\n", "probes: profiles[0] (p): input_tokens+output_tokens = 160 exceeds max_tokens_per_hour 100"},
		// slos:
		{slo("kind: availability, objective: 0.99, period: -1h"), `slos[0].period: not a valid duration string: "-1h"`},
		{slo("kind: availability, objective: 0.99, period: 0s"), "slos[0]: period: 0s is no period (omit period for 30d)"},
		{slo("kind: availability, objective: 0.99, period: 10m"), "slos[0] (s): period: 10m is shorter than 1h"},
		{slo("kind: availability, objective: 0.99, period: 500d"), "slos[0] (s): period: 500d is longer than 400d"},
		{slo("kind: availability, objective: 1.5"), "slos[0] (s): objective: 1.5 must be between 0 and 1 exclusive"},
		{slo("kind: availability, objective: 1"), "slos[0] (s): objective: 1 must be between 0 and 1 exclusive"},
		{slo("kind: availability, objective: -0.1"), "slos[0] (s): objective: -0.1 must be between 0 and 1 exclusive"},
		{slo("kind: availability, objective: 0"), "slos[0]: objective: 0 must be between 0 and 1 exclusive"},
		{slo("kind: preemption, threshold: 0.01, objective: 0"), "slos[0]: objective: 0 must be between 0 and 1 exclusive"},
		{slo("kind: availability"), "slos[0] (s): objective: 0 must be between 0 and 1 exclusive"},
		{slo("kind: availability, objective: high"), "slos[0].objective: line 2: cannot unmarshal !!str `high` into float64"},
		{slo("kind: throughput, objective: 0.99"), `slos[0] (s): kind: "throughput" is not one of latency, preemption, availability`},
		{slo("objective: 0.99"), "slos[0] (s): kind: required"},
		{slo("kind: latency, metric: ttfb, threshold: 1, objective: 0.99"), `slos[0] (s): metric: "ttfb" is not one of ttft, tpot, itl, e2e, queue`},
		{slo("kind: latency, threshold: 1, objective: 0.99"), "slos[0] (s): metric: required for kind latency"},
		{slo("kind: latency, metric: ttft, threshold: 0.3, objective: 0.99"), "slos[0] (s): threshold: 0.3 is not a bucket boundary of the ttft histogram"},
		{slo("kind: latency, metric: queue, threshold: 1, objective: 0.99, source: probe"), "slos[0] (s): metric: queue is only measured by the server"},
		{slo("kind: preemption, threshold: 2"), "slos[0] (s): threshold: 2 must be the allowed preemptions per finished request"},
		{slo("kind: preemption, threshold: 0.01, objective: 0.9"), "slos[0] (s): objective: 0.9 contradicts threshold 0.01"},
		{slo("kind: availability, objective: 0.99, threshold: 1"), "slos[0] (s): threshold: not used by kind availability"},
		{slo("kind: availability, objective: 0.99, source: logs"), `slos[0] (s): source: "logs" is not one of server, probe`},
		{slo(`kind: availability, objective: 0.99, source: ""`), `slos[0]: source: "" is not one of server, probe`},
		{slo("kind: availability, objective: 0.99, min_events: -1"), "slos[0] (s): min_events: -1 must be a finite number >= 0"},
		{slo("kind: availability, objective: 0.99, profiles: [p]"), "slos[0] (s): profiles: only valid with source: probe"},
		{slo("kind: availability, objective: 0.99, source: probe, profiles: [nope]"), `slos[0] (s): profiles[0]: "nope" names no probe profile (probes.profiles has short-chat)`},
		{slo("kind: availability, objective: 0.99, windows: [5m]"), "slos[0].windows: unknown field (line 2)"},
		{"slos:\n- {name: TTFT P99, kind: availability, objective: 0.99}\n", `slos[0] (TTFT P99): name: "TTFT P99" must match`},
		{"slos:\n- {name: a, kind: availability, objective: 0.99}\n- {name: a, kind: availability, objective: 0.9}\n", `slos[1]: duplicate name "a"`},
		{"slos: {name: a}\n", "slos: line 1: cannot unmarshal !!map into []config.SLO"},
		// bottleneck:
		{"bottleneck:\n  window: 0s\n", "bottleneck: window: must be a positive duration, got 0s"},
		{"bottleneck:\n  window: 20m\n", "bottleneck: baseline_window: must be longer than window (20m0s), got 15m0s"},
		{"bottleneck:\n  kv_cache_usage_high: 1.5\n", "bottleneck: kv_cache_usage_high: must be in (0, 1], got 1.5"},
		{"bottleneck:\n  ttft_target_seconds: -1\n", "bottleneck: ttft_target_seconds: must be > 0, got -1"},
		{"bottleneck:\n  slo_quantile: 0.8\n", "bottleneck: slo_quantile: must be one of 0.5, 0.9, 0.95, 0.99, got 0.8"},
		{"bottleneck:\n  hold_ticks: 0\n", "bottleneck: hold_ticks: must be >= 1, got 0"},
		{"bottleneck:\n  headroom: 0.5\n", "bottleneck: headroom: must be >= 1, got 0.5"},
		{"bottleneck:\n  roofline_far_ratio: 0.9\n", "bottleneck: roofline_far_ratio: must not exceed roofline_near_ratio (0.7), got 0.9"},
		{"bottleneck:\n  daily_requests: -5\n", "bottleneck: daily_requests: must be >= 0, got -5"},
		{"bottleneck:\n  stall_after: [10s]\n", "bottleneck.stall_after: line 2: cannot unmarshal !!seq into time.Duration"},
		{"bottleneck:\n  ttft_target: 1\n", "bottleneck.ttft_target: unknown field (line 2)"},
		// models:, histogram_buckets:
		{"models:\n  grace: -1m\n", "models: grace: must be in [0, 24h0m0s] (0 = --vllm.model-grace), got -1m0s"},
		{"models:\n  grace: 48h\n", "models: grace: must be in [0, 24h0m0s] (0 = --vllm.model-grace), got 48h0m0s"},
		{"histogram_buckets:\n  ttft: [0.5, 0.1]\n", "histogram_buckets: ttft: bounds must be strictly ascending (0.1 after 0.5)"},
		{"histogram_buckets:\n  ttfb: [1]\n", `histogram_buckets: "ttfb" is not one of ttft, tpot, itl, e2e, queue`},
		{"histogram_buckets:\n  ttft: []\n", "histogram_buckets: ttft: between 1 and 64 bounds, got 0"},
		{"histogram_buckets:\n  ttft: [0, 1]\n", "histogram_buckets: ttft: bound 0 must be a finite number > 0"},
		{"histogram_buckets:\n  ttft: [a]\n", "histogram_buckets.ttft[0]: line 2: cannot unmarshal !!str `a` into float64"},
		// vllm: (the connection)
		{"vllm:\n  tls_config:\n    ca_file: " + missing + "\n", "vllm.tls_config.ca_file: open " + missing + ": no such file or directory"},
		{"vllm:\n  tls_config:\n    cert_file: " + missing + "\n    key_file: " + missing + "\n", "vllm.tls_config.cert_file: open " + missing},
		{"vllm:\n  authorization:\n    credentials_file: " + missing + "\n", "vllm.authorization.credentials_file (or bearer_token_file): open " + missing},
		{"vllm:\n  basic_auth:\n    username: u\n    password_file: " + missing + "\n", "vllm.basic_auth.password_file: open " + missing},
		{"vllm:\n  bearer_token_file: " + missing + "\n", "vllm.authorization.credentials_file (or bearer_token_file): open " + missing},
		{"vllm:\n  proxy_url: ftp://proxy:21\n", "vllm.proxy_url: ftp://proxy:21 is not an http://, https:// or socks5:// URL with a host"},
		{"vllm:\n  proxy_url: http://u:p/w@proxy:3128\n", `vllm.proxy_url: parse "http://xxxxx@proxy:3128": invalid port`},
		{"vllm:\n  bearer_token: t0ken-0042\n  basic_auth: {username: u, password: p}\n", "vllm: at most one of basic_auth, oauth2, bearer_token & bearer_token_file must be configured"},
		{"vllm:\n  tls_config:\n    min_version: TLS9\n", "vllm.tls_config.min_version: unknown TLS version: TLS9"},
		{"vllm:\n  follow_redirect: true\n", "vllm.follow_redirect: unknown field (line 2)"},
		// vllm: (the API servers)
		{"vllm:\n  urls: [http://a:1, http://a:1]\n", "vllm: urls: http://a:1 twice"},
		{"vllm:\n  urls: http://a:1\n", "vllm.urls: line 2: cannot unmarshal !!str `http://a:1` into []string"},
		{"vllm:\n  urls: [http://u:p@a:1]\n", "vllm: urls: credentials go in basic_auth or authorization"},
		{"vllm:\n  data_parallel_ranks: 2\n  urls: [http://a]\n", "vllm: urls: http://a: data-parallel ranks need the first rank's port"},
		// the file itself
		{"slo: []\n", "slo: unknown field (line 1)"},
		{"slos: []\n---\nslos: []\n", "more than one YAML document"},
	}

	type tc struct {
		args []string
		want string
	}
	var cases []tc
	for _, c := range flagCases {
		cases = append(cases, tc{c.args, c.want})
	}
	for i, c := range configCases {
		cases = append(cases, tc{[]string{"--config.file=" + file(fmt.Sprintf("c%d.yml", i), c.yaml)}, c.want})
	}
	cases = append(cases, tc{[]string{"--config.file=" + missing}, "--config.file: open " + missing + ": no such file or directory"},
		tc{[]string{"--config.file=" + file("huge.yml", "#"+strings.Repeat("x", 1<<20)+"\n")}, "configuration file larger than the 1024 KiB cap"})
	t.Logf("%d bad inputs: %d flags, %d config values, 2 config files", len(cases), len(flagCases), len(configCases))
	if len(cases) < 64 {
		t.Fatalf("only %d bad inputs", len(cases))
	}
	for _, c := range cases {
		args := append([]string{"--web.listen-address=127.0.0.1:0"}, c.args...)
		if !slices.ContainsFunc(c.args, func(a string) bool { return strings.HasPrefix(a, "--config.file") }) {
			args = append(args, "--config.file="+good)
		}
		var out, errb bytes.Buffer
		if code := run(append(args, "--config.check"), &out, &errb); code == 0 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("--config.check %v: exit %d, stderr %q; want an error containing %q", c.args, code, errb.String(), c.want)
		}
		if err := startRefusal(t, args); err == nil || errors.Is(err, errAccepted) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("start %v: %v; want an error containing %q", c.args, err, c.want)
		}
	}
}

// TestGoodFlagsPassConfigCheck: --config.check accepts the defaults and
// values at the bounds, and a scrape interval shorter than the default
// timeout without --vllm.timeout (the timeout then defaults to the
// interval, as Prometheus does with scrape_timeout).
func TestGoodFlagsPassConfigCheck(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		nil,
		{"--vllm.scrape-interval=1s"},
		{"--vllm.scrape-interval=1s", "--vllm.timeout=999ms", "--vllm.windows=2s"},
		{"--vllm.max-body-bytes=1", "--probe.max-event-bytes=1024", "--vllm.max-models=1024"},
		{"--slo.state-file=" + filepath.Join(dir, "slo.state"), "--vllm.model-grace=1h"},
		{"--vllm.opt-in=window-series", "--vllm.opt-in=expected-metric-present,vllm_request_inference_time_seconds", "--slo.error-ratio-series"},
		{"--demo", "--vllm.url=not a url"}, // --demo scrapes its own simulator
	} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"--config.check", "--config.file="}, args...), &out, &errb); code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, errb.String())
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("checking --slo.state-file left %d files behind", len(entries))
	}

	c := newCLI()
	f := c.flags
	if _, err := c.app.Parse([]string{"--vllm.scrape-interval=1s"}); err != nil {
		t.Fatal(err)
	}
	if err := validateFlags(f); err != nil || f.timeout != time.Second {
		t.Fatalf("--vllm.scrape-interval=1s alone: timeout %v, err %v; want the interval", f.timeout, err)
	}
}
