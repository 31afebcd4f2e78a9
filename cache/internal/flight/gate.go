package flight

import (
	"context"
	"sync"
)

// Gate bounds backend fetches in flight and orders who goes next:
// foreground waiters before background ones, first come first served within
// each. Background fetches may not take the last reserve slots.
//
// Invariant: free >= 0; a waiter is either in waiters or granted, never
// both; a granted waiter owns one slot until it calls release.
type Gate struct {
	mu      sync.Mutex
	free    int
	reserve int
	waiters []*gateWaiter
}

type gateWaiter struct {
	f     Raisable
	ready chan struct{}
}

// Raisable is a fetch whose priority may be raised while it waits.
type Raisable interface {
	Foreground() bool
}

func NewGate(slots, reserve int) *Gate {
	return &Gate{free: slots, reserve: min(reserve, slots-1)}
}

// Acquire takes a slot for f, waiting its turn; it fails only when ctx ends
// first, holding nothing then.
func (g *Gate) Acquire(ctx context.Context, f Raisable) error {
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

// Release gives a slot back.
func (g *Gate) Release() {
	g.mu.Lock()
	g.free++
	g.grant()
	g.mu.Unlock()
}

// Kick re-runs the grant after a waiter's priority was raised.
func (g *Gate) Kick() {
	g.mu.Lock()
	g.grant()
	g.mu.Unlock()
}

func (g *Gate) allows(f Raisable) bool {
	if f.Foreground() {
		return g.free > 0
	}
	return g.free > g.reserve
}

// grant hands free slots to waiters, foreground first; g.mu is held.
func (g *Gate) grant() {
	for g.free > 0 && len(g.waiters) > 0 {
		pick := -1
		for i, w := range g.waiters {
			if w.f.Foreground() {
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
