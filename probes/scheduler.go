// Package probes sends low-rate synthetic streaming requests to the
// configured vLLM server and measures what a user feels: TTFT, TPOT,
// inter-token latency and end-to-end latency with vLLM's benchmark
// definitions, failure reasons, and an engine-stall verdict. Probes run on
// their own timers (never inside a Prometheus scrape), within request and
// token budgets, and only ever talk to the one configured server.
package probes

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	commoncfg "github.com/prometheus/common/config"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-exporter/vllm_exporter/collector"
	"github.com/vllm-exporter/vllm_exporter/internal/config"
	"github.com/vllm-exporter/vllm_exporter/internal/ratelog"
	"github.com/vllm-exporter/vllm_exporter/internal/snapshot"
	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
)

// Clock is the scheduler's time source: Now for schedules and measurements
// (use a monotonic clock), After for waiting. Tests inject a virtual one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configures a Scheduler. Only URL is required.
type Options struct {
	// URL is the vLLM server's base URL (http://host:port); a trailing
	// /metrics is ignored. Probes never go anywhere else.
	URL string
	// URLs, when more than one, are the API servers of the one vLLM server
	// (one per data-parallel rank); probes go to the first that is up, or to
	// each in turn (probes.api_servers). URL is then ignored.
	URLs []string
	// Up says whether URLs[i] answered the scraper's last scrape; nil: all
	// are taken as up.
	Up func(i int) bool
	// APIKey is sent as "Authorization: Bearer". Never logged. Shorthand
	// for an Upstream whose configuration has only that credential;
	// ignored when Upstream is set.
	APIKey string
	// Upstream is the connection to vLLM (TLS, credentials, proxy,
	// redirects), the same the vLLM scraper uses; nil = the defaults (no
	// credentials, direct). Only the probes' own client (Client nil) uses it.
	Upstream *upstream.Upstream
	// VLLM is a read-only view of the latest vLLM scrape (the collector's
	// Latest), used for stall detection and, without ServerTTFT, for the
	// server-side TTFT of vllm_probe_ttft_gap_seconds. May be nil.
	VLLM func() *snapshot.VLLM
	// ServerTTFT, if set, returns vLLM's server-side median TTFT of model
	// (the probed model; "" before it is known) over the trailing window,
	// e.g. the scraper's Window(window)[model] quantile 0.5 of
	// time_to_first_token. It takes precedence over VLLM for the TTFT gap.
	// It is called with the scheduler's lock held and must not call back
	// into the Scheduler.
	ServerTTFT func(model string, window time.Duration) snapshot.Value
	// Client sends the probes; nil means the probes' own client from
	// Upstream: HTTP/1.1, the configured TLS, credentials and proxy. Chunk
	// times are taken when the response body's Read returns their bytes.
	Client *http.Client
	// Clock defaults to the real monotonic clock.
	Clock Clock
	// Seed seeds prompt, jitter and request-id randomness; 0 = random.
	Seed uint64
	// MaxEventBytes bounds one SSE event (default 1 MiB).
	MaxEventBytes int
	// Health, if set, gets a report (collector "probes") after every
	// probe: up unless the scheduler cannot probe at all (bad URL). A
	// failed probe is a measurement, not a collector failure.
	Health collector.Reporter
}

// Scheduler runs the probe profiles of the `probes:` configuration section.
type Scheduler struct {
	opts    Options
	baseURL string
	urlErr  error
	scrub   *upstream.Scrubber // error texts go out without the URL's and the connection's secrets
	clock   Clock
	logger  log.Logger
	m       *metrics
	bounds  Bounds // the snapshot histograms' bounds (BoundsFor the config at start)
	latest  atomic.Pointer[snapshot.Probes]
	model   atomic.Pointer[string] // effective model, for Model()
	wake    chan struct{}

	baseURLs []string // of Options.URLs, when several

	mu         sync.Mutex
	turn       int  // the next of baseURLs with api_servers: each
	asleep     bool // the latest scrape says the engine sleeps on purpose
	cfg        config.Probes
	profiles   map[string]*profileState
	rng        *rand.Rand
	budget     ledger
	stall      stallDetector
	history    []serverTTFT // vLLM TTFT histograms seen, for the gap without ServerTTFT
	discovered string

	// Each probed model's max_model_len from /v1/models (0: not given),
	// present once asked. Profiles are fitted to their model's.
	limits   map[string]int
	fitNotes map[string]string // profile -> its fit decision, when not as is
	failLog  *ratelog.Limiter  // failure lines, per profile and reason

	recent     []ProbeRecord // the last RecentProbes finished probes, oldest first
	recentView atomic.Pointer[Recent]
}

