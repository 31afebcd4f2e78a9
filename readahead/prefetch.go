package readahead

import (
	"errors"
	"math"
	"sort"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
)

const (
	// writesPerFetch bounds the items fetched or being written, per fetch
	// slot (Parallel).
	writesPerFetch = 4
	// tick is how often the scheduler samples the jobs' read rates and
	// expires idle jobs.
	tick = 250 * time.Millisecond
	// rateSmoothing weighs a new rate sample.
	rateSmoothing = 0.3
	// latencySmoothing weighs a new fetch latency sample.
	latencySmoothing = 0.1
	// rampStart is how many prefetches may be in flight when prefetching
	// starts from idle; each one that completes allows one more, up to
	// Parallel (slow start): Parallel at once, each on a new connection,
	// kept the store and the daemon busy setting up connections while
	// the readers' first items, among them, waited far longer than plain
	// misses.
	rampStart = 16
	// rampIdle is how long prefetch must have been idle to start slow
	// again: long enough that the HTTP client may have closed its idle
	// connections.
	rampIdle = 30 * time.Second
	// fillEvery is how often the scheduler tops up the windows while any
	// job is declared. Reads don't wake it: a read that readied the
	// scheduler on a busy core waited for the fill (and the prefetches it
	// started) to run before its reply went out. A window covers at least
	// Lead of reading, so 10 ms late costs nothing; finished prefetches
	// still wake it at once.
	fillEvery = 10 * time.Millisecond
	// earlyRateSpan is the shortest span a job's first read rate is taken
	// over, so the first few reads don't claim an absurd rate.
	earlyRateSpan = 50 * time.Millisecond
)

// prefetchState is the scheduler's; mu guards it.
type prefetchState struct {
	inflight map[cache.ObjectID]bool
	running  int
	latency  float64 // seconds per prefetched item, smoothed
	done     chan struct{}
	// ramp bounds running during slow start (rampStart up to Parallel);
	// idleSince is when running last fell to 0. Only the scheduler
	// goroutine touches them.
	ramp      int
	idleSince time.Time
	// After a store asked for fewer requests (throttle.go), ramp grows by
	// one per ramp completions above ssthresh (0: never throttled), and
	// grown counts those completions.
	ssthresh, grown int
	throttle        throttleWatch
}

// schedule is the prefetch loop: it tops up every job's window whenever a
// declaration or a finished prefetch wakes it, every fillEvery while any
// job is declared, and on a tick.
func (r *Registry) schedule() {
	defer r.wg.Done()
	r.pf.done = make(chan struct{}, r.cfg.Parallel)
	t := time.NewTicker(tick)
	defer t.Stop()
	poll := time.NewTimer(fillEvery)
	defer poll.Stop()
	polling := true
	forgotAt := r.cfg.Now()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.wake:
		case <-poll.C:
			polling = false
		case <-r.pf.done:
			r.finished()
		case <-t.C:
			now := r.cfg.Now()
			r.sampleRates(now)
			r.expire(now)
			if now.Sub(forgotAt) > time.Minute {
				r.mu.Lock()
				r.pc.forget(now)
				r.mu.Unlock()
				forgotAt = now
			}
		}
		// Drain completions so running is current.
		for drained := false; !drained; {
			select {
			case <-r.pf.done:
				r.finished()
			default:
				drained = true
			}
		}
		if r.fill() && !polling {
			poll.Reset(fillEvery)
			polling = true
		}
	}
}

// finished accounts for a prefetch that has its bytes: one fewer running,
// and during slow start, room for one more.
func (r *Registry) finished() {
	r.pf.running--
	r.grow()
	if r.pf.running == 0 {
		r.pf.idleSince = r.cfg.Now()
	}
}

// sampleRates updates each job's smoothed read rate.
func (r *Registry) sampleRates(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range r.allJobs() {
		dt := now.Sub(j.rateAt).Seconds()
		if dt <= 0 {
			continue
		}
		sample := float64(j.totalReads-j.rateReads) / dt
		if j.rate == 0 {
			j.rate = sample
		} else {
			j.rate += rateSmoothing * (sample - j.rate)
		}
		j.rateReads, j.rateAt = j.totalReads, now
	}
}

