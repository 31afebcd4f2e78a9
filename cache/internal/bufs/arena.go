package bufs

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// arenaSize is the most memory a cache's chunk buffers take outside the Go
// heap (see arena). It covers the staging area's 256 MiB and a full round
// of fetches in flight; buffers beyond it come from the Go heap.
const arenaSize = 512 << 20

// hugePage is the transparent huge page size the arena is aligned to.
const hugePage = 2 << 20

// arena hands out chunk buffers from one anonymous mapping outside the Go
// heap, advised for transparent huge pages (MADV_HUGEPAGE).
//
// Why: the first touch of a fresh 4 KiB page is costly on VMs whose host
// reclaims the guest's free memory, and the Go heap, which the runtime no
// longer advises for huge pages, kept faulting in fresh pages for chunk
// buffers as it grew and as the scavenger returned what a collection
// freed; that CPU came out of the core serving hits. One 2 MiB fault
// replaces 512 small ones.
//
// A fresh page is paid for when first touched, and a touch is an ordinary
// memory write: the goroutine taking the fault keeps its P. With one P (a
// daemon given one CPU) every FUSE request waited behind it while the
// arena grew. So a populator goroutine has the kernel fault the arena in
// ahead of use (MADV_POPULATE_WRITE, a system call, during which the
// runtime runs other goroutines), keeping populateAhead bytes past what is
// carved off populated. Populating the whole arena up front would take
// its full size from every daemon at start, and time. On a kernel without
// MADV_POPULATE_WRITE (before 5.14) pages fault in on first touch, as
// before. (Figures: docs/benchmarks-history.md, "cache".)
//
// Memory is carved off in order and never returned to the kernel while the
// cache is open: a buffer given back goes on its class's free list. The
// daemon's resident memory therefore holds its peak buffer use, at most
// arenaSize. Close unmaps the arena only when every buffer has come back;
// otherwise it leaves it mapped, so a buffer still held can't fault.
//
// Invariants: every buffer handed out is page aligned, lies wholly inside
// mem, and has the capacity of its class; a buffer is on a free list at
// most once (callers give back only buffers they hold the only reference
// to, as with Pool); populated only grows. mu guards used, populated,
// free, out and mem's mapping. The populator (owned by the arena, stopped
// by release before anything is unmapped) reads mem without mu: only
// release changes it, and only after the populator has stopped.
type arena struct {
	mapping []byte  // what mmap returned, for munmap
	base    uintptr // mem's start; base and size never change
	size    int

	mu        sync.Mutex
	mem       []byte     // mapping from base, aligned to hugePage; nil once released
	used      int        // bytes of mem carved into buffers
	populated int        // bytes of mem from its start populated by the populator
	free      [][][]byte // per class, buffers given back (len 0, cap of the class)
	out       int        // buffers handed out and not given back

	progress *sync.Cond    // on mu: populated grew, or the populator stopped
	poke     chan struct{} // wakes the populator (capacity 1)
	stop     chan struct{} // closed to stop the populator
	stopped  chan struct{} // closed when the populator has returned
	stopOnce sync.Once
}

const (
	// populateAhead is how far past the carved-off part the populator
	// keeps the arena populated: about half a second of a cold epoch's
	// fresh buffers.
	populateAhead = 64 << 20
	// populateStep is the span of one MADV_POPULATE_WRITE: short calls,
	// so the populator's thread gives way often.
	populateStep = 4 << 20
)

// newArena maps an arena of size bytes for classes buffer classes; nil if
// the kernel refuses the mapping (buffers then all come from the heap).
func newArena(size, classes int) *arena {
	m, err := unix.Mmap(-1, 0, size+hugePage, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	off := int((hugePage - start%hugePage) % hugePage)
	mem := m[off : off+size : off+size]
	// Without THP (or with it off) this fails or does nothing: small
	// pages, as on the heap.
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	a := &arena{mapping: m, mem: mem, base: start + uintptr(off), size: size, free: make([][][]byte, classes),
		poke: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	a.progress = sync.NewCond(&a.mu)
	go a.populator()
	return a
}

// populator keeps populateAhead bytes past a.used populated, until stopped
// or the kernel refuses.
func (a *arena) populator() {
	defer func() {
		close(a.stopped)
		a.mu.Lock()
		a.progress.Broadcast()
		a.mu.Unlock()
	}()
	for {
		from, to, ok := a.nextPopulate()
		if !ok {
			select {
			case <-a.poke:
				continue
			case <-a.stop:
				return
			}
		}
		if err := unix.Madvise(a.mem[from:to], unix.MADV_POPULATE_WRITE); err != nil {
			return // unsupported here: pages fault in on first touch
		}
		a.mu.Lock()
		a.populated = to
		a.progress.Broadcast()
		a.mu.Unlock()
		select {
		case <-a.stop:
			return
		default:
		}
	}
}

// nextPopulate is the next span for the populator, if any is due.
func (a *arena) nextPopulate() (from, to int, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Nothing before the first buffer: a daemon that only serves hot
	// files (or is only mounted, listed and declared to) never needs
	// the arena, and populating ahead would hold 64 MiB of its memory.
	target := min(a.used+populateAhead, a.size)
	if a.mem == nil || a.used == 0 || a.populated >= target {
		return 0, 0, false
	}
	return a.populated, min(a.populated+populateStep, target), true
}

// waitPopulated waits until n bytes are populated or the populator has
// stopped, and returns the bytes populated.
func (a *arena) waitPopulated(n int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.populated < n {
		select {
		case <-a.stopped:
			return a.populated
		default:
		}
		a.progress.Wait()
	}
	return a.populated
}

// stopPopulating stops the populator and waits for it.
func (a *arena) stopPopulating() {
	a.stopOnce.Do(func() { close(a.stop) })
	<-a.stopped
}

// get returns a buffer of class c (capacity size) with stale contents, or
// false when the arena is used up and has none of that class free.
func (a *arena) get(c, size int) ([]byte, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem == nil {
		return nil, false
	}
	if l := a.free[c]; len(l) > 0 {
		b := l[len(l)-1]
		a.free[c] = l[:len(l)-1]
		a.out++
		return b, true
	}
	if a.used+size > len(a.mem) {
		return nil, false
	}
	b := a.mem[a.used : a.used : a.used+size]
	a.used += size
	a.out++
	if a.used+populateAhead/2 > a.populated && a.populated < a.size {
		select {
		case a.poke <- struct{}{}:
		default:
		}
	}
	return b, true
}

// owns reports whether b's memory lies in the arena's range. (After
// release the range may be reused by the heap; put then drops b.)
func (a *arena) owns(b []byte) bool {
	if cap(b) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= a.base && p < a.base+uintptr(a.size)
}

// put gives back b, a buffer of class c from get.
func (a *arena) put(c int, b []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem == nil {
		return // released: b can only be a heap buffer now at this address
	}
	a.free[c] = append(a.free[c], b[:0])
	a.out--
}

// release stops the populator and unmaps the arena if every buffer has
// come back, and reports whether it did. After it, get hands out nothing.
func (a *arena) release() bool {
	a.stopPopulating()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem == nil {
		return true
	}
	if a.out != 0 {
		return false
	}
	a.free = nil
	a.mem = nil
	return unix.Munmap(a.mapping) == nil
}