type profileState struct {
	cfg         config.ProbeProfile
	next        time.Time
	inFlight    bool
	consecutive int

	requests, outTokens, chunks, skipped float64
	failures                             map[string]float64
	ttft, tpot, itl, e2e                 classic
	lastSuccess                          bool
	lastTTFT                             snapshot.Value
	lastTime                             time.Time
	promptSeen                           int          // usage.prompt_tokens of the latest probe with usage
	lastError                            string       // reason and detail of the latest failure
	samples                              []timedValue // successful TTFTs, for the gap
	gap                                  snapshot.Value
	target                               string // the model vllm_probe_target_info names
	windows                              [numLatencies]window
}

type timedValue struct {
	t time.Time
	v float64
}

type serverTTFT struct {
	t time.Time
	h snapshot.Histogram
}

// upstream is the connection the probes' own client follows.
func (o *Options) upstream() *upstream.Upstream {
	if o.Upstream != nil || o.APIKey == "" {
		return o.Upstream
	}
	cfg := upstream.DefaultHTTPClientConfig()
	cfg.Authorization = &commoncfg.Authorization{Type: "Bearer", Credentials: commoncfg.Secret(o.APIKey)}
	u, err := upstream.New(cfg)
	if err != nil {
		panic("probes: a bearer token alone cannot fail to build a client: " + err.Error())
	}
	return u
}

// New builds a Scheduler for the probes section of holder (the shipped
// defaults if holder is nil) and subscribes to configuration reloads: a
// reload restarts every profile's timer (except that a profile backing off
// keeps its back-off), adds and removes profiles (with their series) and
// keeps the counters of profiles that stay.
func New(opts Options, holder *config.Holder, logger log.Logger) *Scheduler {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	var clientErr error
	// Resolved once: the client follows it, and failed probes' error texts
	// are scrubbed of its credentials.
	opts.Upstream = opts.upstream()
	if opts.Client == nil {
		opts.Client, clientErr = newClient(nil, opts.Upstream)
	}
	seed := opts.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	var f *config.File
	if holder != nil {
		f = holder.Get()
	}
	bounds := BoundsFor(f)
	s := &Scheduler{
		opts:     opts,
		clock:    opts.Clock,
		logger:   logger,
		m:        newMetrics(ExportBoundsFor(f)),
		bounds:   bounds,
		wake:     make(chan struct{}, 1),
		profiles: map[string]*profileState{},
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		fitNotes: map[string]string{},
		limits:   map[string]int{},
		failLog:  ratelog.New(failLogEvery),
	}
	s.baseURL, s.urlErr = BaseURL(opts.URL)
	if len(opts.URLs) > 1 {
		s.urlErr = nil
		for _, u := range opts.URLs {
			b, err := BaseURL(u)
			s.baseURLs, s.urlErr = append(s.baseURLs, b), cmp.Or(s.urlErr, err)
		}
		s.baseURL = s.baseURLs[0]
	}
	s.scrub = upstream.NewScrubber(opts.URL, opts.APIKey)
	s.scrub.Follow(opts.Upstream)
	if s.urlErr != nil {
		level.Error(logger).Log("msg", "probes cannot run: bad vLLM URL", "err", s.urlErr)
	} else if clientErr != nil {
		s.urlErr = clientErr
		level.Error(logger).Log("msg", "probes cannot run: no HTTP client for vLLM", "err", clientErr)
	}
	cfg := config.DefaultProbes()
	if holder != nil {
		cfg = holder.Get().Probes
		holder.Subscribe(func(f *config.File) { s.apply(f.Probes) })
	}
	s.apply(cfg)
	return s
}

// apply installs a probes section: profiles get a fresh timer (first probe
// within one jitter) unless they are backing off, removed ones lose their
// series.
func (s *Scheduler) apply(cfg config.Probes) {
	now := s.clock.Now()
	s.mu.Lock()
	s.cfg = cfg
	if cfg.Model != s.discovered {
		s.discovered = ""
	}
	s.setModelLocked()
	keep := map[string]bool{}
	for _, pc := range cfg.Profiles {
		keep[pc.Name] = true
		st, ok := s.profiles[pc.Name]
		if ok && !sameMeasurement(&st.cfg, &pc) && !st.inFlight {
			// What the series measure changed: start them afresh rather
			// than mixing two request shapes in one histogram.
			s.m.remove(pc.Name)
			ok = false
		}
		if !ok {
			st = &profileState{
				failures: map[string]float64{},
				ttft:     newClassic(s.bounds.TTFT), tpot: newClassic(s.bounds.TPOT),
				itl: newClassic(s.bounds.ITL), e2e: newClassic(s.bounds.E2E),
			}
			s.profiles[pc.Name] = st
			s.m.create(pc.Name)
		}
		st.cfg = pc
		next := now.Add(s.uniform(pc.Jitter))
		if st.consecutive > 0 && st.next.After(next) {
			// Backing off: a reload does not make vLLM healthier, so
			// the wait (capped by the new backoff_max) stands.
			next = st.next
			if limit := now.Add(max(cfg.BackoffMax, pc.Interval)); next.After(limit) {
				next = limit
			}
		}
		st.next = next
	}
	for name := range s.profiles {
		if !keep[name] {
			delete(s.profiles, name)
			delete(s.fitNotes, name)
			s.m.remove(name)
		}
	}
	s.publishLocked(now)
	s.mu.Unlock()
	s.signal()
}

