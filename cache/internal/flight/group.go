package flight

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Flight is one load in progress. Callers that want the same key while it
// runs join it instead of starting another (groupcache's singleflight,
// with a priority a joiner can raise).
//
// Val is the caller's state for the flight, made by the group's New when
// the flight starts. What Join's joined and the group's Left do to it runs
// under the group's lock, so a caller that joins is ordered with the
// flight's leaving: either it joined before, or it finds no flight.
type Flight[T any] struct {
	Val T
	// ready is closed by Publish: the result (in Val) and err are set.
	// The flight stays joinable until its run returns (done), so a caller
	// arriving in between shares it rather than loading again.
	ready   chan struct{}
	done    chan struct{}
	publish sync.Once
	err     error
	// foreground is set when any caller of the flight is a foreground
	// one: a background load that a foreground caller has caught up with
	// waits at its priority.
	foreground atomic.Bool
}

// Ready is closed once the result is published.
func (f *Flight[T]) Ready() <-chan struct{} { return f.ready }

// Done is closed once the flight has left its group.
func (f *Flight[T]) Done() <-chan struct{} { return f.done }

// Err is the flight's error; valid once Ready is closed.
func (f *Flight[T]) Err() error { return f.err }

// Foreground reports whether a foreground caller has joined.
func (f *Flight[T]) Foreground() bool { return f.foreground.Load() }

// Publish hands the result (set in Val before the call) and err to the
// waiters; only the first call counts.
func (f *Flight[T]) Publish(err error) {
	f.publish.Do(func() {
		f.err = err
		close(f.ready)
	})
}

// ErrUnset ends a flight whose run returned without publishing.
var ErrUnset = errors.New("cache: flight ended without a result")

// Group runs at most one flight per key, each on one of its workers.
type Group[K comparable, T any] struct {
	workers *Workers
	newVal  func(K) T
	left    func(K, T)

	mu sync.Mutex
	m  map[K]*Flight[T]
}

// NewGroup is a group running its flights on workers. newVal makes a
// flight's Val when it starts; left, if not nil, is told (under the
// group's lock) when a flight has left the group, once its run returned.
func NewGroup[K comparable, T any](workers *Workers, newVal func(K) T, left func(K, T)) *Group[K, T] {
	return &Group[K, T]{workers: workers, newVal: newVal, left: left, m: make(map[K]*Flight[T])}
}

// Join returns the flight for key, starting run on a worker if none runs.
// joined, if not nil, is called with the flight's Val under the group's
// lock, whether the flight is new or running. A foreground caller raises
// the flight's priority, and raised says it did so for a flight that was
// already running (a gate it waits at must look again).
func (g *Group[K, T]) Join(key K, foreground bool, joined func(T), run func(*Flight[T])) (f *Flight[T], raised bool) {
	g.mu.Lock()
	if f, ok := g.m[key]; ok {
		if joined != nil {
			joined(f.Val)
		}
		if foreground && !f.foreground.Swap(true) {
			raised = true
		}
		g.mu.Unlock()
		return f, raised
	}
	f = &Flight[T]{Val: g.newVal(key), ready: make(chan struct{}), done: make(chan struct{})}
	f.foreground.Store(foreground)
	if joined != nil {
		joined(f.Val)
	}
	g.m[key] = f
	g.mu.Unlock()
	g.workers.Run(func() {
		run(f)
		f.Publish(ErrUnset) // no-op unless run forgot
		g.mu.Lock()
		delete(g.m, key)
		if g.left != nil {
			g.left(key, f.Val)
		}
		g.mu.Unlock()
		close(f.done)
	})
	return f, false
}

// Any returns a flight of the group, nil if none runs.
func (g *Group[K, T]) Any() *Flight[T] {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, f := range g.m {
		return f
	}
	return nil
}

// Running returns key's flight, nil if none runs.
func (g *Group[K, T]) Running(key K) *Flight[T] {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m[key]
}

// Close stops the group's idle workers and waits for busy ones to finish
// their flight.
func (g *Group[K, T]) Close() { g.workers.Close() }
