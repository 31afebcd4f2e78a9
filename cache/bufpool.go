package cache

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// bufPool recycles chunk buffers. Warming 10,000 small files allocated (and
// zeroed) 1.1 GB of buffers that nobody read after they were written to
// disk; allocation, zeroing and the collections they caused were 8% of the
// daemon's CPU. Buffers come in power-of-two classes from minPooledBuf to
// the chunk size; get returns one with stale contents, so callers use only
// what they have wholly overwritten.
//
// Pooled buffers come from an arena outside the Go heap while it has room
// (see arena), then from the heap through sync.Pools.
type bufPool struct {
	arena   *arena      // nil without one
	classes []sync.Pool // classes[i] holds *[]byte of cap minPooledBuf<<i
	// recycled counts the buffers put back (tests check that flights do).
	recycled atomic.Int64
}

const (
	minPooledBuf = 64 << 10
	// Smaller requests get an exact, unpooled buffer: rounding a 1 KB file
	// up to a pooled 64 KiB costs more than it saves when a reader keeps it.
	minPooledRequest = 16 << 10
)

func newBufPool(chunkSize int64) *bufPool {
	n := 1
	for int64(minPooledBuf)<<(n-1) < chunkSize {
		n++
	}
	return &bufPool{classes: make([]sync.Pool, n), arena: newArena(arenaSize, n)}
}

// close releases the arena if every buffer came back (see arena.release).
func (p *bufPool) close() bool {
	return p.arena == nil || p.arena.release()
}

// class is the index of the smallest class holding n bytes, or -1 if none.
func (p *bufPool) class(n int) int {
	if n <= minPooledBuf {
		return 0
	}
	c := bits.Len(uint(n-1)) - bits.Len(uint(minPooledBuf-1))
	if c >= len(p.classes) {
		return -1
	}
	return c
}

// get returns a buffer of length n; its contents are undefined.
func (p *bufPool) get(n int) []byte {
	if n < minPooledRequest {
		return make([]byte, n)
	}
	return p.getPooled(n)
}

// getPooled is get for buffers that must be a pool class (page-aligned,
// with room up to the class's capacity), however small n is.
func (p *bufPool) getPooled(n int) []byte {
	c := p.class(n)
	if c < 0 {
		return make([]byte, n)
	}
	if p.arena != nil {
		if b, ok := p.arena.get(c, minPooledBuf<<c); ok {
			return b[:n]
		}
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, minPooledBuf<<c)
}

// put recycles b. The caller must hold the only reference to it.
func (p *bufPool) put(b []byte) {
	c := p.class(cap(b))
	if c < 0 || cap(b) != minPooledBuf<<c {
		return // not one of ours
	}
	b = b[:0]
	p.recycled.Add(1)
	if p.arena != nil && p.arena.owns(b) {
		p.arena.put(c, b)
		return
	}
	p.classes[c].Put(&b)
}
