package vllmsim

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"time"
)

// Handler serves the vLLM API, /metrics, /health, /version and /admin/*.
func (s *Sim) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.handleGenerate(w, r, false) })
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.handleGenerate(w, r, true) })
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.HandleFunc("GET /ping", s.handleHealth)
	s.serverRoutes(mux)
	mux.HandleFunc("POST /tokenize", s.handleTokenize)
	mux.HandleFunc("GET /admin/state", func(w http.ResponseWriter, r *http.Request) { s.adminResult(w, nil) })
	mux.HandleFunc("POST /admin/scenario", s.handleAdminScenario)
	mux.HandleFunc("POST /admin/fault", s.handleAdminFault)
	mux.HandleFunc("DELETE /admin/fault", func(w http.ResponseWriter, r *http.Request) {
		s.ClearFaults()
		s.adminResult(w, nil)
	})
	mux.HandleFunc("POST /admin/loadgen", s.handleAdminLoadGen)
	s.registerControls(mux)
	return s.middleware(mux)
}

// statusRecorder captures status and Content-Length for the http_* metrics.
type statusRecorder struct {
	http.ResponseWriter
	status  int
	respLen int64
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
		r.respLen = -1
		if cl := r.Header().Get("Content-Length"); cl != "" {
			_, _ = fmt.Sscan(cl, &r.respLen)
		}
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Sim) clockNow() time.Time {
	s.lockNow()
	defer s.mu.Unlock()
	return s.now
}

func (s *Sim) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		admin := strings.HasPrefix(r.URL.Path, "/admin/")
		if !admin {
			if ch := s.hangChan(); ch != nil {
				s.hanging.Add(1)
				select {
				case <-ch:
				case <-r.Context().Done():
				}
				s.hanging.Add(-1)
				if r.Context().Err() != nil {
					return
				}
			}
		}
		if admin {
			next.ServeHTTP(w, r)
			return
		}
		start := s.clockNow()
		rec := &statusRecorder{ResponseWriter: w}
		// The instrumentator wraps the whole app, so 401s are counted too.
		if s.cfg.APIKey != "" && strings.HasPrefix(r.URL.Path, "/v1") &&
			r.Header.Get("Authorization") != "Bearer "+s.cfg.APIKey {
			writeJSON(rec, http.StatusUnauthorized, map[string]string{"error": "Unauthorized"})
		} else {
			next.ServeHTTP(rec, r)
		}
		handler := r.URL.Path
		switch handler {
		case "/v1/completions", "/v1/chat/completions", "/v1/models", "/tokenize", "/sleep", "/wake_up", "/is_sleeping":
		default:
			handler = "none"
			if uninstrumented[r.URL.Path] {
				return
			}
		}
		status := cmp.Or(rec.status, http.StatusOK)
		end := s.clockNow()
		s.mu.Lock()
		s.http.observe(end, handler, r.Method, status, r.ContentLength, rec.respLen, end.Sub(start))
		s.mu.Unlock()
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// apiError is vLLM's error response.
type apiError struct {
	status  int
	typ     string
	message string
	param   *string
}

func badRequest(msg string, param string) *apiError {
	e := &apiError{status: http.StatusBadRequest, typ: "BadRequestError", message: msg}
	if param != "" {
		e.param = &param
	}
	return e
}

func (s *Sim) writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, orderedError(e, s.version.nestedError))
}

// orderedError keeps vLLM's field order (object, message, type, param, code).
func orderedError(e *apiError, nested bool) any {
	type inner struct {
		Object  string  `json:"object,omitempty"`
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    int     `json:"code"`
	}
	in := inner{Message: e.message, Type: e.typ, Param: e.param, Code: e.status}
	if nested {
		return struct {
			Error inner `json:"error"`
		}{in}
	}
	in.Object = "error"
	return in
}

func (s *Sim) handleHealth(w http.ResponseWriter, r *http.Request) {
	if _, bad := s.fault(Fault5xx); bad {
		w.WriteHeader(s.version.healthDead)
		return
	}
	w.Header().Set("Content-Length", "0")
	if s.stalledTooLong() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Sim) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if f, ok := s.fault(FaultSlowMetrics); ok {
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if _, bad := s.fault(Fault5xx); bad {
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	}
	if _, bad := s.fault(FaultGarbageMetrics); bad {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = io.WriteString(w, "<html><body>502 Bad Gateway</body></html>\n\x00\x01 vllm:num_requests_running{{{ NaN?\n")
		return
	}
	body := s.Metrics()
	ct := "text/plain; version=0.0.4; charset=utf-8"
	switch {
	case s.version.openMetrics:
		ct = "application/openmetrics-text; version=1.0.0; charset=utf-8"
	case s.version.main:
		ct = "text/plain; version=1.0.0; charset=utf-8" // prometheus_client >= 0.23
	}
	w.Header().Set("Content-Type", ct)
	if s.version.name == MetricsV0 && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		_, _ = gz.Write(body)
		_ = gz.Close()
		w.Header().Set("Content-Encoding", "gzip")
		body = buf.Bytes()
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	_, _ = w.Write(body)
}

