package cache

import (
	"errors"
	"os"

	"github.com/dsmount/dsmount/backend"
)

// ErrNotCached is returned by OpenCached for an object not wholly cached.
var ErrNotCached = errors.New("cache: object not wholly cached")

// OpenCached opens obj's cache file read-only if every chunk of it is
// cached, for handing to the kernel (FUSE passthrough): from then on the
// kernel reads the file itself, so every chunk is checked against its
// CRC32C first (chunks loaded from the index after a restart are not
// trusted until then). The file stays readable after an eviction unlinks
// it, and its bytes never change: an object version's file is only ever
// written with that version's bytes.
func (s *Source) OpenCached(obj backend.Object) (*os.File, error) {
	c := s.c
	meta := metaOf(s.id, obj, c.chunkSize)
	o, err := c.existing(meta)
	if err != nil {
		return nil, err
	}
	if o == nil || obj.Size == 0 || meta.packed() {
		// A packed object (one chunk) has no file of its own to hand over;
		// it is served through the page cache.
		return nil, ErrNotCached
	}
	for idx := range meta.numChunks() {
		o.mu.RLock()
		st := chunk{}
		if !o.dead {
			st = o.chunkAt(idx)
		}
		o.mu.RUnlock()
		if st.state == chunkAbsent {
			return nil, ErrNotCached
		}
		if !st.verified {
			data, ok := c.readVerified(o, idx, meta.chunkLen(idx), int64(idx)*meta.ChunkSize)
			if !ok {
				return nil, ErrNotCached
			}
			c.bufs.put(data)
		}
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.dead {
		return nil, ErrNotCached
	}
	return os.Open(o.path)
}
