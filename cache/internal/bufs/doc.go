// Package bufs owns the cache's chunk buffers: the pool that recycles
// them (Pool), the arena outside the Go heap that backs the pool while it
// has room (arena.go), and the refcounted buffer that carries a flight's
// bytes to its readers and then decides, once, whether they go to the
// staging area or back to the pool (Buf).
//
// # Invariants
//
//   - A buffer has one holder at a time: a flight and its readers (Buf),
//     the staging area, or the pool. Holders hand it on by construction;
//     Pool.Put refuses a buffer that is not out (given back twice, or never
//     handed out) and counts it (DoubleReleases): a buffer on a free list
//     twice would be handed to two holders.
//   - Every pooled buffer is page aligned and has the capacity of its
//     class; Get's contents are stale, so callers use only what they have
//     wholly overwritten.
//   - A Buf is handed on exactly once, after its flight ended and its
//     last reader released it.
//
// # Locking
//
// Pool.outMu guards the set of buffers out; each class's free list is a
// sync.Pool, or the arena's, under arena.mu. Buf.mu guards one buffer's
// holders and decision; its sink is called under it when staging (the
// staging area takes its own lock) and outside it when recycling. The
// arena's populator goroutine is owned by the arena and stopped by its
// release.
package bufs
