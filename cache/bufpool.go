package cache

import (
	"log/slog"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
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
//
// A buffer has one holder at a time (a flight and its readers, the staging
// area, a warm): the holders hand it on by construction (flight.go,
// staging.go). The pool also keeps the address of every buffer it has
// handed out and not had back, and put refuses one that is not out (given
// back twice, or never handed out): a buffer given back twice would
// otherwise sit on a free list twice and be handed to two holders, who
// would overwrite each other's bytes. A refusal is a bug in the cache: it
// is counted (doubleReleases, in Stats) and logged. What this can't catch
// is a stale holder giving a buffer back after it was handed out anew (the
// address is out again); that the holders never do is what the poisoned
// stress test (TestRecycledBuffersNeverReachReaders) and the race detector
// check.
type bufPool struct {
	arena   *arena      // nil without one
	classes []sync.Pool // classes[i] holds *[]byte of cap minPooledBuf<<i
	// recycled counts the buffers put back (tests check that flights do).
	recycled atomic.Int64
	// doubleReleases counts buffers put back that were not out.
	doubleReleases atomic.Int64
	// poison, set by tests, fills every buffer put back, so that a holder
	// still reading one after its release reads garbage.
	poison bool

	outMu sync.Mutex
	out   map[uintptr]struct{} // buffers handed out, by address

	log        *slog.Logger
	doubleWarn rateLimitedLog
}

const (
	minPooledBuf = 64 << 10
	// Smaller requests get an exact, unpooled buffer: rounding a 1 KB file
	// up to a pooled 64 KiB costs more than it saves when a reader keeps it.
	minPooledRequest = 16 << 10
)

func newBufPool(chunkSize int64, log *slog.Logger) *bufPool {
	n := 1
	for int64(minPooledBuf)<<(n-1) < chunkSize {
		n++
	}
	return &bufPool{classes: make([]sync.Pool, n), arena: newArena(arenaSize, n), out: make(map[uintptr]struct{}), log: log}
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
	var b []byte
	if p.arena != nil {
		b, _ = p.arena.get(c, minPooledBuf<<c)
	}
	if b == nil {
		if pb, ok := p.classes[c].Get().(*[]byte); ok {
			b = *pb
		} else {
			b = make([]byte, 0, minPooledBuf<<c)
		}
	}
	p.outMu.Lock()
	p.out[bufAddr(b)] = struct{}{}
	p.outMu.Unlock()
	return b[:n]
}

// bufAddr names a pooled buffer (cap > 0) by its first byte's address.
func bufAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b[:1]))) }

// takeBack ends b's time out; false if it was not out (see bufPool).
func (p *bufPool) takeBack(b []byte) bool {
	a := bufAddr(b)
	p.outMu.Lock()
	defer p.outMu.Unlock()
	if _, ok := p.out[a]; !ok {
		return false
	}
	delete(p.out, a)
	return true
}

// put recycles b. The caller must hold the only reference to it; a
// buffer that is not out is refused (see bufPool).
func (p *bufPool) put(b []byte) {
	c := p.class(cap(b))
	if c < 0 || cap(b) != minPooledBuf<<c {
		return // not one of ours
	}
	if !p.takeBack(b) {
		p.doubleReleases.Add(1)
		if p.log != nil {
			p.doubleWarn.warn(p.log, "cache: a chunk buffer was given back twice (a bug); refused, so it can't reach two holders")
		}
		return
	}
	if p.poison {
		full := b[:cap(b)]
		for i := range full {
			full[i] = 0xdb
		}
	}
	b = b[:0]
	p.recycled.Add(1)
	if p.arena != nil && p.arena.owns(b) {
		p.arena.put(c, b)
		return
	}
	p.classes[c].Put(&b)
}
