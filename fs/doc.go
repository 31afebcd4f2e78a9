// Package fs is dsmount's read-only FUSE filesystem (go-fuse v2): it turns a
// backend listing into a directory tree and serves file reads through the
// cache's view of the store (Config.Source).
//
// # Dependencies
//
// A mount takes what it needs of the packages below it as interfaces that
// fs owns (deps.go), each with only the methods fs calls:
//
//   - Cache: ChunkSize, Dir (the passthrough probe), Capacity and Used
//     (warm plans);
//   - Source: Backend, ReadAt and ReadAtStream (the read path),
//     PrefetchWatched, ObjectID, OpenCached (passthrough), ReadCached
//     NewBatch and ReadStaged (pushes and batched READs), CachedBytes, NumChunks, ChunkLen,
//     ChunkCached and Warm (the control entry's warm), Stats;
//   - Readahead (optional): Declare and End (orders), Jobs (stats),
//     Observe (every read, before it is served).
//
// The daemon passes *cache.Cache, *cache.Source and *readahead.Mount; a
// nil *readahead.Mount counts as no readahead. Config.Streams stays a
// *stream.Budget: a budget fs only hands to stream.NewDetector.
// Reads go through these interfaces with no allocation of their own
// (TestReadAllocations holds that).
//
// # Tree
//
// The tree is built once per mount from the listing (tree.go) and never
// changes while mounted: the data is immutable, so the kernel may keep
// entries, attributes and pages for a long time (see Mount's timeouts and
// FOPEN_KEEP_CACHE). Directories come from key prefixes; S3 directory markers
// ("a/b/") only make sure a directory exists. Keys that can't be file names
// (empty, "." or ".." components, NUL bytes, components over 255 bytes, a
// file shadowed by a directory of the same name), and objects of a
// negative size, are skipped and reported,
// never fatal. Inodes are created lazily on LOOKUP from the tree's entries,
// with stable inode numbers, so a million-object prefix costs one small
// entry per object until the kernel asks for it.
//
// # Fast path
//
// Each mount serves hot reads one way (fastpath.go): no-open (Open answers
// ENOSYS: the kernel sends no OPEN/FLUSH/RELEASE and keeps pages across
// opens), passthrough (a wholly cached file's cache file becomes the
// kernel's backing file; probed at mount time), or off. Directories open
// with FOPEN_CACHE_DIR.
//
// # Control entry
//
// ".dsmount-control" at the root (control.go) is hidden from listings; a
// client opens ".dsmount-control.<unique>" read-only to start a session
// (the lookup of a new name reaches the daemon even on a no-open mount),
// sends one JSON request and takes JSON events over the session's ioctls:
// warm (warm.go), order (order.go, to readahead), cached (cached.go: which
// files of a path table the cache holds) and stats. The superblock
// is read-only (mount.go), so that the reads the daemon serves leave the
// kernel's attributes valid: nothing of the mount takes a write.
//
// # Limits
//
// What a control request may ask is bounded, each refusal one error
// line the client reads (a refused request's other bytes are taken and
// dropped, so its writes succeed and it reads why), other jobs on the
// mount untouched:
//
//   - a request's bytes, its payload included: 512 MiB from the mount's
//     owner or root, 64 MiB from another user (maxRequestBytes,
//     maxUserRequestBytes; caller.go);
//   - sessions open at once: 256 of the owner's or root's, 8 of another
//     user's (EAGAIN on the session's first ioctl); a session counts
//     until its answer has been read to the end or the kernel forgets its
//     entry;
//   - an epoch's files: readahead.MaxDeclared (10,000,000), paths or
//     indices, current and next each; a table's paths likewise;
//   - a job's name: 1 to 256 bytes, no control character (maxJobName);
//     its epoch: 0 to 2^31-1 (maxEpoch);
//   - jobs: readahead.MaxJobsPerUser (16) of a user other than the
//     owner or root, readahead.MaxJobsPerMount (256) on the mount;
//   - path tables kept: 4 a mount (maxTables; an older one is forgotten
//     and a declaration naming it gets Code "unknown_table").
//
// Declared and warmed paths are resolved inside the tree only: a path is
// cleaned as if rooted ("../../x" is "x"), and keys that can't be file
// names (NUL, empty, "." or ".." components) are never in the tree. See
// docs/fuzzing.md for the fuzz tests that hold these.
//
// # Readahead
//
// Every read is reported to the mount's Readahead (with the reading
// process, for job attribution) before it is served; files larger than a
// chunk have a sequential detector (stream.Detector) that prefetches
// chunks ahead through Source.PrefetchWatched, within its share of the
// stream.Budget that every mount on the cache shares
// (Config.Streams), and a read it takes for part of a stream is served by
// Source.ReadAtStream.
//
// # Push
//
// A mount is its declarations' readahead.Pusher (push.go): one goroutine
// per mount, started by the first Push and stopped by Close, reads the
// files it is handed from the cache disk in batches (cache.Batch) and
// stores each into its inode's page cache (FUSE_NOTIFY_STORE), on a
// thread of its own at a raised priority. known holds the files whose
// inodes the kernel holds (LOOKUP to FORGET, under its own mutex); a
// file it doesn't hold, one not wholly cached, an empty or large one,
// and every file of a passthrough mount are not pushed. The daemon
// calls Close after the mount's server ended and before its Source
// closes.
//
// # Batched READs
//
// A READ of a whole cached file of at most 256 KiB is read from the cache
// disk together with the other such READs in flight (readbatch.go): one
// goroutine per mount, started by the first and stopped by Close (which
// answers every READ queued first), owns a cache.Batch; each handler
// queues its READ and waits for its answer on a channel, with no thread
// blocked on the disk. Any other READ, one with no other READ being
// served beside it, or one the batch turns away, is read by the handler
// itself (Source.ReadAt).
//
// # Errors
//
// Every errno this package returns comes from toErrno (errno.go), the one
// place backend and cache errors are mapped: a backend error's kind
// decides (ENOENT, EACCES, EINVAL; EIO for a store that failed, whatever
// errno its cause holds), a cancelled request is EINTR, a bare errno
// (the cache's disk) passes through, anything else is EIO. Anything that
// would modify the tree fails with EROFS.
//
// # Concurrency
//
// The tree is read-only after construction; each directory sorts its
// listing once, under a sync.Once. Reads run concurrently; the cache does its
// own locking.
//
// # Tests
//
// The package's tests mount it as the daemon does: a real cache in a
// temporary directory, a real FUSE mount (Serve, Unmount), and
// backend/memory standing for the store (mount_test.go). They need
// /dev/fuse (they skip without it) and root or fusermount.
//
// # Stability
//
// A public package because the project's layout puts it at the top
// level, but its API (Config, Mount, Caller, the interfaces) is built for
// dsmount's daemon (internal/daemon) and changes with it.
package fs
