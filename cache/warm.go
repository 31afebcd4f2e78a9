package cache

import (
	"context"
	"errors"
	"fmt"

	"github.com/dsmount/dsmount/backend"
)

// ErrFull is returned by Warm when caching the chunk would exceed the
// capacity. Warm doesn't make room: what was warmed first stays. (The check
// races with concurrent reads; under an evicting policy a read's fetch may
// still evict.)
var ErrFull = errors.New("cache is full")

// WarmOutcome says what Warm did with a chunk.
type WarmOutcome int

const (
	WarmAlreadyCached WarmOutcome = iota // present before the call
	WarmFetched                          // fetched (or joined a fetch) and now cached
	WarmNotCached                        // fetched, but the policy did not keep it
)

// NumChunks is the number of chunks obj is cached in.
func (s *Source) NumChunks(obj backend.Object) int {
	m := metaOf(s.id, obj, s.c.chunkSize)
	return m.NumChunks()
}

// ChunkLen is the length of chunk idx of obj.
func (s *Source) ChunkLen(obj backend.Object, idx int) int64 {
	m := metaOf(s.id, obj, s.c.chunkSize)
	return m.ChunkLen(idx)
}

// CachedBytes is how many bytes of obj are cached. It creates no state for
// an object the cache has never held.
func (s *Source) CachedBytes(obj backend.Object) (int64, error) {
	o, err := s.c.existing(metaOf(s.id, obj, s.c.chunkSize))
	if o == nil || err != nil {
		return 0, err
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.dead {
		return 0, nil
	}
	o.bits.Lock()
	defer o.bits.Unlock()
	return o.cached, nil
}

// Warm makes sure chunk idx of obj is cached, fetching it through the same
// flight as reads (so a warm and a read of one chunk make one GET). It
// fails with ErrFull, without fetching, when the chunk doesn't fit in the
// remaining capacity. It returns once the chunk is stored; fetched, if not
// nil, is called as soon as its bytes have arrived and are counted against
// the capacity (before they are written), so a caller bounding its fetches
// in flight can start the next, and one holding room for the chunk can
// give it back. prio is Foreground for a warm that is to be done now
// (the default), Background for one that must not take the fetch slots
// reads and prefetch need (another user's, on a shared mount).
func (s *Source) Warm(ctx context.Context, obj backend.Object, idx int, prio Priority, fetched func()) (WarmOutcome, error) {
	c := s.c
	meta := metaOf(s.id, obj, c.chunkSize)
	if idx < 0 || idx >= meta.NumChunks() {
		return 0, fmt.Errorf("cache: chunk %d out of range for %s", idx, obj.Key)
	}
	o, err := c.object(meta)
	if err != nil {
		return 0, err
	}
	if o.present(idx) {
		return WarmAlreadyCached, nil
	}
	if used, capacity := c.Used(), c.budget.capacity.Load(); capacity > 0 && used+meta.ChunkLen(idx) > capacity {
		return 0, ErrFull
	}
	res, err := s.flightStored(ctx, meta, obj, idx, prio, fetched)
	if err != nil {
		return 0, err
	}
	if res.fromBackend {
		c.stats.warmChunks.Add(1)
	}
	o, err = c.object(meta)
	if err != nil {
		return 0, err
	}
	if o.present(idx) {
		return WarmFetched, nil
	}
	return WarmNotCached, nil
}

// ChunkCached reports whether chunk idx of obj is cached, without creating
// state for an object the cache has never held.
func (s *Source) ChunkCached(obj backend.Object, idx int) bool {
	meta := metaOf(s.id, obj, s.c.chunkSize)
	if idx < 0 || idx >= meta.NumChunks() {
		return false
	}
	o, err := s.c.existing(meta)
	return o != nil && err == nil && o.present(idx)
}
