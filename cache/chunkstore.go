package cache

// A chunk's bytes on disk: verified reads of cached chunks, admission and
// stores of fetched ones, and drops of those that can't be trusted.

import (
	"errors"
	"syscall"
	"time"

	"github.com/dsmount/dsmount/cache/internal/record"
	"github.com/dsmount/dsmount/cache/internal/store"
)

// store offers a fetched chunk to the cache: if the policy admits it, the
// bytes are written to o's file, marked present, and queued for the index.
// Otherwise the chunk was only streamed through. counted is called once
// the chunk is counted against the capacity or known not to be kept,
// before it is written.
func (c *Cache) store(o *object, idx int, data []byte, sums []uint32, counted func()) {
	n := int64(len(data))
	o.mu.RLock()
	skip := o.dead || o.chunkAt(idx).state != chunkAbsent
	o.mu.RUnlock()
	if skip {
		counted()
		return
	}
	admitted := c.reserve(o.id, n)
	counted()
	if !admitted {
		c.stats.streamed.Add(1)
		return
	}
	o.mu.RLock()
	if o.dead {
		o.mu.RUnlock()
		c.budget.used.Add(-n)
		return
	}
	sl, stale, err := c.write(o, idx, data)
	if len(stale) > 0 {
		// After the locks are let go: dropping takes mu exclusively.
		defer c.dropStale(o, stale)
	}
	if err != nil {
		o.mu.RUnlock()
		c.budget.used.Add(-n)
		c.stats.writeErrors.Add(1)
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			c.disk.space.NoSpace(err)
		}
		c.warn.write.warn(c.log, "cache: write failed; serving without caching", "key", o.meta.Key, "chunk", idx, "err", err)
		return
	}
	// Still holding mu shared: o can't die; bits orders us with the other
	// stores and readers of this object.
	o.bits.Lock()
	if o.chunks[idx].state != chunkAbsent {
		o.bits.Unlock()
		o.mu.RUnlock()
		if sl != nil {
			c.disk.packs.Free(*sl, n)
		}
		c.budget.used.Add(-n)
		return
	}
	var old *store.Slot
	if sl != nil {
		// Published before the chunk is marked present: a reader that sees
		// it present reads this slot.
		old = o.loc.Swap(sl)
	}
	ch := o.setSums(idx, sums)
	ch.state = chunkPending
	o.chunks[idx] = ch
	o.cached += n
	o.accessed.Store(time.Now().Unix())
	// Sent under mu (shared): an eviction's delete is queued under mu held
	// exclusively, so it can't slip between this record and its object.
	c.disk.commits.send(commitOp{kind: opAddChunk, o: o, idx: idx, rec: record.Chunk{Len: uint32(n), Sums: sums}, slot: sl, crc: sums[0]})
	o.bits.Unlock()
	o.mu.RUnlock()
	if old != nil {
		// A slot whose chunk was dropped before: nobody reads it.
		c.disk.packs.Free(*old, n)
	}
	c.policy.Added(o.id, n)
}

// write writes chunk idx's bytes to o's file or, for a packed object, to a
// new slot, which it returns; o.mu is held shared. stale lists the chunks
// that were marked present when the write had to create o's file: their
// bytes were in a file that is gone (deleted under the daemon).
func (c *Cache) write(o *object, idx int, data []byte) (sl *store.Slot, stale []int, err error) {
	if !o.meta.Packed() {
		// Listed before the write: a store into the file this one
		// creates may mark its chunk present before the write returns.
		before := o.presentChunks()
		var size int64
		if o.meta.NumChunks() > 1 {
			size = o.meta.Size
		}
		created, err := o.file.Write(data, int64(idx)*o.meta.ChunkSize, size)
		if created {
			// A new directory entry: the committer must sync the
			// directory before recording any chunk of this file.
			o.created.Store(true)
			stale = before
		}
		return nil, stale, err
	}
	if int64(cap(data)) < store.AlignUp(int64(len(data))) {
		// Too small a buffer for a whole-block write (an unpooled one, for
		// a tiny object): copy it into a pooled one.
		buf := c.bufs.GetPooled(len(data))
		defer c.bufs.Put(buf)
		copy(buf, data)
		data = buf
	}
	put, err := c.disk.packs.Put(data)
	if err != nil {
		return nil, nil, err
	}
	return &put, nil, nil
}

// presentChunks lists the chunks of o marked present; o.mu is held.
func (o *object) presentChunks() []int {
	o.bits.Lock()
	defer o.bits.Unlock()
	var idxs []int
	for i, ch := range o.chunks {
		if ch.state != chunkAbsent {
			idxs = append(idxs, i)
		}
	}
	return idxs
}

// reserve accounts n more bytes against capacity, evicting the policy's
// victims as needed. False means the policy would rather not cache them.
func (c *Cache) reserve(incoming ObjectID, n int64) bool {
	if c.disk.space.IsFull() {
		return false
	}
	c.awaitIndex()
	c.budget.mu.Lock()
	defer c.budget.mu.Unlock()
	for capacity := c.budget.capacity.Load(); capacity > 0 && c.budget.used.Load()+n > capacity; {
		victim, ok := c.policy.Victim(incoming, n)
		if !ok || victim == incoming {
			return false
		}
		c.evict(victim)
	}
	c.budget.used.Add(n)
	return true
}

// dropChunk forgets a chunk whose cached bytes can't be trusted or read.
func (c *Cache) dropChunk(o *object, idx int) {
	c.dropChunkWhere(o, idx, func(chunk) bool { return true })
}

// dropChunkIf drops chunk idx of o if it is still the chunk whose first
// check block's CRC32C is crc (and not, say, one stored again since with
// other bytes).
func (c *Cache) dropChunkIf(o *object, idx int, crc uint32) {
	c.dropChunkWhere(o, idx, func(ch chunk) bool { return ch.crc == crc })
}

func (c *Cache) dropChunkWhere(o *object, idx int, match func(chunk) bool) {
	c.dropWhere(o, func(i int, ch chunk) bool { return i == idx && match(ch) })
}

// dropWhere forgets the present chunks of o that match says to.
func (c *Cache) dropWhere(o *object, match func(idx int, ch chunk) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dead {
		return
	}
	for idx, ch := range o.chunks {
		if ch.state == chunkAbsent || !match(idx, ch) {
			continue
		}
		n := o.meta.ChunkLen(idx)
		o.chunks[idx] = chunk{}
		o.cached -= n
		c.budget.used.Add(-n)
		c.freeSlot(o)
		o.stamp.Store(nil)
		c.disk.commits.send(commitOp{kind: opDropChunk, o: o, idx: idx, rec: record.Chunk{Len: uint32(n)}})
	}
}

// dropStale forgets chunks of o that were in a file found gone when a
// store had to create it anew.
func (c *Cache) dropStale(o *object, idxs []int) {
	c.stats.verifyFailures.Add(1)
	c.warn.read.warn(c.log, "cache: cache file vanished; refetching its chunks", "key", o.meta.Key, "path", o.file, "chunks", len(idxs))
	for _, idx := range idxs {
		c.dropChunk(o, idx)
	}
}

// vanished drops every chunk of o, whose cache file is gone (deleted, or
// renamed away): none of its chunks is there any more, and a chunk stored
// now would create a new, empty file.
func (c *Cache) vanished(o *object) {
	c.stats.verifyFailures.Add(1)
	c.warn.read.warn(c.log, "cache: cache file vanished; refetching its chunks", "key", o.meta.Key, "path", string(o.file))
	c.dropWhere(o, func(int, chunk) bool { return true })
}
