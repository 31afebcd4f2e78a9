package cache

import (
	"context"
	"fmt"
	"io"

	"github.com/dsmount/dsmount/backend"
)

// ReadAtRandom serves a read whose caller saw its reader jump about obj
// (fs's random detection). While the cache can hold obj it is ReadAt: the
// chunks it fetches will be read again. When obj is bigger than the
// cache's capacity, what is staged or cached is served from there and the
// rest comes from the backend as asked, by one ranged GET, and is not
// cached. A window of a token file or a record of an LMDB is a few KiB
// (the kernel asks for its readahead window around it): a whole chunk per
// such read multiplies the store's traffic by the chunk's size over the
// read's, and evicts a chunk to make room for one that will not be read
// again.
func (s *Source) ReadAtRandom(ctx context.Context, obj backend.Object, p []byte, off int64) (int, error) {
	if capacity := s.c.Capacity(); capacity <= 0 || obj.Size <= capacity {
		return s.readAt(ctx, obj, p, off, false)
	}
	p, eof, done := clip(obj, p, off)
	if done {
		return 0, eof
	}
	c := s.c
	meta := metaOf(s.id, obj, c.chunkSize)
	o, err := c.object(meta)
	if err != nil {
		return 0, err
	}
	// What the cache has is served from it; the first and last bytes it
	// lacks bound the one GET that fetches the rest.
	missFrom, missTo := int64(-1), int64(-1)
	for n := 0; n < len(p); {
		pos := off + int64(n)
		idx := int(pos / c.chunkSize)
		inner := pos - int64(idx)*c.chunkSize
		want := int(min(int64(len(p)-n), meta.ChunkLen(idx)-inner))
		dst := p[n : n+want]
		switch {
		case c.fetch.staged.take(chunkID{o.id, idx}, dst, inner), c.readChecked(o, idx, dst, inner):
			c.stats.hit(want)
			s.stats.hit(want)
		default:
			if missFrom < 0 {
				missFrom = pos
			}
			missTo = pos + int64(want)
		}
		n += want
	}
	if missFrom < 0 {
		c.touched(o)
		return len(p), eof
	}
	if missTo-missFrom <= randomSmall {
		if err := s.readBlocks(ctx, obj, o.id, p[missFrom-off:missTo-off], missFrom); err != nil {
			return 0, err
		}
		return len(p), eof
	}
	if err := s.readRange(ctx, obj, p[missFrom-off:missTo-off], missFrom); err != nil {
		return 0, err
	}
	return len(p), eof
}

// readRange fills dst with obj's bytes at off from the backend.
func (s *Source) readRange(ctx context.Context, obj backend.Object, dst []byte, off int64) error {
	if !s.startFlight() {
		return errSourceClosed
	}
	defer s.flights.Done()
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	c := s.c
	c.stats.fetchesInFlight.Add(1)
	got, err := s.fetch.ReadAt(backend.WithUrgency(ctx, func() bool { return true }), obj, dst, off)
	c.stats.fetchesInFlight.Add(-1)
	if got == len(dst) && err == io.EOF {
		err = nil
	}
	if err == nil && got != len(dst) {
		err = io.EOF
	}
	if err == io.EOF {
		// The object is shorter than its listing said: it changed.
		err = backend.Wrap("read", obj.Key, backend.ErrChanged, fmt.Errorf("object ended at %d, listed size %d", off+int64(got), obj.Size))
	}
	if err != nil {
		return err
	}
	c.stats.bytesFetched.Add(int64(len(dst)))
	c.stats.rangesFetched.Add(1)
	c.stats.miss(len(dst))
	s.stats.miss(len(dst))
	return nil
}