// sameMeasurement reports whether two versions of a profile send the same
// kind of request (timers and timeouts may differ).
func sameMeasurement(a, b *config.ProbeProfile) bool {
	return a.Model == b.Model && a.Endpoint == b.Endpoint && a.InputTokens == b.InputTokens && a.OutputTokens == b.OutputTokens &&
		a.Prefix == b.Prefix && a.WarmPrefix() == b.WarmPrefix()
}

func (s *Scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// uniform draws from [0, d]; mu must be held.
func (s *Scheduler) uniform(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(s.rng.Int64N(int64(d) + 1))
}

// gapAfter is the time to the next slot: interval ± jitter; mu held.
func (s *Scheduler) gapAfter(pc *config.ProbeProfile) time.Duration {
	return pc.Interval - pc.Jitter + 2*s.uniform(pc.Jitter)
}

// job is one admitted probe.
type job struct {
	st     *profileState
	cfg    config.ProbeProfile
	spend  *spend
	model  string
	prompt []int  // completions
	text   string // chat
	reqID  string
	obsSeq uint64 // stall detector's observation count at admission
}

// admitLocked reserves budget for one probe of st at now and builds it.
func (s *Scheduler) admitLocked(st *profileState, now time.Time) (*job, bool) {
	pc := st.cfg
	// Reserve what the last probe of this profile really used for its
	// prompt if that was more (a chat template adds tokens), so the token
	// budget holds after the first probe.
	sp := s.budget.admit(now, max(pc.InputTokens, st.promptSeen)+pc.OutputTokens, s.cfg.MaxRequestsPerMinute, s.cfg.MaxTokensPerHour)
	if sp == nil {
		st.skipped++
		s.m.skipped.WithLabelValues(pc.Name, SkipBudget).Inc()
		return nil, false
	}
	st.inFlight = true
	j := &job{st: st, cfg: pc, spend: sp, model: s.profileModel(&pc), obsSeq: s.stall.seq}
	if fit, outcome, _ := s.fitLocked(j); outcome == fitShrunk {
		j.cfg = fit // reserved at the configured size: never less than used
	}
	pc = j.cfg
	pm := &prompter{rng: s.rng, idMin: s.cfg.TokenIDMin, idMax: s.cfg.TokenIDMax}
	if config.ProbeEndpoints[pc.Endpoint].TokenPrompt {
		j.prompt = pm.tokens(&pc)
	} else {
		j.text = pm.text(&pc)
	}
	var id [8]byte
	for i := range id {
		id[i] = byte(s.rng.UintN(256))
	}
	j.reqID = RequestIDPrefix + pc.Name + "-" + hex.EncodeToString(id[:])
	return j, true
}

// dueJobs admits every profile whose slot has come; profiles over budget
// skip the slot. Each due profile's next slot is set here (fixed rate).
func (s *Scheduler) dueJobs(now time.Time) []*job {
	s.observe()
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.profiles))
	for n := range s.profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	var jobs []*job
	skipped := false
	asleep := s.asleep
	for _, n := range names {
		st := s.profiles[n]
		if st.inFlight || now.Before(st.next) {
			continue
		}
		st.next = now.Add(s.gapAfter(&st.cfg))
		if asleep {
			// Probes pause while the engine sleeps on purpose: they
			// would only fail, and their failures would page.
			s.m.skipped.WithLabelValues(st.cfg.Name, SkipAsleep).Inc()
			continue
		}
		if j, ok := s.admitLocked(st, now); ok {
			jobs = append(jobs, j)
		} else {
			skipped = true
		}
	}
	if skipped {
		s.publishLocked(now)
	} else {
		s.publishRecentLocked(now) // the windows slide while nothing is probed
	}
	return jobs
}

// anyAsleep reports whether the latest successful scrape says an engine is
// deliberately asleep (vllm:engine_sleep_state and friends).
func anyAsleep(v *snapshot.VLLM) bool {
	if v == nil || !v.Up {
		return false
	}
	for _, m := range v.Models {
		if m.Asleep() {
			return true
		}
	}
	return false
}

