package cache

import (
	"container/list"
	"context"
	"sync"

	"github.com/dsmount/dsmount/backend"
)

// Small random reads in a row.
//
// A reader that told the kernel its reads are random (madvise
// MADV_RANDOM: LMDB opened with readahead=False) faults one page at a
// time, so a 100 KB record of a file bigger than the cache comes as 26
// READs of 4 KiB in a row, each a ranged GET of its own. A READ of at
// most randomSmall that misses the cache fetches the aligned randomBlock
// around it instead, kept in memory (randomBlocks, per Source) for the
// READs that follow: a record costs a GET or two, and the store's bytes
// stay within a block per record. Bigger READs (the kernel's readahead
// of a random reader, split where its page cache holds pages already)
// are fetched as asked: a block around each of those cost more GETs and
// bytes than it saved.
const (
	randomSmall      = 16 << 10
	randomBlock      = 128 << 10
	randomBlocksKept = 128 // 16 MiB per Source
)

type blockKey struct {
	id  ObjectID
	idx int64
}

type randomBlockEntry struct {
	key  blockKey
	data []byte
}

// randomBlocks is a Source's most recently fetched random blocks, least
// recently used last. Its bytes came from the store at the object's
// version (the key's ObjectID names it) and are never written.
type randomBlocks struct {
	mu  sync.Mutex
	m   map[blockKey]*list.Element
	lru list.List
}

// copyFrom copies the block's bytes at inner into dst and reports
// whether the block was there (all of dst is within it).
func (b *randomBlocks) copyFrom(k blockKey, dst []byte, inner int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.m[k]
	if !ok {
		return false
	}
	data := e.Value.(*randomBlockEntry).data
	if inner+int64(len(dst)) > int64(len(data)) {
		return false
	}
	copy(dst, data[inner:])
	b.lru.MoveToFront(e)
	return true
}

func (b *randomBlocks) put(k blockKey, data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = make(map[blockKey]*list.Element)
	}
	if e, ok := b.m[k]; ok {
		e.Value.(*randomBlockEntry).data = data
		b.lru.MoveToFront(e)
		return
	}
	b.m[k] = b.lru.PushFront(&randomBlockEntry{k, data})
	for b.lru.Len() > randomBlocksKept {
		last := b.lru.Back()
		delete(b.m, last.Value.(*randomBlockEntry).key)
		b.lru.Remove(last)
	}
}

// readBlocks fills dst, obj's bytes at off (less than a block's worth),
// from the random blocks around them, fetching each block missing.
func (s *Source) readBlocks(ctx context.Context, obj backend.Object, id ObjectID, dst []byte, off int64) error {
	for n := 0; n < len(dst); {
		pos := off + int64(n)
		idx := pos / randomBlock
		inner := pos - idx*randomBlock
		seg := dst[n:min(len(dst), n+int(randomBlock-inner))]
		k := blockKey{id, idx}
		if s.blocks.copyFrom(k, seg, inner) {
			s.c.stats.hit(len(seg))
			s.stats.hit(len(seg))
		} else {
			start := idx * randomBlock
			block := make([]byte, min(randomBlock, obj.Size-start))
			if err := s.readRange(ctx, obj, block, start); err != nil {
				return err
			}
			s.blocks.put(k, block)
			copy(seg, block[inner:])
		}
		n += len(seg)
	}
	return nil
}
