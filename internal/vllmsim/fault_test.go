package vllmsim

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

func get(url string, timeout time.Duration) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	return testutil.Do(&http.Client{Timeout: timeout}, req)
}

func TestFaultDownRefusesThenRecovers(t *testing.T) {
	s := startReal(t, Config{Models: []string{"m"}})
	if err := s.InjectFault(FaultSpec{Kind: FaultDown}); err != nil {
		t.Fatal(err)
	}
	_, _, err := get(s.URL()+"/health", time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("want connection refused while down, got %v", err)
	}
	s.ClearFault(FaultDown)
	if code, _, err := get(s.URL()+"/health", time.Second); err != nil || code != 200 {
		t.Fatalf("after recovery: %d %v", code, err)
	}
}

func TestFaultHangAndSlowMetrics(t *testing.T) {
	s := startReal(t, Config{Models: []string{"m"}})
	_ = s.InjectFault(FaultSpec{Kind: FaultHang})
	if _, _, err := get(s.URL()+"/metrics", 150*time.Millisecond); err == nil {
		t.Fatal("hung server answered")
	}
	// A held request is counted (tests wait on Hanging, not on a fixed
	// sleep) and answered once the hang is cleared. The requests travel
	// real sockets, out of testing/synctest's sight, so this polls.
	waitHanging := func(n int) {
		t.Helper()
		testutil.Poll(t, 20*time.Second, time.Millisecond, fmt.Sprintf("Hanging() == %d", n), nil, func() (bool, string) {
			h := s.Hanging()
			return h == n, fmt.Sprintf("Hanging() = %d", h)
		})
	}
	waitHanging(0) // the timed-out request above is released when its connection closes
	answered := make(chan int, 1)
	go func() { code, _, _ := get(s.URL()+"/health", 30*time.Second); answered <- code }()
	waitHanging(1)
	s.ClearFault(FaultHang)
	if code := <-answered; code != 200 {
		t.Fatalf("held request after the hang cleared: %d", code)
	}
	waitHanging(0)
	if code, _, err := get(s.URL()+"/metrics", 10*time.Second); err != nil || code != 200 {
		t.Fatalf("after hang cleared: %d %v", code, err)
	}
	// The delay dwarfs any scheduling delay: /health answering within a
	// third of it cannot have waited for it, however loaded the machine.
	_ = s.InjectFault(FaultSpec{Kind: FaultSlowMetrics, Delay: 30 * time.Second})
	if _, _, err := get(s.URL()+"/metrics", 150*time.Millisecond); err == nil {
		t.Fatal("slow /metrics answered within the client timeout")
	}
	if code, _, err := get(s.URL()+"/health", 10*time.Second); err != nil || code != 200 {
		t.Fatalf("/health must stay fast while /metrics is slow: %d %v", code, err)
	}
}

func TestFault5xxAndGarbage(t *testing.T) {
	for _, v := range []struct {
		version string
		health  int
	}{{MetricsV1, 503}, {MetricsV0, 500}} {
		s := startReal(t, Config{Models: []string{"m"}, MetricsVersion: v.version})
		_ = s.InjectFault(FaultSpec{Kind: Fault5xx})
		if code, _, _ := get(s.URL()+"/metrics", time.Second); code != 500 {
			t.Errorf("%s /metrics = %d under 5xx", v.version, code)
		}
		if code, _, _ := get(s.URL()+"/health", time.Second); code != v.health {
			t.Errorf("%s /health = %d, want %d", v.version, code, v.health)
		}
		resp, body := post(t, s.URL()+"/v1/completions", `{"model":"m","prompt":"x"}`, nil)
		if resp.StatusCode != 500 || !strings.Contains(body, `"type":"InternalServerError"`) {
			t.Errorf("%s completions under 5xx: %d %s", v.version, resp.StatusCode, body)
		}
		s.ClearFaults()
		_ = s.InjectFault(FaultSpec{Kind: FaultGarbageMetrics})
		code, body, _ := get(s.URL()+"/metrics", time.Second)
		p := expfmt.NewTextParser(model.LegacyValidation)
		if _, err := p.TextToMetricFamilies(strings.NewReader(body)); code != 200 || err == nil {
			t.Errorf("garbage /metrics: %d, parse error %v", code, err)
		}
	}
}

