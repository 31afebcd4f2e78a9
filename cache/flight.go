package cache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Priority orders backend fetches when the fetch slots are all taken.
type Priority int

const (
	// Foreground is a fetch someone is waiting for now: a read that missed,
	// or a warm request.
	Foreground Priority = iota
	// Background is a fetch for the future: readahead and prefetch. It
	// never takes the slots reserved for foreground fetches, and a waiting
	// foreground fetch always gets the next free slot first.
	Background
)

// flight is one chunk load in progress. Callers that want the same chunk
// while it runs join it instead of starting another (groupcache's
// singleflight, with a priority a joiner can raise).
type flight struct {
	// ready is closed once res and err are set: a fetched chunk is handed
	// to its waiters before it is written to the cache. The flight stays
	// joinable until it has stored the chunk (done), so a reader arriving
	// in between shares it rather than fetching again.
	ready chan struct{}
	// counted is closed once the cache has decided whether to keep the
	// chunk and, if so, counted it against its capacity (or the flight
	// failed): a warm's reservation for the chunk may go then, neither
	// earlier (a gap where nobody counts it let a warm over-admit) nor
	// once written (it would count twice meanwhile).
	counted   chan struct{}
	countOnce sync.Once
	done      chan struct{}
	publish   sync.Once
	res       chunkResult
	err       error
	// foreground is set when any caller of the flight is a foreground one:
	// a prefetch that a read has caught up with waits at the read's
	// priority.
	foreground atomic.Bool
	// readers is set (under flightGroup.mu) when a caller that reads
	// res.data joins; stage is set by the flight when its chunk was fetched
	// ahead of any reader. When the flight ends with no reader joined, its
	// buffer goes to the staging area (stage) or back to the pool: nobody
	// else can reach it then, since callers that don't read get res
	// without data.
	readers bool
	stage   bool
	// keepRest is set (under flightGroup.mu) when a reader that joined
	// will read the rest of the chunk (a sequential stream, whose reads of
	// one chunk come concurrently and in any order): what its readers
	// left untaken is then staged for it once every reader is done,
	// rather than recycled. key names the chunk for the staging area.
	keepRest bool
	key      chunkID
	// refs counts the reading callers that joined and have not released
	// the flight (flightGroup.release) since: they may still copy from
	// res.data. ended is set when the flight has left the group with refs
	// above zero: the last release then recycles or stages the buffer.
	// Both under flightGroup.mu. Without this, a read that caught up with
	// a prefetch left its buffer to the garbage collector: half the files
	// of a cold epoch, whose allocation, zeroing and collection cost
	// 0.3-0.5 s of CPU per 10,000 small files.
	refs  int
	ended bool
	// took sums the bytes its readers copied out (under flightGroup.mu):
	// a staged buffer keeps only what is still to be read. A stream's
	// read at the chunk's end may be served here, before the chunk is
	// staged, and the rest then must not wait in the staging area for a
	// read that already happened.
	took int64
}

// set publishes the flight's result to its waiters; only the first call
// counts.
func (f *flight) set(res chunkResult, err error) {
	f.publish.Do(func() {
		f.res, f.err = res, err
		close(f.ready)
	})
}

// staged reports whether the flight's buffer, once nobody reads it, goes
// to the staging area rather than back to the pool: it was fetched ahead
// of any reader, or a stream reader wants the rest of it. The staging
// area keeps it only if some of its bytes were not taken yet (took).
// Under flightGroup.mu.
func (f *flight) staged() bool { return f.keepRest || (f.stage && !f.readers) }

// markCounted closes counted; later calls do nothing.
func (f *flight) markCounted() { f.countOnce.Do(func() { close(f.counted) }) }

var errFlightUnset = errors.New("cache: flight ended without a result")

// flightGroup runs at most one flight per key, each on one of its workers.
type flightGroup struct {
	workers *workers
	free    func([]byte)                 // recycles a flight's buffer nobody else holds
	stage   func(chunkID, []byte, int64) // hands one to the staging area, with the bytes its readers took
	mu      sync.Mutex
	m       map[chunkID]*flight
}

