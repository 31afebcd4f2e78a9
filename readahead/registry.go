package readahead

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
)

// Defaults for Config's zero values.
const (
	DefaultJobTimeout  = 10 * time.Minute
	DefaultParallel    = 64
	DefaultWindowBytes = 1 << 30
	DefaultLead        = time.Second
	// MinWindow is the fewest items a job's window holds: enough for a few
	// loader workers before any rate is known.
	MinWindow = 32
	// MaxDeclared bounds one epoch's declaration.
	MaxDeclared = 10_000_000
	// MaxJobsPerUser bounds the jobs one user may have on a mount, except
	// where a declaration may override ownership (root, the mount's
	// owner): a user of a shared node can't fill the registry.
	MaxJobsPerUser = 16
	// MaxJobsPerMount bounds a mount's jobs, every user's together, the
	// overriding ones' included: each read on the mount looks at every
	// job of it (Observe), so the jobs of a node's many users, or a
	// script declaring a job per run and never ending them, must not
	// make every read slower without bound. A declaration that would
	// make one more is refused (ErrTooManyJobsOnMount); redeclaring an
	// existing job is always allowed.
	MaxJobsPerMount = 256
)

// Config configures a Registry. The zero value of each field picks a
// default.
type Config struct {
	Logger *slog.Logger
	// JobTimeout: a job with no reads and no declarations for this long is
	// forgotten.
	JobTimeout time.Duration
	// Parallel bounds prefetch fetches in flight, all jobs together.
	Parallel int
	// WindowBytes bounds the bytes a job's window covers ahead of its
	// frontier.
	WindowBytes int64
	// Lead is the least reading time a job's window covers at its read
	// rate, so a store that pauses for less than that goes unnoticed.
	Lead time.Duration
	// Fallback decides eviction while no job is declared. Default
	// cache.NewFillAndHold().
	Fallback cache.Policy
	// Capacity reports the cache's capacity and use, for prefetch
	// admission; nil means unlimited. The daemon passes the cache's.
	Capacity func() (capacity, used int64)
	// Now is the clock; tests set it. Default time.Now.
	Now func() time.Time
	// NoPrefetch turns prefetching off, leaving tracking and the policy:
	// for measuring the policy alone.
	NoPrefetch bool
	// PolicyInstalled says the cache evicts with Policy(): prefetch then
	// skips what the policy would not keep. Under another policy it
	// prefetches regardless (a chunk the cache doesn't keep still reaches
	// its reader through the staging area).
	PolicyInstalled bool
	// NoPush turns off pushing declared jobs' cached files into the
	// kernel's page cache (push.go).
	NoPush bool
}

// Registry holds the declared jobs of every mount sharing one cache, runs
// their prefetching, and provides the order-aware Policy. Close stops its
// goroutines.
type Registry struct {
	cfg    Config
	policy *orderPolicy

	mu   sync.RWMutex
	jobs map[jobKey]*job
	// gen counts declarations and removals; reads counts matched reads.
	// Both tell the policy when its ranking is stale.
	gen   atomic.Uint64
	reads atomic.Uint64
	// pc learns how long the kernel's page cache holds what the daemon
	// served (pagecache.go); under mu.
	pc pageCacheModel

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	pf     prefetchState
}

type jobKey struct {
	mount *Mount
	owner uint32 // jobs are named per user: two users' "train" are two jobs
	name  string
}

// New starts a Registry: Prepare, then Start with cfg.Capacity.
func New(cfg Config) *Registry {
	r := Prepare(cfg)
	r.Start(cfg.Capacity)
	return r
}

