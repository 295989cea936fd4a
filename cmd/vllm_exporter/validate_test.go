package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBadFlagsRefusedAtStart: every serving flag whose value the exporter
// used to replace with a default, obey absurdly or fail on later (at every
// scrape or checkpoint) is refused by main's parse path with exit status 2
// and a message that names the flag, also under --config.check, which
// checks the flags as well as the files. A bad value in --config.file is
// refused with exit status 1 and names its field.
func TestBadFlagsRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	cfg := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := cfg("good.yml", "slos: []\n")
	hugeBudget := cfg("budget.yml", "probes:\n  max_requests_per_minute: 999999999999\n")
	hugeTokens := cfg("tokens.yml", "probes:\n  max_tokens_per_hour: 999999999999\n")

	cases := []struct {
		args []string
		code int
		want string // the start of the message after "vllm_exporter: ", or a part of it
	}{
		{[]string{"--vllm.max-body-bytes=-1"}, 2, "--vllm.max-body-bytes: must be in [1, 1073741824], got -1"},
		{[]string{"--vllm.max-body-bytes=0"}, 2, "--vllm.max-body-bytes: must be in [1, 1073741824], got 0"},
		{[]string{"--vllm.max-body-bytes=2147483648"}, 2, "--vllm.max-body-bytes: must be in [1, 1073741824], got 2147483648"},
		{[]string{"--probe.max-event-bytes=0"}, 2, "--probe.max-event-bytes: must be in [1024, 67108864], got 0"},
		{[]string{"--probe.max-event-bytes=-1"}, 2, "--probe.max-event-bytes: must be in [1024, 67108864], got -1"},
		{[]string{"--vllm.timeout=60s", "--vllm.scrape-interval=1s"}, 2, "--vllm.timeout: must be shorter than --vllm.scrape-interval (1s), got 1m0s"},
		{[]string{"--vllm.timeout=5s"}, 2, "--vllm.timeout: must be shorter than --vllm.scrape-interval (5s), got 5s"},
		{[]string{"--vllm.timeout=-1s"}, 2, "--vllm.timeout: must be a positive duration, got -1s"},
		{[]string{"--vllm.scrape-interval=0s"}, 2, "--vllm.scrape-interval: must be a positive duration, got 0s"},
		{[]string{"--vllm.scrape-interval=-5s"}, 2, "--vllm.scrape-interval: must be a positive duration, got -5s"},
		{[]string{"--vllm.url=http://vllm example:8000"}, 2, "--vllm.url: http://vllm example:8000 does not parse"},
		{[]string{"--vllm.url=vllm:8000"}, 2, "--vllm.url: vllm:8000 is not an http(s)://host[:port] URL"},
		{[]string{"--vllm.url=ftp://vllm:8000"}, 2, "--vllm.url: ftp://vllm:8000 is not an http(s)://host[:port] URL"},
		{[]string{"--slo.state-file=" + filepath.Join(dir, "missing", "slo.state")}, 2, "--slo.state-file: directory " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{[]string{"--slo.state-file=" + dir}, 2, "--slo.state-file: " + dir + " is a directory"},
		{[]string{"--slo.state-file=" + good + "/slo.state"}, 2, "--slo.state-file: " + good + " is not a directory"},
		{[]string{"--slo.interval=0s"}, 2, "--slo.interval: must be a positive duration, got 0s"},
		{[]string{"--slo.checkpoint-interval=-1m"}, 2, "--slo.checkpoint-interval: must be >= 0 (0: at every evaluation), got -1m0s"},
		{[]string{"--collector.gpu.interval=-1s"}, 2, "--collector.gpu.interval: must be a positive duration, got -1s"},
		{[]string{"--vllm.max-models=0"}, 2, "--vllm.max-models: must be in [1, 1024], got 0"},
		{[]string{"--vllm.max-models=100000"}, 2, "--vllm.max-models: must be in [1, 1024], got 100000"},
		{[]string{"--vllm.model-idle-timeout=-1h"}, 2, "--vllm.model-idle-timeout: must be a positive duration, got -1h0m0s"},
		{[]string{"--vllm.model-grace=0s"}, 2, "--vllm.model-grace: must be a positive duration, got 0s"},
		{[]string{"--vllm.model-grace=2h"}, 2, "--vllm.model-grace: must not exceed --vllm.model-idle-timeout (1h0m0s), got 2h0m0s"},
		{[]string{"--vllm.windows=0s"}, 2, `--vllm.windows: bad window "0s"`},
		{[]string{"--vllm.windows=5s"}, 2, `--vllm.windows: window "5s" is shorter than two --vllm.scrape-interval (5s)`},
		{[]string{"--vllm.opt-in=window-series,vllm_ttft"}, 2, `--vllm.opt-in: unknown series "vllm_ttft"`},
		{[]string{"--web.telemetry-path=metrics"}, 2, `--web.telemetry-path: must be a path starting with /, got "metrics"`},
		{[]string{"--cost.gpu-hour=-1"}, 2, "--cost.gpu-hour: must be a finite number >= 0, got -1"},
		{[]string{"--cost.gpu-hour=NaN"}, 2, "--cost.gpu-hour: must be a finite number >= 0, got NaN"},
		{[]string{"--cost.gpus=-2"}, 2, "--cost.gpus: must be >= 0, got -2"},
		{[]string{"--model.bytes-per-parameter=-2"}, 2, "--model.bytes-per-parameter: must be a finite number >= 0, got -2"},
		{[]string{"--gpu.peak-flops=+Inf"}, 2, "--gpu.peak-flops: must be a finite number >= 0, got +Inf"},
		{[]string{"--config.file=" + hugeBudget}, 1, "max_requests_per_minute: must be in [1, 600], got 999999999999"},
		{[]string{"--config.file=" + hugeTokens}, 1, "max_tokens_per_hour: must be in [1, 100000000], got 999999999999"},
	}
	for _, c := range cases {
		for _, check := range []bool{false, true} {
			args := append([]string{"--log.level=error"}, c.args...)
			if check {
				args = append(args, "--config.check")
				if !strings.HasPrefix(c.args[0], "--config.file") {
					args = append(args, "--config.file="+good)
				}
			}
			var out, errb bytes.Buffer
			code := run(args, &out, &errb)
			if code != c.code || !strings.Contains(errb.String(), c.want) {
				t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", args, code, errb.String(), c.code, c.want)
			}
			if c.code == 2 && !strings.HasPrefix(errb.String(), program+": --") {
				t.Errorf("%v: the message does not start with the flag: %q", args, errb.String())
			}
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
