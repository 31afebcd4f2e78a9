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
func (m *Mount) Observe(obj backend.Object, id cache.ObjectID, pid int, uid uint32) (done func()) {
	r := m.r
	r.mu.RLock()
	var buf [8]int // declaring processes; on the stack for the usual few jobs
	pids := buf[:0]
	fresh := false
	for _, j := range m.jobs {
		if j.pid != 0 {
			pids = append(pids, j.pid)
		}
		fresh = fresh || j.wants(id)
	}
	r.mu.RUnlock()
	if !fresh {
		return nil
	}
	owner := 0
	if len(pids) > 0 && pid > 0 {
		owner = m.owners.find(pid, pids)
	}
	cached := m.src.Cached(obj)
	now := r.cfg.Now()
	r.mu.Lock()
	jobs := len(m.jobs)
	var matched []*job
	var nearest *job
	nearestGap := math.MaxInt
	for _, j := range m.jobs {
		if j.pid != owner || (owner == 0 && !j.anyReader && j.owner != uid) {
			continue
		}
		if owner != 0 {
			if j.wants(id) {
				matched = append(matched, j)
			}
			continue
		}
		if _, ok := j.cur.posOf(id); !ok && jobs > 1 {
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
		// the file somewhere else in its order, moved that job's spread
		// by thousands (frontier stuck at 1,825 of 10,000 in
		// bench jobs --declare anonymous).
		if !j.wants(id) && !j.readNear(id) {
			continue
		}
		if gap := j.gap(id); gap < nearestGap {
			nearest, nearestGap = j, gap
		}
	}
	if nearest != nil && nearest.wants(id) {
		matched = append(matched, nearest)
	}
	unseen := func(j *job, q int) uint8 {
		it := j.cur.items[q]
		// A pushed file was passed unseen because it was pushed: it says
		// nothing of how long the page cache keeps what was served.
		var m uint8
		if !j.push.pushed(q) {
			m = r.pc.passedUnseen(it.ID, now, j.epochStart)
		}
		if _, ahead := j.fetchedAhead[it.ID]; ahead {
			j.prefetchUnseen++
			delete(j.fetchedAhead, it.ID)
			m |= lateFetched
		}
		return m
	}
	undo := func(j *job, it Item, m uint8) {
		r.pc.unsee(m & lateSample)
		if m&lateFetched != 0 {
			j.prefetchUnseen--
			j.prefetchHits++
		}
	}
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
		j.markRead(int(p), unseen, undo)
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
	r.mu.Unlock()
	if len(matched) == 0 {
		return nil
	}
	// No wake-up: the scheduler polls while jobs exist (see fillEvery).
	r.reads.Add(1)
	if cached {
		return nil
	}
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
