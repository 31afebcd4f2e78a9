package cache

import (
	"errors"
	"io/fs"

	"github.com/dsmount/dsmount/cache/internal/record"
	"github.com/dsmount/dsmount/cache/internal/store"
)

// Cached bytes are checked in blocks (record.CheckBlock), each with its
// CRC32C in the chunk's record: a read of a cached chunk reads the blocks
// it touches and checks each before serving any byte of them (doc.go,
// "Trust").

// readVerified returns the whole of chunk idx of o, read from its cache
// file and checked (readChecked); false if it isn't cached or fails its
// check.
func (c *Cache) readVerified(o *object, idx int) ([]byte, bool) {
	if !o.present(idx) {
		return nil, false // the usual case of a fetch: no buffer to take and give back
	}
	buf := c.bufs.Get(int(o.meta.ChunkLen(idx)))
	if !c.readChecked(o, idx, buf, 0) {
		c.bufs.Put(buf)
		return nil, false
	}
	return buf, true
}

// readChecked fills dst with the bytes of chunk idx of o from inner on,
// read from its cache file and checked: the check blocks dst touches are
// read whole and each checked against its CRC32C, every time, not only the
// first after a start (a cache file can be deleted, replaced, truncated or
// rewritten under the daemon, or rot, at any time). dst ends within the
// chunk. False if the chunk is not cached; a chunk that can't be read or
// fails its check is dropped first (every chunk of its file, if the file
// is gone), so the caller refetches.
func (c *Cache) readChecked(o *object, idx int, dst []byte, inner int64) bool {
	o.mu.RLock()
	ch, sums, from, to := o.checkSpan(idx, inner, int64(len(dst)))
	if ch.state == chunkAbsent {
		o.mu.RUnlock()
		return false
	}
	chunkOff := int64(idx) * o.meta.ChunkSize
	n := to - from
	// Read into dst where it is the span itself (a small file read at
	// once), else into a buffer of the span; a packed object's span with
	// O_DIRECT, into a page-aligned buffer of its own.
	buf, own := dst, from != inner || to != inner+int64(len(dst))
	var err error
	direct := false
	if sl := o.loc.Load(); sl != nil {
		aligned := c.bufs.GetPooled(int(store.AlignUp(n)))
		defer c.bufs.Put(aligned)
		if direct, err = sl.ReadDirect(aligned, chunkOff+from, int(n)); direct {
			buf, own = aligned[:n], true
		}
	} else if !o.meta.Packed() {
		// A chunk file, read around the page cache too: the mount's pages
		// hold the bytes once, and no copy goes through the file's.
		aligned := c.bufs.GetPooled(int(store.AlignUp(n)))
		defer c.bufs.Put(aligned)
		if direct, err = o.file.ReadDirect(aligned, chunkOff+from, int(n)); direct {
			buf, own = aligned[:n], true
		}
	}
	if !direct {
		if own {
			buf = c.bufs.Get(int(n))
			defer c.bufs.Put(buf)
		}
		err = o.readAt(buf, chunkOff+from)
	}
	ok := err == nil && record.SumsMatch(buf, sums)
	o.mu.RUnlock()
	if ok {
		if own {
			copy(dst, buf[inner-from:])
		}
		return true
	}
	switch {
	case err == nil:
		c.stats.verifyFailures.Add(1)
		c.warn.read.warn(c.log, "cache: cached chunk failed its checksum; refetching", "key", o.meta.Key, "chunk", idx)
		c.dropChunk(o, idx)
	case errors.Is(err, fs.ErrNotExist) && !o.meta.Packed():
		c.vanished(o)
	default:
		c.stats.verifyFailures.Add(1)
		c.warn.read.warn(c.log, "cache: read of cached chunk failed; refetching", "key", o.meta.Key, "chunk", idx, "err", err)
		c.dropChunk(o, idx)
	}
	return false
}

// checkSpan returns chunk idx's state and the part of it a read of n bytes
// at inner must read and check, [from, to) within the chunk, with the sums
// to check it against; o.mu is held. A chunk recorded before check blocks
// (whole) is read and checked whole.
func (o *object) checkSpan(idx int, inner, n int64) (ch chunk, sums []uint32, from, to int64) {
	o.bits.Lock()
	defer o.bits.Unlock()
	if o.dead {
		return chunk{}, nil, 0, 0
	}
	ch = o.chunks[idx]
	if ch.state == chunkAbsent {
		return ch, nil, 0, 0
	}
	size := o.meta.ChunkLen(idx)
	nb := record.BlocksIn(size)
	if nb == 1 || ch.whole {
		return ch, []uint32{ch.crc}, 0, size
	}
	b0, b1 := int(inner/record.CheckBlock), int((inner+n+record.CheckBlock-1)/record.CheckBlock)
	base := o.sumsAt(idx)
	return ch, append([]uint32(nil), o.sums[base+b0:base+b1]...), int64(b0) * record.CheckBlock, min(int64(b1)*record.CheckBlock, size)
}

// sumsAt is where chunk idx's block sums start in o.sums.
func (o *object) sumsAt(idx int) int { return idx * record.BlocksIn(o.meta.ChunkSize) }

// sumsLen is the length o.sums has once allocated: every block of every
// chunk of the object.
func (o *object) sumsLen() int {
	n := o.meta.NumChunks()
	if n == 0 {
		return 0
	}
	return o.sumsAt(n-1) + record.BlocksIn(o.meta.ChunkLen(n-1))
}

// setSums records chunk idx's check sums; o.bits is held. A chunk of one
// block keeps its sum in the chunk itself; o.sums is allocated only for an
// object with chunks of several blocks.
func (o *object) setSums(idx int, sums []uint32) chunk {
	if len(sums) == 1 {
		return chunk{crc: sums[0]}
	}
	if o.sums == nil {
		o.sums = make([]uint32, o.sumsLen())
	}
	copy(o.sums[o.sumsAt(idx):], sums)
	return chunk{crc: sums[0]}
}
