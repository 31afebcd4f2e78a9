package cache

import (
	"bytes"
	"context"
	"hash/crc32"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
	"github.com/dsmount/dsmount/cache/internal/index"
	"github.com/dsmount/dsmount/cache/internal/record"
)

// cachedFilePath is where obj's chunks live (an object of several chunks).
func cachedFilePath(dir string, mem *memory.Backend, obj backend.Object, chunkSize int64) string {
	meta := metaOf(mem.ID(), obj, chunkSize)
	id := ObjectID(meta.ID()).String()
	return filepath.Join(dir, "data", id[:2], id)
}

// flipByte flips the byte at off of the file at path, in place.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestReadsCheckTheBlocksTheyTouch: a read of part of a cached chunk
// reads and checks the check blocks it touches, every time (not only the
// first after a start): a byte flipped in one block while the cache is
// open is caught by the next read of that block, and only that block's
// readers refetch.
func TestReadsCheckTheBlocksTheyTouch(t *testing.T) {
	dir := t.TempDir()
	mem := memory.New()
	const chunkSize = 1 << 20 // 8 check blocks
	obj := mem.Put("x", randBytes(rand.New(rand.NewPCG(11, 12)), 3*chunkSize+5000))
	c := openCache(t, dir, Options{ChunkSize: chunkSize})
	defer c.Close()
	s := c.Source(mem)
	readAll(t, s, obj)
	c.disk.commits.barrier()

	flipByte(t, cachedFilePath(dir, mem, obj, chunkSize), chunkSize+5*record.CheckBlock+7) // chunk 1, block 5
	read := func(off, n int64) {
		t.Helper()
		buf := make([]byte, n)
		if _, err := s.ReadAt(context.Background(), obj, buf, off); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, mem.Data("x")[off:off+n]) {
			t.Fatalf("read of %d at %d: wrong bytes", n, off)
		}
	}
	before := mem.Reads.Load()
	read(chunkSize+4096, 8192)                    // block 0 of chunk 1: intact
	read(chunkSize+4*record.CheckBlock+100, 4096) // block 4: intact
	if c.Stats().VerifyFailures != 0 || mem.Reads.Load() != before {
		t.Fatalf("reads of intact blocks: %d verify failures, %d fetches; want none", c.Stats().VerifyFailures, mem.Reads.Load()-before)
	}
	read(chunkSize+5*record.CheckBlock, 100) // block 5: flipped
	if c.Stats().VerifyFailures != 1 || mem.Reads.Load()-before != 1 {
		t.Fatalf("read of the flipped block: %d verify failures, %d fetches; want 1 and 1", c.Stats().VerifyFailures, mem.Reads.Load()-before)
	}
}

// TestWholeChunkRecordsAreCheckedWhole: a chunk recorded before check
// blocks (one CRC32C for the whole chunk) is read and checked whole, so a
// flipped byte anywhere in it is caught by a read of any part.
func TestWholeChunkRecordsAreCheckedWhole(t *testing.T) {
	const chunkSize = 1 << 20
	dir, mem, obj := cacheOne(t, Options{ChunkSize: chunkSize}, 13, 2*chunkSize)

	// Rewrite chunk 0's record as an older dsmount wrote it.
	x := openIndex(t, dir)
	meta := metaOf(mem.ID(), obj, chunkSize)
	// One CRC32C for the whole chunk: 8 bytes, CRC then length.
	old := record.Chunk{Len: chunkSize, Sums: []uint32{crc32.Checksum(mem.Data("x")[:chunkSize], crc32.MakeTable(crc32.Castagnoli))}}
	if err := x.Update(func(w index.Writer) error { return w.SetChunk(meta.ID(), 0, old) }); err != nil {
		t.Fatal(err)
	}
	x.Close()

	c := openCache(t, dir, Options{ChunkSize: chunkSize})
	defer c.Close()
	s := c.Source(mem)
	buf := make([]byte, 4096)
	if _, err := s.ReadAt(context.Background(), obj, buf, 3*record.CheckBlock); err != nil || !bytes.Equal(buf, mem.Data("x")[3*record.CheckBlock:3*record.CheckBlock+4096]) {
		t.Fatalf("read under a whole-chunk record: %v, or wrong bytes", err)
	}
	flipByte(t, cachedFilePath(dir, mem, obj, chunkSize), 7*record.CheckBlock+1)
	before := mem.Reads.Load()
	if _, err := s.ReadAt(context.Background(), obj, buf, 0); err != nil || !bytes.Equal(buf, mem.Data("x")[:4096]) {
		t.Fatalf("read after a flip elsewhere in the chunk: %v, or wrong bytes", err)
	}
	if c.Stats().VerifyFailures != 1 || mem.Reads.Load()-before != 1 {
		t.Fatalf("%d verify failures, %d fetches; want the whole chunk checked (1 and 1)", c.Stats().VerifyFailures, mem.Reads.Load()-before)
	}
}

// openIndex opens the index of the closed cache at dir, as the cache does.
func openIndex(t testing.TB, dir string) *index.DB {
	t.Helper()
	x, err := index.Open(filepath.Join(dir, "index"), dir, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	return x
}
