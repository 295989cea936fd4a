// Package vllm scrapes a vLLM server's /metrics on its own interval: a
// streaming scanner reads the body into a cache of the series the family
// table (internal/families) reads, the normalizer turns them into one stable
// snapshot per served model whatever vLLM's version calls them, a bounded
// history of snapshots gives windowed rates and quantiles, and Collect
// renders the last scrape's state as const metrics. A Prometheus scrape of
// the exporter never reaches vLLM.
package vllm

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vllm-exporter/vllm_exporter/collector"
	"github.com/vllm-exporter/vllm_exporter/internal/families"
	"github.com/vllm-exporter/vllm_exporter/internal/modelset"
	"github.com/vllm-exporter/vllm_exporter/internal/ratelog"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
)

// Defaults for Options fields left zero.
const (
	DefaultInterval = 5 * time.Second
	DefaultTimeout  = 4 * time.Second
	// DefaultMaxBodyBytes bounds a decompressed /metrics body, past the
	// simulator's 16 models x 16 engines. The series cache holds about one
	// body's keys, so this bounds its memory with DefaultMaxSeries
	// (TestFaultMatrixPeakRSS).
	DefaultMaxBodyBytes = 12 << 20
)

// DefaultWindows are the windows derived values are computed over.
var DefaultWindows = []time.Duration{time.Minute, 5 * time.Minute}

// Scrape error reasons (vllm_exporter_scrape_errors_total{reason}).
const (
	ReasonConnect       = "connect"
	ReasonTLS           = "tls" // TLS handshake failed: untrusted certificate, client certificate refused, ...
	ReasonTimeout       = "timeout"
	ReasonHTTP4xx       = "http_4xx"
	ReasonHTTP5xx       = "http_5xx"
	ReasonHTTPStatus    = "http_status"     // any other non-200 status
	ReasonBodyTooLarge  = "body_too_large"  // the body passed --vllm.max-body-bytes
	ReasonTooManySeries = "too_many_series" // the body held more series the exporter reads than --vllm.max-series
	ReasonParse         = "parse"           // includes a corrupt gzip stream
)

var reasons = []string{ReasonConnect, ReasonTLS, ReasonTimeout, ReasonHTTP4xx, ReasonHTTP5xx, ReasonHTTPStatus, ReasonBodyTooLarge, ReasonTooManySeries, ReasonParse}

// CollectorName is the name the scraper reports under
// vllm_exporter_collector_up{collector}.
const CollectorName = "vllm"

// Options configure a Scraper.
type Options struct {
	// URL is vLLM's base URL (http://host:8000); "/metrics" is appended
	// unless the path already ends with it.
	URL string
	// URLs, when more than one, are the API servers of one vLLM server
	// (--data-parallel-multi-port-external-lb: one per rank), scraped
	// together as that server (endpoints.go); URL is then ignored.
	URLs []string
	// Supervisor is the base URL of vLLM's data-parallel supervisor, whose
	// /health is asked at every scrape (vllm_exporter_supervisor_healthy).
	Supervisor   string
	Interval     time.Duration
	Timeout      time.Duration
	MaxBodyBytes int64
	// MaxSeries bounds the series of the families the exporter reads in
	// one body (--vllm.max-series), which is what the series cache holds.
	MaxSeries int
	// Windows are derived at every scrape and exported with a `window` label.
	Windows []time.Duration
	// Readers are the windows other components read through Window (the
	// classifier's bottleneck.window, the probes' TTFT gap window): each is
	// derived once per scrape beside Windows, not exported, and the history
	// reaches back the longest of them. History beyond the largest of
	// Windows is thinned to at most coarseSnapshots snapshots, so memory
	// stays bounded. SetReaders replaces them at run time.
	Readers []time.Duration
	// Upstream is the connection to vLLM (TLS, credentials, proxy,
	// redirects) shared with the probes; nil = the defaults (no
	// credentials, direct, redirects followed within the server only).
	Upstream *upstream.Upstream
	// Client overrides the HTTP client (tests). Its transport must not
	// decompress transparently; the default one does not.
	Client *http.Client
	// Health receives each scrape's outcome; optional.
	Health collector.Reporter
	// OptIn names series that are off by default (OptInNames): the
	// window series, the expected-and-present rows of
	// vllm_exporter_expected_metric_missing, opt-in families by exported
	// name. Unknown names are refused by ValidateOptIn.
	OptIn []string
	// PerPriority keeps a per-`priority` view of TTFT and e2e (vLLM's
	// --scheduling-policy priority), at most MaxPriorities values.
	PerPriority bool
	// Role is the pod's role in disaggregated serving (--vllm.role):
	// prefill, decode or both; "" or RoleAuto learns it from the scrape
	// (see detectRole), else both.
	Role string
	// Server is the inference server (--vllm.server: auto, vllm, sglang,
	// trtllm); "" or auto learns it from the server.
	Server string
	// Models bounds the model names kept (--vllm.max-models), evicts those
	// absent from successful scrapes for its idle timeout
	// (--vllm.model-idle-timeout) and gives the place of one absent for its
	// grace (--vllm.model-grace) to a new name; the zero value means the
	// defaults.
	Models modelset.Limits
}

