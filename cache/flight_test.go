package cache

import (
	"context"
	"runtime"
	"testing"
)

// acquireAsync starts an acquire and returns a channel closed once granted.
func acquireAsync(g *fetchGate, f *flight) chan struct{} {
	done := make(chan struct{})
	go func() {
		if err := g.acquire(context.Background(), f); err == nil {
			close(done)
		}
	}()
	return done
}

// queued waits until n waiters are queued (the gate's own state, read
// under its lock, is the synchronisation: no sleeps).
func queued(g *fetchGate, n int) {
	for {
		g.mu.Lock()
		l := len(g.waiters)
		g.mu.Unlock()
		if l >= n {
			return
		}
		runtime.Gosched()
	}
}

func granted(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func newFlight(p Priority) *flight {
	f := &flight{ready: make(chan struct{}), counted: make(chan struct{}), done: make(chan struct{})}
	f.foreground.Store(p == Foreground)
	return f
}

func TestGateForegroundGoesFirst(t *testing.T) {
	g := newFetchGate(2, 1)
	ctx := context.Background()
	if err := g.acquire(ctx, newFlight(Background)); err != nil {
		t.Fatal(err)
	}
	// The last slot is reserved for foreground fetches.
	bg := acquireAsync(g, newFlight(Background))
	queued(g, 1)
	if err := g.acquire(ctx, newFlight(Foreground)); err != nil {
		t.Fatal("a foreground fetch must take the reserved slot at once:", err)
	}
	fg := acquireAsync(g, newFlight(Foreground))
	queued(g, 2)
	g.release()
	<-fg // granted synchronously inside release, ahead of the older background waiter
	if granted(bg) {
		t.Fatal("background waiter was granted before the foreground one")
	}
	g.release() // one slot free: still reserved for foreground
	g.mu.Lock()
	waiting := len(g.waiters)
	g.mu.Unlock()
	if waiting != 1 {
		t.Fatalf("background took a reserved slot: %d waiting, want 1", waiting)
	}
	g.release() // two free: background may go
	<-bg
}

func TestGateRaisedPriorityIsGranted(t *testing.T) {
	g := newFetchGate(2, 1)
	if err := g.acquire(context.Background(), newFlight(Background)); err != nil {
		t.Fatal(err)
	}
	f := newFlight(Background)
	ch := acquireAsync(g, f)
	queued(g, 1)
	// A read joins the prefetch's flight: it now waits at foreground
	// priority and may take the reserved slot.
	f.foreground.Store(true)
	g.kick()
	<-ch
}

func TestGateCancelledWaiterHoldsNothing(t *testing.T) {
	g := newFetchGate(1, 0)
	if err := g.acquire(context.Background(), newFlight(Foreground)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- g.acquire(ctx, newFlight(Foreground)) }()
	queued(g, 1)
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("cancelled acquire succeeded")
	}
	g.release()
	if g.free != 1 || len(g.waiters) != 0 {
		t.Fatalf("after cancel and release: free %d, waiters %d; want 1, 0", g.free, len(g.waiters))
	}
}
