package cache

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
)

// countingBackend counts the bytes each ReadAt asks for.
type countingBackend struct {
	*memory.Backend
	asked int64
}

func (b *countingBackend) ReadAt(ctx context.Context, obj backend.Object, p []byte, off int64) (int, error) {
	b.asked += int64(len(p))
	return b.Backend.ReadAt(ctx, obj, p, off)
}

// TestReadAtRandom: random reads of an object bigger than the cache fetch
// what they ask (the random block around a small one), uncached, with the
// right bytes; what is cached is served
// from the cache; an object the cache can hold is read by chunks as
// ReadAt would.
func TestReadAtRandom(t *testing.T) {
	mem := &countingBackend{Backend: memory.New()}
	r := rand.New(rand.NewPCG(3, 4))
	const chunk = 1 << 20
	big := mem.Put("big", randBytes(r, 8<<20+123))
	small := mem.Put("small", randBytes(r, 1<<20))
	c := openCache(t, t.TempDir(), Options{ChunkSize: chunk, Capacity: 4 << 20})
	defer c.Close()
	s := c.Source(mem)
	ctx := context.Background()

	// One chunk of big read whole first: cached, then served from there.
	if got := readAll(t, s, small); !bytes.Equal(got, mem.Data("small")) {
		t.Fatal("small: wrong bytes")
	}
	buf := make([]byte, chunk)
	if _, err := s.ReadAt(ctx, big, buf, 3*chunk); err != nil {
		t.Fatal(err)
	}
	c.Settle()

	const reads, window = 200, 2050
	mem.asked = 0
	before := c.Stats()
	for i := range reads {
		off := r.Int64N(big.Size - window)
		if i%10 == 0 {
			off = 3*chunk + r.Int64N(chunk-window) // in the cached chunk
		}
		p := make([]byte, window)
		n, err := s.ReadAtRandom(ctx, big, p, off)
		if err != nil || n != window {
			t.Fatalf("read at %d: %d, %v", off, n, err)
		}
		if !bytes.Equal(p, mem.Data("big")[off:off+window]) {
			t.Fatalf("read at %d: wrong bytes", off)
		}
	}
	after := c.Stats()
	// Each read under a block fetches the block around it (two at most).
	if limit := int64(reads) * 2 * randomBlock; mem.asked > limit {
		t.Errorf("%d reads of %d bytes asked the backend for %d bytes; want at most %d", reads, window, mem.asked, limit)
	}
	if after.ChunksFetched != before.ChunksFetched || after.RangesFetched == before.RangesFetched {
		t.Errorf("chunks fetched %d -> %d, ranges %d -> %d: want ranges, not chunks", before.ChunksFetched, after.ChunksFetched, before.RangesFetched, after.RangesFetched)
	}
	if after.Hits-before.Hits < reads/10 {
		t.Errorf("%d hits for %d reads inside a cached chunk", after.Hits-before.Hits, reads/10)
	}
	if after.Used != before.Used {
		t.Errorf("block reads cached something: used %d -> %d", before.Used, after.Used)
	}

	// An object the cache can hold: whole chunks, cached.
	fits := mem.Put("fits", randBytes(r, 2<<20))
	p := make([]byte, window)
	if _, err := s.ReadAtRandom(ctx, fits, p, 12345); err != nil || !bytes.Equal(p, mem.Data("fits")[12345:12345+window]) {
		t.Fatalf("a read at random of an object the cache holds: %v", err)
	}
	c.Settle()
	if st := c.Stats(); st.ChunksFetched != after.ChunksFetched+1 || st.RangesFetched != after.RangesFetched {
		t.Errorf("a read at random of an object the cache holds: chunks fetched %d -> %d, ranges %d -> %d; want one chunk", after.ChunksFetched, st.ChunksFetched, after.RangesFetched, st.RangesFetched)
	}
}

// TestSmallRandomReadsInARow: a record read a page at a time (a reader
// that madvised MADV_RANDOM) costs a GET per random block, not one per
// page; every byte is right; a READ of a block or more is fetched as
// asked; a new version of the object is never served the old one's
// blocks.
func TestSmallRandomReadsInARow(t *testing.T) {
	mem := &countingBackend{Backend: memory.New()}
	r := rand.New(rand.NewPCG(5, 6))
	big := mem.Put("lmdb", randBytes(r, 8<<20))
	c := openCache(t, t.TempDir(), Options{ChunkSize: 1 << 20, Capacity: 2 << 20})
	defer c.Close()
	s := c.Source(mem)
	ctx := context.Background()
	read := func(obj backend.Object, key string, off int64, n int) {
		t.Helper()
		p := make([]byte, n)
		if got, err := s.ReadAtRandom(ctx, obj, p, off); err != nil || got != n {
			t.Fatalf("read %d at %d: %d, %v", n, off, got, err)
		}
		if !bytes.Equal(p, mem.Data(key)[off:off+int64(n)]) {
			t.Fatalf("read %d at %d: wrong bytes", n, off)
		}
	}
	before := c.Stats()
	start := int64(3*randomBlock + 8192)
	for off := start; off < start+100<<10; off += 4096 {
		read(big, "lmdb", off, 4096)
	}
	if got := c.Stats().RangesFetched - before.RangesFetched; got != 1 {
		t.Errorf("25 pages in a row within one block: %d ranged GETs; want 1", got)
	}
	mid := c.Stats()
	read(big, "lmdb", 6*randomBlock-100, 200) // across two blocks
	if got := c.Stats().RangesFetched - mid.RangesFetched; got != 2 {
		t.Errorf("a read across two blocks: %d GETs; want 2", got)
	}
	mem.asked = 0
	read(big, "lmdb", 12345, randomSmall+1) // not small: as asked
	if mem.asked != randomSmall+1 {
		t.Errorf("a READ of %d bytes asked for %d bytes; want as many", randomSmall+1, mem.asked)
	}
	// The object changes: its new version reads its own bytes.
	newer := mem.Put("lmdb", randBytes(r, 8<<20))
	if newer.Version == big.Version {
		t.Fatal("the memory backend gave the new object the old version")
	}
	read(newer, "lmdb", start, 4096)
}
