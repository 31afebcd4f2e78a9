package readahead

import (
	"testing"
	"time"
)

// TestStallHistogram: each first read of a file that was not cached is
// counted in the bucket of the time it took, and the histogram's count is
// the job's stalls, its total time StallSeconds.
func TestStallHistogram(t *testing.T) {
	_, m, items := newTestMount(t, 3)
	if _, err := m.Declare(Declaration{Job: "j", Current: items, Owner: 1000}); err != nil {
		t.Fatal(err)
	}
	waits := []time.Duration{0, 3 * time.Millisecond, 60 * time.Millisecond}
	for i, it := range items {
		done := m.Observe(m.objs[it.Ref], it.ID, 0, 1000)
		if done == nil {
			t.Fatalf("read %d of an uncached file: no stall to time", i)
		}
		time.Sleep(waits[i])
		done()
	}
	var j JobStats
	for _, s := range m.Jobs() {
		j = s
	}
	h := j.StallHistogram
	if h.Count() != uint64(j.Stalls) || j.Stalls != 3 {
		t.Fatalf("histogram counts %d stalls, the job %d; want 3: %+v", h.Count(), j.Stalls, h)
	}
	// The 60 ms wait lands in a bucket whose bound is past it (a sleep
	// takes at least its time), and no stall in the last (over 30 s).
	if h.Counts[len(StallBuckets)] != 0 {
		t.Errorf("a stall counted as over %vs: %+v", StallBuckets[len(StallBuckets)-1], h)
	}
	if got := bound(bucketOf(h, 2)); got < 0.1 {
		t.Errorf("the longest stall (a 60 ms sleep) is in the bucket up to %vs: %+v", got, h)
	}
	if j.StallSeconds < 0.063 {
		t.Errorf("stall seconds %v; want the sleeps' 63 ms at least", j.StallSeconds)
	}
}

// bound is bucket i's upper bound.
func bound(i int) float64 {
	if i == len(StallBuckets) {
		return 1e9
	}
	return StallBuckets[i]
}

// bucketOf is the bucket of the n-th stall (0-based) in bucket order.
func bucketOf(h StallHistogram, n int) int {
	for i, c := range h.Counts {
		if n < int(c) {
			return i
		}
		n -= int(c)
	}
	return -1
}
