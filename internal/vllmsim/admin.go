package vllmsim

import (
	"encoding/json"
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

	adminRoute(s, mux, "/admin/sleep", func(body struct {
		Level *int `json:"level"`
	}) error {
		level := 1
		setIf(&level, body.Level)
		return s.Sleep(level)
	})
	adminRoute(s, mux, "/admin/wake", func(body struct {
		Tags []string `json:"tags"`
	}) error {
		return s.WakeUp(body.Tags...)
	})
	adminRoute(s, mux, "/admin/defer", func(body struct {
		Fraction float64 `json:"fraction"`
		Hold     string  `json:"hold"`
		Livelock bool    `json:"livelock"`
	}) error {
		d := DeferSpec{Fraction: body.Fraction, Livelock: body.Livelock}
		if body.Hold != "" {
			h, err := time.ParseDuration(body.Hold)
			if err != nil {
				return fmt.Errorf("bad hold %q", body.Hold)
			}
			d.Hold = h
		}
		return s.SetDefer(d)
	})
	mux.HandleFunc("DELETE /admin/defer", func(w http.ResponseWriter, r *http.Request) {
		s.ClearDefer()
		s.adminResult(w, nil)
	})
	adminRoute(s, mux, "/admin/spec_decode", s.SetSpecDecode)
	adminRoute(s, mux, "/admin/refuse", s.SetRefusal)
	adminRoute(s, mux, "/admin/admission", s.SetAdmission)
	adminRoute(s, mux, "/admin/pd", s.SetPD)
	adminRoute(s, mux, "/admin/lora", s.SetLoRA)
	adminRoute(s, mux, "/admin/offload", s.SetOffload)
	adminRoute(s, mux, "/admin/mooncake", s.SetMooncake)
	adminRoute(s, mux, "/admin/hf3fs", s.SetHF3FS)
	adminRoute(s, mux, "/admin/kv_cache_metrics", func(v struct {
		Enabled bool `json:"enabled"`
	}) error {
		s.SetKVCacheMetrics(v.Enabled)
		return nil
	})
	adminRoute(s, mux, "/admin/buckets", s.SetHistogramBuckets)
}

// adminRoute serves POST path: a control's JSON body decoded and applied
// with set, answered with the admin state or set's error.
func adminRoute[T any](s *Sim, mux *http.ServeMux, path string, set func(T) error) {
	mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
		var v T
		if decodeAdmin(w, r, &v) {
			s.adminResult(w, set(v))
		}
	})
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