// window is how many items ahead of its frontier a job should have cached
// or in flight: enough to cover the fetch latency at the job's read rate
// four times over, and at least Lead of reading, plus a full round of
// parallel fetches; bounded in bytes by WindowBytes (using the order's
// mean item size).
//
// Latency alone is not enough: four latencies of reading left bursts of
// reads waiting whenever the store paused for longer than that. The round
// of parallel fetches lets an epoch start with as many items in flight as
// prefetch may have.
//
// A full cache shrinks it to what hides the latency: an item fetched
// ahead takes the room of one kept for a later read (another job's, or the
// next epoch's), so every item fetched earlier than it must be costs a hit.
func (r *Registry) window(j *job, now time.Time, full bool) int {
	lead, slack := r.cfg.Lead.Seconds(), r.cfg.Parallel
	if full {
		lead, slack = 0, r.cfg.Parallel/4
	}
	if r.pf.ssthresh > 0 {
		slack = min(slack, r.pf.ramp) // a store is throttling (throttle.go)
	}
	w := int(math.Ceil(r.readRate(j, now)*max(4*r.pf.latency, lead))) + slack
	return min(max(w, MinWindow), r.maxSpan(j))
}

// readRate is the job's smoothed read rate, or before the first sample
// (a tick after the declaration) its reads so far over the time since,
// counted from at least earlyRateSpan: held to the minimum window until
// then, the readers of a paced epoch caught up with prefetch and waited.
func (r *Registry) readRate(j *job, now time.Time) float64 {
	if j.rate > 0 {
		return j.rate
	}
	dt := max(now.Sub(j.rateAt), earlyRateSpan).Seconds()
	return float64(j.totalReads-j.rateReads) / dt
}

// maxSpan is the most items from the frontier that prefetch may cover:
// WindowBytes worth at the order's mean item size.
func (r *Registry) maxSpan(j *job) int {
	n := len(j.cur.items)
	if n == 0 || j.cur.meanSize == 0 {
		return n
	}
	mean := max(j.cur.meanSize, 1)
	return int(max(r.cfg.WindowBytes/mean, 1))
}

// prefetchJob is one item chosen to fetch ahead.
type prefetchJob struct {
	j   *job
	it  Item
	obj backend.Object
}

