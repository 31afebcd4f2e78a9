package readahead

import (
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
)

// job is one declared job: who declared it and whose reads count for it
// (identity), how far its readers are (progress), what prefetch and push
// do for it (scheduling), and what it counted (counters). Registry.mu
// guards every field but identity's mount, name and owner, which never
// change once the job is made (a prefetch in flight reads its mount
// without the lock).
type job struct {
	jobIdentity
	jobProgress
	jobSchedule
	jobCounters
}

// jobIdentity is who a job is. mount, name and owner are set when the job
// is made and never change; each declaration sets pid and anyReader
// (under Registry.mu).
type jobIdentity struct {
	mount *Mount
	name  string
	// owner is the user who declared the job: jobs are named per user.
	// With no pid, only reads by owner count for the job, unless
	// anyReader (a privileged declarer's job: reads by any user count).
	owner     uint32
	anyReader bool
	// pid is the process that declared the order (0: unknown, e.g. the
	// CLI). Reads by it or its descendants (loader workers) are the job's.
	pid int
}

// jobProgress is where a job's readers are in its orders. Registry.mu
// guards it.
//
// Invariants: 0 <= frontier <= len(cur.items); read[p] for every p <
// frontier; nread counts the true entries of read; late[p] != 0 implies
// read[p].
type jobProgress struct {
	cur  *order
	next *order // nil when not declared
	read []bool
	// late marks positions counted as read by the lag, no read of them
	// seen (yet): a read that comes after all still counts, and takes back
	// what the position's passing recorded (lateFlag, lateFetched,
	// lateSample).
	late     []uint8
	frontier int
	nread    int
	// head is the furthest position read (-1 before the first read):
	// loader workers read a spread of positions between frontier and head.
	head int
	// spread is the furthest behind head a read has landed, all epochs:
	// how out of order the job's readers read (see lag).
	spread int
	// epochStart is when the current order became the job's.
	epochStart time.Time
	// lastActive is the job's last read or declaration (expiry.go).
	lastActive time.Time
}

// jobSchedule is what the scheduler keeps for a job: where prefetch
// resumes, how far ahead it reaches, and what it fetched. Registry.mu
// guards it.
type jobSchedule struct {
	// scan is where the prefetcher resumes: positions before it (and after
	// frontier) were already issued or found cached. It may run into the
	// next order: positions >= len(cur.items) index next.
	scan int
	// window is the prefetch window, in items, as fill last set it.
	window int
	// rate is the job's reads per second, smoothed; rateReads and rateAt
	// are the count and time of the last sample.
	rate      float64
	rateReads int64
	rateAt    time.Time
	// fetchedAhead are the items fetched ahead for the job and not read
	// yet.
	fetchedAhead map[cache.ObjectID]struct{}
	// refusedAt is the last position where prefetch stopped because the
	// cache would not evict for it (refused counts each position once).
	refusedAt int

	push pushes
}

// jobCounters are a job's figures for stats. Registry.mu guards them.
type jobCounters struct {
	totalReads   int64 // items read, all epochs
	prefetched   int64 // items fetched ahead by the prefetcher
	prefetchHits int64 // first reads of an item that a prefetch had fetched
	stalls       int64 // first reads of an item that was not cached yet
	epochStalls  int   // stalls in the current order
	// stallTime is how long the reads counted as stalls took, stallHist
	// each one's time.
	stallTime time.Duration
	stallHist StallHistogram
	// prefetchEvicted counts items fetched ahead for the job and evicted
	// before it read them: prefetch that cost a GET for nothing.
	prefetchEvicted int64
	// prefetchUnseen counts items fetched ahead for the job that its
	// readers then passed unseen (the kernel's page cache served them):
	// a GET for nothing too.
	prefetchUnseen int64
	// refused counts the times prefetch stopped at an item of the job's
	// window because the cache would not evict for it (once per
	// position: see refusedAt); evictedNeeded the items evicted while the
	// job needed them within its window.
	refused       int64
	evictedNeeded int64
}

// markRead records a read of position p of the current order.
//
// Some reads never reach the daemon (a file the kernel still has in its
// page cache, a sample the loader skips), so the frontier can't wait for
// every position: items more than lag behind the latest read count as
// consumed.
// unseen, if not nil, is told of each position counted as read without a
// read of it having reached the daemon.
func (j *job) markRead(p int, unseen func(*job, int) uint8, undo func(*job, Item, uint8)) {
	if m := j.late[p]; m != 0 {
		// A read the lag had given up on: the readers spread further
		// than learnt. It counts as the job's read, widens the lag, and
		// what its passing recorded is taken back.
		j.late[p] = 0
		j.totalReads++
		j.spread = min(max(j.spread, j.head-p), maxLag)
		if undo != nil {
			undo(j, j.cur.items[p], m)
		}
		return
	}
	j.read[p] = true
	j.nread++
	j.totalReads++
	if p < j.head {
		j.spread = min(max(j.spread, j.head-p), maxLag)
	}
	j.head = max(j.head, p)
	if behind := j.head - j.lag(); j.frontier < behind {
		for q := j.frontier; q < behind; q++ {
			if !j.read[q] {
				j.read[q], j.late[q] = true, lateFlag
				j.nread++
				if unseen != nil {
					j.late[q] |= unseen(j, q)
				}
			}
		}
		j.frontier = behind
	}
	for j.frontier < len(j.read) && j.read[j.frontier] {
		j.frontier++
	}
	if j.scan < j.frontier {
		j.scan = j.frontier
	}
}