// dropLogEvery spaces the log lines about dropped samples of one reason:
// the first is logged at once, later ones with the count in between.
const dropLogEvery = 10 * time.Minute

// Scraper polls vLLM. Create with New; all methods are safe for concurrent use.
type Scraper struct {
	opts       Options
	logger     log.Logger
	metricsURL string
	logURL     string // metricsURL without a password, for logs
	client     *http.Client
	clientErr  error // why no client could be built (every scrape fails with it)
	descs      *descs
	optIn      map[string]bool // Options.OptIn as a set
	// eps are the API servers of a server of several (nil for one); scan
	// is then the view of them all the normalizer reads.
	eps           []*endpoint
	supervisorURL string         // its /health, "" none
	supervisor    snapshot.Value // what it answered last; guarded by mu

	// mu serialises scrapes and guards the fields below it (and the
	// metrics URL).
	mu         sync.Mutex
	srv        serverState
	norm       *normalizer
	scan       *scanner
	scrapes    float64
	errors     map[string]float64
	lastOK     time.Time
	lastReason string // for logging state changes only
	lastSchema string // for logging state changes only
	// loggedUnexpected: unexpected label values already logged at warn
	// level (bounded: past maxLoggedUnexpected they go to debug).
	loggedUnexpected map[string]bool
	models           *modelset.Set
	scrapeNow        time.Time // the current scrape's time, for models.Admit
	dropped          map[string]float64
	dropLog          *ratelog.Limiter

	histMu  sync.RWMutex
	history []*snapshot.VLLM // oldest first, bounded by prune; all but the newest slimmed
	readers []time.Duration  // Options.Readers, then SetReaders', less Windows; guarded by histMu

	latest atomic.Pointer[snapshot.VLLM]
	// windows: the last scrape's derived values for Windows and readers.
	windows atomic.Pointer[map[time.Duration]map[string]*snapshot.Derived]
	// state is what the last scrape left for /metrics.
	state atomic.Pointer[renderState]

	// pub announces each stored snapshot to consumers (the SLO watchdog
	// and classifier evaluate on it instead of on a timer of their own).
	pub snapshot.Publisher
}

// New returns a Scraper; it does nothing until Run or ScrapeOnce.
func New(opts Options, logger log.Logger) *Scraper {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxSeries <= 0 {
		opts.MaxSeries = DefaultMaxSeries
	}
	if opts.Windows == nil {
		opts.Windows = DefaultWindows
	}
	opts.Windows = slices.Clone(opts.Windows)
	slices.Sort(opts.Windows)
	opts.Windows = slices.Compact(opts.Windows)
	if logger == nil {
		logger = log.NewNopLogger()
	}
	client, clientErr := opts.Client, error(nil)
	if client == nil {
		// common/config's transport never decompresses transparently: we
		// ask for gzip ourselves so that the size limit applies to the
		// decompressed body too.
		client, clientErr = opts.Upstream.Client("vllm_scrape")
	}
	s := &Scraper{
		opts:       opts,
		logger:     logger,
		metricsURL: MetricsURL(opts.URL),
		logURL:     RedactedURL(MetricsURL(opts.URL)),
		client:     client,
		clientErr:  clientErr,
		descs:      newDescs(),
		optIn:      optInSet(opts.OptIn),
		norm:       newNormalizer(),
		scan:       newScanner(),
		errors:     map[string]float64{},
		models:     opts.Models.NewSet(CollectorName),
		dropped:    map[string]float64{},
		dropLog:    ratelog.New(dropLogEvery),

		loggedUnexpected: map[string]bool{},
	}
	s.srv.base, s.srv.explicit = apiBase(opts.URL)
	if _, ok := families.ServerNamed(opts.Server); ok {
		s.srv.name, s.srv.source = opts.Server, serverFromFlag
	}
	s.norm.admit = func(name string) bool { return s.models.Admit(name, s.scrapeNow) }
	s.models.OnEvict(func(name string) {
		level.Info(s.logger).Log("msg", "model absent from successful scrapes for --vllm.model-grace gives its place under --vllm.max-models to a new name; its state is dropped", "model", name, "grace", s.models.Grace())
	})
	s.norm.perPriority = opts.PerPriority
	if len(opts.URLs) > 1 {
		s.eps = make([]*endpoint, len(opts.URLs))
		for i, u := range opts.URLs {
			s.eps[i] = &endpoint{url: MetricsURL(u), scan: newScanner(), carried: map[carriedKey]*carried{}}
		}
		s.metricsURL, s.logURL = s.eps[0].url, RedactedURL(s.eps[0].url)
		s.srv.base, _ = apiBase(opts.URLs[0])
		s.srv.explicit = true // each API server's /metrics, as --vllm.url names it
		if opts.Supervisor != "" {
			s.supervisorURL = strings.TrimSuffix(opts.Supervisor, "/") + "/health"
		}
	}
	s.SetReaders(opts.Readers...)
	s.keepState(nil, nil, nil, 0)
	return s
}

