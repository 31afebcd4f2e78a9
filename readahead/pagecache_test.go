package readahead

import (
	"math"
	"testing"
	"time"

	"github.com/dsmount/dsmount/cache"
)

// TestPageCacheHorizon: files found alive in the page cache up to about a
// second after they were served and gone after two make a horizon of
// about a second; files only ever found alive make it unbounded; no
// samples, unknown (0: nothing is taken as in the page cache).
func TestPageCacheHorizon(t *testing.T) {
	var pc pageCacheModel
	if pc.horizon != (horizons{}) {
		t.Fatalf("no samples: horizons %v, want 0", pc.horizon)
	}
	t0 := time.Unix(1000, 0)
	epoch := t0.Add(-time.Minute) // every read below is of this epoch
	id := func(i int) cache.ObjectID { return cache.ObjectID{byte(i), byte(i >> 8)} }
	for i := range 200 {
		pc.servedNow(id(i), t0, epoch)
	}
	for i := range 100 { // alive at 0.2-0.9 s
		pc.passedUnseen(id(i), t0.Add(time.Duration(200+7*i)*time.Millisecond), epoch)
	}
	if pc.horizon.same != math.MaxInt64 || pc.horizon.earlier != 0 {
		t.Fatalf("only found alive: horizons %v, want unbounded (this epoch), unknown (before)", pc.horizon)
	}
	for i := 100; i < 200; i++ { // gone at 2.1-3.1 s: read again
		pc.servedNow(id(i), t0.Add(time.Duration(2100+10*i-1000)*time.Millisecond), epoch)
	}
	if h := pc.horizon.same; h < 900*time.Millisecond || h > 2100*time.Millisecond {
		t.Fatalf("alive to 0.9 s, gone from 2.1 s: horizon %v, want between", h)
	}
	// A page cache emptied between epochs: files of this epoch found there
	// at any age, files of the last never.
	var dropped pageCacheModel
	for i := range 100 {
		dropped.servedNow(id(i), t0, epoch) // last epoch
	}
	next := t0.Add(30 * time.Second)
	for i := range 100 {
		at := next.Add(time.Duration(i) * 100 * time.Millisecond)
		dropped.servedNow(id(i), at, next)                                         // gone: served before this epoch
		dropped.passedUnseen(id(i), at.Add(5*time.Second), next.Add(-time.Second)) // alive: served this epoch
	}
	if dropped.horizon.same != math.MaxInt64 || dropped.horizon.earlier > 30*time.Second {
		t.Fatalf("a page cache emptied between epochs: horizons %v, want unbounded (this epoch), under 30 s (before)", dropped.horizon)
	}
}

// TestNeedsThePageCacheServesAreNoNeeds: a job's need of a file the daemon
// served moments ago, coming within the page cache's horizon, is no need
// of the chunk cache's; one coming after it is.
func TestNeedsThePageCacheServesAreNoNeeds(t *testing.T) {
	items := make([]Item, 100)
	for i := range items {
		items[i].ID = cache.ObjectID{byte(i)}
		items[i].Obj.Size = 1 // an empty file counts as read
	}
	now := time.Unix(2000, 0)
	j := &job{}
	j.start(newOrder(0, items), now.Add(-time.Minute))
	j.posRate = 10 // positions a second
	near, far := items[5].ID, items[90].ID
	served := now.Add(-time.Second) // this epoch
	h := horizons{same: 3 * time.Second, earlier: 3 * time.Second}
	// Served 1 s ago, horizon 3 s: position 5 comes in 0.6 s (inside),
	// position 90 in 9.1 s (outside).
	if _, ok := j.distance(near, served, true, h, now); ok {
		t.Error("a need inside the horizon counted")
	}
	if d, ok := j.distance(far, served, true, h, now); !ok || d != 91 {
		t.Errorf("a need outside the horizon: %d, %v; want 91", d, ok)
	}
	if d, ok := j.distance(near, time.Time{}, false, h, now); !ok || d != 6 {
		t.Errorf("a file never served: %d, %v; want 6", d, ok)
	}
	if _, ok := j.distance(far, served, true, horizons{same: math.MaxInt64}, now.Add(time.Hour)); ok {
		t.Error("an unbounded page cache: a need of a file served this epoch counted")
	}
	if d, ok := j.distance(far, served, true, horizons{}, now); !ok || d != 91 {
		t.Errorf("an unknown horizon: %d, %v; want 91 (nothing taken as in the page cache)", d, ok)
	}
	// Served before the epoch began, and nothing of that kind stays.
	if d, ok := j.distance(near, now.Add(-2*time.Minute), true, horizons{same: math.MaxInt64, earlier: 0}, now); !ok || d != 6 {
		t.Errorf("a file served last epoch, page cache emptied since: %d, %v; want 6", d, ok)
	}
}
