// Package cache owns dsmount's persistent chunk cache on local disk: the
// chunk files, the index that says which chunks are present, the capacity
// budget and its eviction policy, and the single flight that makes
// concurrent misses on one chunk fetch it once.
//
// # Packages
//
// The root package keeps the in-memory object and its lifecycle
// (object.go, records.go), admission and stores (chunkstore.go), the
// committer that makes stores durable and then records them (commit.go),
// reads and their checks (read.go, check.go, batch.go, passthrough.go;
// randomread.go: ranged GETs for random readers of objects bigger than the
// cache), warm, the staging area, stats and the policies. What lies below it is in
// packages of one idea each under internal/, none of which imports cache:
//
//	record   IDs, Meta, key layout, the object/chunk/listing codecs and
//	         check blocks; no I/O
//	index    everything badger: open and format, the start-up scan, reads,
//	         the committer's writes, deletes, listings, value-log GC, Files
//	store    an object's file and pack slots (write, read, sync, free),
//	         O_DIRECT, the space guard, private-dir checks, file stamps
//	flight   a generic singleflight group with raisable priority, the
//	         fetch gate, and the workers flights run on
//	bufs     the buffer pool, its arena, and the refcounted buffer that
//	         carries a flight's bytes to its readers, then to staging or
//	         the pool
//
// A chunk's write path is chunkstore.go (store, write), then
// internal/store/write.go (File.Write, or PackStore.Put and its writer).
//
// # Layout
//
//	<dir>/dsmount.lock         flock held by the one process using the cache
//	<dir>/index/               badger v4: object records, chunk records, listings
//	<dir>/data/<xx>/<id>       one sparse file per object version of several chunks
//	<dir>/packs/<16 hex>       pack files: a slot per object version of one chunk
//	<dir>/reserve              space held back for the index (store.SpaceGuard)
//
// An object version (source ID, key, size, version string, chunk size) hashes
// to a 128-bit ObjectID. An object of several chunks keeps all its cached
// bytes in one file at their own offsets, so a fully cached file is an exact
// copy of the object and can be handed to the kernel as is (FUSE
// passthrough). An object of one chunk is a slot in a pack file (internal/store):
// creating a file per small object cost a cold epoch most of the CPU it
// spent keeping its data. Its object record names the slot. A changed object has a
// new ID, hence a new file or slot: old and new bytes can never mix.
//
// # Invariants
//
//   - A chunk record (length, and a CRC32C per check block) is written to the index only after the
//     chunk's bytes, the file (or pack) and its directory entry are durable
//     (fdatasync, fsync of the directory). Commits are grouped: see committer.
//   - A pack slot is written once and never reused, and pack names are never
//     reused: a record that outlives its slot (an eviction's punched hole, a
//     lost pack) fails its CRC32C or its read, and the chunk is refetched.
//   - Every read of a cached chunk from its cache file reads the check
//     blocks it touches and checks them against their CRC32Cs before serving
//     any byte of them, every time, whoever wrote them (see Trust). A mismatch or a failed read drops
//     the chunk and refetches it; a cache file found gone drops every chunk
//     it held. So a crash or power loss at any moment, a cache file deleted,
//     replaced, truncated or rewritten under the daemon, or a disk that rots
//     can lose cached data but never serve wrong bytes.
//   - A chunk whose sync fails is dropped, in memory as well as from the
//     index (syncfail.go): what a failed sync leaves on disk is unknown.
//   - used (the bytes accounted against capacity) equals the sum of the
//     lengths of the chunks marked present in memory, pending or durable.
//   - Restart does not scan data/, and Open reads no object record: a
//     background scan of the index (records.go) counts the cached bytes and
//     each pack's slots and tells the policy what is cached, keeping nothing
//     per object; an object is made from its record, and its chunk records
//     read, the first time it is touched. What decides by the byte count
//     (admission, eviction, Used) waits for the scan; reads don't. Pack
//     files that no record names are deleted when the scan ends.
//
// # Trust
//
// The daemon trusts no byte on disk for longer than one read. The cache
// directory is the daemon's, but anything can happen to it meanwhile: a
// clean-up tool deletes files, an admin restores a backup over them,
// another program writes into one, the disk returns other bytes than it was
// given. So every read of a cached chunk from a cache file is checked
// (readChecked, check.go): a chunk's bytes are kept in check blocks of 128
// KiB, each with its CRC32C in the chunk record, and a read reads the
// blocks it touches and checks each before serving any byte of them. A
// read of a whole small file (one block) goes straight into the reader's
// buffer and is checked there. From the disk a checked read costs what an
// unchecked one did (docs/guarantees.md).
// Hot reads don't reach the daemon at all: the kernel serves them from its
// page cache, which holds what a checked read returned. A chunk recorded
// before check blocks carries one CRC32C for the whole chunk and is read
// and checked whole.
//
// A Batch (batch.go) reads many cached small objects at once with Linux
// AIO, for a caller that moves cached bytes elsewhere (the file system's
// push into the kernel's page cache). Its reads are checked as readChecked's
// are, after the read, and the slot read must still be the object's when
// it finishes (a slot freed by a drop or eviction meanwhile may hold
// anything): otherwise the read reports ErrNotCached, and a failed check
// drops the chunk. Source.ReadCached is the one-at-a-time twin that never
// fetches.
//
// Under FUSE passthrough the kernel reads a wholly cached object's cache
// file itself, with no check. Before a file is handed over, every chunk of
// it is checked, and the file's identity and state (store.Stamp: device,
// inode, birth, change and modification times, size) recorded; a later
// open hands it over unchecked only while its stamp is the same. A file
// deleted and recreated, replaced, truncated or written to has another
// stamp, since no program can set a change time, and is checked again. What
// this can't see is a disk returning other bytes with no write at all (bit
// rot) in a file handed to the kernel: --fast-path off (or no-open) checks
// every read.
//
// The index's records are not trusted either: each is decoded with its
// lengths checked against what it holds (internal/record), a record
// that doesn't decode reads as none (its chunks are fetched again), and a
// stored listing that doesn't decode, or whose page would decode to more
// than maxListingPageDecoded (64 MiB), is not used (the source is listed
// again). Fuzz tests feed each decoder arbitrary bytes (docs/fuzzing.md).
//
// # A full disk
//
// The index writes through memory maps, where a write with no free block
// left is a SIGBUS, not an error. So the cache holds a reserve file and
// watches free space (store.SpaceGuard): when the filesystem runs low, or a
// write of cached data fails for want of space, the reserve goes and
// nothing new is cached (reads are streamed) until there is room again.
// Before each index write, and before closing the index, there must be
// room for the memtable flush it may start, and the index's log files
// have their blocks allocated (index.Files); with no room even then, the
// write is skipped (records are lost, never the daemon).
//
// # Fetching
//
// A chunk load runs as one flight per chunk (flight.go, on a
// flight.Group): every concurrent caller joins it, whatever its reason (read, warm, prefetch). A fetched
// chunk is handed to its waiters first and written after; the flight stays
// joinable until it is stored, so nobody fetches it again meanwhile (warm
// and prefetch wait for the store, reads don't). Chunks are written with
// O_DIRECT where block-aligned (internal/store): the reader's page cache (or,
// under FUSE passthrough, the cache file's) is the one copy in memory.
// Chunks fetched ahead wait for their reader in a bounded staging area
// (staging.go), and so does the rest of a chunk that a sequential reader
// (Source.ReadAtStream) waited for and took only part of: read back from
// its O_DIRECT-written file, it would come from the disk. A staged chunk
// leaves once as many bytes as it holds have been taken, counting those
// its flight's readers took before it was staged: the kernel's concurrent
// READs of one chunk come in any order. Chunks pushed out with bytes
// untaken when the area is full are counted (Stats.StagedPushedOut): the
// readahead that fills it keeps within its share (stream.Budget).
//
// Flights run on reused worker goroutines (flight.Workers), so their deep
// stacks stay grown. A flight's buffer comes from a pool (bufs.Pool) and
// travels as a bufs.Buf, which decides where it goes next. When the
// flight is stored and no caller that reads the bytes joined it, the buffer
// goes back to the pool (warm) or, for a chunk fetched ahead, to the staging
// area, which recycles it when its reader has taken it or it ages out; with
// readers, it goes back to the pool once they are done, or to the staging
// area with what they left untaken if one of them was a stream, which
// reads the rest. A buffer has one holder at a time: readers that joined,
// or the staging area, or the pool. Pooled buffers live in an arena
// outside the Go heap, advised for transparent huge pages, while it has
// room: fresh 4 KiB pages cost the daemon more CPU than the copies it
// makes. The arena's populator
// goroutine faults it in ahead of use, so no buffer's first write takes a
// page fault on a goroutine's P. Close drains the staging area and unmaps
// the arena once every buffer is back. Source.Close cancels the flights
// started through that source and waits for them, so its backend can be
// closed after it; a caller from another source that had joined one fetches
// again.
//
// A gate bounds backend fetches in flight (Options.FetchSlots). Background
// fetches (prefetch) never take the last slots, and a waiting foreground
// fetch (a read that missed, warm) is always granted before a waiting
// background one; a read that joins a background flight raises it.
//
// # Locking
//
// Cache.table.mu guards the objects map and the IDs of evicted objects
// whose records are not yet deleted (forgotten). Each object has an RWMutex for its
// file's life: held shared by whoever reads or writes the file, exclusively
// to load its chunk records, to evict it (mark dead, unlink) or to drop a
// chunk. Presence bits and the cached byte count have their own small mutex
// (object.bits), taken under the RWMutex held shared: a store flips a chunk
// present without waiting for the other stores' writes. A reader or writer
// that finds its object dead looks it up again. The policy has its own
// mutex and is never called with an object lock held. Source.mu guards only
// that source's closed flag, so a flight can't register after Close, and is
// never held with another lock. Lock order: Cache.budget.mu, then
// Cache.table.mu, then an object's mu, then its bits; the pack store's mu is
// taken last, under any of them. The flight group's lock is taken before a
// bufs.Buf's, and that before the staging area's; none of them is held
// with an object's.
// A packed object's slot (object.loc) is published before its chunk is
// marked present and cleared only under its mu held exclusively.
//
// # Entry points for readahead
//
// Source.ReadAt serves a read; Source.Fetch (blocking) and Source.Prefetch
// (in the background) load a chunk at a priority; all go through the same
// flight. Source.PrefetchWatched is Prefetch for a caller that keeps count
// of its bytes in flight: the backend's progress reports for the flight it
// starts reach it as they come in. Source.ObjectID names an object version
// as the Policy sees it, Source.Cached says whether it is wholly cached,
// Source.OpenCached opens its checked cache file for passthrough, and
// Source.ReadCached and Source.NewBatch read cached bytes without ever
// fetching (pushes). Policy decides admission and
// victims, so the order-aware policy plugs in without touching the read
// path.
//
// # Stability
//
// A library: a program that reads objects through a backend.Backend can
// use a Cache on its own (Open, Source, ReadAt), with the guarantees
// above. dsmount's daemon is its main user, and the API follows it.
package cache
