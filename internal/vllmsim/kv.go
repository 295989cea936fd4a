package vllmsim

import "hash/fnv"

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
}

func newBlockPool(numBlocks, blockSize int, caching bool) *blockPool {
	p := &blockPool{
		blockSize: blockSize, numBlocks: numBlocks, caching: caching,
		ref: make([]int, numBlocks), hash: make([]uint64, numBlocks),
		cached: map[uint64]int{}, prev: make([]int, numBlocks), next: make([]int, numBlocks),
		head: -1, tail: -1,
	}
	for i := 0; i < numBlocks; i++ {
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

// usage is vLLM's kv_cache_usage_perc: 1 - free/total (cached-but-free blocks count as free).
func (p *blockPool) usage() float64 { return 1 - float64(p.numFree)/float64(p.numBlocks) }

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
			p.pushFree(b)
		}
	}
}

// blockHash chains a block's tokens to its parent hash. Never 0.
func blockHash(parent uint64, tokens []int) uint64 {
	h := fnv.New64a()
	var buf [8]byte
	put := func(v uint64) {
		for i := range buf {
			buf[i] = byte(v >> (8 * i))
		}
		_, _ = h.Write(buf[:])
	}
	put(parent)
	for _, t := range tokens {
		put(uint64(t))
	}
	s := h.Sum64()
	if s == 0 {
		s = 1
	}
	return s
}

// lookup returns the cached blocks holding the longest prefix of tokens, at
// most maxTokens long (whole blocks only), taking a reference on each.
func (p *blockPool) lookup(tokens []int, maxTokens int) (blocks []int, hashes []uint64) {
	if !p.caching {
		return nil, nil
	}
	var parent uint64
	for end := p.blockSize; end <= maxTokens; end += p.blockSize {
		h := blockHash(parent, tokens[end-p.blockSize:end])
		b, ok := p.cached[h]
		if !ok {
			break
		}
		if p.ref[b] == 0 {
			p.unlinkFree(b)
		}
		p.ref[b]++
		blocks = append(blocks, b)
		hashes = append(hashes, h)
		parent = h
	}
	return blocks, hashes
}

// peek is lookup without taking references: the number of tokens a prompt
// would find cached right now.
func (p *blockPool) peek(tokens []int, maxTokens int) int {
	if !p.caching {
		return 0
	}
	var parent uint64
	n := 0
	for end := p.blockSize; end <= maxTokens; end += p.blockSize {
		h := blockHash(parent, tokens[end-p.blockSize:end])
		if _, ok := p.cached[h]; !ok {
			break
		}
		n = end
		parent = h
	}
	return n
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