// MetricsURL is the /metrics URL for a vLLM base URL.
func MetricsURL(base string) string {
	u, err := url.Parse(base)
	if err != nil || strings.HasSuffix(u.Path, "/metrics") {
		return base
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/metrics"
	return u.String()
}

// RedactedURL is raw without the password of its user info, for logs and
// pages: --vllm.url may carry basic-auth credentials for a proxy in front of
// vLLM. See upstream.Redact (which also covers URLs that do not parse).
func RedactedURL(raw string) string { return upstream.Redact(raw) }

// Interval is the configured scrape interval.
func (s *Scraper) Interval() time.Duration { return s.opts.Interval }

// Run scrapes immediately and then every Interval until ctx is done.
func (s *Scraper) Run(ctx context.Context) {
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		s.ScrapeOnce(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Latest is the most recent scrape attempt (nil before the first). A failed
// attempt has Up false and no models: its data are not fresh.
func (s *Scraper) Latest() *snapshot.VLLM { return s.latest.Load() }

// Subscribe returns a channel notified after every scrape attempt (success
// or failure) has been stored, and a cancel function.
func (s *Scraper) Subscribe() (<-chan struct{}, func()) { return s.pub.Subscribe() }

// Ready reports whether a scrape has been attempted.
func (s *Scraper) Ready() bool { return s.latest.Load() != nil }

// Window returns derived values per model over the last d. It is nil when
// the latest scrape failed (values from a lost period are not fresh) or when
// the history does not reach back d (see Options.Readers and SetReaders).
// A d among Windows or the readers was derived by the last scrape; any
// other is derived on each call (a one-off reader: diagnose, tests).
func (s *Scraper) Window(d time.Duration) map[string]*snapshot.Derived {
	if w := s.windows.Load(); w != nil {
		if m, ok := (*w)[d]; ok {
			return m
		}
	}
	s.histMu.RLock()
	defer s.histMu.RUnlock()
	return windowOf(s.history, d, s.tolerance(d))
}

// SetReaders replaces the windows read through Window besides the
// configured ones (a reload may lengthen or shorten them): from the next
// scrape each is derived once per scrape, and the history reaches back the
// longest.
func (s *Scraper) SetReaders(ds ...time.Duration) {
	readers := make([]time.Duration, 0, len(ds))
	for _, d := range ds {
		if d > 0 && !slices.Contains(s.opts.Windows, d) && !slices.Contains(readers, d) {
			readers = append(readers, d)
		}
	}
	s.histMu.Lock()
	defer s.histMu.Unlock()
	s.readers = readers
}

// retention is how far back the history reaches beyond the full-resolution
// span: the longest reader not among Windows (the others lie within that
// span). Called with histMu held.
func (s *Scraper) retention() time.Duration {
	if len(s.readers) == 0 {
		return 0
	}
	return slices.Max(s.readers)
}

// maxLoggedUnexpected bounds the set of unexpected label values logged at
// warn level once each.
const maxLoggedUnexpected = 64

// coarseSnapshots bounds the thinned part of the history: a 15m reader
// window is kept at one snapshot per 15 s (tolerance 20 s), 3 days
// at one per 72 minutes. The full-resolution part covers the configured
// windows; beyond them only a start point is needed, not every scrape.
const coarseSnapshots = 60

// fineSpan is the recent history kept at full resolution; coarseStep the
// spacing of the thinned history before it. Called with histMu held.
func (s *Scraper) fineSpan() time.Duration {
	fine := 2 * s.opts.Interval
	if n := len(s.opts.Windows); n > 0 {
		fine += s.opts.Windows[n-1]
	}
	return fine
}

func (s *Scraper) coarseStep() time.Duration {
	return max(s.opts.Interval, s.retention()/coarseSnapshots)
}

// tolerance is how far a window's start may sit from end-d: one interval in
// the full-resolution history, one coarse step more beyond it.
func (s *Scraper) tolerance(d time.Duration) time.Duration {
	if d+s.opts.Interval <= s.fineSpan() {
		return s.opts.Interval
	}
	return s.coarseStep() + s.opts.Interval
}

// windowOf derives over d ending at the newest snapshot. The start is the
// newest successful snapshot at least d-tol/2 older than the end and no
// older than d+tol: a gap in the history does not stretch a window. The
// snapshots in between are used to see counter resets.
func windowOf(history []*snapshot.VLLM, d, tol time.Duration) map[string]*snapshot.Derived {
	if len(history) < 2 || d <= 0 {
		return nil
	}
	end := history[len(history)-1]
	if !end.Up {
		return nil
	}
	latest := end.Time.Add(-d + tol/2)
	earliest := end.Time.Add(-d - tol)
	for i := len(history) - 2; i >= 0; i-- {
		h := history[i]
		if h.Time.Before(earliest) {
			return nil
		}
		if h.Up && !h.Time.After(latest) {
			return derive(d, history[i:])
		}
	}
	return nil
}

// ScrapeOnce fetches, parses and normalizes one body, records it as taken at
// now, and keeps everything /metrics will show. Tests call it with a
// virtual clock.
func (s *Scraper) ScrapeOnce(ctx context.Context, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	began := time.Now()
	s.scrapeNow = now
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	if !s.srv.known && s.eps == nil { // several API servers are vLLM's (multi-port LB)
		s.detect(ctx)
	}
	res := &result{}
	var reason string
	var err error
	if s.eps == nil {
		reason, err = s.fetch(ctx, s.metricsURL, s.scan, res)
		for err != nil && s.nextPath(reason, err) {
			res = &result{}
			reason, err = s.fetch(ctx, s.metricsURL, s.scan, res)
		}
		s.scrapes++
	} else {
		reason, err = s.fetchAll(ctx, now, res)
	}
	snap := &snapshot.VLLM{Time: now}
	if err == nil {
		s.norm.normalize(s.scan, res)
		snap = res.vllm
		snap.Time, snap.Up = now, true
		assignRoles(snap, s.opts.Role)
		// Only a successful scrape ages the names it lacks.
		s.models.Scraped(now, func(name string) bool { _, ok := snap.Models[name]; return ok })
		for _, gone := range s.models.Expire() {
			level.Info(s.logger).Log("msg", "model absent from successful scrapes for --vllm.model-idle-timeout; its state is dropped", "model", gone, "idle_timeout", s.models.IdleTimeout())
		}
	}
	s.scraped(snap.Schema, err)
	took := time.Since(began)
	if err != nil {
		res = nil
		snap.Error = reason
		if s.eps == nil {
			s.errors[reason]++
		}
		lvl := level.Debug
		if reason != s.lastReason {
			lvl = level.Warn
		}
		lvl(s.logger).Log("msg", "vLLM scrape failed", "url", s.logURL, "reason", reason, "err", err)
	} else {
		s.lastOK = now
		s.logScrape(now, snap, res)
	}
	s.lastReason = reason

	s.histMu.Lock()
	if n := len(s.history); n > 0 {
		s.history[n-1] = slim(s.history[n-1])
	}
	s.history = append(s.history, snap)
	s.prune()
	windows := make(map[time.Duration]map[string]*snapshot.Derived, len(s.opts.Windows)+len(s.readers))
	for _, d := range slices.Concat(s.opts.Windows, s.readers) {
		windows[d] = windowOf(s.history, d, s.tolerance(d))
	}
	s.histMu.Unlock()

	s.latest.Store(snap)
	s.windows.Store(&windows)
	s.keepState(snap, res, windows, took)
	if s.opts.Health != nil {
		s.opts.Health.Report(CollectorName, took, err)
	}
	s.pub.Publish()
}

// slim is snap as the history keeps it once it is no longer the newest:
// without what only the newest snapshot is read for. Windows read counters
// and histograms; per-engine gauges, label sets and by-label gauges are
// rendered from the newest alone (TestSlimmedHistoryDerivesTheSame keeps
// this list honest).
func slim(snap *snapshot.VLLM) *snapshot.VLLM {
	if !snap.Up || len(snap.Models) == 0 {
		return snap
	}
	out := *snap
	out.Models = make(map[string]*snapshot.Model, len(snap.Models))
	for name, m := range snap.Models {
		c := *m
		c.PerEngine, c.CacheConfig, c.ByPriority = nil, nil, nil
		c.WaitingByReason, c.Sleep.Resources = nil, nil
		c.LoRA.Running, c.LoRA.Waiting = nil, nil
		c.KVOffloadLoadBytes, c.KVOffloadStoreBytes = nil, nil
		c.KVOffloadLoadSeconds, c.KVOffloadStoreSeconds = nil, nil
		c.MooncakeOps, c.MooncakeOpErrors, c.MooncakeKeys, c.MooncakeBytes, c.MooncakeFailedKeys = nil, nil, nil, nil, nil
		out.Models[name] = &c
	}
	return &out
}

// keepState stores the state /metrics shows until the next scrape.
func (s *Scraper) keepState(snap *snapshot.VLLM, res *result, windows map[time.Duration]map[string]*snapshot.Derived, took time.Duration) {
	var up []bool
	for _, ep := range s.eps {
		up = append(up, ep.up)
	}
	s.state.Store(&renderState{snap: snap, res: res, windows: windows, took: took, scrapes: s.scrapes, srv: s.srv,
		errors: maps.Clone(s.errors), dropped: maps.Clone(s.dropped), lastOK: s.lastOK, endpoints: up, supervisor: s.supervisor})
}

// logScrape reports what a successful scrape found: it logs a recovery and
// a new schema, counts the samples the line reader dropped, and logs drops
// and label values it did not understand (each rate-limited). Called with
// s.mu held.
func (s *Scraper) logScrape(now time.Time, snap *snapshot.VLLM, res *result) {
	if s.lastReason != "" {
		level.Info(s.logger).Log("msg", "vLLM scrape recovered", "url", s.logURL, "schema", snap.Schema)
	}
	if snap.Schema != s.lastSchema {
		// Once at start and after a vLLM upgrade: say what was found.
		level.Info(s.logger).Log("msg", "vLLM metric schema detected", "schema", snap.Schema,
			"models", len(snap.Models), "missing", strings.Join(snap.Missing, ","))
		s.lastSchema = snap.Schema
	}
	s.logDrops(now, res)
	for _, u := range res.unexpectedValues {
		lvl := level.Debug
		if !s.loggedUnexpected[u] && len(s.loggedUnexpected) < maxLoggedUnexpected {
			s.loggedUnexpected[u] = true
			lvl = level.Warn
		}
		lvl(s.logger).Log("msg", "vLLM label value not understood; sample ignored (see vllm_exporter_vllm_unexpected_label_values)", "sample", u)
	}
}

// logDrops counts the samples res dropped and logs each reason at most
// once per dropLogEvery, with how many were dropped since the last line: a
// body that repeats a problem on every scrape must not flood the log.
// Called with s.mu held.
func (s *Scraper) logDrops(now time.Time, res *result) {
	for _, reason := range dropReasons {
		n := res.dropped[reason]
		if n == 0 {
			continue
		}
		s.dropped[reason] += n
		if ok, suppressed := s.dropLog.Allow(reason, now); ok {
			level.Warn(s.logger).Log("msg", "vLLM samples dropped", "reason", reason, "samples", n,
				"earlier_scrapes_not_logged", suppressed, "example", res.detail[reason],
				"next_log_after", dropLogEvery)
		}
	}
}

// prune bounds the history: full resolution over the largest window (plus
// two intervals), successful snapshots thinned to one per coarseStep back to
// the retention, nothing older; and, against a clock that jumps, by count.
// Called with histMu held.
func (s *Scraper) prune() {
	fine := s.fineSpan()
	keep := max(fine, s.retention()+s.opts.Interval)
	step := s.coarseStep()
	end := s.history[len(s.history)-1].Time
	out := s.history[:0]
	var lastCoarse time.Time
	for _, h := range s.history {
		age := end.Sub(h.Time)
		switch {
		case age > keep:
			continue
		case age > fine:
			// Failed scrapes carry nothing an old window could start from.
			if !h.Up || (!lastCoarse.IsZero() && h.Time.Sub(lastCoarse) < step) {
				continue
			}
			lastCoarse = h.Time
		}
		out = append(out, h)
	}
	if maxLen := 2*int(fine/s.opts.Interval) + 2*int(keep/step) + 8; len(out) > maxLen {
		out = append(out[:0], out[len(out)-maxLen:]...)
	}
	clear(s.history[len(out):])
	s.history = out
}

// fetch GETs the body at metricsURL and scans it into sc, or returns the
// error reason. ScrapeOnce sets the deadline.
func (s *Scraper) fetch(ctx context.Context, metricsURL string, sc *scanner, res *result) (reason string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		// The parse error quotes the URL, password included.
		if verr := upstream.ValidateURL(metricsURL); verr != nil {
			return ReasonConnect, verr
		}
		return ReasonConnect, fmt.Errorf("cannot build a request for %s", RedactedURL(metricsURL))
	}
	// Ask for the classic text format: vLLM's negotiating route would
	// otherwise be free to pick OpenMetrics (which the scanner reads too).
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=1,text/plain;q=0.9,*/*;q=0.1")
	req.Header.Set("Accept-Encoding", "gzip")
	if s.clientErr != nil {
		return ReasonConnect, s.clientErr
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return transportReason(ctx, err), err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096)) // let the connection be reused
		r := ReasonHTTPStatus
		switch {
		case resp.StatusCode >= 500:
			r = ReasonHTTP5xx
		case resp.StatusCode >= 400:
			r = ReasonHTTP4xx
		}
		return r, fmt.Errorf("unexpected HTTP status %s", resp.Status)
	}
	if strings.Contains(resp.Header.Get("Content-Type"), "json") {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return ReasonParse, errJSONBody
	}
	if resp.ContentLength > s.opts.MaxBodyBytes {
		return ReasonBodyTooLarge, fmt.Errorf("Content-Length %d exceeds --vllm.max-body-bytes=%d", resp.ContentLength, s.opts.MaxBodyBytes)
	}
	var body io.Reader = resp.Body
	if strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		gz, err := gzip.NewReader(io.LimitReader(resp.Body, s.opts.MaxBodyBytes+1))
		if err != nil {
			if r := bodyReason(ctx, err); r != "" {
				return r, err
			}
			return ReasonParse, fmt.Errorf("gzip: %w", err)
		}
		defer gz.Close()
		body = gz
	}
	err = sc.scan(body, s.opts.MaxBodyBytes, s.opts.MaxSeries, res)
	switch {
	case err == nil:
		return "", nil
	case errors.Is(err, errBodyTooLarge):
		return ReasonBodyTooLarge, fmt.Errorf("%w (%d bytes)", err, s.opts.MaxBodyBytes)
	case errors.Is(err, errTooManySeries):
		return ReasonTooManySeries, fmt.Errorf("%w (%d); raise --vllm.max-series (and the memory limit) for a server this large", err, s.opts.MaxSeries)
	}
	if r := bodyReason(ctx, err); r != "" {
		return r, err
	}
	return ReasonParse, fmt.Errorf("reading body: %w", err)
}

// transportReason classifies an error from Client.Do.
func transportReason(ctx context.Context, err error) string {
	if r := bodyReason(ctx, err); r == ReasonTimeout {
		return r
	}
	if isTLSError(err) {
		return ReasonTLS
	}
	return ReasonConnect
}

// isTLSError reports a failed TLS handshake: a server certificate the
// client does not trust (wrong CA, wrong name), an alert from the server
// (it wants a client certificate, or rejects the one sent), or a peer that
// does not speak TLS.
func isTLSError(err error) bool {
	var (
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		record  tls.RecordHeaderError
		op      *net.OpError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &host) ||
		errors.As(err, &invalid) || errors.As(err, &record) ||
		(errors.As(err, &op) && op.Op == "remote error" && strings.HasPrefix(op.Err.Error(), "tls:"))
}

// bodyReason says timeout or connect for network errors (also while the
// body is read), and "" for errors in the data itself (a corrupt gzip).
func bodyReason(ctx context.Context, err error) string {
	var ne net.Error // *url.Error and *net.OpError both are one
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return ReasonTimeout
	case errors.As(err, &ne):
		return ReasonConnect
	}
	return ""
}
