// Package store owns the cache's bytes on disk, below the index: the file
// of an object of several chunks (File) and the pack files whose slots
// hold objects of one chunk (PackStore, Slot), each with one way in to
// write, read, sync and free; O_DIRECT writes and reads (direct.go); the
// space guard that keeps the cache filesystem from filling under the
// index (SpaceGuard); the checks that the cache directory is the daemon's
// alone (private.go); file stamps, which tell one state of a file from any
// other (Stamp); and the sync helpers the committer uses.
//
// It knows nothing of records, chunks' states or the index: the cache
// decides what is written where and when it is durable.
//
// # Packs
//
// Small objects (one chunk) live in pack files: each gets a slot, aligned
// to Align, in the pack being filled, written with O_DIRECT. Creating a
// file per small object costs the kernel an inode, a directory entry and
// a journal commit each; a slot in a preallocated pack costs a write
// (docs/benchmarks-history.md, "cache"). Objects of several chunks keep a
// file of their own, since FUSE passthrough hands a whole file to the
// kernel at the object's own offsets.
//
// # Invariants
//
//   - A slot is written once. Offsets in a pack only grow, and a pack's
//     name is a random 64-bit number never reused (O_EXCL), so a record
//     naming (pack, offset) can't come to point at another object's bytes:
//     a record that outlived its slot finds a hole (zeros) or no file,
//     which its CRC32C or the failed read turns into a refetch.
//   - A pack's live count is its slots allocated and not freed. A pack
//     with none, other than the one being filled, is deleted: nobody reads
//     it and nobody writes it.
//   - Freeing a slot punches a hole over it, giving the space back at once.
//   - SpaceGuard's full is true exactly while the reserve file is not held.
//   - Files in the cache directory are opened with O_NOFOLLOW, and the
//     directories the cache makes must not be symlinks.
//
// # Locking
//
// PackStore.mu guards the pack being filled, the next offset, what is
// preallocated, the packs map and each pack's writing and retired; a
// pack's descriptors are opened under their own sync.Once and closed only
// by deleteIfEmpty (under PackStore.mu) or Close, and used under withFd so
// that a descriptor closed meanwhile is never a number reused by another
// file. One writer goroutine (owned by the PackStore, stopped by Close)
// issues slot writes. SpaceGuard.mu serialises its transitions; its
// checker goroutine is stopped by Close. File holds no state.
package store
