package fs

import "github.com/dsmount/dsmount/backend"

// randomReadaheadKB is the kernel readahead of a mount once a file bigger
// than the cache is read at random in it: the kernel's own default. An
// mmap fault reads the readahead window around the faulting page, and at
// the mount's usual 1 MiB that, not the window the job wants, is what a
// token file's reader costs the store (docs/ranges.md).
const randomReadaheadKB int32 = 128

// randomRead notes a random read of obj: the first of a file bigger than
// the cache lowers the mount's kernel readahead to randomReadaheadKB for
// the rest of the mount's life. Sequential readers of the mount's other
// files still get the daemon's own readahead, in smaller READs.
func (m *Mount) randomRead(obj backend.Object) {
	if b := m.readaheadBound.Load(); b != 0 && b <= randomReadaheadKB {
		return
	}
	if !m.tooBigToCache(obj) {
		return
	}
	m.boundReadahead(randomReadaheadKB, "random reads of a file bigger than the cache: fetching what is read, not chunks", "key", obj.Key, "size", obj.Size)
}

// boundReadahead lowers the mount's kernel readahead to kb, for the rest
// of the mount's life, unless it is that low already.
func (m *Mount) boundReadahead(kb int32, why string, args ...any) {
	for {
		b := m.readaheadBound.Load()
		if b != 0 && b <= kb {
			return
		}
		if m.readaheadBound.CompareAndSwap(b, kb) {
			break
		}
	}
	if err := raiseReadahead(m.dev, int(kb)); err != nil {
		m.log.Warn("could not lower the mount's kernel readahead", "mountpoint", m.dir, "read_ahead_kb", kb, "why", why, "err", err)
		return
	}
	m.log.Info("the mount's kernel readahead lowered: "+why, append([]any{"mountpoint", m.dir, "read_ahead_kb", kb}, args...)...)
}

// tooBigToCache says whether obj is bigger than the cache's capacity, so
// that a random reader of it is served by ranged GETs (Source.ReadAtRandom).
func (m *Mount) tooBigToCache(obj backend.Object) bool {
	capacity := m.cache.Capacity()
	return capacity > 0 && obj.Size > capacity
}
