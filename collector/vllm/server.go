package vllm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/internal/families"
)

// The inference server behind --vllm.url (vLLM, SGLang, trtllm-serve), where
// its Prometheus text is and what it serves are learnt once, from
// /v1/models (owned_by, the served model) and its version endpoint, and
// again after redetectAfter failed scrapes in a row (a server replaced
// behind the same address); never on every scrape.

// Servers are --vllm.server's values.
var Servers = []string{families.ServerAuto, families.ServerVLLM, families.ServerSGLang, families.ServerTRTLLM}

// redetectAfter failed scrapes in a row, the server is learnt again.
const redetectAfter = 3

// maxDetectBytes bounds the JSON the detection reads.
const maxDetectBytes = 1 << 20

// Sources of vllm_server_info.
const (
	serverFromFlag     = "flag"
	serverFromDetected = "detected"
)

// errJSONBody: the metrics path answered JSON (trtllm-serve's /metrics).
var errJSONBody = errors.New("answered JSON, not Prometheus text (trtllm-serve's /metrics holds iteration stats; its Prometheus text is /prometheus/metrics with return_perf_metrics: true)")

// serverState is what the scraper knows of the server. Guarded by the
// scraper's mu; renderState holds a copy.
type serverState struct {
	name, version, source string
	// base is the server's base URL; explicit: --vllm.url names the
	// metrics path (no other is tried).
	base     string
	explicit bool
	// path is the metrics path scraped; tried the paths probed since the
	// last detection.
	path   string
	tried  []string
	known  bool   // detection ran since the last redetect
	fails  int    // failed scrapes in a row
	logged string // what the last "inference server detected" line said
}

// metricsPaths are the paths a server of unknown kind may serve its
// Prometheus text at, tried in order.
var metricsPaths = func() []string {
	var out []string
	for _, s := range families.Servers {
		if !slices.Contains(out, s.MetricsPath) {
			out = append(out, s.MetricsPath)
		}
	}
	return out
}()

// apiBase is the server's base URL: --vllm.url less a /metrics path it
// names (then explicit: no other path is tried).
func apiBase(raw string) (base string, explicit bool) {
	u, err := url.Parse(raw)
	if err != nil || !strings.HasSuffix(u.Path, "/metrics") {
		return strings.TrimSuffix(raw, "/"), false
	}
	u.Path = strings.TrimSuffix(u.Path, "/metrics")
	return strings.TrimSuffix(u.String(), "/"), true
}

// detect learns the server (unless --vllm.server names it), its version,
// the model it serves and its metrics path. Called with s.mu held.
func (s *Scraper) detect(ctx context.Context) {
	st := &s.srv
	st.known, st.tried, st.version = true, nil, ""
	var models struct {
		Data []struct {
			ID      string `json:"id"`
			OwnedBy string `json:"owned_by"`
			Parent  string `json:"parent"`
		} `json:"data"`
	}
	s.norm.served = ""
	if s.getJSON(ctx, "/v1/models", &models) == nil {
		var base []string
		for _, m := range models.Data {
			if st.source != serverFromFlag {
				for _, srv := range families.Servers {
					if srv.OwnedBy == m.OwnedBy {
						st.name, st.source = srv.Name, serverFromDetected
					}
				}
			}
			if m.Parent == "" {
				base = append(base, m.ID)
			}
		}
		if len(base) == 1 { // a placeholder model_name can only be this one
			s.norm.served = base[0]
		}
	}
	srv, known := families.ServerNamed(st.name)
	if known {
		var v struct{ Version string }
		if s.getJSON(ctx, srv.VersionPath, &v) == nil {
			st.version = v.Version
		}
	}
	switch {
	case s.srv.explicit:
	case known:
		st.path = srv.MetricsPath
	default:
		st.path = metricsPaths[0]
	}
	s.setPath()
	// Logged when it changes: a server failing for hours is redetected
	// every few scrapes.
	if said := strings.Join([]string{st.name, st.version, st.source, s.logURL, s.norm.served}, "\xff"); said != st.logged {
		st.logged = said
		level.Info(s.logger).Log("msg", "inference server detected", "server", st.name, "version", st.version, "source", st.source,
			"metrics", s.logURL, "served_model", s.norm.served)
	}
}

// setPath points the scrape at the current path (the URL stays as given
// when --vllm.url names its path).
func (s *Scraper) setPath() {
	if !s.srv.explicit {
		s.metricsURL = s.srv.base + s.srv.path
		s.logURL = RedactedURL(s.metricsURL)
	}
}

// nextPath moves to the next metrics path after the current one answered
// 404 or JSON, when the path is neither named by --vllm.url nor known from
// the server: false when none is left.
func (s *Scraper) nextPath(reason string, err error) bool {
	st := &s.srv
	if s.srv.explicit || st.name != "" || (reason != ReasonHTTP4xx && !errors.Is(err, errJSONBody)) {
		return false
	}
	st.tried = append(st.tried, st.path)
	for _, p := range metricsPaths {
		if !slices.Contains(st.tried, p) {
			st.path = p
			s.setPath()
			return true
		}
	}
	return false
}

// scraped records a scrape's outcome: a body names its server when
// detection could not; failures in a row trigger a new detection.
func (s *Scraper) scraped(schema string, err error) {
	st := &s.srv
	if err != nil {
		if st.fails++; st.fails >= redetectAfter {
			st.known, st.fails = false, 0
			if st.source == serverFromDetected {
				st.name = ""
			}
		}
		return
	}
	st.fails = 0
	if st.name == "" && schema != SchemaNone {
		st.name, st.source = families.ServerOf(schema), serverFromDetected
	}
}

// getJSON GETs a path of the server and decodes its JSON answer into v.
func (s *Scraper) getJSON(ctx context.Context, path string, v any) error {
	if s.clientErr != nil {
		return s.clientErr
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return errors.New(resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, maxDetectBytes)).Decode(v)
}

// serverDesc is vllm_server_info's.
var serverDesc = prometheus.NewDesc("vllm_server_info",
	"The inference server the exporter reads (server: vllm, sglang, trtllm), its version where it tells it, and where the exporter learnt it (source: flag = --vllm.server, detected = from /v1/models or the metric names), value 1.",
	[]string{"server", "version", "source"}, nil)

// renderServer sends vllm_server_info once the server is known.
func renderServer(e sink, st serverState) {
	if st.name != "" {
		e.emit(serverDesc, prometheus.GaugeValue, 1, st.name, st.version, st.source)
	}
}
