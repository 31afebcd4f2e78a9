package readahead

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
	"github.com/dsmount/dsmount/cache"
)

// gatedBackend holds every ReadAt until the test lets one through, and
// tracks how many are waiting.
type gatedBackend struct {
	backend.Backend
	mu      sync.Mutex
	waiting int
	arrived chan struct{} // one per ReadAt that starts waiting
	pass    chan struct{} // one per ReadAt let through
}

func (g *gatedBackend) ReadAt(ctx context.Context, obj backend.Object, p []byte, off int64) (int, error) {
	g.mu.Lock()
	g.waiting++
	g.mu.Unlock()
	g.arrived <- struct{}{}
	select {
	case <-g.pass:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	g.mu.Lock()
	g.waiting--
	g.mu.Unlock()
	return g.Backend.ReadAt(ctx, obj, p, off)
}

// arrival waits for the next ReadAt to start waiting; one that never
// comes fails the test rather than hanging it.
func (g *gatedBackend) arrival(t *testing.T, what string) {
	t.Helper()
	select {
	case <-g.arrived:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no GET started in 10 s (%d in flight)", what, g.inFlight())
	}
}

func (g *gatedBackend) inFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// TestPrefetchSlowStart declares an order to a Registry allowed 64
// prefetches in flight, on a store that answers only when told: prefetch
// starts with rampStart GETs, and each answer lets it have one more. (With
// no reads yet, the window is Parallel items from the start of the order,
// so answered items also use it up: after k answers, min(rampStart+k,
// Parallel-k) are in flight.)
func TestPrefetchSlowStart(t *testing.T) {
	const n, parallel = 400, 64
	mem := memory.New()
	objs := make([]backend.Object, n)
	for i := range objs {
		objs[i] = mem.Put(fmt.Sprintf("d/%04d", i), []byte{byte(i)})
	}
	gb := &gatedBackend{Backend: mem, arrived: make(chan struct{}, n), pass: make(chan struct{})}
	reg := New(Config{Parallel: parallel})
	c, err := cache.Open(t.TempDir(), cache.Options{ChunkSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	src := c.Source(gb)
	defer func() {
		close(gb.pass) // let whatever is still waiting go
		reg.Close()
		c.Close()
	}()
	items := make([]Item, n)
	for i, o := range objs {
		items[i] = Item{Ref: uint32(i), ID: src.ObjectID(o)}
	}
	m := reg.Mount("m", src)
	if _, err := m.Declare(Declaration{Job: "job", Epoch: 0, Current: items, Objects: objList(objs)}); err != nil {
		t.Fatal(err)
	}
	for range rampStart {
		gb.arrival(t, "declaration")
	}
	// Each answer is followed by two new GETs (the one it frees and the
	// one slow start adds) while the window has room. Waiting for both
	// orders each check after any extra GET already on its way.
	want := rampStart
	for k := 1; rampStart+k <= parallel-k; k++ {
		gb.pass <- struct{}{}
		gb.arrival(t, fmt.Sprintf("answer %d", k))
		gb.arrival(t, fmt.Sprintf("answer %d, slow start's one more", k))
		want++
		if now := gb.inFlight(); now != want {
			t.Fatalf("after %d answers, %d GETs in flight; want %d", k, now, want)
		}
	}
	if want <= rampStart {
		t.Fatalf("slow start never went past %d", rampStart)
	}
}
