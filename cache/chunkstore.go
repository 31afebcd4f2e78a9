package cache

// A chunk's bytes on disk: verified reads of cached chunks, admission and
// stores of fetched ones, and drops of those that can't be trusted.

import (
	"errors"
	"hash/crc32"
	"os"
	"syscall"
	"time"
)

// readVerified returns chunk idx from o's file if it is present and its
// bytes match their checksum; a chunk that fails is dropped.
func (c *Cache) readVerified(o *object, idx int, n, off int64) ([]byte, bool) {
	o.mu.RLock()
	want := chunk{}
	if !o.dead {
		want = o.chunkAt(idx)
	}
	if want.state == chunkAbsent {
		o.mu.RUnlock()
		return nil, false
	}
	buf := c.bufs.get(int(n))
	err := o.readAt(buf, off)
	if err == nil && (want.verified || crc32.Checksum(buf, castagnoli) == want.crc) {
		if !want.verified {
			o.bits.Lock()
			if o.chunks[idx].state != chunkAbsent && o.chunks[idx].crc == want.crc {
				o.chunks[idx].verified = true
			}
			o.bits.Unlock()
		}
		o.mu.RUnlock()
		return buf, true
	}
	o.mu.RUnlock()
	c.bufs.put(buf)
	if err == nil {
		c.stats.verifyFailures.Add(1)
		c.log.Warn("cache: chunk failed its checksum; refetching", "key", o.meta.Key, "chunk", idx)
	} else {
		c.log.Warn("cache: read of cached chunk failed; refetching", "key", o.meta.Key, "chunk", idx, "err", err)
	}
	c.dropChunk(o, idx)
	return nil, false
}

// store offers a fetched chunk to the cache: if the policy admits it, the
// bytes are written to o's file, marked present, and queued for the index.
// Otherwise the chunk was only streamed through. counted is called once
// the chunk is counted against the capacity or known not to be kept,
// before it is written.
func (c *Cache) store(o *object, idx int, data []byte, crc uint32, counted func()) {
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
		c.used.Add(-n)
		return
	}
	sl, err := c.write(o, idx, data)
	if err != nil {
		o.mu.RUnlock()
		c.used.Add(-n)
		c.stats.writeErrors.Add(1)
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			c.space.noSpace(err)
		}
		c.writeWarn.warn(c.log, "cache: write failed; serving without caching", "key", o.meta.Key, "chunk", idx, "err", err)
		return
	}
	// Still holding mu shared: o can't die; bits orders us with the other
	// stores and readers of this object.
	o.bits.Lock()
	if o.chunks[idx].state != chunkAbsent {
		o.bits.Unlock()
		o.mu.RUnlock()
		if sl != nil {
			c.packs.free(*sl, n)
		}
		c.used.Add(-n)
		return
	}
	var old *slot
	if sl != nil {
		// Published before the chunk is marked present: a reader that sees
		// it present reads this slot.
		old = o.loc.Swap(sl)
	}
	o.chunks[idx] = chunk{state: chunkPending, verified: true, crc: crc}
	o.cached += n
	o.accessed.Store(time.Now().Unix())
	// Sent under mu (shared): an eviction's delete is queued under mu held
	// exclusively, so it can't slip between this record and its object.
	c.commits.send(commitOp{kind: opAddChunk, o: o, idx: idx, rec: chunkRecord{CRC: crc, Len: uint32(n)}, slot: sl})
	o.bits.Unlock()
	o.mu.RUnlock()
	if old != nil {
		// A slot whose chunk was dropped before: nobody reads it.
		c.packs.free(*old, n)
	}
	c.policy.Added(o.id, n)
}

// reserve accounts n more bytes against capacity, evicting the policy's
// victims as needed. False means the policy would rather not cache them.
func (c *Cache) reserve(incoming ObjectID, n int64) bool {
	if c.space.isFull() {
		return false
	}
	c.spaceMu.Lock()
	defer c.spaceMu.Unlock()
	for capacity := c.capacity.Load(); capacity > 0 && c.used.Load()+n > capacity; {
		victim, ok := c.policy.Victim(incoming, n)
		if !ok || victim == incoming {
			return false
		}
		c.evict(victim)
	}
	c.used.Add(n)
	return true
}

// dropChunk forgets a chunk whose cached bytes can't be trusted or read.
func (c *Cache) dropChunk(o *object, idx int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dead || o.chunks[idx].state == chunkAbsent {
		return
	}
	n := o.meta.chunkLen(idx)
	o.chunks[idx] = chunk{}
	o.cached -= n
	c.used.Add(-n)
	c.freeSlot(o)
	c.commits.send(commitOp{kind: opDropChunk, o: o, idx: idx, rec: chunkRecord{Len: uint32(n)}})
}

func preadFull(path string, p []byte, off int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.ReadAt(p, off)
	return err
}

func pwriteFull(o *object, p []byte, off int64) error {
	f, direct, err := o.openForWrite()
	if err != nil {
		return err
	}
	err = writeChunk(f, direct, p, off)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