// Prepare builds a Registry without starting it, so that its Policy can go
// into cache.Open before the cache exists whose capacity Start is given:
// the daemon's start-up is Prepare, cache.Open, Start. Nothing may be
// mounted or declared before Start; Close is safe either way.
func Prepare(cfg Config) *Registry {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.JobTimeout <= 0 {
		cfg.JobTimeout = DefaultJobTimeout
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel
	}
	if cfg.WindowBytes <= 0 {
		cfg.WindowBytes = DefaultWindowBytes
	}
	if cfg.Lead <= 0 {
		cfg.Lead = DefaultLead
	}
	if cfg.Fallback == nil {
		cfg.Fallback = cache.NewFillAndHold()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Registry{cfg: cfg, jobs: make(map[jobKey]*job), wake: make(chan struct{}, 1)}
	r.policy = &orderPolicy{r: r, fallback: cfg.Fallback, resident: make(map[cache.ObjectID]struct{})}
	r.pf.inflight = make(map[cache.ObjectID]bool)
	r.pf.latency = 0.05
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// Start sets how the registry learns the cache's capacity and use (nil:
// unlimited) and starts its scheduler. Call it once, after Prepare.
func (r *Registry) Start(capacity func() (capacity, used int64)) {
	r.cfg.Capacity = capacity
	r.wg.Add(1)
	go r.schedule()
}

// Policy is the order-aware eviction policy; give it to cache.Open.
func (r *Registry) Policy() cache.Policy { return r.policy }

// Close stops prefetching and waits for prefetches in flight.
func (r *Registry) Close() {
	r.cancel()
	r.wg.Wait()
}

// Mount is one mount's view of the registry.
type Mount struct {
	r      *Registry
	name   string
	src    *cache.Source
	owners owners
}

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

// Errors of Declare. They are plain values the control entry reports.
var (
	ErrEmpty   = errors.New("the declared order names no files")
	ErrTooMany = fmt.Errorf("a declared order may name at most %d files", MaxDeclared)
	ErrNoJob   = errors.New("no job name")
	// ErrTooManyJobs: the user has MaxJobsPerUser jobs on the mount.
	ErrTooManyJobs = fmt.Errorf("a user may have at most %d jobs on a mount: end one first", MaxJobsPerUser)
	// ErrTooManyJobsOnMount: the mount has MaxJobsPerMount jobs.
	ErrTooManyJobsOnMount = fmt.Errorf("a mount may have at most %d jobs, all users' together: end one first", MaxJobsPerMount)
)

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
	k := jobKey{m, d.Owner, d.Job}
	j := r.jobs[k]
	switch {
	case j == nil && !d.Override && m.jobsOf(d.Owner) >= MaxJobsPerUser:
		r.mu.Unlock()
		return Declared{}, ErrTooManyJobs
	case j == nil && m.jobCount() >= MaxJobsPerMount:
		r.mu.Unlock()
		return Declared{}, ErrTooManyJobsOnMount
	case j == nil:
		j = &job{mount: m, name: d.Job, rateAt: now, owner: d.Owner}
		r.jobs[k] = j
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
	j.push.pusher = d.Pusher
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
// object by one reference): a bit per reference, where a set of a
// million IDs cost tens of megabytes for the moment of a declaration.
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

// jobsOf counts the mount's jobs owned by uid; r.mu is held.
func (m *Mount) jobsOf(uid uint32) int {
	n := 0
	for k, j := range m.r.jobs {
		if k.mount == m && j.owner == uid {
			n++
		}
	}
	return n
}

// jobCount counts the mount's jobs, every user's; r.mu is held.
func (m *Mount) jobCount() int {
	n := 0
	for k := range m.r.jobs {
		if k.mount == m {
			n++
		}
	}
	return n
}

// End forgets owner's job of that name; false if there was none. With
// override (root, the mount's owner) and no job of that name of the
// owner's own, it forgets every user's job of that name.
func (m *Mount) End(name string, owner uint32, override bool) bool {
	r := m.r
	r.mu.Lock()
	k := jobKey{m, owner, name}
	_, ok := r.jobs[k]
	delete(r.jobs, k)
	if !ok && override {
		for k := range r.jobs {
			if k.mount == m && k.name == name {
				delete(r.jobs, k)
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
	for k := range r.jobs {
		if k.mount == m {
			delete(r.jobs, k)
		}
	}
	r.mu.Unlock()
	r.gen.Add(1)
}

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
	for k, j := range r.jobs {
		if k.mount != m {
			continue
		}
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
	jobs := 0
	for k := range r.jobs {
		if k.mount == m {
			jobs++
		}
	}
	var matched []*job
	var nearest *job
	nearestGap := math.MaxInt
	for k, j := range r.jobs {
		if k.mount != m || j.pid != owner || (owner == 0 && !j.anyReader && j.owner != uid) {
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

// Jobs returns the mount's jobs, by name.
func (m *Mount) Jobs() []JobStats {
	r := m.r
	now := r.cfg.Now()
	r.mu.RLock()
	out := []JobStats{} // never nil: stats lists no jobs as []
	for k, j := range r.jobs {
		if k.mount == m {
			out = append(out, j.stats(now))
		}
	}
	r.mu.RUnlock()
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out
}

// expire forgets jobs idle for longer than the timeout.
func (r *Registry) expire(now time.Time) {
	r.mu.Lock()
	n := 0
	for k, j := range r.jobs {
		if now.Sub(j.lastActive) > r.cfg.JobTimeout {
			r.cfg.Logger.Info("readahead: job expired", "mount", k.mount.name, "job", k.name, "idle", now.Sub(j.lastActive).Round(time.Second))
			delete(r.jobs, k)
			n++
		}
	}
	r.mu.Unlock()
	if n > 0 {
		r.gen.Add(1)
	}
}

// distance is Belady's distance of id over all jobs: the fewest items any
// job reads before it needs id; false if no job's declared orders still
// name it. r.mu is held (read).
func (r *Registry) distance(id cache.ObjectID) (int64, bool) {
	best, found := int64(0), false
	for _, j := range r.jobs {
		if d, ok := j.distance(id); ok && (!found || d < best) {
			best, found = d, true
		}
	}
	return best, found
}

func (r *Registry) kick() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}
