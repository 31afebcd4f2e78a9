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

// TestNeedsCountEvenWhenThePageCacheMayServeThem: a job's need of a file
// the daemon served moments ago (the kernel's page cache may still hold
// it) is a need like any other: the distance is from the job's furthest
// read, in this epoch's order, then the next's.
func TestNeedsCountEvenWhenThePageCacheMayServeThem(t *testing.T) {
	items := make([]Item, 100)
	for i := range items {
		items[i].ID = cache.ObjectID{byte(i)}
	}
	now := time.Unix(2000, 0)
	var pc pageCacheModel
	j := &job{}
	j.start(newOrder(0, items, sized(1)), now.Add(-time.Minute))
	j.next = newOrder(1, []Item{items[7], items[5]}, sized(1))
	for p := range 11 {
		pc.servedNow(items[p].ID, now, j.epochStart)
		j.markRead(p, nil, nil)
	}
	if d, ok := j.distance(items[90].ID); !ok || d != 80 {
		t.Errorf("unread, 80 past the furthest read: %d, %v; want 80, true", d, ok)
	}
	// Read this epoch (served moments ago): needed next epoch, at its
	// position there.
	if d, ok := j.distance(items[5].ID); !ok || d != int64(100-10+1) {
		t.Errorf("read, second in the next order: %d, %v; want %d, true", d, ok, 100-10+1)
	}
	if _, ok := j.distance(items[3].ID); ok {
		t.Error("read, in no later order: counted as needed")
	}
}

// TestUnseeTakesBackASample: a sample of a file passed unseen whose read
// came late after all is taken back, and the horizon with it.
func TestUnseeTakesBackASample(t *testing.T) {
	var pc pageCacheModel
	t0 := time.Unix(1000, 0)
	epoch := t0.Add(-time.Minute)
	id := cache.ObjectID{1}
	pc.servedNow(id, t0, epoch)
	s := pc.passedUnseen(id, t0.Add(time.Second), epoch)
	if s == 0 || pc.horizon.same != math.MaxInt64 {
		t.Fatalf("one file found alive: sample %d, horizon %v; want a sample, unbounded", s, pc.horizon.same)
	}
	pc.unsee(s)
	if pc.horizon.same != 0 {
		t.Errorf("the only sample taken back: horizon %v, want unknown (0)", pc.horizon.same)
	}
	if pc.passedUnseen(cache.ObjectID{2}, t0, epoch) != 0 {
		t.Error("a file never served gave a sample")
	}
}
