package flight

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
)

// acquireAsync starts an acquire and returns a channel closed once granted.
func acquireAsync(g *Gate, f Raisable) chan struct{} {
	done := make(chan struct{})
	go func() {
		if err := g.Acquire(context.Background(), f); err == nil {
			close(done)
		}
	}()
	return done
}

// queued waits until n waiters are queued (the gate's own state, read
// under its lock, is the synchronisation: no sleeps).
func queued(g *Gate, n int) {
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

// fetch is a Raisable whose priority the test sets.
type fetch struct{ fg atomic.Bool }

func (f *fetch) Foreground() bool { return f.fg.Load() }

const (
	Foreground = true
	Background = false
)

func newFlight(foreground bool) *fetch {
	f := &fetch{}
	f.fg.Store(foreground)
	return f
}

func TestGateForegroundGoesFirst(t *testing.T) {
	g := NewGate(2, 1)
	ctx := context.Background()
	if err := g.Acquire(ctx, newFlight(Background)); err != nil {
		t.Fatal(err)
	}
	// The last slot is reserved for foreground fetches.
	bg := acquireAsync(g, newFlight(Background))
	queued(g, 1)
	if err := g.Acquire(ctx, newFlight(Foreground)); err != nil {
		t.Fatal("a foreground fetch must take the reserved slot at once:", err)
	}
	fg := acquireAsync(g, newFlight(Foreground))
	queued(g, 2)
	g.Release()
	<-fg // granted synchronously inside release, ahead of the older background waiter
	if granted(bg) {
		t.Fatal("background waiter was granted before the foreground one")
	}
	g.Release() // one slot free: still reserved for foreground
	g.mu.Lock()
	waiting := len(g.waiters)
	g.mu.Unlock()
	if waiting != 1 {
		t.Fatalf("background took a reserved slot: %d waiting, want 1", waiting)
	}
	g.Release() // two free: background may go
	<-bg
}

func TestGateRaisedPriorityIsGranted(t *testing.T) {
	g := NewGate(2, 1)
	if err := g.Acquire(context.Background(), newFlight(Background)); err != nil {
		t.Fatal(err)
	}
	f := newFlight(Background)
	ch := acquireAsync(g, f)
	queued(g, 1)
	// A read joins the prefetch's flight: it now waits at foreground
	// priority and may take the reserved slot.
	f.fg.Store(true)
	g.Kick()
	<-ch
}

func TestGateCancelledWaiterHoldsNothing(t *testing.T) {
	g := NewGate(1, 0)
	if err := g.Acquire(context.Background(), newFlight(Foreground)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- g.Acquire(ctx, newFlight(Foreground)) }()
	queued(g, 1)
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("cancelled acquire succeeded")
	}
	g.Release()
	if g.free != 1 || len(g.waiters) != 0 {
		t.Fatalf("after cancel and release: free %d, waiters %d; want 1, 0", g.free, len(g.waiters))
	}
}
