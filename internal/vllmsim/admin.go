package vllmsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// registerControls adds the engine-control routes: vLLM's own sleep-mode
// routes (served by vLLM with VLLM_SERVER_DEV_MODE=1; always here) and the
// simulator's /admin controls. It is long because it is the route table:
// one short handler per route, read as a list.
func (s *Sim) registerControls(mux *http.ServeMux) {
	mux.HandleFunc("POST /sleep", func(w http.ResponseWriter, r *http.Request) {
		level := 1 // vLLM's default level
		if q := r.URL.Query().Get("level"); q != "" {
			n, err := strconv.Atoi(q)
			if err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("bad level %q", q)})
				return
			}
			level = n
		}
		if err := s.Sleep(level); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("POST /wake_up", func(w http.ResponseWriter, r *http.Request) {
		if err := s.WakeUp(r.URL.Query()["tags"]...); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /is_sleeping", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]bool{"is_sleeping": s.SleepState().Sleeping()})
	})

	mux.HandleFunc("POST /admin/sleep", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Level *int `json:"level"`
		}
		if !decodeAdmin(w, r, &body) {
			return
		}
		level := 1
		if body.Level != nil {
			level = *body.Level
		}
		s.adminResult(w, s.Sleep(level))
	})
	mux.HandleFunc("POST /admin/wake", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Tags []string `json:"tags"`
		}
		if !decodeAdmin(w, r, &body) {
			return
		}
		s.adminResult(w, s.WakeUp(body.Tags...))
	})
	mux.HandleFunc("POST /admin/defer", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Fraction float64 `json:"fraction"`
			Hold     string  `json:"hold"`
			Livelock bool    `json:"livelock"`
		}
		if !decodeAdmin(w, r, &body) {
			return
		}
		d := DeferSpec{Fraction: body.Fraction, Livelock: body.Livelock}
		if body.Hold != "" {
			h, err := time.ParseDuration(body.Hold)
			if err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("bad hold %q", body.Hold)})
				return
			}
			d.Hold = h
		}
		s.adminResult(w, s.SetDefer(d))
	})
	mux.HandleFunc("DELETE /admin/defer", func(w http.ResponseWriter, r *http.Request) {
		s.ClearDefer()
		s.adminResult(w, nil)
	})
	mux.HandleFunc("POST /admin/spec_decode", func(w http.ResponseWriter, r *http.Request) {
		var sd SpecDecode
		if !decodeAdmin(w, r, &sd) {
			return
		}
		s.adminResult(w, s.SetSpecDecode(sd))
	})
	mux.HandleFunc("POST /admin/refuse", func(w http.ResponseWriter, r *http.Request) {
		var rf Refusal
		if !decodeAdmin(w, r, &rf) {
			return
		}
		s.adminResult(w, s.SetRefusal(rf))
	})
	for path, set := range map[string]func(*http.Request, http.ResponseWriter) error{
		"/admin/admission": func(r *http.Request, w http.ResponseWriter) error { return adminSet(w, r, s.SetAdmission) },
		"/admin/pd":        func(r *http.Request, w http.ResponseWriter) error { return adminSet(w, r, s.SetPD) },
		"/admin/lora":      func(r *http.Request, w http.ResponseWriter) error { return adminSet(w, r, s.SetLoRA) },
		"/admin/offload":   func(r *http.Request, w http.ResponseWriter) error { return adminSet(w, r, s.SetOffload) },
		"/admin/mooncake":  func(r *http.Request, w http.ResponseWriter) error { return adminSet(w, r, s.SetMooncake) },
		"/admin/hf3fs":     func(r *http.Request, w http.ResponseWriter) error { return adminSet(w, r, s.SetHF3FS) },
		"/admin/kv_cache_metrics": func(r *http.Request, w http.ResponseWriter) error {
			return adminSet(w, r, func(v struct {
				Enabled bool `json:"enabled"`
			}) error {
				s.SetKVCacheMetrics(v.Enabled)
				return nil
			})
		},
	} {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			if err := set(r, w); err != errBodyAnswered {
				s.adminResult(w, err)
			}
		})
	}
	mux.HandleFunc("POST /admin/buckets", func(w http.ResponseWriter, r *http.Request) {
		var m map[string][]float64
		if !decodeAdmin(w, r, &m) {
			return
		}
		s.adminResult(w, s.SetHistogramBuckets(m))
	})
}

// errBodyAnswered: the request body was invalid and already answered.
var errBodyAnswered = errors.New("invalid body answered")

// adminSet decodes a control's JSON body and applies it with set.
func adminSet[T any](w http.ResponseWriter, r *http.Request, set func(T) error) error {
	var v T
	if !decodeAdmin(w, r, &v) {
		return errBodyAnswered
	}
	return set(v)
}

// decodeAdmin decodes a strict JSON body; an empty body leaves v as is.
func decodeAdmin(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.ContentLength == 0 {
		return true
	}
	return decodeStrict(w, http.MaxBytesReader(w, r.Body, 1<<20), v, "invalid body")
}

// decodeStrict decodes one JSON value from rd into v, refusing unknown
// fields; on an error it answers 400 ("what: error") and returns false.
func decodeStrict(w http.ResponseWriter, rd io.Reader, v any, what string) bool {
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": what + ": " + err.Error()})
		return false
	}
	return true
}

func (s *Sim) adminResult(w http.ResponseWriter, err error) {
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, s.adminState())
}

// controlsState is the controls' part of GET /admin/state.
func (s *Sim) controlsState() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := map[string]any{"fraction": s.deferCfg.Fraction, "livelock": s.deferCfg.Livelock}
	if s.deferCfg.Hold > 0 {
		d["hold"] = s.deferCfg.Hold.String()
	}
	return map[string]any{"sleep": s.sleep, "fully_awake": s.sleep.FullyAwake(), "defer": d,
		"spec_decode": s.spec, "refusal": s.refuse, "scheduling_policy": s.cfg.SchedulingPolicy,
		"custom_histogram_buckets": s.cfg.CustomHistogramBuckets,
		"admission":                s.admission, "pd": s.pd, "lora": s.lora, "offload": map[string]any{"on": s.offloadOn, "config": s.offload},
		"mooncake": map[string]any{"on": s.mooncakeOn, "config": s.mooncake}, "hf3fs": map[string]any{"on": s.hf3fsOn, "config": s.hf3fs},
		"kv_cache_metrics": s.kvCacheMetrics}
}
