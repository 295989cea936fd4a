package vllmsim

import (
	"math"
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

	state        reqState
	numComputed  int
	blocks       []int
	registered   int      // blocks[0:registered] are registered in the prefix cache
	tokHashes    []uint64 // chained hashes of every full block of tokens (memoized)
	everSched    bool
	preemptions  int
	cachedTokens int // prefix-cache hit on first scheduling
	computedNew  int // prompt tokens computed on first prefill (excluding cache hits)

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
	stats   *engineStats

	busy    bool
	stepEnd time.Time
	batch   []schedItem
	stepDur time.Duration
	blocked bool // nothing schedulable until something changes
}

func (e *engine) hasWork() bool { return len(e.waiting)+len(e.running) > 0 }

func (e *engine) load() int { return len(e.waiting) + len(e.running) }

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
	r.numComputed = 0
	r.state = stateWaiting
	r.preemptions++
	e.stats.preemptions++
	e.waiting = append([]*req{r}, e.waiting...)
}

func removeReq(list []*req, r *req) []*req {
	for i, x := range list {
		if x == r {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// schedule builds the next batch like vLLM V1: running requests first (decode
// or the next prefill chunk), preempting from the tail of the running list when
// blocks run out; then, if nothing was preempted, waiting requests in FCFS
// order while the token budget, max_num_seqs and free blocks allow.
func (e *engine) schedule(now time.Time) []schedItem {
	cfg := &e.sim.cfg
	budget := cfg.MaxNumBatchedTokens
	var batch []schedItem
	preempted := false
	for i := 0; i < len(e.running) && budget > 0; {
		r := e.running[i]
		n := r.numTokens() - r.numComputed
		if n > budget {
			n = budget
		}
		ok := true
		for !e.allocate(r, n) {
			victim := e.running[len(e.running)-1]
			e.running = e.running[:len(e.running)-1]
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
		batch = append(batch, schedItem{r: r, numNew: n})
		e.registerFull(r, r.numComputed+n)
		budget -= n
		i++
	}
	if preempted && len(batch) > 0 {
		return batch // vLLM admits no waiting request in a step that preempted
	}
	for len(e.waiting) > 0 && budget > 0 && len(e.running) < cfg.MaxNumSeqs {
		r := e.waiting[0]
		if r.numComputed == 0 {
			bs := e.pool.blockSize
			r.tokHashes = chainHashes(r.tokHashes, r.tokens, bs)
			r.blocks = e.pool.lookup(r.tokHashes, (r.numTokens()-1)/bs)
			r.registered = len(r.blocks)
			r.numComputed = len(r.blocks) * bs
		}
		n := r.numTokens() - r.numComputed
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
			}
		}
		e.waiting = e.waiting[1:]
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

// stepDuration is the cost model: memory-bound decode plus compute-bound prefill.
func (e *engine) stepDuration(batch []schedItem) time.Duration {
	var prefill, ctx int
	for _, it := range batch {
		if it.numNew > 1 || it.r.numComputed+it.numNew <= it.r.promptLen {
			prefill += it.numNew
		}
		ctx += it.r.numComputed + it.numNew
	}
	return e.sim.costLocked(len(batch), ctx, prefill)
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
	iterTokens, outputs := 0, 0
	for _, it := range e.batch {
		r := it.r
		if r.state != stateRunning {
			continue // aborted during the step
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
		e.emitToken(r, t)
		iterTokens++
		outputs++
	}
	if v0 || outputs > 0 {
		e.stats.iterationTokens.observe(float64(iterTokens))
	}
	e.stats.steps++
	e.stats.stepSeconds += e.stepDur.Seconds()
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

// emitToken generates one token for r at time t and records its statistics.
func (e *engine) emitToken(r *req, t time.Time) {
	st := e.stats
	n := r.outputs() + 1
	eos := !r.ignoreEOS && r.eosAt > 0 && n >= r.eosAt && n > r.minTokens
	var id int
	var text string
	if eos {
		id = EOSToken
	} else {
		id, text = outputToken(splitmix(&r.rng))
	}
	r.tokens = append(r.tokens, id)
	st.generationTokens++
	if n == 1 {
		r.firstTok = t
		r.computedNew = r.promptLen - r.cachedTokens
		if e.sim.version.name != MetricsV0 { // V1: the whole prompt at the first token
			st.promptTokens += float64(r.promptLen)
		}
		st.promptCacheHit += float64(r.cachedTokens)
		st.promptCompute += float64(r.promptLen - r.cachedTokens)
		st.hist[hTTFT].observe(t.Sub(r.arrival).Seconds())
	} else {
		itl := t.Sub(r.lastTok).Seconds()
		st.hist[hITL].observe(itl)
		r.itlSum += itl
		r.itlN++
		r.itlMax = math.Max(r.itlMax, itl)
	}
	r.lastTok = t
	switch {
	case eos:
		r.finish = FinishStop
	case n >= r.maxTokens:
		r.finish = FinishLength
	}
	if r.finish != "" {
		e.finishReq(r, t)
	}
	if r.sink != nil {
		r.sink.push(Output{TokenIDs: []int{id}, Text: text, Time: t, FinishReason: r.finish,
			PromptTokens: r.promptLen, CompletionTokens: n, CachedTokens: r.cachedTokens})
	}
}

// finishReq removes r from the engine and records the per-request histograms.
func (e *engine) finishReq(r *req, t time.Time) {
	r.state = stateFinished
	e.running = removeReq(e.running, r)
	e.waiting = removeReq(e.waiting, r)
	e.freeBlocks(r)
	e.blocked = false
	st := e.stats
	st.success[r.finish]++
	gen := r.outputs()
	st.hist[hE2E].observe(t.Sub(r.arrival).Seconds())
	st.hist[hQueue].observe(r.scheduled.Sub(r.arrival).Seconds())
	st.hist[hInference].observe(r.lastTok.Sub(r.scheduled).Seconds())
	st.hist[hPrefill].observe(r.firstTok.Sub(r.scheduled).Seconds())
	decode := r.lastTok.Sub(r.firstTok).Seconds()
	st.hist[hDecode].observe(decode)
	tpot := 0.0
	if gen > 1 {
		tpot = decode / float64(gen-1)
	}
	st.hist[hReqTPOT].observe(tpot)
	st.hist[hReqPrompt].observe(float64(r.promptLen))
	st.hist[hReqGen].observe(float64(gen))
	st.hist[hParamsN].observe(1)
	st.hist[hMaxGen].observe(float64(gen))
	st.hist[hParamsMaxTokens].observe(float64(r.maxTokens))
	st.hist[hPrefillKV].observe(float64(r.computedNew))
	e.sim.recordFinished(e, r, tpot)
}

// abort removes r without recording finished-request statistics (a
// frontend-side abort, e.g. client disconnect).
func (e *engine) abort(r *req) {
	if r.state == stateFinished {
		return
	}
	r.state = stateFinished
	r.finish = FinishAbort
	e.running = removeReq(e.running, r)
	e.waiting = removeReq(e.waiting, r)
	e.freeBlocks(r)
	e.blocked = false
}
