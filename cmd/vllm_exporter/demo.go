package main

import (
	"context"
	"errors"

	"github.com/go-kit/log"
)

// startDemo starts a simulated vLLM for --demo and returns its base URL.
// Placeholder: the simulator area replaces this file.
func startDemo(ctx context.Context, logger log.Logger) (vllmURL string, stop func(), err error) {
	return "", func() {}, errors.New("demo mode not built")
}
