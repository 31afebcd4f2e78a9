package bufs

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Pool recycles chunk buffers: most are not read after they were written
// to disk, and allocating, zeroing and collecting them took a share of the
// daemon's CPU worth saving. Buffers come in power-of-two classes from minPooledBuf to
// the chunk size; get returns one with stale contents, so callers use only
// what they have wholly overwritten.
//
// Pooled buffers come from an arena outside the Go heap while it has room
// (see arena), then from the heap through sync.Pools.
//
// A buffer has one holder at a time (a flight and its readers, the staging
// area, a warm): the holders hand it on by construction (Buf, the
// cache's staging area). The pool also keeps the address of every buffer it has
// handed out and not had back, and put refuses one that is not out (given
// back twice, or never handed out): a buffer given back twice would
// otherwise sit on a free list twice and be handed to two holders, who
// would overwrite each other's bytes. A refusal is a bug in the cache: it
// is counted (doubleReleases, in Stats) and logged. What this can't catch
// is a stale holder giving a buffer back after it was handed out anew (the
// address is out again); that the holders never do is what the poisoned
// stress test (TestRecycledBuffersNeverReachReaders) and the race detector
// check.
type Pool struct {
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

	// doubleRelease, if set, hears of each refusal (the cache logs it).
	doubleRelease func()
}

const (
	minPooledBuf = 64 << 10
	// Smaller requests get an exact, unpooled buffer: rounding a 1 KB file
	// up to a pooled 64 KiB costs more than it saves when a reader keeps it.
	minPooledRequest = 16 << 10
)

func NewPool(chunkSize int64, doubleRelease func()) *Pool {
	n := 1
	for int64(minPooledBuf)<<(n-1) < chunkSize {
		n++
	}
	return &Pool{classes: make([]sync.Pool, n), arena: newArena(arenaSize, n), out: make(map[uintptr]struct{}), doubleRelease: doubleRelease}
}

// Close releases the arena if every buffer came back (see arena.release).
func (p *Pool) Close() bool {
	return p.arena == nil || p.arena.release()
}

// class is the index of the smallest class holding n bytes, or -1 if none.
func (p *Pool) class(n int) int {
	if n <= minPooledBuf {
		return 0
	}
	c := bits.Len(uint(n-1)) - bits.Len(uint(minPooledBuf-1))
	if c >= len(p.classes) {
		return -1
	}
	return c
}

// Get returns a buffer of length n; its contents are undefined.
func (p *Pool) Get(n int) []byte {
	if n < minPooledRequest {
		return make([]byte, n)
	}
	return p.GetPooled(n)
}

// GetPooled is Get for buffers that must be a pool class (page-aligned,
// with room up to the class's capacity), however small n is.
func (p *Pool) GetPooled(n int) []byte {
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

// takeBack ends b's time out; false if it was not out (see Pool).
func (p *Pool) takeBack(b []byte) bool {
	a := bufAddr(b)
	p.outMu.Lock()
	defer p.outMu.Unlock()
	if _, ok := p.out[a]; !ok {
		return false
	}
	delete(p.out, a)
	return true
}

// Put recycles b. The caller must hold the only reference to it; a
// buffer that is not out is refused (see Pool).
func (p *Pool) Put(b []byte) {
	c := p.class(cap(b))
	if c < 0 || cap(b) != minPooledBuf<<c {
		return // not one of ours
	}
	if !p.takeBack(b) {
		p.doubleReleases.Add(1)
		if p.doubleRelease != nil {
			p.doubleRelease()
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

// SetPoison makes Put fill every buffer it takes back with garbage, so
// that a holder still reading one after its release reads garbage: for
// stress tests.
func (p *Pool) SetPoison(on bool) { p.poison = on }

// Recycled is the number of buffers put back.
func (p *Pool) Recycled() int64 { return p.recycled.Load() }

// DoubleReleases is the number of buffers put back that were not out (a
// bug in a holder, refused).
func (p *Pool) DoubleReleases() int64 { return p.doubleReleases.Load() }

// Arena reports whether the pool has an arena, and how many of its
// buffers are out (-1 once it is unmapped).
func (p *Pool) Arena() (has bool, out int) {
	if p.arena == nil {
		return false, 0
	}
	p.arena.mu.Lock()
	defer p.arena.mu.Unlock()
	if p.arena.mem == nil {
		return true, -1
	}
	return true, p.arena.out
}
