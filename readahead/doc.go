// Package readahead owns what dsmount knows about the future: the sample
// orders that training jobs declare, how far each job has read, the
// prefetching that runs ahead of the readers, the order-aware eviction
// policy that keeps what will be needed soonest, and sequential readahead
// for large files.
//
// # Jobs and orders
//
// A job (a name, unique per mount and user) declares the files it will
// read in the current epoch, in order, and when known the next epoch's
// order too. A Registry serves every mount sharing one cache, and each
// Mount holds its own jobs. Reads on a mount are matched to its jobs: by the reading process when
// the job named its training process (a read by it, a descendant, or a
// thread of either counts for that job alone), otherwise to the one job of
// the reader's user whose own reads are nearest the item's position in its
// order (in another job's shuffle the item is anywhere). A matched read of
// an item still unread in the job's current order marks it read; the
// frontier (the first unread position) only moves forward. Loader workers
// read out of order, and reads the kernel serves from its page cache never
// reach the daemon, so positions more than a lag behind the furthest read
// count as read: the lag is twice the furthest behind that a read has
// landed, plus 64, learnt from the reads (and halved at each epoch, so
// one slow stretch doesn't hold it wide); a read that comes later than
// the lag allowed still counts, and widens it. A read of the next epoch's
// items after the current one is done promotes the next order. A job with
// no reads and no declarations for Config.JobTimeout expires.
//
// # Limits
//
// A declaration and the jobs it makes are bounded, each refusal a plain
// one-line error of Declare that leaves every other job as it was:
//
//   - MaxDeclared (10,000,000) items in an epoch's order, and as many in
//     the next's: ErrTooMany.
//   - MaxJobsPerUser (16) jobs of one user on a mount, unless the
//     declaration overrides (root, the mount's owner): ErrTooManyJobs.
//   - MaxJobsPerMount (256) jobs on a mount, every user's together and
//     overriding ones included: ErrTooManyJobsOnMount. Each read on a
//     mount looks at each of its jobs, so their number bounds a read's
//     cost.
//
// Redeclaring an existing job (a new epoch) is never refused by the job
// bounds. The file system bounds a declaration's bytes before it gets
// here (fs: the control request limits).
//
// # Prefetch
//
// One scheduler goroutine keeps each job's window filled: the next unread
// items after its frontier are cached or in flight. The window, in items,
// covers the larger of four times the measured fetch latency and
// Config.Lead (default 1 s) at the job's read rate, plus slack for the
// readers' own parallelism; it is at least MinWindow and bounded by
// Config.WindowBytes. Reads don't wake the scheduler (a read that did
// waited for the fill it caused, on a busy core); it polls every 10 ms
// while any job is declared, and a finished prefetch wakes it. Prefetches
// run at cache.Background priority, so a read that misses always gets a
// backend slot first, and through the cache's flights, so a prefetch and
// a read of one chunk make one GET. An item is prefetched only if the
// policy would admit it: prefetch never evicts data needed sooner than
// what it brings in. Prefetch starting from idle starts slow (16 in
// flight, one more per completion, up to Parallel): a declaration that
// sent Parallel GETs at once, each on a new connection, made the readers'
// first items wait for all of them.
//
// # Push
//
// A declaration may carry a Pusher (the file system's). The files of the
// job's order from its furthest read on, pushBytes ahead, are handed to
// it as the scheduler fills windows: it reads them from the cache and
// stores them into the kernel's page cache, so the readers' reads of
// them never reach the daemon. Every pushEvery-th position is left for
// the readers to read through the daemon: those reads are what moves the
// job's furthest read, and the push window with it (a pushed file's
// read is never seen). A pushed position passed unseen says nothing of
// how long the page cache keeps what was served, so the page-cache model
// takes no sample from it. Pusher.Push takes a callback it calls later
// from its own goroutine; the callback takes Registry.mu.
//
// # Large files
//
// Sequential readers of large files are package stream's (a Detector per
// file, a Budget per cache); nothing here depends on them.
//
// # Eviction
//
// The Registry's Policy is Belady's rule over the declared orders: the
// distance of an object is, over all jobs, the fewest items the job must
// read from its furthest read before it needs the object from the cache
// (current epoch, then next). The victim is the cached object farthest in
// the future; objects in no declared future go first. An incoming object
// farther in the future than every cached one is streamed through
// uncached. With no jobs declared, the fallback policy (fill-and-hold)
// decides.
//
// Where the kernel's page cache holds every file read in an epoch for
// the rest of it (it is larger than what the jobs read), the reads that
// reach the daemon are each file's first of an epoch, and the policy
// keeps what it holds (fill-and-hold), which serves such a sequence as
// well as anything can: the registry learns how long the page cache
// holds what the daemon served (pagecache.go: from files a job passed
// unseen, and files read again through the daemon) and stats says when
// it has fallen back. A smaller page cache changes nothing in the
// distances: a need the page cache may serve still counts, because
// skipping such needs lost more hits than it saved.
//
// When the cache is full, prefetch windows shrink to what hides the fetch
// latency: an item fetched earlier than it must be takes the room of one
// kept for a later read.
//
// docs/multijob.md compares these choices, several jobs sharing one
// cache, with an offline oracle; the figures that once sat in this
// package's comments are in docs/benchmarks-history.md.
//
// # Files
//
//   - registry.go: Config and its defaults, the Registry, its life (New,
//     Prepare, Start, Close), allJobs (every mount's jobs).
//   - mount.go: Mount, its jobs (addJob and removeJob keep
//     Registry.mounts in step), Declare, End, Close.
//   - limits.go: the bounds of a declaration and of a mount's jobs, and
//     Declare's errors.
//   - order.go, posindex.go: a declared order, and finding an item's
//     position in it.
//   - job.go: a job, its fields in four groups (identity, progress,
//     scheduling, counters), how reads move its frontier (markRead, lag),
//     and JobStats.
//   - attribute.go: Observe: which jobs a read counts for (attribute,
//     which changes nothing) and recording it (recordRead).
//   - distance.go: Belady's distance, per job and over every job.
//   - policy.go: the order policy, a cache.Policy.
//   - prefetch.go, throttle.go, push.go: the scheduler, its windows and
//     slow start, giving way to a throttling store, pushing into the
//     kernel's page cache.
//   - pagecache.go: what is learnt of the kernel's page cache.
//   - stats.go, stallhist.go: the jobs' figures.
//   - expiry.go: idle jobs are forgotten.
//   - owners.go: whether a reader descends from a declaring process.
//
// A Mount is in Registry.mounts exactly while it has a job, and a job is
// in its own mount's jobs under its owner and name; the registry-wide
// passes (scheduler, policy, expiry) see every job through allJobs.
//
// # Locking
//
// Registry.mu guards Registry.mounts, every Mount's jobs, every job but
// for its mount, name and owner (fixed when it is made), the page-cache
// model, and prefetchState's in-flight set and latency. The scheduler's
// slow-start and throttle state is its goroutine's alone; gen and reads
// are atomic. The policy's own mutex guards what it knows is cached; it
// is taken after Registry.mu (read), never the other way (Removed
// releases it before taking Registry.mu). Registry.mu is never held while
// calling into the cache (which calls the policy with its own locks held)
// or while walking /proc (owners has its own mutex). Pusher.Push is called
// under Registry.mu and must return at once; its callback takes
// Registry.mu from the pusher's goroutine.
//
// # Stability
//
// A public package by the project's layout, with an API built for
// dsmount's daemon (internal/daemon): a Registry is prepared, given to
// cache.Open as its policy, then started with the open cache's capacity
// (Prepare, Start; New does both for callers that know the capacity).
// It may change with the daemon.
package readahead