// fill issues prefetches for every job's window, nearest items first
// across jobs, until Parallel are running (fewer during slow start). It
// reports whether any job is declared (and prefetch on).
func (r *Registry) fill() (active bool) {
	if r.cfg.NoPrefetch {
		return false
	}
	var picks []prefetchJob
	r.mu.Lock()
	active = r.hasJobs()
	// Fetching, and fetched but being written: those bound together keep
	// chunks from piling up behind a disk slower than the store.
	// Idle since the start (a zero idleSince) counts as idle for long.
	now := r.cfg.Now()
	if r.pf.running == 0 && now.Sub(r.pf.idleSince) >= rampIdle {
		r.pf.ramp = min(rampStart, r.cfg.Parallel, max(r.pf.ssthresh, rampStart))
	}
	r.watchThrottle(now)
	r.queuePushes()
	free := min(r.pf.ramp-r.pf.running, writesPerFetch*r.cfg.Parallel-len(r.pf.inflight))
	if free <= 0 || !active {
		r.mu.Unlock()
		return active
	}
	var jobs []*job
	for _, j := range r.allJobs() {
		jobs = append(jobs, j)
	}
	// Jobs furthest behind their window go first.
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].scan-jobs[a].frontier < jobs[b].scan-jobs[b].frontier })
	full := r.cfg.PolicyInstalled && r.full()
	for _, j := range jobs {
		j.window = r.window(j, now, full)
		// Cover the readers' spread (frontier to head) and the window past
		// the furthest read, within the byte bound.
		limit := min(j.head+1+j.window, j.frontier+r.maxSpan(j))
		for ; j.scan < limit && free > 0; j.scan++ {
			p := j.scan
			if p < len(j.read) && j.read[p] {
				continue
			}
			it, obj, ok := j.itemAt(p)
			if !ok {
				break
			}
			if r.pf.inflight[it.ID] {
				continue
			}
			if r.cfg.PolicyInstalled {
				ok, needed := r.policy.admits(it.ID)
				if !needed {
					// No job needs it any more.
					continue
				}
				if !ok {
					// Later items are needed later still: stop this job
					// here and look again when something changes.
					if j.refusedAt != p {
						j.refused++
						j.refusedAt = p
					}
					break
				}
			}
			r.pf.inflight[it.ID] = true
			picks = append(picks, prefetchJob{j, it, obj})
			free--
		}
	}
	r.mu.Unlock()
	// Asking the cache what it holds takes its locks (and may read the
	// index): never under r.mu, which every read needs.
	var cached []cache.ObjectID
	for _, pj := range picks {
		if pj.j.mount.src.Cached(pj.obj) {
			cached = append(cached, pj.it.ID)
			continue
		}
		r.pf.running++
		r.wg.Add(1)
		go r.prefetch(pj)
	}
	if len(cached) > 0 {
		r.mu.Lock()
		for _, id := range cached {
			delete(r.pf.inflight, id)
		}
		r.mu.Unlock()
	}
	return true
}

// full reports whether the cache has no room left for prefetch without
// evicting.
func (r *Registry) full() bool {
	if r.cfg.Capacity == nil {
		return false
	}
	capacity, used := r.cfg.Capacity()
	// Keep a little headroom so foreground misses don't all evict.
	return capacity > 0 && used >= capacity-capacity/100
}

// prefetch fetches every chunk of one item at background priority. Its
// slot (one of Parallel) is given back as soon as the last chunk's bytes
// are in, while they are written: a slot held for the write too left the
// store fewer fetches in flight than Parallel. The item stays in flight
// (no second prefetch of it) until it is stored.
func (r *Registry) prefetch(pj prefetchJob) {
	defer r.wg.Done()
	src := pj.j.mount.src
	start := time.Now()
	elapsed := -1.0
	freed := false
	free := func() {
		if freed {
			return
		}
		freed = true
		elapsed = time.Since(start).Seconds()
		select {
		case r.pf.done <- struct{}{}:
		case <-r.ctx.Done():
		}
	}
	defer free()
	var err error
	n := src.NumChunks(pj.obj)
	for idx := 0; idx < n && err == nil; idx++ {
		var fetched func()
		if idx == n-1 {
			fetched = free
		}
		err = src.Fetch(r.ctx, pj.obj, idx, cache.Background, fetched)
	}
	if elapsed < 0 {
		elapsed = time.Since(start).Seconds()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pf.inflight) == writesPerFetch*r.cfg.Parallel {
		// fill stopped at the bound: this makes room.
		defer r.kick()
	}
	delete(r.pf.inflight, pj.it.ID)
	if err == nil {
		// Latency per item (to its bytes), smoothed: fetches of n chunks
		// count once.
		r.pf.latency += latencySmoothing * (elapsed - r.pf.latency)
		if pj.j.stillDeclared() {
			pj.j.prefetched++
			// Not if its read came first (and joined this fetch): it
			// would never leave the map and, evicted, count as unread.
			if p, ok := pj.j.cur.posOf(pj.it.ID); !ok || !pj.j.read[p] {
				pj.j.fetchedAhead[pj.it.ID] = struct{}{}
				if ok {
					r.pushFetched(pj.j, int(p))
				}
			}
		}
	} else if !errors.Is(err, cache.ErrClosed) && r.ctx.Err() == nil {
		r.cfg.Logger.Debug("readahead: prefetch failed", "key", pj.obj.Key, "err", err)
	}
}
