package readahead

import (
	"math"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
)

// Observe tells the registry that obj (whose cache ID is id) is being read
// through the mount by process pid (0 if unknown) of user uid; call it
// before the read, so a read that has to wait for a fetch is counted as a
// stall, and call what it returns, if not nil, once the read is done: the
// time a read of an item that was not cached took counts as the jobs'
// stall time. Reads of items already counted cost a map lookup per job.
//
// A read counts for the jobs it can belong to: if jobs of the mount were
// declared by a process that is pid or one of its ancestors (or the
// process of the thread pid), for those alone; otherwise for the jobs with
// no known declaring process, of the reader's own user (a privileged
// declarer's such jobs: of any user's). Among those, a job counts it if
// the item is unread in its order and not implausibly far past its
// frontier; of several jobs with no known declaring process, only the one
// whose furthest read is nearest the item's position in its order counts
// it (each job's reads cluster around its own position; in another job's
// shuffled order the item is anywhere). So another user's reads, or
// another job's, can't move a job's frontier or epoch.
//
// Which jobs count the read is attribute's answer, which changes nothing;
// recordRead then applies it.
func (m *Mount) Observe(obj backend.Object, id cache.ObjectID, pid int, uid uint32) (done func()) {
	r := m.r
	var buf [8]int // declaring processes; on the stack for the usual few jobs
	r.mu.RLock()
	declarers, wanted := wantedBy(m.jobs, id, buf[:0])
	r.mu.RUnlock()
	if !wanted {
		return nil
	}
	// Outside r.mu, which every read needs: the reader's ancestry may be
	// read from /proc, and asking the cache takes its locks.
	obs := observation{id: id, uid: uid}
	if len(declarers) > 0 && pid > 0 {
		obs.declarer = m.owners.find(pid, declarers)
	}
	cached := m.src.Cached(obj)
	now := r.cfg.Now()
	r.mu.Lock()
	matched := attribute(m.jobs, obs)
	r.recordRead(matched, id, now, cached)
	r.mu.Unlock()
	if len(matched) == 0 {
		return nil
	}
	// No wake-up: the scheduler polls while jobs exist (see fillEvery).
	r.reads.Add(1)
	if cached {
		return nil
	}
	return r.timeStall(matched)
}

// observation is a read as attribution sees it.
type observation struct {
	id cache.ObjectID
	// declarer is the declaring process the reader is, descends from, or
	// is a thread of; 0 if none (or the reader is unknown).
	declarer int
	uid      uint32 // the reading user
}

// wantedBy reports whether a read of id may count for any of jobs, and
// appends to pids the processes that declared them (those that named
// one): the reader's ancestry is worth looking up only if so. It changes
// nothing; r.mu is held (read).
func wantedBy(jobs map[jobKey]*job, id cache.ObjectID, pids []int) ([]int, bool) {
	wanted := false
	for _, j := range jobs {
		if j.pid != 0 {
			pids = append(pids, j.pid)
		}
		wanted = wanted || j.wants(id)
	}
	return pids, wanted
}

// attribute returns the jobs of a mount (jobs) that count a read (see
// Observe): with a declarer, its jobs that want the item; without, at
// most one job, the reader's user's (or any user's, for a privileged
// declarer's) whose furthest read is nearest the item. It changes
// nothing; r.mu is held.
func attribute(jobs map[jobKey]*job, obs observation) []*job {
	if obs.declarer != 0 {
		return declaredBy(jobs, obs)
	}
	if j := nearest(jobs, obs); j != nil && j.wants(obs.id) {
		return []*job{j}
	}
	return nil
}

// declaredBy returns the jobs declared by obs.declarer that want its read.
func declaredBy(jobs map[jobKey]*job, obs observation) []*job {
	var matched []*job
	for _, j := range jobs {
		if j.pid == obs.declarer && j.wants(obs.id) {
			matched = append(matched, j)
		}
	}
	return matched
}

// nearest returns, of the jobs with no declaring process that obs's user
// may read for, the one whose furthest read is nearest the item among
// those that want it or read it moments ago; nil if none.
func nearest(jobs map[jobKey]*job, obs observation) *job {
	var best *job
	bestGap := math.MaxInt
	for _, j := range jobs {
		if j.pid != 0 || (!j.anyReader && j.owner != obs.uid) {
			continue
		}
		if _, ok := j.cur.posOf(obs.id); !ok && len(jobs) > 1 {
			// The job finished its epoch without declaring the next one
			// and reads the order it had declared as next. Only when the
			// read is surely its own: another job's read of the same file
			// must not move it into its next epoch.
			continue
		}
		// A job that read the file moments ago competes too: a file read
		// in several requests (the kernel splits a read into max_read
		// pieces, and readahead into more) reaches the daemon more than
		// once, and its second request, counted for the job that needs
		// the file somewhere else in its order, would throw that job's
		// spread, and its frontier, far off.
		if !j.wants(obs.id) && !j.readNear(obs.id) {
			continue
		}
		if gap := j.gap(obs.id); gap < bestGap {
			best, bestGap = j, gap
		}
	}
	return best
}

