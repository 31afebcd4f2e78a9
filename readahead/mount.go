package readahead

import (
	"github.com/dsmount/dsmount/cache"
)

// Mount is one mount's view of the registry.
type Mount struct {
	r      *Registry
	name   string
	src    *cache.Source
	owners owners
	// jobs are the mount's declared jobs; Registry.mu guards the map. The
	// mount is in Registry.mounts while it holds one (addJob, removeJob).
	jobs map[jobKey]*job
}

// jobKey names a job within its mount: jobs are named per user, so two
// users' "train" are two jobs.
type jobKey struct {
	owner uint32
	name  string
}

// addJob makes j the mount's job k; r.mu is held.
func (m *Mount) addJob(k jobKey, j *job) {
	if m.jobs == nil {
		m.jobs = make(map[jobKey]*job)
	}
	m.jobs[k] = j
	m.r.mounts[m] = struct{}{}
}

// removeJob forgets the mount's job k, if any; r.mu is held.
func (m *Mount) removeJob(k jobKey) {
	delete(m.jobs, k)
	if len(m.jobs) == 0 {
		delete(m.r.mounts, m)
	}
}

// stillDeclared reports whether j is still its mount's job of its name
// (not ended, expired, or ended and declared anew); r.mu is held.
func (j *job) stillDeclared() bool { return j.mount.jobs[jobKey{j.owner, j.name}] == j }

// Mount registers a mount (named for stats, e.g. its mountpoint) whose
// reads go through src.
func (r *Registry) Mount(name string, src *cache.Source) *Mount {
	return &Mount{r: r, name: name, src: src}
}

// Declaration is one job's declared order for an epoch and, optionally,
// the next.
type Declaration struct {
	Job     string
	Epoch   int
	Current []Item
	Next    []Item
	// Objects resolves the items' references.
	Objects Objects
	// Pusher, if set, puts the order's cached files into the kernel's
	// page cache ahead of the readers (push.go).
	Pusher Pusher
	// PushFetched pushes each item of the push window as soon as
	// prefetch has fetched it, not only those cached when the window
	// reaches them: for ranges of files bigger than the cache, where
	// nothing is cached ahead but what prefetch brings, and a range the
	// readers fault on unpushed costs the kernel's readahead around it
	// from the store.
	PushFetched bool
	// PID is the declaring process, if known: reads by it and its
	// descendants (loader workers) are attributed to this job alone.
	PID int
	// Owner is the declaring user. Jobs are named per user: a
	// declaration sets the owner's job of that name, and no other user's.
	// Override (the caller is root or the mount's owner) lifts
	// MaxJobsPerUser.
	Owner    uint32
	Override bool
}

// Declared reports what a declaration kept.
type Declared struct {
	Current, Next int // items kept
	Duplicates    int // repeated items left out (each item is read once per epoch)
}

// Declare sets a job's order for an epoch (creating the job), replacing any
// earlier declaration of that job. Other jobs are untouched.
func (m *Mount) Declare(d Declaration) (Declared, error) {
	if d.Job == "" {
		return Declared{}, ErrNoJob
	}
	if len(d.Current) > MaxDeclared || len(d.Next) > MaxDeclared {
		return Declared{}, ErrTooMany
	}
	cur, dupCur := dedup(d.Current)
	next, dupNext := dedup(d.Next)
	if len(cur) == 0 {
		return Declared{}, ErrEmpty
	}
	r := m.r
	now := r.cfg.Now()
	r.mu.Lock()
	k := jobKey{d.Owner, d.Job}
	j := m.jobs[k]
	if j == nil {
		if err := m.roomForJob(d.Owner, d.Override); err != nil {
			r.mu.Unlock()
			return Declared{}, err
		}
		j = &job{jobIdentity: jobIdentity{mount: m, name: d.Job, owner: d.Owner}, jobSchedule: jobSchedule{rateAt: now}}
		m.addJob(k, j)
	}
	// A job declaring each epoch with the next (the Python sampler does)
	// declares as current what it declared as next last time: that order
	// is reused, not built again (a million-item map).
	curOrder := j.next
	if curOrder.sameItems(cur) {
		curOrder.epoch = d.Epoch
	} else {
		curOrder = newOrder(d.Epoch, cur, d.Objects)
	}
	j.push.pusher, j.push.eager = d.Pusher, d.PushFetched
	j.start(curOrder, now)
	j.pid = d.PID
	j.anyReader = d.Override
	j.next = nil
	if len(next) > 0 {
		j.next = newOrder(d.Epoch+1, next, d.Objects)
	}
	j.lastActive = now
	r.mu.Unlock()
	r.gen.Add(1)
	r.kick()
	return Declared{Current: len(cur), Next: len(next), Duplicates: dupCur + dupNext}, nil
}

// dedup leaves out the repeats of a reference (one Objects names one
// object by one reference): a bit per reference, since a set of IDs, for a
// million-item declaration, is a large allocation for a moment.
func dedup(items []Item) ([]Item, int) {
	maxRef := uint32(0)
	for _, it := range items {
		maxRef = max(maxRef, it.Ref)
	}
	seen := make([]uint64, maxRef/64+1)
	out := make([]Item, 0, len(items))
	for _, it := range items {
		w, bit := it.Ref/64, uint64(1)<<(it.Ref%64)
		if seen[w]&bit != 0 {
			continue
		}
		seen[w] |= bit
		out = append(out, it)
	}
	return out, len(items) - len(out)
}

// End forgets owner's job of that name; false if there was none. With
// override (root, the mount's owner) and no job of that name of the
// owner's own, it forgets every user's job of that name.
func (m *Mount) End(name string, owner uint32, override bool) bool {
	r := m.r
	r.mu.Lock()
	k := jobKey{owner, name}
	_, ok := m.jobs[k]
	m.removeJob(k)
	if !ok && override {
		for k := range m.jobs {
			if k.name == name {
				m.removeJob(k)
				ok = true
			}
		}
	}
	r.mu.Unlock()
	if ok {
		r.gen.Add(1)
	}
	return ok
}

// Close forgets every job of the mount.
func (m *Mount) Close() {
	r := m.r
	r.mu.Lock()
	clear(m.jobs)
	delete(r.mounts, m)
	r.mu.Unlock()
	r.gen.Add(1)
}