// nextWake is how long Run may sleep before some profile is due.
func (s *Scheduler) nextWake(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	wait := time.Minute
	for _, st := range s.profiles {
		if st.inFlight {
			continue
		}
		if d := st.next.Sub(now); d < wait {
			wait = d
		}
	}
	return max(wait, 0)
}

// Run probes until ctx is done. Each profile runs at most one probe at a
// time; profiles run concurrently, each on a goroutine of its own that
// lives as long as the profile (not one per probe: the goroutine count
// stays put while probes come and go).
func (s *Scheduler) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	workers := map[string]chan *job{}
	defer func() {
		for _, ch := range workers {
			close(ch)
		}
	}()
	run := func(j *job) {
		s.execute(ctx, j)
		s.signal()
	}
	for {
		for _, j := range s.dueJobs(s.clock.Now()) {
			ch := workers[j.cfg.Name]
			if ch == nil {
				ch = make(chan *job, 1)
				workers[j.cfg.Name] = ch
				wg.Go(func() {
					for j := range ch {
						run(j)
					}
				})
			}
			select {
			case ch <- j:
			default:
				// The profile's goroutine is still busy with a probe of
				// a removed profile of the same name: this one does not
				// wait for it.
				wg.Go(func() { run(j) })
			}
		}
		for name, ch := range workers {
			if !s.hasProfile(name) {
				close(ch)
				delete(workers, name)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-s.clock.After(s.nextWake(s.clock.Now())):
		}
	}
}

// hasProfile reports whether a profile of that name is configured.
func (s *Scheduler) hasProfile(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.profiles[name]
	return ok
}

// Tick is the manual step: it runs every probe due at now (concurrently
// across profiles) and returns when they have finished.
func (s *Scheduler) Tick(ctx context.Context, now time.Time) {
	var wg sync.WaitGroup
	for _, j := range s.dueJobs(now) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.execute(ctx, j)
		}()
	}
	wg.Wait()
}

// failLogEvery is how often one profile's failures of one reason are logged.
const failLogEvery = 5 * time.Minute

// Errors returned by ProbeOnce when it sends nothing.
var (
	ErrUnknownProfile = errors.New("probes: unknown profile")
	ErrBusy           = errors.New("probes: profile already has a probe in flight")
	ErrBudget         = errors.New("probes: budget exhausted")
	// ErrTooLong: the profile does not fit the served model's
	// max_model_len even shrunk; nothing was sent (Result.Detail says why).
	ErrTooLong = errors.New("probes: profile does not fit the model's max_model_len")
)

// ProbeOnce sends one probe of the named profile now, outside its timer
// but within the budgets, records it like a scheduled one and returns it.
// A probe that fails because ctx ended is not recorded and comes back with
// an error wrapping ctx.Err().
func (s *Scheduler) ProbeOnce(ctx context.Context, profile string) (Result, error) {
	s.observe()
	now := s.clock.Now()
	s.mu.Lock()
	st, ok := s.profiles[profile]
	switch {
	case !ok:
		s.mu.Unlock()
		return Result{}, fmt.Errorf("%w %q", ErrUnknownProfile, profile)
	case st.inFlight:
		s.mu.Unlock()
		return Result{}, ErrBusy
	}
	j, ok := s.admitLocked(st, now)
	if !ok {
		s.publishLocked(now)
		s.mu.Unlock()
		return Result{}, ErrBudget
	}
	s.mu.Unlock()
	res := s.execute(ctx, j)
	if res.Reason != "" && ctx.Err() != nil {
		return res, fmt.Errorf("probes: probe abandoned, not recorded: %w", ctx.Err())
	}
	if res.Refused {
		return res, fmt.Errorf("%w: %s", ErrTooLong, res.Detail)
	}
	return res, nil
}

