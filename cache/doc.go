// Package cache owns dsmount's persistent chunk cache on local disk: the
// chunk files, the badger index that says which chunks are present, the
// capacity budget and its eviction policy, and the single flight that makes
// concurrent misses on one chunk fetch it once.
//
// # Layout
//
//	<dir>/dsmount.lock         flock held by the one process using the cache
//	<dir>/index/               badger v4: object records, chunk records, listings
//	<dir>/data/<xx>/<id>       one sparse file per object version
//
// An object version (source ID, key, size, version string, chunk size) hashes
// to a 128-bit ObjectID. All cached bytes of that version live in one file at
// their own offsets, so a fully cached file is an exact copy of the object and
// can be handed to the kernel as is (FUSE passthrough). A changed object has a
// new ID, hence a new file: old and new bytes can never mix.
//
// # Invariants
//
//   - A chunk record (CRC32C and length) is written to the index only after the
//     chunk's bytes, the file and its directory entry are durable (fdatasync,
//     fsync of the directory). Commits are grouped: see committer.
//   - The first read of a chunk that was loaded from the index re-checks its
//     CRC32C against the file before serving any byte of it; a mismatch drops
//     the chunk and refetches it. Chunks written by this process are trusted,
//     since their CRC was computed from the bytes written. So a crash or power
//     loss at any moment can lose cached data but never serve wrong bytes.
//   - used (the bytes accounted against capacity) equals the sum of the
//     lengths of the chunks marked present in memory, pending or durable.
//   - Restart does not scan data/: object records are read from the index at
//     Open; chunk records of an object are read the first time it is touched.
//
// # Locking
//
// Cache.mu guards the objects map only. Each object has its own RWMutex:
// readers hold it shared while they check presence and pread; writers hold it
// shared while they pwrite a chunk and exclusively to flip presence bits;
// eviction holds it exclusively while it marks the object dead and unlinks
// its file. A reader or writer that finds its object dead looks it up again.
// The policy has its own mutex and is never called with an object lock held.
//
// # Entry points for readahead
//
// Source.ReadAt serves a read; Source.Prefetch starts a chunk fetch without
// waiting; both go through the same flight, so a prefetch and a read of one
// chunk share one backend GET. Policy decides admission and victims, so an
// order-aware policy plugs in without touching the read path.
package cache
