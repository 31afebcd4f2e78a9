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
		items[i].Obj.Size = 1
	}
	j := &job{}
	j.start(newOrder(0, items), time.Unix(1000, 0))
	for p := 1; p <= spreadEvidence+200; p++ { // position 0 left to a slow reader
		j.markRead(p, nil)
	}
	if j.frontier == 0 || !j.read[0] {
		t.Fatalf("frontier %d: the lag (%d) should have passed position 0", j.frontier, j.lag())
	}
	before := j.lag()
	if !j.wants(items[0].ID) {
		t.Fatal("a late read of position 0 is not wanted")
	}
	j.markRead(0, nil)
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
