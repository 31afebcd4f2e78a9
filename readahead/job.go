package readahead

import (
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
)

// Item is one entry of a declared order: an object and the cache's name for
// its version.
type Item struct {
	Obj backend.Object
	ID  cache.ObjectID
}

// order is one epoch's declared sequence.
type order struct {
	epoch int
	items []Item
	pos   map[cache.ObjectID]int32
	bytes int64
}

func newOrder(epoch int, items []Item) *order {
	o := &order{epoch: epoch, items: items, pos: make(map[cache.ObjectID]int32, len(items))}
	for i, it := range items {
		o.pos[it.ID] = int32(i)
		o.bytes += it.Obj.Size
	}
	return o
}

// job is one declared job's progress. Guarded by Registry.mu.
//
// Invariants: 0 <= frontier <= len(cur.items); read[p] for every p <
// frontier; nread counts the true entries of read.
type job struct {
	mount *Mount
	name  string

	cur      *order
	next     *order // nil when not declared
	read     []bool
	frontier int
	nread    int
	// head is the furthest position read (-1 before the first read):
	// loader workers read a spread of positions between frontier and head.
	head int
	// pid is the process that declared the order (0: unknown, e.g. the
	// CLI). Reads by it or its descendants (loader workers) are the job's.
	pid int
	// owner is the user who declared the job: jobs are named per user.
	// With no pid, only reads by owner count for the job, unless
	// anyReader (a privileged declarer's job: reads by any user count).
	owner     uint32
	anyReader bool

	// scan is where the prefetcher resumes: positions before it (and after
	// frontier) were already issued or found cached. It may run into the
	// next order: positions >= len(cur.items) index next.
	scan int

	lastActive time.Time

	// rate is the job's reads per second, smoothed; rateReads and rateAt
	// are the count and time of the last sample.
	rate      float64
	rateReads int64
	rateAt    time.Time

	totalReads   int64 // items read, all epochs
	prefetched   int64 // items fetched ahead by the prefetcher
	prefetchHits int64 // first reads of an item that a prefetch had fetched
	stalls       int64 // first reads of an item that was not cached yet
	fetchedAhead map[cache.ObjectID]struct{}
	window       int
}

// distance is how many of its items the job reads before it needs id
// again, and whether it ever does (in the declared orders).
func (j *job) distance(id cache.ObjectID) (int64, bool) {
	if p, ok := j.cur.pos[id]; ok && !j.read[p] {
		return int64(int(p) - j.frontier), true
	}
	if j.next != nil {
		if q, ok := j.next.pos[id]; ok {
			return int64(len(j.cur.items) - j.frontier + int(q)), true
		}
	}
	return 0, false
}

// markRead records a read of position p of the current order.
//
// Some reads never reach the daemon (a file the kernel still has in its
// page cache, a sample the loader skips), so the frontier can't wait for
// every position: items more than lag behind the latest read count as
// consumed.
func (j *job) markRead(p int) {
	j.read[p] = true
	j.nread++
	j.totalReads++
	j.head = max(j.head, p)
	if behind := j.head - j.lag(); j.frontier < behind {
		for q := j.frontier; q < behind; q++ {
			if !j.read[q] {
				j.read[q] = true
				j.nread++
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
// spread over thousands of positions.
func (j *job) lag() int { return max(8192, 4*j.window) }

// tolerance is how far past the frontier a read may land and still count
// for the job (further ones are taken for another job's).
func (j *job) tolerance() int { return 2 * j.lag() }

// start makes o the current order.
func (j *job) start(o *order) {
	j.cur = o
	j.read = make([]bool, len(o.items))
	j.frontier, j.nread, j.scan, j.head = 0, 0, 0, -1
	j.fetchedAhead = make(map[cache.ObjectID]struct{})
	// An empty file has nothing to fetch, and its reads may never reach
	// the daemon (the kernel knows it is empty): it counts as read.
	for p, it := range o.items {
		if it.Obj.Size == 0 {
			j.read[p] = true
			j.nread++
		}
	}
	for j.frontier < len(j.read) && j.read[j.frontier] {
		j.frontier++
	}
}

// itemAt returns the item at scan position p (current order, then next).
func (j *job) itemAt(p int) (Item, bool) {
	if p < len(j.cur.items) {
		return j.cur.items[p], true
	}
	if j.next != nil && p-len(j.cur.items) < len(j.next.items) {
		return j.next.items[p-len(j.cur.items)], true
	}
	return Item{}, false
}

// JobStats are one job's figures.
type JobStats struct {
	Mount        string  `json:"mount"`
	Name         string  `json:"name"`
	UID          uint32  `json:"uid"` // the user who owns the job
	Epoch        int     `json:"epoch"`
	Declared     int     `json:"declared"`      // items in the current epoch's order
	NextDeclared int     `json:"next_declared"` // items in the next epoch's order, 0 if not declared
	Read         int     `json:"read"`          // items of the current epoch read
	Frontier     int     `json:"frontier"`      // first unread position of the current epoch
	Window       int     `json:"window"`        // prefetch window, items
	ReadRate     float64 `json:"read_rate"`     // items per second, smoothed
	TotalReads   int64   `json:"total_reads"`
	Prefetched   int64   `json:"prefetched"`
	PrefetchHits int64   `json:"prefetch_hits"`
	Stalls       int64   `json:"stalls"`
	IdleSeconds  float64 `json:"idle_seconds"`
}

func (j *job) stats(now time.Time) JobStats {
	s := JobStats{
		Mount: j.mount.name, Name: j.name, UID: j.owner, Epoch: j.cur.epoch, Declared: len(j.cur.items),
		Read: j.nread, Frontier: j.frontier, Window: j.window, ReadRate: j.rate,
		TotalReads: j.totalReads, Prefetched: j.prefetched, PrefetchHits: j.prefetchHits, Stalls: j.stalls,
		IdleSeconds: now.Sub(j.lastActive).Seconds(),
	}
	if j.next != nil {
		s.NextDeclared = len(j.next.items)
	}
	return s
}
