package vllmsim

import (
	"cmp"
	"time"
)

// blockPool is the KV cache of one engine: numBlocks blocks of blockSize
// tokens, reference counted, with an LRU queue of free blocks. A full block of
// a request is registered under the hash of its tokens chained to the previous
// block's hash (vLLM's prefix-caching block hash); a free block keeps its hash
// until it is reallocated, so a later request with the same prefix can reuse it.
type blockPool struct {
	blockSize int
	numBlocks int
	ref       []int
	hash      []uint64 // 0 = not registered
	cached    map[uint64]int
	// free list: doubly linked by block id; head = least recently freed (evicted first)
	prev, next []int
	head, tail int
	numFree    int
	caching    bool
	usable     int // numBlocks minus the V1 null block
	// track, when set (--kv-cache-metrics), records block residency.
	track *blockTrack
}

// newBlockPool builds a pool of numBlocks blocks. With nullBlock (the V1
// engine), block 0 is vLLM's null block: never free, never allocated, and
// left out of the usage denominator (BlockPool.get_usage divides by
// num_gpu_blocks - 1).
func newBlockPool(numBlocks, blockSize int, caching, nullBlock bool) *blockPool {
	p := &blockPool{
		blockSize: blockSize, numBlocks: numBlocks, caching: caching, usable: numBlocks,
		ref: make([]int, numBlocks), hash: make([]uint64, numBlocks),
		cached: map[uint64]int{}, prev: make([]int, numBlocks), next: make([]int, numBlocks),
		head: -1, tail: -1,
	}
	first := 0
	if nullBlock {
		first, p.usable = 1, numBlocks-1
		p.ref[0] = 1
	}
	for i := first; i < numBlocks; i++ {
		p.pushFree(i)
	}
	return p
}

func (p *blockPool) pushFree(b int) {
	p.prev[b], p.next[b] = p.tail, -1
	if p.tail >= 0 {
		p.next[p.tail] = b
	} else {
		p.head = b
	}
	p.tail = b
	p.numFree++
}

func (p *blockPool) unlinkFree(b int) {
	if p.prev[b] >= 0 {
		p.next[p.prev[b]] = p.next[b]
	} else {
		p.head = p.next[b]
	}
	if p.next[b] >= 0 {
		p.prev[p.next[b]] = p.prev[b]
	} else {
		p.tail = p.prev[b]
	}
	p.numFree--
}

// usage is vLLM's kv_cache_usage_perc: 1 - free/usable (cached-but-free
// blocks count as free; V1 leaves the null block out of the total).
func (p *blockPool) usage() float64 {
	if p.usable <= 0 {
		return 0
	}
	return 1 - float64(p.numFree)/float64(p.usable)
}

// alloc takes n free blocks (evicting cached hashes) or returns nil if fewer are free.
func (p *blockPool) alloc(n int) []int {
	if n > p.numFree {
		return nil
	}
	out := make([]int, 0, n)
	for i := 0; i < n; i++ {
		b := p.head
		p.unlinkFree(b)
		if h := p.hash[b]; h != 0 {
			if p.cached[h] == b {
				delete(p.cached, h)
			}
			p.hash[b] = 0
		}
		p.track.allocated(b)
		p.ref[b] = 1
		out = append(out, b)
	}
	return out
}

// release drops one reference of each block; blocks reaching 0 go to the free
// queue tail in reverse order (a request's last blocks are evicted first, as in vLLM).
func (p *blockPool) release(blocks []int) {
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		p.ref[b]--
		if p.ref[b] == 0 {
			p.track.accessed(b, false)
			p.pushFree(b)
		}
	}
}

// blockHash chains a block's tokens to its parent hash (FNV-style mix). Never 0.
func blockHash(parent uint64, tokens []int) uint64 {
	h := parent ^ 0xcbf29ce484222325
	for _, t := range tokens {
		h ^= uint64(t)
		h *= 0x100000001b3
		h ^= h >> 29
	}
	return cmp.Or(h, 1)
}

// lookup takes a reference on the cached blocks matching the longest prefix
// of hashes (a request's chained full-block hashes), at most maxBlocks.
func (p *blockPool) lookup(hashes []uint64, maxBlocks int) (blocks []int) {
	if !p.caching {
		return nil
	}
	for k := 0; k < maxBlocks && k < len(hashes); k++ {
		b, ok := p.cached[hashes[k]]
		if !ok {
			break
		}
		if p.ref[b] == 0 {
			p.unlinkFree(b)
		}
		p.track.accessed(b, true)
		p.ref[b]++
		blocks = append(blocks, b)
	}
	return blocks
}

// peek counts the leading hashes that are cached, at most maxBlocks, without
// taking references.
func (p *blockPool) peek(hashes []uint64, maxBlocks int) int {
	if !p.caching {
		return 0
	}
	n := 0
	for n < maxBlocks && n < len(hashes) {
		if _, ok := p.cached[hashes[n]]; !ok {
			break
		}
		n++
	}
	return n
}

// chainHashes extends hashes (the chained hashes of tokens' first full
// blocks) to cover every full block of tokens.
func chainHashes(hashes []uint64, tokens []int, bs int) []uint64 {
	for k := len(hashes); (k+1)*bs <= len(tokens); k++ {
		var parent uint64
		if k > 0 {
			parent = hashes[k-1]
		}
		hashes = append(hashes, blockHash(parent, tokens[k*bs:(k+1)*bs]))
	}
	return hashes
}

// register records block b (full, holding tokens) under its chained hash.
func (p *blockPool) register(b int, h uint64) {
	if !p.caching {
		return
	}
	p.hash[b] = h
	if _, ok := p.cached[h]; !ok {
		p.cached[h] = b
	}
}

// blockTrack records KV block residency as vLLM's --kv-cache-metrics does
// (every block sampled): a block's lifetime from allocation to eviction,
// its idle time before eviction, and the gaps between reuses of its cached
// content.
type blockTrack struct {
	now                   func() time.Time
	observe               func(hist string, v float64)
	allocatedAt, accessAt []time.Time
}

func newBlockTrack(numBlocks int, now func() time.Time, observe func(string, float64)) *blockTrack {
	return &blockTrack{now: now, observe: observe, allocatedAt: make([]time.Time, numBlocks), accessAt: make([]time.Time, numBlocks)}
}

// allocated: block b is taken for new content; what it held is evicted.
func (t *blockTrack) allocated(b int) {
	if t == nil {
		return
	}
	now := t.now()
	if !t.allocatedAt[b].IsZero() {
		t.observe(hKVBlockLifetime, now.Sub(t.allocatedAt[b]).Seconds())
		t.observe(hKVBlockIdle, now.Sub(t.accessAt[b]).Seconds())
	}
	t.allocatedAt[b], t.accessAt[b] = now, now
}

// accessed: block b was used (released by its last request, or reused from
// the prefix cache: a reuse gap).
func (t *blockTrack) accessed(b int, reuse bool) {
	if t == nil || t.allocatedAt[b].IsZero() {
		return
	}
	now := t.now()
	if reuse {
		t.observe(hKVBlockReuseGap, now.Sub(t.accessAt[b]).Seconds())
	}
	t.accessAt[b] = now
}
