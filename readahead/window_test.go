package readahead

import (
	"testing"
	"time"
)

// TestWindowCoversLead: the window covers the larger of four fetch
// latencies and Config.Lead at the job's read rate, plus a round of
// parallel fetches; before the first rate sample the reads so far stand in
// for the rate (over at least earlyRateSpan); WindowBytes bounds it.
func TestWindowCoversLead(t *testing.T) {
	t0 := time.Unix(1000, 0)
	items := make([]Item, 100_000)
	r := &Registry{cfg: Config{Parallel: 8, Lead: 2 * time.Second, WindowBytes: 1 << 30}}
	j := &job{jobProgress: jobProgress{cur: newOrder(0, items, sized(100_000))}, jobSchedule: jobSchedule{rateAt: t0}}

	r.pf.latency = 0.05 // 4 latencies: 0.2 s, under Lead
	j.rate = 100
	if got, want := r.window(j, t0, false), 100*2+8; got != want {
		t.Errorf("rate 100/s, Lead 2 s: window %d, want %d", got, want)
	}
	// A full cache: the latency alone, a quarter of the parallel slack.
	if got, want := r.window(j, t0, true), MinWindow; got != want {
		t.Errorf("rate 100/s, full cache: window %d, want %d (4 latencies: 20, and 2: under the least)", got, want)
	}
	j.rate = 1000
	if got, want := r.window(j, t0, true), 1000*2/10+2; got != want {
		t.Errorf("rate 1000/s, full cache: window %d, want %d", got, want)
	}
	j.rate = 100
	r.pf.latency = 1 // 4 latencies: 4 s, over Lead
	if got, want := r.window(j, t0, false), 100*4+8; got != want {
		t.Errorf("rate 100/s, latency 1 s: window %d, want %d", got, want)
	}

	// No sample yet: 30 reads in the first 10 ms count as 30 per 50 ms.
	r.pf.latency = 0.05
	j.rate, j.totalReads = 0, 30
	if got, want := r.window(j, t0.Add(10*time.Millisecond), false), 600*2+8; got != want {
		t.Errorf("30 reads 10 ms in: window %d, want %d", got, want)
	}
	// 30 reads over 300 ms: 100/s.
	if got, want := r.window(j, t0.Add(300*time.Millisecond), false), 100*2+8; got != want {
		t.Errorf("30 reads 300 ms in: window %d, want %d", got, want)
	}

	// WindowBytes bounds it: 1 GiB of 100 kB items.
	j.rate = 1e6
	if got, want := r.window(j, t0, false), (1<<30)/100_000; got != want {
		t.Errorf("rate 1e6/s: window %d, want the byte bound %d", got, want)
	}
}
