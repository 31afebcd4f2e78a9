package readahead

// Pusher puts a cached item's bytes into the kernel's page cache for the
// mount's file, so that its readers' read of it is a page-cache hit that
// never reaches the daemon (the file system's FUSE_NOTIFY_STORE). Push
// queues item ref of objs (the order's Objects: a file, or a range of
// one) and returns at once: false, never calling done, if it can take no
// more now; otherwise done is called once, later and from another
// goroutine (never from within Push), with whether the item was pushed
// (one not cached, or that the kernel holds no inode for, is left to the
// readers' own read).
type Pusher interface {
	Push(objs Objects, ref uint32, done func(pushed bool)) bool
}

// Pushing a declared job's cached files ahead of its readers.
//
// A read from the cache disk costs the readers a round trip through the
// daemon each, with the disk read inside it. A declared job's next files
// are known, so the daemon reads them from the cache disk ahead of the
// readers, many at a time, and pushes them into the kernel's
// page cache: the readers then read them as a hot file.
//
// A pushed file's read never reaches the daemon, and reads are how the
// registry learns where a job's readers are. So every pushEvery-th
// position is left for the readers to read through the daemon: those
// reads move the job's furthest read (head), and the push window follows
// it, pushBytes ahead. Where the page cache already holds every file
// (a hot epoch), no read comes, and pushing stops at the first window.
const (
	pushEvery = 32
	pushBytes = 32 << 20
)

// pushes are a job's pushing state; Registry.mu guards them.
type pushes struct {
	pusher Pusher
	// eager: push each item of the window once prefetched
	// (Declaration.PushFetched).
	eager bool
	// scan is where pushing resumes in the current order.
	scan int
	// done marks the positions pushed (a bit each); count is how many
	// files were pushed, all epochs.
	done  []uint64
	count int64
}

func (ps *pushes) reset(n int) {
	ps.scan = 0
	ps.done = nil
	if ps.pusher != nil {
		ps.done = make([]uint64, (n+63)/64)
	}
}

func (ps *pushes) pushed(p int) bool {
	return p/64 < len(ps.done) && ps.done[p/64]&(1<<(p%64)) != 0
}

// pushSpan is how many positions past its furthest read a job's files
// are pushed: pushBytes at the order's mean size.
func pushSpan(j *job) int {
	if j.cur.meanSize <= 0 {
		return 2 * pushEvery
	}
	return int(max(pushBytes/j.cur.meanSize, 2*pushEvery))
}

// queuePushes hands the pusher the files of each job's push window that
// it has not been handed yet, as far as it takes them. r.mu is held.
func (r *Registry) queuePushes() {
	if r.cfg.NoPrefetch || r.cfg.NoPush {
		return
	}
	for _, j := range r.allJobs() {
		ps := &j.push
		if ps.pusher == nil {
			continue
		}
		o := j.cur
		p := max(ps.scan, j.head+1)
		end := min(j.head+1+pushSpan(j), len(o.items))
		for ; p < end; p++ {
			if p%pushEvery == pushEvery-1 || j.read[p] {
				continue
			}
			if !ps.pusher.Push(o.objs, o.items[p].Ref, r.pushed(j, o, p)) {
				break
			}
		}
		ps.scan = p
	}
}

// pushed is the report of position p of job j's order o: a file pushed
// is marked, unless the job has moved on to another order since.
func (r *Registry) pushed(j *job, o *order, p int) func(bool) {
	return func(ok bool) {
		if !ok {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if ps := &j.push; j.cur == o && p/64 < len(ps.done) {
			ps.done[p/64] |= 1 << (p % 64)
			ps.count++
		}
	}
}

// pushFetched pushes position p of job j's current order, just
// prefetched, if the job pushes eagerly and p is in its push window and
// neither a position left for the readers nor read or pushed already.
// r.mu is held.
func (r *Registry) pushFetched(j *job, p int) {
	ps := &j.push
	if ps.pusher == nil || !ps.eager || r.cfg.NoPrefetch || r.cfg.NoPush {
		return
	}
	if p <= j.head || p >= j.head+1+pushSpan(j) || p%pushEvery == pushEvery-1 || (p < len(j.read) && j.read[p]) || ps.pushed(p) {
		return
	}
	ps.pusher.Push(j.cur.objs, j.cur.items[p].Ref, r.pushed(j, j.cur, p))
}
