package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
)

// TestRecycledBuffersNeverReachReaders mixes reads (whole, and partial
// stream reads whose rest is staged) with fetches, prefetches and warms of
// the same chunks on a cache too small to keep them, so flights keep
// starting, recycling their buffers, and being joined. Buffers given back
// are poisoned: one recycled while a reader could still copy from it, or
// handed to two holders, shows up as wrong bytes.
func TestRecycledBuffersNeverReachReaders(t *testing.T) {
	mem := memory.New()
	r := rand.New(rand.NewPCG(7, 8))
	var objs []backend.Object
	for i := range 48 {
		size := 20_000 + r.IntN(300_000)
		objs = append(objs, mem.Put(fmt.Sprintf("o%02d", i), randBytes(r, size)))
	}
	c := openCache(t, t.TempDir(), Options{ChunkSize: 128 << 10, Capacity: 512 << 10, Policy: NewLRU()})
	closed := false
	defer func() {
		if !closed {
			c.Close()
		}
	}()
	if !hasArena(c) {
		t.Fatal("no buffer arena: mmap refused")
	}
	c.bufs.SetPoison(true)
	s := c.Source(mem)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for range 300 {
				obj := objs[r.IntN(len(objs))]
				idx := r.IntN(s.NumChunks(obj))
				switch r.IntN(5) {
				case 4:
					off := r.Int64N(obj.Size)
					buf := make([]byte, min(obj.Size-off, 1+r.Int64N(64<<10)))
					if _, err := s.ReadAtStream(ctx, obj, buf, off); err != nil && !errors.Is(err, io.EOF) {
						errs <- err
						return
					}
					if !bytes.Equal(buf, mem.Data(obj.Key)[off:off+int64(len(buf))]) {
						errs <- fmt.Errorf("%s: stream read at %d: bytes that are not the object's", obj.Key, off)
						return
					}
				case 0:
					s.Prefetch(obj, idx)
				case 1:
					if _, err := s.Warm(ctx, obj, idx, Foreground, nil); err != nil && !errors.Is(err, ErrFull) {
						errs <- err
						return
					}
				case 2:
					if err := s.Fetch(ctx, obj, idx, Background, nil); err != nil {
						errs <- err
						return
					}
				default:
					buf := make([]byte, obj.Size)
					if _, err := s.ReadAt(ctx, obj, buf, 0); err != nil && !errors.Is(err, io.EOF) {
						errs <- err
						return
					}
					if !bytes.Equal(buf, mem.Data(obj.Key)) {
						errs <- fmt.Errorf("%s: read bytes that are not the object's", obj.Key)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Every buffer comes back by Close (staged ones included), so the
	// arena can be unmapped: one that didn't would be lost to every later
	// read.
	c.Settle()
	closed = true
	c.Close()
	if n := c.bufs.DoubleReleases(); n != 0 {
		t.Fatalf("%d buffers given back twice", n)
	}
	if _, out := c.bufs.Arena(); out != -1 {
		t.Fatalf("arena still mapped after Close: %d buffers never came back", out)
	}
}

// TestReadersRecycleTheirFlightsBuffer: when reads join a flight (a read
// catching up with a prefetch, or concurrent misses), the last of them to
// finish copying gives the buffer back to the pool, so a run of such
// flights can reuse one buffer instead of allocating one each.
func TestReadersRecycleTheirFlightsBuffer(t *testing.T) {
	mem := memory.New()
	objs := putRandom(mem, rand.New(rand.NewPCG(33, 34)), "o%02d", 32, 100<<10)
	c := openCache(t, t.TempDir(), Options{})
	defer c.Close()
	s := c.Source(mem)
	const readers = 4
	for _, obj := range objs {
		release := mem.Hold()
		var wg sync.WaitGroup
		for range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, obj.Size)
				if _, err := s.ReadAt(context.Background(), obj, buf, 0); err != nil || !bytes.Equal(buf, mem.Data(obj.Key)) {
					t.Errorf("%s: %v or wrong bytes", obj.Key, err)
				}
			}()
		}
		for c.Stats().Waiting < readers {
			runtime.Gosched()
		}
		release()
		wg.Wait()
		c.Settle()
	}
	// Counted where the cache gives buffers back: the pool itself may drop
	// what it is given (at a collection, or at random under -race).
	if n := c.bufs.Recycled(); n != int64(len(objs)) {
		t.Fatalf("%d buffers recycled for %d flights joined by readers; want one each", n, len(objs))
	}
}

// hasArena reports whether c's buffer pool got its arena.
func hasArena(c *Cache) bool {
	has, _ := c.bufs.Arena()
	return has
}