// execute sends an admitted probe and records its result.
func (s *Scheduler) execute(ctx context.Context, j *job) Result {
	t := &target{baseURL: s.pickBase(), client: s.opts.Client, scrub: s.scrub,
		now: s.clock.Now, maxEvent: s.opts.MaxEventBytes, requestID: j.reqID}
	if s.opts.VLLM != nil {
		// Look at vLLM once more just before the deadline: a request the
		// probe abandons is aborted, and the engine state while it waited
		// is the evidence the stall detector needs.
		peek := time.AfterFunc(j.cfg.Timeout*9/10, s.observe)
		defer peek.Stop()
	}
	var res Result
	if s.urlErr != nil {
		res = Result{Start: s.clock.Now(), Reason: ReasonConnect, Detail: "unusable vLLM URL"}
	} else if reason, detail := s.resolveTarget(ctx, t, j); reason != "" {
		res = Result{Start: s.clock.Now(), Reason: reason, Detail: detail}
	} else if msg, refused := s.fitJob(j); refused {
		s.refuse(j, msg)
		return Result{Profile: j.cfg.Name, RequestID: j.reqID, Start: s.clock.Now(), Refused: true, Detail: msg}
	}
	if res.Reason == "" {
		body, path := buildRequest(&j.cfg, j.model, j.prompt, j.text)
		res = t.do(ctx, &j.cfg, body, path)
	}
	res.Profile = j.cfg.Name
	res.RequestID = j.reqID
	if res.Reason != "" && ctx.Err() != nil {
		// The caller gave up (shutdown, or ProbeOnce's own context): that
		// says nothing about vLLM, so it is neither a request nor a failure.
		s.abandon(j)
		return res
	}
	s.observe()
	s.record(j, &res)
	if s.opts.Health != nil {
		s.opts.Health.Report("probes", s.clock.Now().Sub(res.Start), s.urlErr)
	}
	return res
}

