package vllmsim

import (
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

type reqState int

const (
	stateWaiting reqState = iota
	stateRunning
	stateFinished
)

// Finish reasons as vLLM reports them.
const (
	FinishStop   = "stop"
	FinishLength = "length"
	FinishAbort  = "abort"
)

// req is one sequence inside an engine.
type req struct {
	id        string
	eng       *engine
	tokens    []int // prompt followed by generated tokens
	promptLen int
	maxTokens int
	minTokens int
	ignoreEOS bool
	eosAt     int // generate EOS as output token number eosAt (1-based); 0 = never
	rng       uint64
	lora      string // the LoRA adapter it runs with, "" for the base model

	state        reqState
	numComputed  int
	blocks       []int
	registered   int      // blocks[0:registered] are registered in the prefix cache
	tokHashes    []uint64 // chained hashes of every full block of tokens (memoized)
	everSched    bool
	preemptions  int
	cachedTokens int       // prefix-cache hit on first scheduling
	computedNew  int       // prompt tokens computed on first prefill (excluding cache hits)
	priority     int       // request priority (lower = more urgent; priority policy only)
	seq          uint64    // submission order (ties in the priority queue)
	deferUntil   time.Time // deferred: when its constraint clears (zero = until ClearDefer)

	arrival, scheduled, firstTok, lastTok time.Time
	itlSum, itlMax                        float64
	itlN                                  int
	finish                                string

	sink *Handle // nil for load-generator requests
}

func (r *req) numTokens() int { return len(r.tokens) }
func (r *req) outputs() int   { return len(r.tokens) - r.promptLen }

type schedItem struct {
	r      *req
	numNew int
	admit  bool // this item (re)admitted r from the waiting queue
	hit    int  // the prefix-cache hit taken at that admission
	drafts int  // speculative draft tokens verified with this decode step
}

// engine is one data-parallel rank of one model: a V1-style scheduler over a
// block pool. All methods run under Sim.mu.
type engine struct {
	sim     *Sim
	model   string
	index   int
	pool    *blockPool
	waiting []*req
	running []*req
	// deferred are waiting requests skipped by a transient constraint
	// (vLLM's skipped_waiting queue): not schedulable until released.
	deferred []*req
	stats    *engineStats

	busy    bool
	stepEnd time.Time
	batch   []schedItem
	stepDur time.Duration
	// lastStepAt is when the engine last completed a step (or was built):
	// the stats-based health check's last progress.
	lastStepAt time.Time
	blocked    bool // nothing schedulable until something changes
	// loraLRU is each adapter ever loaded and its level (gpu, cpu);
	// loraOrder the adapters by last use, oldest first.
	loraLRU   map[string]string
	loraOrder []string
	// atFinish is running, waiting and KV usage at the last completion
	// (trtllm-serve logs its iteration stats only then).
	atFinish [3]float64
}

func (e *engine) hasWork() bool { return len(e.waiting)+len(e.running) > 0 }

func (e *engine) load() int { return len(e.waiting) + len(e.running) + len(e.deferred) }

// priorityPolicy reports --scheduling-policy priority.
func (e *engine) priorityPolicy() bool { return e.sim.cfg.SchedulingPolicy == PolicyPriority }

// before orders the priority queue: lower priority value first, then arrival.
func before(a, b *req) bool {
	if a.priority != b.priority {
		return a.priority < b.priority
	}
	return a.seq < b.seq
}

// enqueue adds a new request to the waiting queue: at the tail (FCFS) or at
// its place in the priority queue.
func (e *engine) enqueue(r *req) {
	if !e.priorityPolicy() {
		e.waiting = append(e.waiting, r)
		return
	}
	e.insertSorted(r)
}

// requeue returns a preempted or released request to the waiting queue: at
// the head (FCFS, recomputed first) or at its place in the priority queue.
func (e *engine) requeue(r *req) {
	if !e.priorityPolicy() {
		e.waiting = append([]*req{r}, e.waiting...)
		return
	}
	e.insertSorted(r)
}

func (e *engine) insertSorted(r *req) {
	i := sort.Search(len(e.waiting), func(i int) bool { return before(r, e.waiting[i]) })
	e.waiting = slices.Insert(e.waiting, i, r)
}

// victim picks the running request to preempt: the most recently admitted
// (FCFS), or the least urgent, latest-arrived one (priority policy).
func (e *engine) victim() int {
	v := len(e.running) - 1
	if e.priorityPolicy() {
		for i, r := range e.running {
			if before(e.running[v], r) {
				v = i
			}
		}
	}
	return v
}

// canStart reports whether the scheduler may start a step (not paused by sleep).
func (e *engine) canStart() bool { return e.sim.sleep.Scheduler != StatePaused }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// allocate makes sure r has blocks for numComputed+numNew tokens.
func (e *engine) allocate(r *req, numNew int) bool {
	need := ceilDiv(r.numComputed+numNew, e.pool.blockSize) - len(r.blocks)
	if need <= 0 {
		return true
	}
	b := e.pool.alloc(need)
	if b == nil {
		return false
	}
	r.blocks = append(r.blocks, b...)
	return true
}

func (e *engine) freeBlocks(r *req) {
	e.pool.release(r.blocks)
	r.blocks, r.registered = nil, 0
}

// preempt returns r to the head of the waiting queue; its KV must be recomputed.
func (e *engine) preempt(r *req) {
	e.freeBlocks(r)
	e.stats.recomputed += float64(r.numComputed) // computed again later
	r.numComputed = 0
	r.state = stateWaiting
	r.preemptions++
	e.stats.preemptions++
	e.requeue(r)
}

func removeReq(list []*req, r *req) []*req {
	if i := slices.Index(list, r); i >= 0 {
		return append(list[:i], list[i+1:]...)
	}
	return list
}

// schedule builds the next batch like vLLM V1: running requests first (decode
// or the next prefill chunk), preempting from the tail of the running list when
// blocks run out; then, if nothing was preempted, waiting requests in FCFS
// order while the token budget, max_num_seqs and free blocks allow.
func (e *engine) schedule(now time.Time) []schedItem {
	batch, budget, preempted := e.scheduleRunning(e.sim.cfg.MaxNumBatchedTokens)
	if preempted && len(batch) > 0 {
		return batch // vLLM admits no waiting request in a step that preempted
	}
	return e.admitWaiting(now, batch, budget)
}

// scheduleRunning schedules the running requests within budget tokens,
// preempting from the tail when blocks run out. It returns the batch, the
// budget left and whether it preempted.
func (e *engine) scheduleRunning(budget int) (batch []schedItem, left int, preempted bool) {
	for i := 0; i < len(e.running) && budget > 0; {
		r := e.running[i]
		n, drafts := e.newTokens(r, budget)
		ok := true
		for !e.allocate(r, n) {
			vi := e.victim()
			victim := e.running[vi]
			e.running = append(e.running[:vi], e.running[vi+1:]...)
			if vi < i {
				// Priority policy: the victim was already scheduled in this
				// step; unschedule it and give its tokens back (as vLLM does).
				i--
				for j, it := range batch {
					if it.r == victim {
						budget += it.numNew
						batch = append(batch[:j], batch[j+1:]...)
						break
					}
				}
			}
			e.preempt(victim)
			preempted = true
			if victim == r {
				ok = false
				break
			}
		}
		if !ok {
			break
		}
		batch = append(batch, schedItem{r: r, numNew: n, drafts: drafts})
		e.registerFull(r, r.numComputed+n)
		budget -= n
		i++
	}
	return batch, budget, preempted
}

// newTokens is how many tokens running request r computes this step
// within budget (decode or the next prefill chunk), and how many of them
// are speculative drafts.
func (e *engine) newTokens(r *req, budget int) (n, drafts int) {
	n = e.capLongPrefill(r.numTokens() - r.numComputed)
	if sd := e.sim.spec; sd.On() && n == 1 && r.outputs() > 0 {
		// Decode with speculative decoding: verify the last token plus
		// the drafts, never drafting past max_tokens.
		drafts = sd.NumSpeculativeTokens
		if left := r.maxTokens - r.outputs() - 1; drafts > left {
			drafts = left
		}
		n += drafts
	}
	if n > budget {
		if drafts > 0 {
			drafts -= n - budget
			if drafts < 0 {
				drafts = 0
			}
		}
		n = budget
	}
	return n, drafts
}

// admitWaiting adds waiting requests to batch in queue order while the
// token budget, max_num_seqs and free blocks allow, skipping (as vLLM's
// scheduler does) a request whose LoRA adapter would be one more than
// max_lora adapters in the batch.
func (e *engine) admitWaiting(now time.Time, batch []schedItem, budget int) []schedItem {
	// With the #53130 livelock, deferred requests take max_num_seqs slots.
	held := 0
	if e.sim.deferCfg.Livelock {
		held = len(e.deferred)
	}
	lora := e.loraBudget()
	for i := 0; i < len(e.waiting) && budget > 0 && len(e.running)+held < e.sim.cfg.MaxNumSeqs; {
		r := e.waiting[i]
		if lora.blocks(r) {
			i++ // held by the LoRA budget: the next request may run
			continue
		}
		if r.numComputed == 0 {
			bs := e.pool.blockSize
			r.tokHashes = chainHashes(r.tokHashes, r.tokens, bs)
			r.blocks = e.pool.lookup(r.tokHashes, (r.numTokens()-1)/bs)
			r.registered = len(r.blocks)
			r.numComputed = len(r.blocks) * bs
		}
		n := e.capLongPrefill(r.numTokens() - r.numComputed)
		if n > budget {
			n = budget
		}
		if !e.allocate(r, n) {
			e.freeBlocks(r)
			r.numComputed = 0
			break
		}
		if !r.everSched {
			r.everSched = true
			r.scheduled = now
			r.cachedTokens = r.numComputed
			if e.pool.caching { // vLLM records no prefix-cache stats with caching off
				e.stats.prefixQueries += float64(r.promptLen)
				e.stats.prefixHits += float64(r.numComputed)
				e.stats.prefixBlockQueries += float64(r.promptLen / e.pool.blockSize)
				e.stats.prefixBlockHits += float64(len(r.blocks))
			}
		}
		e.waiting = append(e.waiting[:i], e.waiting[i+1:]...)
		lora.add(r)
		e.loadLoRA(r.lora)
		r.state = stateRunning
		e.running = append(e.running, r)
		// A waiting request always starts from numComputed 0 (new, preempted
		// or after a failed allocation), so numComputed is the cache hit.
		batch = append(batch, schedItem{r: r, numNew: n, admit: true, hit: r.numComputed})
		e.registerFull(r, r.numComputed+n)
		budget -= n
	}
	return batch
}

// capLongPrefill caps a request's new tokens in one step at
// --long-prefill-token-threshold, as vLLM's V1 scheduler does for running
// and waiting requests alike (a decode step's one token is never above it).
func (e *engine) capLongPrefill(n int) int {
	if th := e.sim.cfg.LongPrefillTokenThreshold; th > 0 && n > th {
		return th
	}
	return n
}

// stepDuration is the cost model: memory-bound decode plus compute-bound prefill.
func (e *engine) stepDuration(batch []schedItem) time.Duration {
	var prefill, ctx, drafts int
	for _, it := range batch {
		switch {
		case it.drafts > 0:
			// Verifying drafts is compute like prefill; the drafter runs
			// once per proposed position for the whole batch.
			prefill += it.drafts
			if it.drafts > drafts {
				drafts = it.drafts
			}
		case it.numNew > 1 || it.r.numComputed+it.numNew <= it.r.promptLen:
			prefill += it.numNew
		}
		ctx += it.r.numComputed + it.numNew
	}
	d := e.sim.costLocked(len(batch), ctx, prefill)
	if drafts > 0 {
		d += e.sim.scaledLocked(float64(drafts) * e.sim.spec.DraftCost)
	}
	return d
}

// startStep schedules a batch at now; returns false if nothing could run.
func (e *engine) startStep(now time.Time) bool {
	batch := e.schedule(now)
	if len(batch) == 0 {
		e.blocked = true
		return false
	}
	e.batch = batch
	e.stepDur = e.stepDuration(batch)
	e.stepEnd = now.Add(e.stepDur)
	e.busy = true
	return true
}

// completeStep applies the batch's results at the step's end time t.
func (e *engine) completeStep(t time.Time) {
	e.busy = false
	// vllm:iteration_tokens_total. V1 observes once per engine output batch
	// that carries at least one request output (AsyncLLM builds
	// IterationStats only when num_outputs > 0): the full prompt length of
	// each request producing its first token plus the tokens generated, so
	// partial prefill chunks and recomputation after preemption are not
	// counted. V0 observes every step: scheduled prompt (prefill/recompute)
	// tokens plus generated tokens, the same tokens its counters count.
	v0 := e.sim.version.name == MetricsV0
	e.accountWork()
	iterTokens, outputs := 0, 0
	for _, it := range e.batch {
		r := it.r
		if r.state != stateRunning {
			continue // aborted during the step
		}
		if it.drafts > 0 {
			// Speculative decode: the last token's KV plus the accepted
			// drafts' KV stay; the step emits accepted + 1 tokens.
			a := acceptDrafts(&r.rng, it.drafts, e.sim.spec.AcceptanceRate)
			e.stats.observeSpec(it.drafts, a)
			r.numComputed += 1 + a
			iterTokens += e.emitTokens(r, t, a+1)
			outputs++
			continue
		}
		decode := !it.admit && r.outputs() > 0 && it.numNew == 1 && r.numComputed+1 == r.numTokens()
		if v0 && !decode {
			// V0 counts a prefill chunk (token_chunk_size, cached tokens
			// included) as prompt tokens when it is computed, and a
			// recompute after preemption prefills prompt + outputs again.
			iterTokens += it.numNew + it.hit
			e.stats.promptTokens += float64(it.numNew + it.hit)
		}
		r.numComputed += it.numNew
		if r.numComputed < r.numTokens() {
			continue // partial prefill chunk
		}
		if !v0 && r.outputs() == 0 {
			iterTokens += r.promptLen
		}
		iterTokens += e.emitTokens(r, t, 1)
		outputs++
	}
	if v0 || outputs > 0 {
		e.stats.hist[hIteration].observe(float64(iterTokens))
	}
	e.stats.steps++
	e.stats.stepSeconds += e.stepDur.Seconds()
	e.lastStepAt = t
	e.batch = nil
}

// registerFull registers r's full blocks up to upto tokens in the prefix
// cache. Like vLLM's allocate_slots (cache_blocks with num_computed +
// num_new tokens) this runs when a chunk is scheduled, so a request admitted
// later in the same step already hits the blocks being computed.
func (e *engine) registerFull(r *req, upto int) {
	bs := e.pool.blockSize
	if upto > len(r.tokens) {
		upto = len(r.tokens)
	}
	r.tokHashes = chainHashes(r.tokHashes, r.tokens[:upto], bs)
	for ; r.registered < len(r.blocks) && r.registered < len(r.tokHashes) && (r.registered+1)*bs <= upto; r.registered++ {
		e.pool.register(r.blocks[r.registered], r.tokHashes[r.registered])
	}
}

func splitmix(x *uint64) uint64 {
	*x += 0x9E3779B97F4A7C15
	z := *x
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// emitTokens generates up to n tokens for r at time t (n > 1: accepted
// speculative drafts plus the bonus token), stopping at EOS or max_tokens,
// and records their statistics: one engine output, hence one ITL
// observation, however many tokens it carries. It returns the tokens emitted.
func (e *engine) emitTokens(r *req, t time.Time, n int) int {
	st := e.stats
	first := r.outputs() == 0
	var ids []int
	var text strings.Builder
	for len(ids) < n && r.finish == "" {
		k := r.outputs() + 1
		eos := !r.ignoreEOS && r.eosAt > 0 && k >= r.eosAt && k > r.minTokens
		var id int
		if eos {
			id = EOSToken
		} else {
			var piece string
			id, piece = outputToken(splitmix(&r.rng))
			text.WriteString(piece)
		}
		r.tokens = append(r.tokens, id)
		ids = append(ids, id)
		st.generationTokens++
		switch {
		case eos:
			r.finish = FinishStop
		case k >= r.maxTokens:
			r.finish = FinishLength
		}
	}
	if first && r.finish == "" && e.sim.scen.AbortFraction > 0 &&
		float64(splitmix(&r.rng)>>11)/(1<<53) < e.sim.scen.AbortFraction {
		r.finish = FinishAbort // engine-side abort: counted as finished
	}
	if first {
		r.firstTok = t
		r.computedNew = r.promptLen - r.cachedTokens
		if e.sim.version.name != MetricsV0 { // V1: the whole prompt at the first token
			st.promptTokens += float64(r.promptLen)
		}
		st.promptCacheHit += float64(r.cachedTokens)
		st.promptCompute += float64(r.promptLen - r.cachedTokens)
		e.observeFinished(r, hTTFT, t.Sub(r.arrival).Seconds())
	} else {
		itl := t.Sub(r.lastTok).Seconds()
		st.hist[hITL].observe(itl)
		r.itlSum += itl
		r.itlN++
		r.itlMax = math.Max(r.itlMax, itl)
	}
	r.lastTok = t
	if r.finish != "" {
		e.finishReq(r, t)
	}
	if r.sink != nil {
		r.sink.push(Output{TokenIDs: ids, Text: text.String(), Time: t, FinishReason: r.finish,
			PromptTokens: r.promptLen, CompletionTokens: r.outputs(), CachedTokens: r.cachedTokens})
	}
	return len(ids)
}

// observeFinished observes a finished-request histogram (and, under the
// priority policy, its per-priority child).
func (e *engine) observeFinished(r *req, key string, v float64) {
	e.stats.hist[key].observe(v)
	if e.priorityPolicy() {
		e.stats.prioStats(priorityLabel(r.priority)).hist[key].observe(v)
	}
}

// finishReq removes r from the engine and records the per-request histograms.
func (e *engine) finishReq(r *req, t time.Time) {
	e.atFinish = [3]float64{float64(len(e.running)), float64(len(e.waiting)), e.pool.usage()}
	e.remove(r)
	st := e.stats
	st.success[r.finish]++
	if e.priorityPolicy() {
		st.prioStats(priorityLabel(r.priority)).success[r.finish]++
		st.hist[hPriority].observe(float64(r.priority))
	}
	gen := r.outputs()
	e.observeFinished(r, hE2E, t.Sub(r.arrival).Seconds())
	e.observeFinished(r, hTTFTAtFinish, r.firstTok.Sub(r.arrival).Seconds())
	e.observeFinished(r, hQueue, r.scheduled.Sub(r.arrival).Seconds())
	e.observeFinished(r, hInference, r.lastTok.Sub(r.scheduled).Seconds())
	e.observeFinished(r, hPrefill, r.firstTok.Sub(r.scheduled).Seconds())
	decode := r.lastTok.Sub(r.firstTok).Seconds()
	e.observeFinished(r, hDecode, decode)
	tpot := 0.0
	if gen > 1 {
		tpot = decode / float64(gen-1)
	}
	e.observeFinished(r, hReqTPOT, tpot)
	e.observeFinished(r, hReqPrompt, float64(r.promptLen))
	e.observeFinished(r, hReqGen, float64(gen))
	st.hist[hParamsN].observe(1)
	st.hist[hMaxGen].observe(float64(gen))
	e.observeFinished(r, hParamsMaxTokens, float64(r.maxTokens))
	e.observeFinished(r, hPrefillKV, float64(r.computedNew))
	e.observeFinished(r, hNumPreempt, float64(r.preemptions))
	e.sim.recordFinished(e, r, tpot)
}

// abort removes r without recording finished-request statistics (a
// frontend-side abort, e.g. client disconnect).
func (e *engine) abort(r *req) {
	if r.state == stateFinished {
		return
	}
	r.finish = FinishAbort
	e.remove(r)
}

// remove marks r finished, takes it off every queue and frees its KV
// blocks (which unblocks admission).
func (e *engine) remove(r *req) {
	r.state = stateFinished
	e.running = removeReq(e.running, r)
	e.waiting = removeReq(e.waiting, r)
	e.deferred = removeReq(e.deferred, r)
	e.freeBlocks(r)
	e.blocked = false
}

// accountWork adds the step's estimated FLOPs and memory traffic (vLLM's
// --enable-mfu-metrics counters): 2 × parameters FLOPs per computed token
// (attention FLOPs left out), the weights plus the KV of every context token
// read, the KV of every computed token written. TP = 1: per GPU = per engine.
func (e *engine) accountWork() {
	c := &e.sim.cfg
	if !c.EnableMFUMetrics {
		return
	}
	var tokens, ctx int
	for _, it := range e.batch {
		tokens += it.numNew
		ctx += it.r.numComputed + it.numNew
	}
	st := e.stats
	st.flops += 2 * c.ModelParams * float64(tokens)
	st.readBytes += c.ModelParams*c.WeightBytesPerParam + float64(ctx)*c.KVBytesPerToken
	st.writeBytes += float64(tokens) * c.KVBytesPerToken
}

// loraSet is the LoRA adapters of a batch against max_lora (0: LoRA off).
type loraSet struct {
	max    int
	active map[string]bool
}

// loraBudget is the adapters of the running requests.
func (e *engine) loraBudget() loraSet {
	l := loraSet{max: e.sim.lora.MaxLoRA, active: map[string]bool{}}
	for _, r := range e.running {
		l.add(r)
	}
	return l
}

func (l loraSet) add(r *req) {
	if r.lora != "" {
		l.active[r.lora] = true
	}
}

// blocks reports whether r waits on the LoRA budget: its adapter is not in
// the batch and the batch already holds max_lora adapters.
func (l loraSet) blocks(r *req) bool {
	return l.max > 0 && r.lora != "" && !l.active[r.lora] && len(l.active) >= l.max
}

// loraBlocked counts the waiting requests held by the LoRA budget (vLLM
// counts them as deferred in num_requests_waiting_by_reason).
func (e *engine) loraBlocked() int {
	l, n := e.loraBudget(), 0
	for _, r := range e.waiting {
		if l.blocks(r) {
			n++
		}
	}
	return n
}

// loadLoRA makes adapter a resident on the engine's GPU for a request
// admitted with it: loaded from disk the first time (kept in CPU memory
// after), activated on GPU when it is not there, the least recently used
// GPU adapter moved back to CPU past max_lora.
func (e *engine) loadLoRA(a string) {
	if a == "" || e.sim.lora.MaxLoRA == 0 {
		return
	}
	st := e.stats
	if e.loraLRU == nil {
		e.loraLRU = map[string]string{}
	}
	if _, loaded := e.loraLRU[a]; !loaded {
		st.loraLoad.observe(loraLoadSeconds)
	}
	if e.loraLRU[a] != "gpu" {
		st.loraActivate.observe(loraActivateSeconds)
	}
	e.loraLRU[a] = "gpu"
	e.loraOrder = append(slices.DeleteFunc(e.loraOrder, func(x string) bool { return x == a }), a)
	gpu := 0
	for i := len(e.loraOrder) - 1; i >= 0; i-- {
		if x := e.loraOrder[i]; e.loraLRU[x] == "gpu" {
			if gpu++; gpu > e.sim.lora.MaxLoRA {
				e.loraLRU[x] = "cpu"
			}
		}
	}
}

// The simulated adapter's load (disk to CPU) and activation (CPU to GPU)
// times in seconds.
const (
	loraLoadSeconds     = 0.4
	loraActivateSeconds = 0.02
)
