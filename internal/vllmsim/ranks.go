package vllmsim

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"
)

// Ranks serves simulators as the ranks of one data-parallel vLLM server
// started with --data-parallel-multi-port-external-lb: rank r is an API
// server of its own on its own port, with one engine labelled engine="r" on
// its /metrics, and the supervisor answers only /health, /ready and
// /readyz: 200 while every rank's /health answers 200, else 503 (vLLM's
// dp_supervisor.py). Each rank is a Sim with DataParallelSize 1, so its
// engine, its http_* series, its faults and its restarts are its own.
type Ranks struct {
	Sims []*Sim
	sup  *server
}

// StartRanks serves sims[r] on addrs[r] (they must not be started) and,
// unless supervisor is "", the supervisor there. Close stops them all.
func StartRanks(sims []*Sim, addrs []string, supervisor string) (*Ranks, error) {
	if len(sims) != len(addrs) {
		return nil, errors.New("vllmsim: one address per rank")
	}
	rk := &Ranks{Sims: sims}
	for r, s := range sims {
		if s.cfg.DataParallelSize != 1 {
			return nil, fmt.Errorf("vllmsim: rank %d has %d engines; a rank serves one", r, s.cfg.DataParallelSize)
		}
		if err := s.startOn(addrs[r], rankMetrics(s.Handler(), strconv.Itoa(r))); err != nil {
			rk.Close()
			return nil, err
		}
	}
	if supervisor == "" {
		return rk, nil
	}
	mux := http.NewServeMux()
	for _, p := range []string{"/health", "/ready", "/readyz"} {
		mux.HandleFunc("GET "+p, rk.supervise)
	}
	rk.sup = &server{h: mux, addr: supervisor}
	if err := rk.sup.listen(); err != nil {
		rk.sup = nil
		rk.Close()
		return nil, err
	}
	return rk, nil
}

// SupervisorURL is the supervisor's base URL ("" without one).
func (rk *Ranks) SupervisorURL() string {
	if rk.sup == nil {
		return ""
	}
	return "http://" + rk.sup.addr
}

// Close stops the supervisor and every rank.
func (rk *Ranks) Close() {
	if rk.sup != nil {
		rk.sup.close()
	}
	for _, s := range rk.Sims {
		s.Close()
	}
}

// supervise asks every rank's /health, as vLLM's supervisor does.
func (rk *Ranks) supervise(w http.ResponseWriter, r *http.Request) {
	c := http.Client{Timeout: 2 * time.Second}
	status := http.StatusOK
	for _, s := range rk.Sims {
		resp, err := c.Get(s.URL() + "/health")
		if err == nil {
			resp.Body.Close()
		}
		if err != nil || resp.StatusCode != http.StatusOK {
			status = http.StatusServiceUnavailable
		}
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(status)
}

// rankMetrics serves next with its /metrics body's engine="0" (the Sim's
// one engine) relabelled as the rank's engine. No other label of vLLM's
// ends in "engine".
func rankMetrics(next http.Handler, engine string) http.Handler {
	from, to := []byte(`engine="0"`), []byte(`engine="`+engine+`"`)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if rec.Code == http.StatusOK && rec.Header().Get("Content-Encoding") == "" {
			body = bytes.ReplaceAll(body, from, to)
		}
		maps.Copy(w.Header(), rec.Header())
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}
