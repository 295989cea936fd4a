package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
)

func TestStartDemoServesSimulatedVLLM(t *testing.T) {
	url, stop, err := startDemo(context.Background(), log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("demo must listen on loopback, got %s", url)
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "vllm:num_requests_running{engine=\"0\"") {
		t.Fatalf("demo /metrics: %d %.200s", resp.StatusCode, b)
	}
	stop()
	stop() // idempotent
	c := &http.Client{Timeout: time.Second}
	if _, err := c.Get(url + "/health"); err == nil {
		t.Fatal("simulator still serving after stop")
	}
}
