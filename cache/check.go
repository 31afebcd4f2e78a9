package cache

import (
	"errors"
	"hash/crc32"
	"io/fs"
)

// Cached bytes are checked in blocks: every chunk's bytes are split into
// check blocks of checkBlock bytes (the last one of a chunk shorter), and
// each block's CRC32C is kept with the chunk. A read of a cached chunk
// reads the blocks it touches and checks each before serving any byte of
// them (doc.go, "Trust"). Checking whole chunks instead would make a read
// of 4 KiB or 128 KiB from a 4 MiB chunk read and checksum all 4 MiB:
// 15-22x the cost of the read itself, even from the page cache (go test
// ./cache -bench CachedRead, docs/guarantees.md). At 128 KiB a kernel
// READ (128 KiB to 1 MiB, mostly aligned) touches one block more at most,
// and a file of up to 128 KiB, the common small sample, is one block, one
// CRC, as before blocks.
const checkBlock = 128 << 10

// blocksIn is the number of check blocks of a chunk of n bytes.
func blocksIn(n int64) int { return int((n + checkBlock - 1) / checkBlock) }

// blockSums returns the CRC32C of each check block of data, in order.
func blockSums(data []byte) []uint32 {
	sums := make([]uint32, blocksIn(int64(len(data))))
	for i := range sums {
		sums[i] = crc32.Checksum(data[i*checkBlock:min((i+1)*checkBlock, len(data))], castagnoli)
	}
	return sums
}

// readVerified returns the whole of chunk idx of o, read from its cache
// file and checked (readChecked); false if it isn't cached or fails its
// check.
func (c *Cache) readVerified(o *object, idx int) ([]byte, bool) {
	if !o.present(idx) {
		return nil, false // the usual case of a fetch: no buffer to take and give back
	}
	buf := c.bufs.get(int(o.meta.chunkLen(idx)))
	if !c.readChecked(o, idx, buf, 0) {
		c.bufs.put(buf)
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
		aligned := c.bufs.getPooled(int(alignUp(n)))
		defer c.bufs.put(aligned)
		if direct, err = sl.readDirect(aligned, chunkOff+from, int(n)); direct {
			buf, own = aligned[:n], true
		}
	} else if !o.meta.packed() {
		// A chunk file, read around the page cache too: the mount's pages
		// hold the bytes once, and no copy goes through the file's.
		aligned := c.bufs.getPooled(int(alignUp(n)))
		defer c.bufs.put(aligned)
		if direct, err = preadDirect(o.path, aligned, chunkOff+from, int(n)); direct {
			buf, own = aligned[:n], true
		}
	}
	if !direct {
		if own {
			buf = c.bufs.get(int(n))
			defer c.bufs.put(buf)
		}
		err = o.readAt(buf, chunkOff+from)
	}
	ok := err == nil && sumsMatch(buf, sums)
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
		c.readWarn.warn(c.log, "cache: cached chunk failed its checksum; refetching", "key", o.meta.Key, "chunk", idx)
		c.dropChunk(o, idx)
	case errors.Is(err, fs.ErrNotExist) && !o.meta.packed():
		c.vanished(o)
	default:
		c.stats.verifyFailures.Add(1)
		c.readWarn.warn(c.log, "cache: read of cached chunk failed; refetching", "key", o.meta.Key, "chunk", idx, "err", err)
		c.dropChunk(o, idx)
	}
	return false
}

// sumsMatch checks buf, consecutive check blocks, against their sums (one
// sum for the whole of buf when there is one).
func sumsMatch(buf []byte, sums []uint32) bool {
	if len(sums) == 1 {
		return crc32.Checksum(buf, castagnoli) == sums[0]
	}
	for i, want := range sums {
		if crc32.Checksum(buf[i*checkBlock:min((i+1)*checkBlock, len(buf))], castagnoli) != want {
			return false
		}
	}
	return true
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
	size := o.meta.chunkLen(idx)
	nb := blocksIn(size)
	if nb == 1 || ch.whole {
		return ch, []uint32{ch.crc}, 0, size
	}
	b0, b1 := int(inner/checkBlock), int((inner+n+checkBlock-1)/checkBlock)
	base := o.sumsAt(idx)
	return ch, append([]uint32(nil), o.sums[base+b0:base+b1]...), int64(b0) * checkBlock, min(int64(b1)*checkBlock, size)
}

// sumsAt is where chunk idx's block sums start in o.sums.
func (o *object) sumsAt(idx int) int { return idx * blocksIn(o.meta.ChunkSize) }

// sumsLen is the length o.sums has once allocated: every block of every
// chunk of the object.
func (o *object) sumsLen() int {
	n := o.meta.numChunks()
	if n == 0 {
		return 0
	}
	return o.sumsAt(n-1) + blocksIn(o.meta.chunkLen(n-1))
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
