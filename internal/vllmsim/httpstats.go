package vllmsim

import (
	"fmt"
	"math"
	"time"
)

// httpStats mirrors prometheus-fastapi-instrumentator's default metrics for
// the routes it instruments (everything but /metrics, /health, /load, /ping,
// /version, /server_info).
type httpStats struct {
	reqKeys  []string // handler|method|status in first-seen order
	requests map[string]float64
	handlers []string
	reqSize  map[string][2]float64 // count, sum
	respSize map[string][2]float64
	durKeys  []string // handler|method
	dur      map[string]*histogram
	highr    *histogram
	created  map[string]float64 // child key -> unix time of first observation
	start    float64
}

var (
	highrBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 7.5, 10, 30, 60}
	durBuckets   = []float64{0.1, 0.5, 1}
)

func newHTTPStats() *httpStats {
	return &httpStats{requests: map[string]float64{}, reqSize: map[string][2]float64{}, respSize: map[string][2]float64{},
		dur: map[string]*histogram{}, highr: newHistogram(highrBuckets), created: map[string]float64{}}
}

var uninstrumented = map[string]bool{"/metrics": true, "/health": true, "/load": true, "/ping": true, "/version": true, "/server_info": true}

// observe records one finished HTTP request. reqLen/respLen are Content-Length
// header values (-1 = absent, e.g. a streamed response: counted as 0).
func (h *httpStats) observe(now time.Time, handler, method string, status int, reqLen, respLen int64, d time.Duration) {
	if uninstrumented[handler] {
		return
	}
	ts := unixSeconds(now)
	for _, k := range []string{"req|" + handler + "|" + method + "|" + fmt.Sprint(status/100), "size|" + handler, "dur|" + handler + "|" + method} {
		if _, ok := h.created[k]; !ok {
			h.created[k] = ts
		}
	}
	group := fmt.Sprintf("%dxx", status/100)
	k := handler + "|" + method + "|" + group
	if _, ok := h.requests[k]; !ok {
		h.reqKeys = append(h.reqKeys, k)
	}
	h.requests[k]++
	if _, ok := h.reqSize[handler]; !ok {
		h.handlers = append(h.handlers, handler)
	}
	add := func(m map[string][2]float64, n int64) {
		v := m[handler]
		v[0]++
		v[1] += math.Max(0, float64(n))
		m[handler] = v
	}
	add(h.reqSize, reqLen)
	add(h.respSize, respLen)
	dk := handler + "|" + method
	if _, ok := h.dur[dk]; !ok {
		h.durKeys = append(h.durKeys, dk)
		h.dur[dk] = newHistogram(durBuckets)
	}
	h.dur[dk].observe(d.Seconds())
	h.highr.observe(d.Seconds())
}

func splitKey(k string) []string {
	var out []string
	start := 0
	for i := 0; i < len(k); i++ {
		if k[i] == '|' {
			out = append(out, k[start:i])
			start = i + 1
		}
	}
	return append(out, k[start:])
}

const (
	helpHTTPReqSize  = "Content length of incoming requests by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. "
	helpHTTPRespSize = "Content length of outgoing responses by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. "
	helpHTTPHighr    = "Latency with many buckets but no API specific labels. Made for more accurate percentile calculations. "
	helpHTTPDur      = "Latency with only few buckets by handler. Made to be only used if aggregation by handler is important. "
)

// httpRequests is http_requests_total's children, each created with its
// first request.
func httpRequests(w *expoWriter) []child {
	h := w.s.http
	out := make([]child, 0, len(h.reqKeys))
	for _, k := range h.reqKeys {
		p := splitKey(k)
		out = append(out, child{ls: []label{{"handler", p[0]}, {"method", p[1]}, {"status", p[2]}}, v: h.requests[k],
			created: h.created["req|"+p[0]+"|"+p[1]+"|"+p[2][:1]]})
	}
	return out
}

// httpFamilies are the instrumentator's families in its registration
// order: http_requests_total is the table's, the rest the simulator's own.
func httpFamilies() []entry {
	summary := func(name, help string, pick func(h *httpStats) map[string][2]float64) entry {
		return entry{name: name, own: func(w *expoWriter) {
			h := w.s.http
			if len(h.handlers) == 0 {
				return
			}
			w.header(name, "summary", help)
			m := pick(h)
			for _, hd := range h.handlers {
				ls := []label{{"handler", hd}}
				w.sample(name+"_count", ls, m[hd][0])
				w.sample(name+"_sum", ls, m[hd][1])
			}
			if !w.v.created {
				return
			}
			w.header(name+"_created", "gauge", help)
			for _, hd := range h.handlers {
				w.sample(name+"_created", []label{{"handler", hd}}, h.created["size|"+hd])
			}
		}}
	}
	return []entry{
		{name: "http_requests_total"},
		summary("http_request_size_bytes", helpHTTPReqSize, func(h *httpStats) map[string][2]float64 { return h.reqSize }),
		summary("http_response_size_bytes", helpHTTPRespSize, func(h *httpStats) map[string][2]float64 { return h.respSize }),
		{name: "http_request_duration_highr_seconds", own: func(w *expoWriter) {
			name := "http_request_duration_highr_seconds"
			w.header(name, "histogram", helpHTTPHighr)
			w.histogram(name, nil, w.s.http.highr)
			if !w.v.created {
				return
			}
			w.header(name+"_created", "gauge", helpHTTPHighr)
			w.sample(name+"_created", nil, unixSeconds(w.s.started)+0.0009)
		}},
		{name: "http_request_duration_seconds", own: func(w *expoWriter) {
			h := w.s.http
			if len(h.durKeys) == 0 {
				return
			}
			name := "http_request_duration_seconds"
			w.header(name, "histogram", helpHTTPDur)
			for _, k := range h.durKeys {
				p := splitKey(k)
				w.histogram(name, []label{{"handler", p[0]}, {"method", p[1]}}, h.dur[k])
			}
			if !w.v.created {
				return
			}
			w.header(name+"_created", "gauge", helpHTTPDur)
			for _, k := range h.durKeys {
				p := splitKey(k)
				w.sample(name+"_created", []label{{"handler", p[0]}, {"method", p[1]}}, h.created["dur|"+k])
			}
		}},
	}
}