func (s *Sim) handleModels(w http.ResponseWriter, r *http.Request) {
	created := s.clockNow().Unix()
	type perm struct {
		ID                 string  `json:"id"`
		Object             string  `json:"object"`
		Created            int64   `json:"created"`
		AllowCreateEngine  bool    `json:"allow_create_engine"`
		AllowSampling      bool    `json:"allow_sampling"`
		AllowLogprobs      bool    `json:"allow_logprobs"`
		AllowSearchIndices bool    `json:"allow_search_indices"`
		AllowView          bool    `json:"allow_view"`
		AllowFineTuning    bool    `json:"allow_fine_tuning"`
		Organization       string  `json:"organization"`
		Group              *string `json:"group"`
		IsBlocking         bool    `json:"is_blocking"`
	}
	type card struct {
		ID          string  `json:"id"`
		Object      string  `json:"object"`
		Created     int64   `json:"created"`
		OwnedBy     string  `json:"owned_by"`
		Root        string  `json:"root"`
		Parent      *string `json:"parent"`
		MaxModelLen *int    `json:"max_model_len"` // null for a LoRA adapter, as vLLM
		Permission  []perm  `json:"permission"`
	}
	var data []card
	permission := func(i int) []perm {
		return []perm{{ID: fmt.Sprintf("modelperm-%032x", i+1), Object: "model_permission", Created: created,
			AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*"}}
	}
	maxLen := s.cfg.MaxModelLen
	for i, m := range s.cfg.Models {
		data = append(data, card{ID: m, Object: "model", Created: created, OwnedBy: s.ownedBy(), Root: m,
			MaxModelLen: &maxLen, Permission: permission(i)})
	}
	// LoRA adapters follow, as vLLM lists its --lora-modules: root is the
	// adapter's path, parent the base model, no max_model_len.
	for i, a := range s.loraAdapters() {
		base := s.cfg.Models[0]
		data = append(data, card{ID: a, Object: "model", Created: created, OwnedBy: s.ownedBy(), Root: "/adapters/" + a,
			Parent: &base, Permission: permission(len(s.cfg.Models) + i)})
	}
	writeJSON(w, http.StatusOK, struct {
		Object string `json:"object"`
		Data   []card `json:"data"`
	}{"list", data})
}

func (s *Sim) handleTokenize(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model    string        `json:"model"`
		Prompt   *string       `json:"prompt"`
		Messages []ChatMessage `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.writeError(w, badRequest("invalid JSON body: "+err.Error(), ""))
		return
	}
	var toks []int
	switch {
	case body.Prompt != nil:
		toks = Tokenize(*body.Prompt)
	case body.Messages != nil:
		toks = ChatTokens(body.Messages)
	default:
		s.writeError(w, badRequest("either prompt or messages is required", ""))
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Count       int     `json:"count"`
		MaxModelLen int     `json:"max_model_len"`
		Tokens      []int   `json:"tokens"`
		TokenStrs   *string `json:"token_strs"`
	}{len(toks), s.cfg.MaxModelLen, toks, nil})
}

func (s *Sim) adminState() any {
	st := map[string]any{"scenario": s.Scenario(), "faults": s.Faults(), "engines": s.Engines(),
		"metrics_version": s.cfg.MetricsVersion, "virtual_clock": s.cfg.VirtualClock, "now": s.Now()}
	maps.Copy(st, s.controlsState())
	return st
}

func (s *Sim) handleAdminScenario(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Scenario   string          `json:"scenario"`
		Load       json.RawMessage `json:"load"` // merged over the preset's profile
		StepFactor *float64        `json:"step_factor"`
		// PrefillFactor slows prefill tokens only (see Scenario).
		PrefillFactor *float64 `json:"prefill_factor"`
		Stalled       *bool    `json:"stalled"`
		AbortFraction *float64 `json:"abort_fraction"`
	}
	if !decodeStrict(w, r.Body, &body, "invalid body") {
		return
	}
	sc, ok := scenarios[body.Scenario]
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("unknown scenario %q", body.Scenario), "known": Scenarios()})
		return
	}
	if body.Load != nil {
		if !decodeStrict(w, bytes.NewReader(body.Load), &sc.Load, "invalid load") {
			return
		}
	}
	setIf(&sc.PrefillFactor, body.PrefillFactor)
	setIf(&sc.StepFactor, body.StepFactor)
	setIf(&sc.Stalled, body.Stalled)
	setIf(&sc.AbortFraction, body.AbortFraction)
	s.adminResult(w, s.ApplyScenario(sc))
}

// setIf sets *dst to *v when v is set (a JSON field given).
func setIf[T any](dst, v *T) {
	if v != nil {
		*dst = *v
	}
}

func (s *Sim) handleAdminFault(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Fault       string `json:"fault"`
		Delay       string `json:"delay"`
		Duration    string `json:"duration"`
		AfterChunks int    `json:"after_chunks"`
	}
	if !decodeStrict(w, r.Body, &body, "invalid body") {
		return
	}
	if body.Fault == "none" || body.Fault == "" {
		s.ClearFaults()
		writeJSON(w, http.StatusOK, s.adminState())
		return
	}
	f := FaultSpec{Kind: FaultKind(body.Fault), AfterChunks: body.AfterChunks}
	for _, p := range []struct {
		s   string
		dst *time.Duration
	}{{body.Delay, &f.Delay}, {body.Duration, &f.Duration}} {
		if p.s == "" {
			continue
		}
		d, err := time.ParseDuration(p.s)
		if err != nil || d < 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("bad duration %q", p.s)})
			return
		}
		*p.dst = d
	}
	// Answer before a down/restart fault closes this very connection.
	if f.Kind == FaultDown || f.Kind == FaultRestart {
		if f.Kind == FaultDown && s.srv == nil {
			writeJSON(w, http.StatusConflict, map[string]string{"error": ErrNotStarted.Error()})
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]any{"fault": f.Kind, "status": "scheduled"})
		go func() {
			time.Sleep(50 * time.Millisecond)
			_ = s.InjectFault(f)
		}()
		return
	}
	s.adminResult(w, s.InjectFault(f))
}

func (s *Sim) handleAdminLoadGen(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Enabled bool `json:"enabled"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid body: " + err.Error()})
		return
	}
	s.SetLoadGen(body.Enabled)
	writeJSON(w, http.StatusOK, s.adminState())
}