// recordRead applies a read of id, at now, to the jobs that count it
// (attribute's): a job whose current order is done and that id opens its
// next one starts it; each marks id read, counts a prefetch hit if it was
// fetched ahead, and a stall if it was not cached. The first job's epoch
// dates the page-cache model's sample. r.mu is held.
func (r *Registry) recordRead(matched []*job, id cache.ObjectID, now time.Time, cached bool) {
	unseen := func(j *job, q int) uint8 { return r.passedUnseen(j, q, now) }
	for i, j := range matched {
		if _, ok := j.cur.posOf(id); !ok {
			j.start(j.next, now)
			j.next = nil
			r.gen.Add(1)
		}
		if i == 0 {
			r.pc.servedNow(id, now, j.epochStart)
		}
		p, _ := j.cur.posOf(id)
		j.markRead(int(p), unseen, r.readLate)
		j.lastActive = now
		if _, ahead := j.fetchedAhead[id]; ahead {
			j.prefetchHits++
			delete(j.fetchedAhead, id)
		}
		if !cached {
			j.stalls++
			j.epochStalls++
		}
	}
}

// passedUnseen is what markRead is told of each position it counts as
// read, at now, with no read of it seen: the page cache served it (a
// sample for the page-cache model), and if it was fetched ahead, that
// fetch was for nothing. It returns the position's late mark.
func (r *Registry) passedUnseen(j *job, q int, now time.Time) uint8 {
	it := j.cur.items[q]
	// A pushed file was passed unseen because it was pushed: it says
	// nothing of how long the page cache keeps what was served.
	var mark uint8
	if !j.push.pushed(q) {
		mark = r.pc.passedUnseen(it.ID, now, j.epochStart)
	}
	if _, ahead := j.fetchedAhead[it.ID]; ahead {
		j.prefetchUnseen++
		delete(j.fetchedAhead, it.ID)
		mark |= lateFetched
	}
	return mark
}

// readLate takes back what passedUnseen recorded for a position (its late
// mark) whose read came after all.
func (r *Registry) readLate(j *job, _ Item, mark uint8) {
	r.pc.unsee(mark & lateSample)
	if mark&lateFetched != 0 {
		j.prefetchUnseen--
		j.prefetchHits++
	}
}

// timeStall returns what Observe's caller calls once a read of an item
// that was not cached is done: its time counts as the jobs' stall time.
func (r *Registry) timeStall(matched []*job) func() {
	start := time.Now()
	return func() {
		waited := time.Since(start)
		r.mu.Lock()
		for _, j := range matched {
			j.stallTime += waited
			j.stallHist.observe(waited)
		}
		r.mu.Unlock()
	}
}

// readNear reports whether id was read, by a read that reached the
// daemon, within the job's lag behind its furthest read.
func (j *job) readNear(id cache.ObjectID) bool {
	p, ok := j.cur.posOf(id)
	return ok && j.read[p] && j.late[p] == 0 && int(p) >= j.head-j.lag()
}

// gap is how far id's position in the job's order is from the job's
// furthest read (from the start of the next order, once the current one is
// done).
func (j *job) gap(id cache.ObjectID) int {
	if p, ok := j.cur.posOf(id); ok {
		return abs(int(p) - j.head)
	}
	p, _ := j.next.posOf(id) // 0 when absent, as a map's zero value was
	return int(p) + 1
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// wants reports whether a read of id may count for the job: id is unread in
// its current order (or only counted read by the lag) and not implausibly
// far past the frontier, or the
// current order is done and id opens the declared next one.
func (j *job) wants(id cache.ObjectID) bool {
	if p, ok := j.cur.posOf(id); ok {
		return (!j.read[p] || j.late[p] != 0) && int(p) < j.frontier+j.tolerance()
	}
	if j.next != nil && j.frontier == len(j.cur.items) {
		p, ok := j.next.posOf(id)
		return ok && int(p) < j.tolerance()
	}
	return false
}

// Pick returns which of ids (items that a read's bytes all belong to:
// declared ranges of one file that share its pages) the read most
// plausibly is: the one some job of the mount wants nearest its furthest
// read; -1 if no job wants any. Jobs that read windows of one file at
// random share its pages, and a read counted for a range far down a
// job's order would move the job's frontier there.
func (m *Mount) Pick(ids []cache.ObjectID) int {
	r := m.r
	r.mu.RLock()
	defer r.mu.RUnlock()
	best, bestGap := -1, math.MaxInt
	for _, j := range m.jobs {
		for k, id := range ids {
			// A range just read competes too: a window over two pages
			// comes in two READs, and the second, counted for another
			// range of its page far down the order, would move the
			// frontier there.
			if !j.wants(id) && !j.readNear(id) {
				continue
			}
			if gap := j.gap(id); gap < bestGap {
				best, bestGap = k, gap
			}
		}
	}
	return best
}