// pickBase is the API server a probe goes to: with several, the first up
// (the first when none is), or the next in turn.
func (s *Scheduler) pickBase() string {
	if s.baseURLs == nil {
		return s.baseURL
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.APIServers == config.APIServersEach {
		b := s.baseURLs[s.turn%len(s.baseURLs)]
		s.turn++
		return b
	}
	for i, b := range s.baseURLs {
		if s.opts.Up == nil || s.opts.Up(i) {
			return b
		}
	}
	return s.baseURL
}

// resolveTarget asks /v1/models for the model to probe (when none is
// configured or discovered) and its max_model_len (once per model; again
// after a 404 or a context-length failure). A failure fails the probe only
// when the model is still unknown; with a configured model the probe goes
// on without the limit and asks again next time. A configured model (or
// LoRA adapter) the server's list lacks fails the probe unsent
// (unknown_model) and is asked about again at the next probe: an adapter
// can be loaded while vLLM runs.
func (s *Scheduler) resolveTarget(ctx context.Context, t *target, j *job) (reason, detail string) {
	s.mu.Lock()
	_, known := s.limits[j.model]
	known = known && j.model != ""
	s.mu.Unlock()
	if known {
		return "", ""
	}
	model, maxLen, reason, detail := t.discoverModel(ctx, j.cfg.Timeout, j.model)
	if reason != "" {
		if j.model == "" || reason == ReasonUnknownModel {
			return reason, detail
		}
		if reason == ReasonHTTP4xx || reason == ReasonStreamError {
			// The server does not list its models (a proxy, another
			// OpenAI-compatible server): probe without the limit, and
			// do not ask on every probe.
			s.mu.Lock()
			s.limits[j.model] = 0
			s.mu.Unlock()
		}
		return "", ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if j.model == "" {
		if s.discovered != model {
			level.Info(s.logger).Log("msg", "probes use the model vLLM lists first", "model", model)
		}
		s.discovered = model
		s.setModelLocked()
		j.model = model
	}
	if old, ok := s.limits[model]; !ok || old != maxLen {
		level.Info(s.logger).Log("msg", "served model's context", "model", model, "max_model_len", maxLen)
	}
	s.limits[model] = maxLen
	return "", ""
}

// profileModel is the served model (or LoRA adapter) a profile probes:
// its own model, else the section's, else the one discovered.
func (s *Scheduler) profileModel(pc *config.ProbeProfile) string {
	if pc.Model != "" {
		return pc.Model
	}
	return s.Model()
}

// fitLocked fits a job's profile to what is known of its model.
func (s *Scheduler) fitLocked(j *job) (config.ProbeProfile, fitOutcome, string) {
	maxLen, ok := s.limits[j.model]
	if !ok || j.model == "" {
		return j.cfg, fitAsIs, ""
	}
	fit, outcome, msg := fitProfile(j.st.cfg, j.model, maxLen, j.st.promptSeen)
	if s.fitNotes[j.st.cfg.Name] != msg {
		switch outcome {
		case fitShrunk:
			level.Warn(s.logger).Log("msg", msg, "profile", j.st.cfg.Name, "input_tokens", fit.InputTokens, "output_tokens", fit.OutputTokens, "max_model_len", maxLen)
		case fitRefused:
			level.Error(s.logger).Log("msg", msg, "profile", j.st.cfg.Name, "max_model_len", maxLen)
		}
		if msg == "" {
			delete(s.fitNotes, j.st.cfg.Name)
		} else {
			s.fitNotes[j.st.cfg.Name] = msg
		}
	}
	return fit, outcome, msg
}

// fitJob fits a job admitted before the model's limit was known; a shrunk
// profile gets a new prompt of the fitted length.
func (s *Scheduler) fitJob(j *job) (msg string, refused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fit, outcome, msg := s.fitLocked(j)
	switch {
	case outcome == fitRefused:
		return msg, true
	case outcome == fitShrunk && fit.InputTokens != j.cfg.InputTokens:
		j.cfg = fit
		pm := &prompter{rng: s.rng, idMin: s.cfg.TokenIDMin, idMax: s.cfg.TokenIDMax}
		if fit.Endpoint == config.EndpointChat {
			j.text = pm.text(&fit)
		} else {
			j.prompt = pm.tokens(&fit)
		}
	}
	return "", false
}

// refuse ends a job that does not fit the model: nothing was sent, so it
// is neither a request nor a failure but a skip (reason max_model_len),
// and its budget reservation is returned.
func (s *Scheduler) refuse(j *job, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j.st.inFlight = false
	if j.spend != nil {
		j.spend.tokens = 0
	}
	if s.profiles[j.cfg.Name] != j.st {
		return
	}
	j.st.lastError = "not sent: " + msg
	s.m.skipped.WithLabelValues(j.cfg.Name, SkipModelLen).Inc()
	s.publishLocked(s.clock.Now())
}

// FitNotes lists how profiles were fitted to the served model's
// max_model_len (shrunk or refused), sorted; empty when all fit as
// configured or the limit is unknown.
func (s *Scheduler) FitNotes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.fitNotes))
	for _, m := range s.fitNotes {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// abandon ends a probe its caller cancelled without recording it; the
// budget reservation stands (the request may have cost tokens).
func (s *Scheduler) abandon(j *job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j.st.inFlight = false
}

// learnLimitsLocked learns the served model's context from a probe's
// error, or forgets it when the server may have changed.
func (s *Scheduler) learnLimitsLocked(j *job, res *Result) {
	switch n := contextLength(res.Detail); {
	case res.Reason == ReasonContextLength && n > 0 && j.model != "":
		// A server that does not list max_model_len says it in its error:
		// the next probes are fitted to it.
		if old, ok := s.limits[j.model]; !ok || old != n {
			level.Info(s.logger).Log("msg", "served model's context, from the server's error", "model", j.model, "max_model_len", n)
		}
		s.limits[j.model] = n
	case res.StatusCode == http.StatusNotFound || res.Reason == ReasonContextLength:
		delete(s.limits, j.model) // ask /v1/models again: the server may have restarted with another context
	}
}

// updateStallLocked feeds the stall detector a finished probe and reports
// a change of its verdict.
func (s *Scheduler) updateStallLocked(j *job, res *Result) {
	wasStalled := s.stall.stalled
	s.stall.probeDone(j.obsSeq, res.Reason == ReasonTimeout || !res.FirstToken())
	if s.stall.stalled == wasStalled {
		return
	}
	s.m.stalled.Set(b2f(s.stall.stalled))
	if s.stall.stalled {
		level.Warn(s.logger).Log("msg", "vLLM engine looks stalled: probe got no token while requests run and generation tokens do not move", "profile", j.cfg.Name)
	} else {
		level.Info(s.logger).Log("msg", "vLLM engine stall cleared", "profile", j.cfg.Name)
	}
}

// record folds a result into the profile's state, metrics, back-off, the
// stall detector and the published snapshot.
func (s *Scheduler) record(j *job, res *Result) {
	end := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st, pc := j.st, &j.cfg
	st.inFlight = false
	used := res.PromptTokens + res.CompletionTokens
	s.budget.settle(j.spend, used)
	if res.StatusCode == http.StatusNotFound && s.cfg.Model == "" {
		s.discovered = "" // the served model may have changed
		s.setModelLocked()
	}
	s.learnLimitsLocked(j, res)
	s.updateStallLocked(j, res)
	if s.profiles[pc.Name] != st {
		return // the profile was removed or replaced by a reload meanwhile
	}

	name := pc.Name
	if j.model != "" && j.model != st.target {
		if st.target != "" {
			s.m.target.DeleteLabelValues(name, st.target)
		}
		st.target = j.model
		s.m.target.WithLabelValues(name, j.model).Set(1)
	}
	st.requests++
	st.lastTime = res.Start
	s.m.requests.WithLabelValues(name).Inc()
	s.m.lastTS.WithLabelValues(name).Set(float64(res.Start.UnixNano()) / 1e9)
	st.chunks += float64(res.Chunks)
	s.m.chunks.WithLabelValues(name).Add(float64(res.Chunks))
	if res.HasUsage && res.PromptTokens > 0 {
		st.promptSeen = res.PromptTokens
	}
	if res.HasUsage && res.CompletionTokens > 0 {
		st.outTokens += float64(res.CompletionTokens)
		s.m.outTokens.WithLabelValues(name).Add(float64(res.CompletionTokens))
	}
	if res.FirstToken() {
		st.lastTTFT = snapshot.Some(res.TTFT.Seconds())
		s.m.lastTTFT.WithLabelValues(name).Set(res.TTFT.Seconds())
	} else {
		st.lastTTFT = snapshot.Value{}
		s.m.lastTTFT.DeleteLabelValues(name)
	}
	st.lastSuccess = res.Reason == ""
	s.m.lastSuccess.WithLabelValues(name).Set(b2f(st.lastSuccess))

	if res.Reason != "" {
		st.failures[res.Reason]++
		st.lastError = res.Reason
		if res.Detail != "" {
			st.lastError += ": " + res.Detail
		}
		s.m.failures.WithLabelValues(name, res.Reason).Inc()
		// One line per profile and reason per failLogEvery, with the
		// server's error text and how many were not logged since.
		if ok, suppressed := s.failLog.Allow(name+"/"+res.Reason, end); ok {
			level.Warn(s.logger).Log("msg", "probe failed", "profile", name, "reason", res.Reason, "status", res.StatusCode,
				"error", res.Detail, "suppressed", suppressed)
		}
		s.backoffLocked(st, res, end)
	} else {
		st.consecutive = 0
		s.observeLatencies(st, res)
		st.slideWindows(end, res)
	}
	s.remember(j, res, end)
	s.updateGapLocked(st, end)
	s.publishLocked(end)
}

func (s *Scheduler) observeLatencies(st *profileState, res *Result) {
	name := st.cfg.Name
	st.ttft.observe(res.TTFT.Seconds())
	s.m.ttft.WithLabelValues(name).Observe(res.TTFT.Seconds())
	st.e2e.observe(res.E2E.Seconds())
	s.m.e2e.WithLabelValues(name).Observe(res.E2E.Seconds())
	if res.HasTPOT {
		st.tpot.observe(res.TPOT.Seconds())
		s.m.tpot.WithLabelValues(name).Observe(res.TPOT.Seconds())
	}
	itl := s.m.itl.WithLabelValues(name)
	for _, g := range res.ITL {
		st.itl.observe(g.Seconds())
		itl.Observe(g.Seconds())
	}
	st.samples = append(st.samples, timedValue{t: res.Start, v: res.TTFT.Seconds()})
}

// backoffLocked pushes the next slot out after failures: the first failure
// keeps the normal interval, each further consecutive one doubles the wait,
// a 503 or 429 doubles from the start and honours Retry-After; all capped
// at backoff_max (never below the interval).
func (s *Scheduler) backoffLocked(st *profileState, res *Result, end time.Time) {
	st.consecutive++
	k := st.consecutive - 1
	if overloaded(res.StatusCode) {
		k = st.consecutive
	}
	if k <= 0 {
		return
	}
	limit := max(s.cfg.BackoffMax, st.cfg.Interval)
	d := limit
	if k < 30 {
		d = min(st.cfg.Interval<<k, limit)
	}
	if res.RetryAfter > d {
		d = min(res.RetryAfter, limit)
	}
	if nb := end.Add(d); nb.After(st.next) {
		st.next = nb
	}
}

// observe feeds the latest vLLM scrape to the stall detector and the
// server-TTFT history.
func (s *Scheduler) observe() {
	if s.opts.VLLM == nil {
		return
	}
	v := s.opts.VLLM()
	s.mu.Lock()
	defer s.mu.Unlock()
	model := s.cfg.Model
	if model == "" {
		model = s.discovered
	}
	wasStalled := s.stall.stalled
	s.asleep = anyAsleep(v)
	if s.asleep {
		// A sleeping engine makes no tokens on purpose: not a stall.
		s.stall.stalled = false
	} else {
		s.stall.observe(v, model)
	}
	if wasStalled && !s.stall.stalled {
		s.m.stalled.Set(0)
		s.publishLocked(s.clock.Now())
		level.Info(s.logger).Log("msg", "vLLM engine stall cleared: generation tokens move again or nothing runs")
	}
	if s.opts.ServerTTFT != nil {
		return
	}
	m := pickModel(v, model)
	if m == nil {
		return
	}
	h, ok := m.Histograms.Lookup(snapshot.TTFT)
	if !ok || (len(s.history) > 0 && !v.Time.After(s.history[len(s.history)-1].t)) {
		return
	}
	s.history = append(s.history, serverTTFT{t: v.Time, h: h})
	cut := v.Time.Add(-2 * s.cfg.TTFTGapWindow)
	i := 0
	for i < len(s.history)-1 && s.history[i].t.Before(cut) {
		i++
	}
	s.history = s.history[i:]
}

// updateGapLocked recomputes the profile's TTFT gap: median probe TTFT over
// the window minus vLLM's median TTFT over the same window.
func (s *Scheduler) updateGapLocked(st *profileState, now time.Time) {
	w := s.cfg.TTFTGapWindow
	cut := now.Add(-w)
	i := 0
	for i < len(st.samples) && st.samples[i].t.Before(cut) {
		i++
	}
	st.samples = st.samples[i:]
	st.gap = snapshot.Value{}
	if len(st.samples) > 0 {
		var server snapshot.Value
		if s.opts.ServerTTFT != nil {
			server = s.opts.ServerTTFT(s.Model(), w)
		} else {
			server = s.historyMedianLocked(now, w)
		}
		if server.OK {
			vals := make([]float64, len(st.samples))
			for i, x := range st.samples {
				vals[i] = x.v
			}
			st.gap = snapshot.Some(median(vals) - server.V)
		}
	}
	if st.gap.OK {
		s.m.ttftGap.WithLabelValues(st.cfg.Name).Set(st.gap.V)
	} else {
		s.m.ttftGap.DeleteLabelValues(st.cfg.Name)
	}
}

// historyMedianLocked is vLLM's median TTFT over the window from the
// scrapes this scheduler has seen (newest minus the newest at or before
// the window start).
func (s *Scheduler) historyMedianLocked(now time.Time, w time.Duration) snapshot.Value {
	n := len(s.history)
	if n < 2 {
		return snapshot.Value{}
	}
	newer := s.history[n-1]
	older := s.history[0]
	for i := n - 2; i >= 0; i-- {
		if !s.history[i].t.After(newer.t.Add(-w)) {
			older = s.history[i]
			break
		}
	}
	return deltaMedian(newer.h, older.h)
}

// deltaMedian is the median (PromQL histogram_quantile) of the increase
// from older to newer; absent on a restart in between or no observations.
func deltaMedian(newer, older snapshot.Histogram) snapshot.Value {
	d, reset := newer.Sub(older)
	if reset {
		return snapshot.Value{}
	}
	return d.Quantile(0.5)
}

func median(v []float64) float64 {
	sort.Float64s(v)
	return quantile(v, 0.5)
}

// publishLocked stores a fresh immutable snapshot.
func (s *Scheduler) publishLocked(now time.Time) {
	p := &snapshot.Probes{Time: now, Profiles: make(map[string]*snapshot.ProbeProfile, len(s.profiles)), EngineStalled: s.stall.stalled}
	for name, st := range s.profiles {
		f := make(map[string]float64, len(Reasons))
		for _, r := range Reasons {
			f[r] = st.failures[r]
		}
		p.Profiles[name] = &snapshot.ProbeProfile{
			Name: name, Endpoint: st.cfg.Endpoint, Prefix: st.cfg.Prefix,
			InputTokens: st.cfg.InputTokens, OutputTokens: st.cfg.OutputTokens,
			Requests: st.requests, Failures: f,
			TTFT: st.ttft.snapshot(), TPOT: st.tpot.snapshot(), ITL: st.itl.snapshot(), E2E: st.e2e.snapshot(),
			LastSuccess: st.lastSuccess, LastTTFT: st.lastTTFT, LastTime: st.lastTime,
			OutputTokensReceived: st.outTokens, Chunks: st.chunks, BudgetSkips: st.skipped, TTFTGap: st.gap,
			LastError: st.lastError, FitNote: s.fitNotes[name],
		}
	}
	s.latest.Store(p)
	s.publishRecentLocked(now)
}

// Model is the served model name probes use: the configured one, else the
// one discovered from /v1/models ("" before discovery). Lock-free.
func (s *Scheduler) Model() string {
	if m := s.model.Load(); m != nil {
		return *m
	}
	return ""
}

func (s *Scheduler) setModelLocked() {
	m := s.cfg.Model
	if m == "" {
		m = s.discovered
	}
	s.model.Store(&m)
}

// Latest returns the most recent published state; never nil.
func (s *Scheduler) Latest() *snapshot.Probes { return s.latest.Load() }

// Describe implements prometheus.Collector.
func (s *Scheduler) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range s.m.collectors() {
		c.Describe(ch)
	}
	for _, d := range s.m.window {
		ch <- d
	}
}

// Collect implements prometheus.Collector. It renders the state the probes
// left behind and does no I/O.
func (s *Scheduler) Collect(ch chan<- prometheus.Metric) {
	for _, c := range s.m.collectors() {
		c.Collect(ch)
	}
	s.m.collectWindows(ch, s.Recent())
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
