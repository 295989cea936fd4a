package vllm

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-kit/log/level"
	"github.com/vllm-exporter/vllm_exporter/internal/families"

	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
)

// A vLLM server may answer on several API servers: with
// --data-parallel-multi-port-external-lb each data-parallel rank has its
// own on port+rank, showing its own engine only. They are fetched at once
// under the one scrape deadline and their samples read as one body, so the
// family table's aggregation combines the ranks as it combines engines
// (and sums each API server's own http_requests_total).
//
// Counters and histograms must stay monotonic whatever one rank does, or
// every consumer (windows, SLOs, Prometheus' rate) would read a rank going
// down, restarting or appearing late as a reset of the whole server: a rank
// that does not answer adds its last readings, one that restarted adds what
// it had counted before, one first seen after the server counts from then
// on. Its gauges count only while it answers.

// endpoint is one API server, exported by its place in Options.URLs.
type endpoint struct {
	url            string // its /metrics
	scan           *scanner
	res            result
	up, everUp     bool
	reason         string // its last fetch's error reason ("" when up)
	carried        map[carriedKey]*carried
	order          []*carried // carried, in first-seen order
	engines        []string   // model and engine of its readings, which it claims
	rawBuf, lesBuf []float64
}

type carriedKey struct {
	fam    int
	labels string
}

// carried is a counter or histogram child of one endpoint as of its last
// successful fetch, made monotonic across its restarts.
type carried struct {
	key  carriedKey
	hist bool
	e    series // a counter's sample as the view shows it
	c    child  // a histogram child's
	les  []float64
	// last are the raw readings of the last body (a counter's value; a
	// child's buckets by bound, _sum, _count), base what is added to them.
	last, base []float64
	seen       time.Time
}

// fetchAll fetches every endpoint and builds the view of them in s.scan.
// The scrape fails only when every endpoint does; each endpoint's fetch
// counts as a scrape, and each failure under its reason.
func (s *Scraper) fetchAll(ctx context.Context, now time.Time, res *result) (string, error) {
	reasons, errs := make([]string, len(s.eps)), make([]error, len(s.eps))
	var wg sync.WaitGroup
	for i, ep := range s.eps {
		wg.Go(func() { ep.res = result{}; reasons[i], errs[i] = s.fetch(ctx, ep.url, ep.scan, &ep.res) })
	}
	if s.supervisorURL != "" {
		wg.Go(func() { s.supervisor = s.askSupervisor(ctx) })
	}
	wg.Wait()
	s.scrapes += float64(len(s.eps))
	reason, err := "", error(nil)
	for i, ep := range s.eps {
		if errs[i] != nil {
			s.errors[reasons[i]]++
			if reasons[i] != ep.reason {
				level.Warn(s.logger).Log("msg", "vLLM API server not scraped; the server is shown without it", "endpoint", i, "url", RedactedURL(ep.url), "reason", reasons[i], "err", errs[i])
			}
			if reason == "" {
				reason, err = reasons[i], fmt.Errorf("endpoint %d: %w", i, errs[i])
			}
			ep.up, ep.reason = false, reasons[i]
			continue
		}
		if ep.reason != "" {
			level.Info(s.logger).Log("msg", "vLLM API server scraped again", "endpoint", i, "url", RedactedURL(ep.url))
		}
		ep.carry(now, !ep.everUp && !s.lastOK.IsZero(), s.models.IdleTimeout(), s.opts.MaxSeries)
		ep.up, ep.reason, ep.everUp = true, "", true
		for r, n := range ep.res.dropped {
			if res.first(r) {
				res.detail[r] = fmt.Sprintf("endpoint %d: %s", i, ep.res.detail[r])
			}
			res.dropped[r] += n - 1
		}
	}
	if !slices.ContainsFunc(s.eps, func(ep *endpoint) bool { return ep.up }) {
		return reason, err
	}
	s.merge(res)
	return "", nil
}