// lag is how far the frontier may trail the furthest read: loader workers
// each read a batch at a time, prefetch_factor batches ahead, so reads
// spread over up to thousands of positions behind the furthest. It is
// twice the furthest behind the head a read has landed (spread) plus
// minLag, once enough reads were seen to know (before, and at most:
// maxLag, or four windows).
// Too large a lag keeps positions the readers passed unseen (the kernel
// served them from its page cache: typical when several jobs read one
// dataset) counted as needed, holding cache space for nothing; too small
// marks as read what a slow worker still reads, which then counts as a
// read of another job's.
func (j *job) lag() int {
	old := max(maxLag, 4*j.window)
	if j.totalReads < spreadEvidence {
		return old
	}
	return min(max(2*j.spread+minLag, minLag), old)
}

// A late mark: lateFlag for a position counted read by the lag; with
// lateFetched if it had been fetched ahead (counted in prefetchUnseen);
// lateSample the page-cache sample its passing gave
// (pageCacheModel.passedUnseen), 0 if none.
const (
	lateFlag    uint8 = 0x40
	lateFetched uint8 = 0x80
	lateSample  uint8 = 0x3f
)

const (
	maxLag         = 8192
	minLag         = 64
	spreadEvidence = 256 // reads seen before the spread is trusted
)

// tolerance is how far past the frontier a read may land and still count
// for the job (further ones are taken for another job's).
func (j *job) tolerance() int { return 2 * max(maxLag, 4*j.window) }

// start makes o the current order, from now.
func (j *job) start(o *order, now time.Time) {
	j.cur = o
	j.epochStart = now
	j.read = make([]bool, len(o.items))
	j.late = make([]uint8, len(o.items))
	// The readers' spread is learnt again each epoch, from half the last
	// one's: a few stalls once must not hold the lag wide for good.
	j.spread /= 2
	j.frontier, j.nread, j.scan, j.head, j.epochStalls = 0, 0, 0, -1, 0
	j.push.reset(len(o.items))
	// Items fetched ahead from the order that is now current stay
	// counted (prefetch of the next epoch).
	kept := make(map[cache.ObjectID]struct{})
	for id := range j.fetchedAhead {
		if _, ok := o.posOf(id); ok {
			kept[id] = struct{}{}
		}
	}
	j.fetchedAhead = kept
	j.refusedAt = -1
	// An empty file has nothing to fetch, and its reads may never reach
	// the daemon (the kernel knows it is empty): it counts as read.
	for p, it := range o.items {
		if o.objs.Empty(it.Ref) {
			j.read[p] = true
			j.nread++
		}
	}
	for j.frontier < len(j.read) && j.read[j.frontier] {
		j.frontier++
	}
}

// itemAt returns the item at scan position p (current order, then next)
// and its object.
func (j *job) itemAt(p int) (Item, backend.Object, bool) {
	if p < len(j.cur.items) {
		it := j.cur.items[p]
		return it, j.cur.objs.Object(it.Ref), true
	}
	if j.next != nil && p-len(j.cur.items) < len(j.next.items) {
		it := j.next.items[p-len(j.cur.items)]
		return it, j.next.objs.Object(it.Ref), true
	}
	return Item{}, backend.Object{}, false
}

// JobStats are one job's figures.
type JobStats struct {
	Mount        string
	Name         string
	UID          uint32 // the user who owns the job
	Epoch        int
	Declared     int     // items in the current epoch's order
	NextDeclared int     // items in the next epoch's order, 0 if not declared
	Read         int     // items of the current epoch read
	Frontier     int     // first unread position of the current epoch
	Window       int     // prefetch window, items
	ReadRate     float64 // items per second, smoothed
	TotalReads   int64
	Prefetched   int64
	PrefetchHits int64
	Stalls       int64
	// HitRate is the share of this epoch's positions passed so far whose
	// read didn't find the item uncached (positions passed unseen, which
	// the kernel's page cache served, count as hits); StallSeconds the
	// time the requests that found their item uncached took, all epochs;
	// PrefetchEvicted the items fetched ahead for the job and evicted
	// before it read them, PrefetchUnseen those its readers then
	// got from the kernel's page cache; AdmissionsRefused the items of
	// its window that prefetch left because the cache would not evict
	// for them, EvictedInWindow the items evicted while it needed them
	// within its window (the policy's trace: see docs/multijob.md).
	HitRate           float64
	StallSeconds      float64
	PrefetchEvicted   int64
	PrefetchUnseen    int64
	AdmissionsRefused int64
	EvictedInWindow   int64
	IdleSeconds       float64
	// Pushed counts the files put into the kernel's page cache ahead of
	// the readers (push.go), all epochs.
	Pushed int64
	// StallHistogram counts the stalls whose time StallSeconds sums, by
	// how long each took (the daemon's metrics; not in the stats JSON).
	StallHistogram StallHistogram
}

func (j *job) stats(now time.Time) JobStats {
	s := JobStats{
		Mount: j.mount.name, Name: j.name, UID: j.owner, Epoch: j.cur.epoch, Declared: len(j.cur.items),
		Read: j.nread, Frontier: j.frontier, Window: j.window, ReadRate: j.rate,
		TotalReads: j.totalReads, Prefetched: j.prefetched, PrefetchHits: j.prefetchHits, Stalls: j.stalls,
		IdleSeconds:  now.Sub(j.lastActive).Seconds(),
		StallSeconds: j.stallTime.Seconds(), StallHistogram: j.stallHist, PrefetchEvicted: j.prefetchEvicted,
		PrefetchUnseen: j.prefetchUnseen, AdmissionsRefused: j.refused, EvictedInWindow: j.evictedNeeded,
		Pushed: j.push.count,
	}
	if j.nread > 0 {
		s.HitRate = 1 - float64(j.epochStalls)/float64(j.nread)
	}
	if j.next != nil {
		s.NextDeclared = len(j.next.items)
	}
	return s
}
