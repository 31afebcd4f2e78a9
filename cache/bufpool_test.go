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

func TestBufPoolClasses(t *testing.T) {
	p := newBufPool(4 << 20)
	for _, tc := range []struct{ n, wantCap int }{
		{1, 1}, {16 << 10, 64 << 10}, {64 << 10, 64 << 10}, {64<<10 + 1, 128 << 10}, {110_000, 128 << 10},
		{1 << 20, 1 << 20}, {4 << 20, 4 << 20}, {4<<20 + 1, 4<<20 + 1},
	} {
		b := p.get(tc.n)
		if len(b) != tc.n || cap(b) != tc.wantCap {
			t.Errorf("get(%d): len %d cap %d, want len %d cap %d", tc.n, len(b), cap(b), tc.n, tc.wantCap)
		}
		p.put(b)
	}
	// A foreign buffer is dropped, not pooled under a class it doesn't fill
	// (a fresh pool: the loop above left a 128 KiB buffer in this one).
	p = newBufPool(4 << 20)
	p.put(make([]byte, 100_000))
	if b := p.get(100_000); cap(b) != 128<<10 {
		t.Errorf("get after a foreign put: cap %d, want %d", cap(b), 128<<10)
	}
}

// TestRecycledBuffersNeverReachReaders mixes reads with fetches, prefetches
// and warms of the same chunks on a cache too small to keep them, so flights
// keep starting, recycling their buffers, and being joined: any buffer
// recycled while a reader could still copy from it shows up as wrong bytes.
func TestRecycledBuffersNeverReachReaders(t *testing.T) {
	mem := memory.New()
	r := rand.New(rand.NewPCG(7, 8))
	var objs []backend.Object
	for i := range 48 {
		size := 20_000 + r.IntN(300_000)
		objs = append(objs, mem.Put(fmt.Sprintf("o%02d", i), randBytes(r, size)))
	}
	c := openCache(t, t.TempDir(), Options{ChunkSize: 128 << 10, Capacity: 512 << 10, Policy: NewLRU()})
	defer c.Close()
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
				switch r.IntN(4) {
				case 0:
					s.Prefetch(obj, idx)
				case 1:
					if _, err := s.Warm(ctx, obj, idx, nil); err != nil && !errors.Is(err, ErrFull) {
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
	if n := c.bufs.recycled.Load(); n != int64(len(objs)) {
		t.Fatalf("%d buffers recycled for %d flights joined by readers; want one each", n, len(objs))
	}
}
