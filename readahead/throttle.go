package readahead

import (
	"time"

	"github.com/dsmount/dsmount/backend"
)

// When a store asks for fewer requests (S3's 503 SlowDown or 429, counted
// by a backend.ThrottleCounter), prefetch gives way: the reads someone
// waits for keep the store's capacity, and prefetch's share follows what
// is left, as TCP's congestion control does (additive increase,
// multiplicative decrease):
//
//   - a throttle seen since the last look cuts the prefetches that may run
//     (ramp) by 30%, at most once per cutEvery, since the answers of one
//     round of requests come back together. A deeper, more frequent cut
//     (halving) left the store further below its limit, the refused
//     GETs' back-off holding their slots;
//   - from then on ramp grows by one per ramp prefetches finished, rather
//     than one per prefetch (slow start), until it is back at Parallel.
//
// The window follows: its slack, a full round of parallel fetches, is the
// parallelism allowed now.
const cutEvery = 500 * time.Millisecond

// throttleWatch is the scheduler's view of its stores' throttle counts.
// Only the scheduler goroutine touches it (under Registry.mu, from fill).
type throttleWatch struct {
	last  map[backend.ThrottleCounter]int64 // each store's count at the last look
	seen  map[backend.ThrottleCounter]bool  // scratch: the stores looked at now
	cutAt time.Time
}

// watchThrottle looks at the throttle counts of the stores the declared
// jobs read from, and cuts ramp if one grew. r.mu is held.
func (r *Registry) watchThrottle(now time.Time) {
	w := &r.pf.throttle
	if w.last == nil {
		w.last, w.seen = map[backend.ThrottleCounter]int64{}, map[backend.ThrottleCounter]bool{}
	}
	clear(w.seen)
	grew := false
	for m := range r.mounts {
		tc, ok := m.src.Backend().(backend.ThrottleCounter)
		if !ok || w.seen[tc] {
			continue
		}
		w.seen[tc] = true
		n := tc.Throttled()
		if last, ok := w.last[tc]; ok && n > last {
			grew = true
		}
		w.last[tc] = n
	}
	for tc := range w.last {
		if !w.seen[tc] {
			delete(w.last, tc) // its jobs are gone; a new one starts afresh
		}
	}
	if !grew || now.Sub(w.cutAt) < cutEvery {
		return
	}
	w.cutAt = now
	r.pf.ramp = max(1, r.pf.ramp*7/10)
	r.pf.ssthresh, r.pf.grown = r.pf.ramp, 0
	r.cfg.Logger.Debug("readahead: the store asks for fewer requests: prefetch parallelism cut", "now", r.pf.ramp)
}

// grow lets one more prefetch run after one finished: at once during slow
// start, after ramp of them once a store has throttled.
func (r *Registry) grow() {
	if r.pf.ssthresh == 0 || r.pf.ramp < r.pf.ssthresh {
		r.pf.ramp = min(r.pf.ramp+1, r.cfg.Parallel)
		return
	}
	r.pf.grown++
	if r.pf.grown >= r.pf.ramp {
		r.pf.grown = 0
		r.pf.ramp = min(r.pf.ramp+1, r.cfg.Parallel)
		if r.pf.ramp == r.cfg.Parallel {
			r.pf.ssthresh = 0 // recovered: slow start again after idle
		}
	}
}
