package fs

import "github.com/dsmount/dsmount/backend"

// randomReadaheadKB is the kernel readahead of a mount once a file bigger
// than the cache is read at random in it: the kernel's own default. An
// mmap fault reads the readahead window around the faulting page, and at
// the mount's usual 1 MiB that, not the window the job wants, is what a
// token file's reader costs the store (docs/ranges.md).
const randomReadaheadKB = 128

// randomRead notes a random read of obj: the first of a file bigger than
// the cache lowers the mount's kernel readahead to randomReadaheadKB for
// the rest of the mount's life. Sequential readers of the mount's other
// files still get the daemon's own readahead, in smaller READs.
func (m *Mount) randomRead(obj backend.Object) {
	if m.readaheadBounded.Load() {
		return
	}
	if !m.tooBigToCache(obj) {
		return
	}
	if m.readaheadBounded.Swap(true) {
		return
	}
	if err := raiseReadahead(m.dev, randomReadaheadKB); err != nil {
		m.log.Warn("could not lower the mount's kernel readahead for random reads", "mountpoint", m.dir, "err", err)
		return
	}
	m.log.Info("random reads of a file bigger than the cache: fetching what is read, not chunks, and the mount's kernel readahead lowered",
		"mountpoint", m.dir, "key", obj.Key, "size", obj.Size, "read_ahead_kb", randomReadaheadKB)
}

// tooBigToCache says whether obj is bigger than the cache's capacity, so
// that a random reader of it is served by ranged GETs (Source.ReadAtRandom).
func (m *Mount) tooBigToCache(obj backend.Object) bool {
	capacity := m.cache.Capacity()
	return capacity > 0 && obj.Size > capacity
}
