package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache/internal/store"
)

// ErrNotCached is returned by OpenCached for an object not wholly cached.
var ErrNotCached = errors.New("cache: object not wholly cached")

// OpenCached opens obj's cache file read-only if every chunk of it is
// cached, for handing to the kernel (FUSE passthrough). From then on the
// kernel reads the file itself, with no check of its own, so the file is
// checked here: every chunk against its CRC32C, the first time a file is
// handed over in this process and whenever the file is no longer the one
// last checked (store.Stamp: another inode, or its size, change time or
// modification time moved: deleted and recreated, replaced, truncated,
// written to). The file opened is the one checked: its stamp is taken
// again from the open descriptor. The file stays readable after an
// eviction unlinks it, and the daemon never writes an object version's
// file with other bytes than that version's.
func (s *Source) OpenCached(obj backend.Object) (*os.File, error) {
	c := s.c
	meta := metaOf(s.id, obj, c.chunkSize)
	o, err := c.existing(meta)
	if err != nil {
		return nil, err
	}
	if o == nil || obj.Size == 0 || meta.Packed() {
		// A packed object (one chunk) has no file of its own to hand over;
		// it is served through the page cache.
		return nil, ErrNotCached
	}
	// Under mu: an eviction (which unlinks the file) is not a vanishing.
	o.mu.RLock()
	whole := !o.dead && o.cachedBytes() == meta.Size
	var before store.Stamp
	if whole {
		before, err = store.StampPath(string(o.file))
	}
	o.mu.RUnlock()
	if !whole {
		return nil, ErrNotCached
	}
	if errors.Is(err, fs.ErrNotExist) {
		c.vanished(o)
		return nil, ErrNotCached
	}
	if err != nil {
		return nil, ErrNotCached
	}
	if last := o.stamp.Load(); last == nil || *last != before {
		for idx := range meta.NumChunks() {
			data, ok := c.readVerified(o, idx)
			if !ok {
				return nil, ErrNotCached
			}
			c.bufs.Put(data)
		}
	}
	f, err := o.file.Open()
	if err != nil {
		return nil, ErrNotCached
	}
	opened, err := store.StampFile(f)
	if err != nil || opened != before {
		// Changed while being checked: not the file that was checked.
		f.Close()
		return nil, ErrNotCached
	}
	o.mu.RLock()
	dead := o.dead
	if !dead && !opened.Racy() {
		o.stamp.Store(&opened)
	}
	o.mu.RUnlock()
	if dead {
		f.Close()
		return nil, ErrNotCached
	}
	return f, nil
}

// ReadCached fills p with obj's bytes at off from the cache alone, each
// chunk read and checked as a read's would be, and never fetches:
// ErrNotCached if a chunk p touches is not cached (or fails its check,
// which drops it). Where a read would wait on the store, a caller that
// only wants to move cached bytes somewhere (the file system's push into
// the kernel's page cache) stops instead.
func (s *Source) ReadCached(obj backend.Object, p []byte, off int64) (int, error) {
	if off < 0 || off > obj.Size {
		return 0, fmt.Errorf("cache: offset %d outside object of %d bytes", off, obj.Size)
	}
	p = p[:min(int64(len(p)), obj.Size-off)]
	c := s.c
	meta := metaOf(s.id, obj, c.chunkSize)
	o, err := c.existing(meta)
	if err != nil {
		return 0, err
	}
	if o == nil {
		return 0, ErrNotCached
	}
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		idx := int(pos / c.chunkSize)
		inner := pos - int64(idx)*c.chunkSize
		want := int(min(int64(len(p)-n), meta.ChunkLen(idx)-inner))
		if !c.readChecked(o, idx, p[n:n+want], inner) {
			return n, ErrNotCached
		}
		n += want
	}
	c.stats.hit(n)
	s.stats.hit(n)
	c.touched(o)
	return n, nil
}
