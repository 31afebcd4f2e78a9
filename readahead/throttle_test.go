package readahead

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend/memory"
)

// throttlingMem is a memory backend whose throttle count the test sets.
type throttlingMem struct {
	*memory.Backend
	n atomic.Int64
}

func (b *throttlingMem) Throttled() int64 { return b.n.Load() }

// TestThrottleCutsPrefetch: a throttle count that grows cuts by 30% the
// prefetches that may run, at most once per cutEvery; afterwards they grow
// by one per round of completions, back to Parallel.
func TestThrottleCutsPrefetch(t *testing.T) {
	mem := &throttlingMem{Backend: memory.New()}
	// The scheduler goroutine reads the clock too: it moves atomically.
	var clock atomic.Int64
	clock.Store(time.Unix(1_000_000, 0).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	reg := New(Config{NoPrefetch: true, Parallel: 64, Now: now})
	t.Cleanup(reg.Close)
	src, objs, items := cachedObjects(t, mem.Backend, mem, 100)
	m := reg.Mount("m", src)
	if _, err := m.Declare(Declaration{Job: "j", Current: items, Objects: objs, Override: true}); err != nil {
		t.Fatal(err)
	}
	look := func() {
		reg.mu.Lock()
		reg.watchThrottle(now())
		reg.mu.Unlock()
	}
	reg.pf.ramp = 64
	look() // first look: learns the count
	if reg.pf.ramp != 64 {
		t.Fatalf("ramp %d after a look with no throttle; want 64", reg.pf.ramp)
	}
	mem.n.Add(3)
	look()
	if reg.pf.ramp != 44 || reg.pf.ssthresh != 44 {
		t.Fatalf("after a throttle: ramp %d ssthresh %d; want 44, 44", reg.pf.ramp, reg.pf.ssthresh)
	}
	mem.n.Add(1)
	clock.Add(int64(cutEvery / 2))
	look()
	if reg.pf.ramp != 44 {
		t.Fatalf("a second throttle within cutEvery cut again: ramp %d", reg.pf.ramp)
	}
	mem.n.Add(1)
	clock.Add(int64(cutEvery))
	look()
	if reg.pf.ramp != 30 {
		t.Fatalf("a throttle after cutEvery: ramp %d, want 30", reg.pf.ramp)
	}
	// Additive increase: 30 completions for one more.
	for range 29 {
		reg.grow()
	}
	if reg.pf.ramp != 30 {
		t.Fatalf("ramp %d after 29 completions; want 30 until the 30th", reg.pf.ramp)
	}
	reg.grow()
	if reg.pf.ramp != 31 {
		t.Fatalf("ramp %d after 30 completions; want 31", reg.pf.ramp)
	}
	// Back to Parallel, the throttled spell forgotten.
	for range 64 * 64 {
		reg.grow()
	}
	if reg.pf.ramp != 64 || reg.pf.ssthresh != 0 {
		t.Fatalf("after many completions: ramp %d ssthresh %d; want 64, 0", reg.pf.ramp, reg.pf.ssthresh)
	}
}
