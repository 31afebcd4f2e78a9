package readahead

import (
	"time"

	"testing"

	"github.com/dsmount/dsmount/cache"
)

// TestLateReadStillCounts: positions the lag counted as read (no read of
// them seen) still count for the job when their read comes after all,
// once, and widen the lag.
func TestLateReadStillCounts(t *testing.T) {
	items := make([]Item, 2000)
	for i := range items {
		items[i].ID = cache.ObjectID{byte(i), byte(i >> 8)}
	}
	j := &job{}
	j.start(newOrder(0, items, sized(1)), time.Unix(1000, 0))
	passed := func(j *job, p int) uint8 { return lateFetched | 5 }
	for p := 1; p <= spreadEvidence+200; p++ { // position 0 left to a slow reader
		j.markRead(p, passed, nil)
	}
	if j.frontier == 0 || !j.read[0] {
		t.Fatalf("frontier %d: the lag (%d) should have passed position 0", j.frontier, j.lag())
	}
	before := j.lag()
	if !j.wants(items[0].ID) {
		t.Fatal("a late read of position 0 is not wanted")
	}
	var undone uint8
	j.markRead(0, passed, func(_ *job, it Item, m uint8) {
		if it.ID != items[0].ID {
			t.Errorf("undo of %v, want position 0's item", it.ID)
		}
		undone = m
	})
	if undone != lateFlag|lateFetched|5 {
		t.Errorf("undo got mark %#x, want %#x: what the passing recorded", undone, lateFlag|lateFetched|5)
	}
	if j.totalReads != int64(spreadEvidence+201) {
		t.Errorf("total reads %d, want %d (the late one counted)", j.totalReads, spreadEvidence+201)
	}
	if j.lag() <= before {
		t.Errorf("lag %d after a read %d behind the head, was %d: want it wider", j.lag(), j.head, before)
	}
	if j.wants(items[0].ID) {
		t.Error("position 0 wanted again after its read")
	}
}