// join returns the flight for key, starting fn on a worker if none runs.
// A caller that will read res.data says so with reads (and keepRest, if it
// will read the rest of the chunk); the others must not touch it.
// Once nobody reads the buffer any more it is staged or recycled through
// free (see staged). A foreground caller raises the flight's priority, and
// raised says it did so for a flight that was already running (the gate
// must look again).
//
// A caller that reads must call release once it no longer uses res.data
// (whether or not it got to use it), saying how many bytes it took.
func (g *flightGroup) join(key chunkID, prio Priority, reads, keepRest bool, fn func(*flight)) (f *flight, raised bool) {
	g.mu.Lock()
	if f, ok := g.m[key]; ok {
		if reads {
			f.readers = true
			f.refs++
			f.keepRest = f.keepRest || keepRest
		}
		if prio == Foreground && !f.foreground.Swap(true) {
			raised = true
		}
		g.mu.Unlock()
		return f, raised
	}
	if g.m == nil {
		g.m = make(map[chunkID]*flight)
	}
	f = &flight{ready: make(chan struct{}), counted: make(chan struct{}), done: make(chan struct{}), key: key}
	f.foreground.Store(prio == Foreground)
	if reads {
		f.readers = true
		f.refs = 1
		f.keepRest = keepRest
	}
	g.m[key] = f
	g.mu.Unlock()
	g.workers.run(func() {
		fn(f)
		f.set(chunkResult{}, errFlightUnset) // no-op unless fn forgot
		g.mu.Lock()
		delete(g.m, key)
		var recycle []byte
		switch data := f.res.data; {
		case data == nil:
		case f.refs > 0:
			// Readers are still copying: the last one recycles (or
			// stages). A read arriving before then finds the chunk in
			// neither the flight nor the staging area and reads it from
			// its cache file; its bytes are not counted in took, so a
			// staged rest may stay until pushed out.
			f.ended = true
		case f.staged() && g.stage != nil:
			// Staged before the flight leaves g.mu: a reader arriving now
			// finds it either in the flight or in the staging area.
			g.stage(key, data, f.took)
		default:
			recycle = data
		}
		g.mu.Unlock()
		close(f.done)
		if recycle != nil && g.free != nil {
			g.free(recycle)
		}
	})
	return f, false
}

// release ends a reading caller's use of f's result, of which it took
// (copied) took bytes; the last one out of a flight that has ended
// recycles its buffer, or stages it (see staged).
func (g *flightGroup) release(f *flight, took int) {
	g.mu.Lock()
	f.refs--
	f.took += int64(took)
	last := f.refs == 0 && f.ended
	if last && f.staged() && g.stage != nil {
		g.stage(f.key, f.res.data, f.took)
		last = false
	}
	g.mu.Unlock()
	if last && g.free != nil {
		g.free(f.res.data)
	}
}

// fetchGate bounds backend fetches in flight and orders who goes next:
// foreground waiters before background ones, first come first served within
// each. Background fetches may not take the last reserve slots.
//
// Invariant: free >= 0; a waiter is either in waiters or granted, never
// both; a granted waiter owns one slot until it calls release.
type fetchGate struct {
	mu      sync.Mutex
	free    int
	reserve int
	waiters []*gateWaiter
}

type gateWaiter struct {
	f     *flight
	ready chan struct{}
}

func newFetchGate(slots, reserve int) *fetchGate {
	return &fetchGate{free: slots, reserve: min(reserve, slots-1)}
}

// acquire takes a slot for f, waiting its turn; it fails only when ctx ends
// first, holding nothing then.
func (g *fetchGate) acquire(ctx context.Context, f *flight) error {
	g.mu.Lock()
	if len(g.waiters) == 0 && g.allows(f) {
		g.free--
		g.mu.Unlock()
		return nil
	}
	w := &gateWaiter{f: f, ready: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	g.grant()
	g.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, x := range g.waiters {
		if x == w {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			return ctx.Err()
		}
	}
	// Granted while giving up: hand the slot on.
	g.free++
	g.grant()
	return ctx.Err()
}

func (g *fetchGate) release() {
	g.mu.Lock()
	g.free++
	g.grant()
	g.mu.Unlock()
}

// kick re-runs the grant after a waiter's priority was raised.
func (g *fetchGate) kick() {
	g.mu.Lock()
	g.grant()
	g.mu.Unlock()
}

func (g *fetchGate) allows(f *flight) bool {
	if f.foreground.Load() {
		return g.free > 0
	}
	return g.free > g.reserve
}

// grant hands free slots to waiters, foreground first; g.mu is held.
func (g *fetchGate) grant() {
	for g.free > 0 && len(g.waiters) > 0 {
		pick := -1
		for i, w := range g.waiters {
			if w.f.foreground.Load() {
				pick = i
				break
			}
		}
		if pick < 0 {
			if g.free <= g.reserve {
				return
			}
			pick = 0
		}
		w := g.waiters[pick]
		g.waiters = append(g.waiters[:pick], g.waiters[pick+1:]...)
		g.free--
		close(w.ready)
	}
}