func TestFaultStreamCutAndStreamError(t *testing.T) {
	s := startReal(t, Config{Models: []string{"m"}})
	_ = s.InjectFault(FaultSpec{Kind: FaultStreamCut, AfterChunks: 2})
	req, _ := http.NewRequest("POST", s.URL()+"/v1/completions", strings.NewReader(`{"model":"m","prompt":"x","max_tokens":50,"ignore_eos":true,"stream":true}`))
	req.Header.Set("Content-Type", "application/json")
	code, b, err := testutil.Do(nil, req)
	if code == 0 {
		t.Fatal(err)
	}
	if err == nil || strings.Contains(b, "[DONE]") || strings.Count(b, "data: ") != 2 {
		t.Fatalf("want a cut after 2 events without [DONE]: err=%v body=%q", err, b)
	}
	// The abort reaches the engine asynchronously (the cut is seen over a
	// real socket), so poll.
	testutil.Poll(t, 20*time.Second, 10*time.Millisecond, "cut request leaves the engine", nil, func() (bool, string) {
		e := s.Engines()[0]
		return e.Running == 0, fmt.Sprintf("%d running", e.Running)
	})
	if e := s.Engines()[0]; e.Running != 0 || e.Finished["length"] != 0 {
		t.Fatalf("cut request must be aborted in the engine: %+v", e)
	}
	s.ClearFaults()
	_ = s.InjectFault(FaultSpec{Kind: FaultStreamError, AfterChunks: 1})
	_, body := post(t, s.URL()+"/v1/completions", `{"model":"m","prompt":"x","max_tokens":50,"ignore_eos":true,"stream":true}`, nil)
	ev := strictEvents(t, body)
	if len(ev) != 2 || !strings.HasPrefix(ev[1], `{"error": {"message": "`) || !strings.HasSuffix(ev[1], `"type": "InternalServerError", "param": null, "code": 500}}`) {
		t.Fatalf("in-stream error shape wrong: %q", ev)
	}
	// 0.7.3: flat error object inside {"error": ...}, BadRequestError/400 defaults.
	v0 := startReal(t, Config{Models: []string{"m"}, MetricsVersion: MetricsV0})
	_ = v0.InjectFault(FaultSpec{Kind: FaultStreamError, AfterChunks: 1})
	_, body = post(t, v0.URL()+"/v1/completions", `{"model":"m","prompt":"x","max_tokens":50,"ignore_eos":true,"stream":true}`, nil)
	ev = strictEvents(t, body)
	if len(ev) != 2 || !strings.HasPrefix(ev[1], `{"error": {"object": "error", "message": "`) || !strings.HasSuffix(ev[1], `"type": "BadRequestError", "param": null, "code": 400}}`) {
		t.Fatalf("v0 in-stream error shape wrong: %q", ev)
	}
}

// On the virtual clock: a restart needs no server, and the clock moves by
// Advance (not a sleep) so the new process_start_time_seconds is later.
func TestFaultRestartResetsCounters(t *testing.T) {
	s := newVirtual(t, Config{Models: []string{"m"}})
	if rec := doVirtual(t, s, "POST", "/v1/completions", `{"model":"m","prompt":"x","max_tokens":3}`, nil); rec.Code != 200 {
		t.Fatalf("completion: %d %s", rec.Code, rec.Body)
	}
	before := parseMetrics(t, s.Metrics())
	if sumValue(t, before, "vllm:generation_tokens_total", nil) == 0 {
		t.Fatal("no tokens before restart")
	}
	s.Advance(time.Second)
	if err := s.InjectFault(FaultSpec{Kind: FaultRestart}); err != nil {
		t.Fatal(err)
	}
	after := parseMetrics(t, s.Metrics())
	if g := sumValue(t, after, "vllm:generation_tokens_total", nil); g != 0 {
		t.Errorf("generation_tokens_total after restart = %v", g)
	}
	if _, ok := after["http_requests_total"]; ok {
		t.Error("http counters must reset too")
	}
	if a, b := sumValue(t, before, "process_start_time_seconds", nil), sumValue(t, after, "process_start_time_seconds", nil); b <= a {
		t.Errorf("process_start_time_seconds %v -> %v", a, b)
	}
}

func TestAdminEndpoints(t *testing.T) {
	s := startReal(t, Config{Models: []string{"m"}})
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/admin/scenario", `{"scenario":"queueing","load":{"rate":7,"prompt":{"mean":99}}}`, 200},
		{"/admin/scenario", `{"scenario":"queueing","load":{"rates":7}}`, 400},
		{"/admin/scenario", `{"scenario":"kv_exhausted"}`, 200},
		{"/admin/scenario", `{"scenario":"nope"}`, 400},
		{"/admin/scenario", `{"scenario":"healthy","bogus":1}`, 400},
		{"/admin/fault", `{"fault":"5xx"}`, 200},
		{"/admin/fault", `{"fault":"melt"}`, 400},
		{"/admin/fault", `{"fault":"slow_metrics","delay":"soon"}`, 400},
		{"/admin/loadgen", `{"enabled":false}`, 200},
	} {
		resp, body := post(t, s.URL()+c.path, c.body, nil)
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: %d %s", c.path, c.body, resp.StatusCode, body)
		}
	}
	if s.Scenario().Name != "kv_exhausted" {
		t.Errorf("scenario %q", s.Scenario().Name)
	}
	if f := s.Faults(); len(f) != 1 || f[0].Kind != Fault5xx {
		t.Errorf("faults %+v", f)
	}
	req, _ := http.NewRequest("DELETE", s.URL()+"/admin/fault", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(s.Faults()) != 0 {
		t.Error("DELETE /admin/fault did not clear")
	}
	code, body, _ := get(s.URL()+"/admin/state", time.Second)
	if code != 200 || !bytes.Contains([]byte(body), []byte(`"metrics_version":"v1"`)) {
		t.Errorf("/admin/state: %d %s", code, body)
	}
}

func TestV0MetricsGzipWhenAsked(t *testing.T) {
	s := startReal(t, Config{Models: []string{"m"}, MetricsVersion: MetricsV0})
	req, _ := http.NewRequest("GET", s.URL()+"/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" {
		t.Fatalf("headers %v", resp.Header)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(zr)
	parseMetrics(t, b)
}

func TestAdminScenarioLoadOverrideMerges(t *testing.T) {
	s := startReal(t, Config{Models: []string{"m"}})
	resp, body := post(t, s.URL()+"/admin/scenario", `{"scenario":"queueing","load":{"rate":7,"prompt":{"mean":99}},"step_factor":1.5}`, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	got, preset := s.Scenario(), scenarios["queueing"]
	if got.Load.Rate != 7 || got.Load.Prompt.Mean != 99 || got.Load.Prompt.Max != preset.Load.Prompt.Max ||
		got.Load.Output != preset.Load.Output || got.StepFactor != 1.5 {
		t.Fatalf("override not merged over the preset: %+v", got)
	}
}