// carry updates the carried readings from the body just read. zero: the
// endpoint answers for the first time after the server did, so what it
// counted before is left out. A series absent from its bodies for idle (or
// past maxSeries of them) is forgotten.
func (ep *endpoint) carry(now time.Time, zero bool, idle time.Duration, maxSeries int) {
	for fam, vs := range ep.scan.values {
		for _, e := range vs {
			if counterFamily[fam] {
				c := ep.entry(fam, e.labels, false, now)
				c.update(append(ep.rawBuf[:0], e.v), nil, zero)
				c.e, c.e.v = *e, c.last[0]+c.base[0]
			}
		}
	}
	for fam, kids := range ep.scan.kids {
		for _, k := range kids {
			c := ep.entry(fam, k.labels, true, now)
			slices.SortFunc(k.buckets, func(a, b bucket) int { return cmpFloat(a.le, b.le) })
			ep.rawBuf, ep.lesBuf = ep.rawBuf[:0], ep.lesBuf[:0]
			for _, b := range k.buckets {
				ep.lesBuf, ep.rawBuf = append(ep.lesBuf, b.le), append(ep.rawBuf, b.v)
			}
			c.update(append(ep.rawBuf, k.sum, k.count), ep.lesBuf, zero)
			own, n := c.c.buckets[:0], len(k.buckets)
			c.c = *k
			c.c.buckets = append(own, k.buckets...)
			for i := range c.c.buckets {
				c.c.buckets[i].v += c.base[i]
			}
			c.c.sum, c.c.count = k.sum+c.base[n], k.count+c.base[n+1]
		}
	}
	keep := ep.order[:0]
	ep.engines = ep.engines[:0]
	for _, c := range ep.order {
		if !c.seen.Equal(now) && (now.Sub(c.seen) >= idle || len(keep) >= maxSeries) {
			delete(ep.carried, c.key)
			continue
		}
		keep = append(keep, c)
		l := c.e.labels
		if c.hist {
			l = c.c.labels
		}
		if e, ok := l.Lookup("engine"); ok {
			ep.engines = append(ep.engines, l.Get("model_name")+"\xff"+e)
		}
	}
	clear(ep.order[len(keep):])
	ep.order = keep
	slices.Sort(ep.engines)
	ep.engines = slices.Compact(ep.engines)
}

// entry is the carried reading of a series, added when new.
func (ep *endpoint) entry(fam int, l families.Labels, hist bool, now time.Time) *carried {
	k := carriedKey{fam, l.Key()}
	c := ep.carried[k]
	if c == nil {
		c = &carried{key: k, hist: hist}
		ep.carried[k], ep.order = c, append(ep.order, c)
	}
	c.seen = now
	return c
}

// update takes this body's raw readings: one below the last means the
// endpoint restarted, and what it had counted goes into base. New bucket
// bounds (vLLM restarted with others) cannot be continued.
func (c *carried) update(raw, les []float64, zero bool) {
	switch {
	case c.last == nil && zero:
		c.base = make([]float64, len(raw))
		for i, v := range raw {
			c.base[i] = -v
		}
	case c.last == nil || len(raw) != len(c.last) || !slices.Equal(les, c.les):
		c.base = make([]float64, len(raw))
	default:
		for i := range raw {
			if raw[i] < c.last[i] {
				for j := range c.base {
					c.base[j] += c.last[j]
				}
				break
			}
		}
	}
	c.les, c.last = append(c.les[:0], les...), append(c.last[:0], raw...)
}

// merge builds the view the normalizer reads: the gauges of the endpoints
// that answered, everyone's carried counters and histograms. An endpoint
// whose engines another already showed (a second URL of one API server) is
// left out: summed, it would count them twice.
func (s *Scraper) merge(res *result) {
	m := s.scan
	m.forget()
	claimed := map[string]int{}
	for i, ep := range s.eps {
		if j := claim(claimed, ep.engines, i); j >= 0 {
			res.drop(DropDuplicate, func() string {
				return fmt.Sprintf("endpoint %d shows the engines endpoint %d does (two URLs of one API server?): its samples are ignored", i, j)
			})
			res.dropped[DropDuplicate] += float64(len(ep.order))
			continue
		}
		if ep.up {
			m.anyVLLM = m.anyVLLM || ep.scan.anyVLLM
			maps.Copy(m.helps, ep.scan.helps)
			for fam, vs := range ep.scan.values {
				if !counterFamily[fam] {
					m.values[fam] = append(m.values[fam], vs...)
				}
				m.bad[fam] = append(m.bad[fam], ep.scan.bad[fam]...)
			}
		}
		for _, c := range ep.order {
			if c.hist {
				m.kids[c.key.fam] = append(m.kids[c.key.fam], &c.c)
			} else {
				m.values[c.key.fam] = append(m.values[c.key.fam], &c.e)
			}
		}
	}
}

// claim records engines as endpoint i's, unless another endpoint claimed
// one of them already: then it returns that endpoint, else -1.
func claim(claimed map[string]int, engines []string, i int) int {
	for _, k := range engines {
		if j, ok := claimed[k]; ok {
			return j
		}
	}
	for _, k := range engines {
		claimed[k] = i
	}
	return -1
}

// askSupervisor is 1 when the supervisor's /health answers 200, else 0.
func (s *Scraper) askSupervisor(ctx context.Context) snapshot.Value {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.supervisorURL, nil)
	if err != nil {
		return snapshot.Some(0)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return snapshot.Some(0)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return snapshot.Some(b2f(resp.StatusCode == http.StatusOK))
}

// EndpointUp says whether the API server at Options.URLs[i] answered the
// last scrape.
func (s *Scraper) EndpointUp(i int) bool {
	up := s.state.Load().endpoints
	return i < len(up) && up[i]
}
