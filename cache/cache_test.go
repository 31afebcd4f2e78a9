package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
)

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// putRandom stores n objects of size random bytes in mem, named by
// fmt.Sprintf(name, i).
func putRandom(mem *memory.Backend, r *rand.Rand, name string, n, size int) []backend.Object {
	objs := make([]backend.Object, n)
	for i := range objs {
		objs[i] = mem.Put(fmt.Sprintf(name, i), randBytes(r, size))
	}
	return objs
}

func openCache(t *testing.T, dir string, opts Options) *Cache {
	t.Helper()
	c, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func readAll(t *testing.T, s *Source, obj backend.Object) []byte {
	t.Helper()
	buf := make([]byte, obj.Size)
	n, err := s.ReadAt(context.Background(), obj, buf, 0)
	s.c.Settle()
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("read %s: %v", obj.Key, err)
	}
	return buf[:n]
}

// readAllRight reads each of objs whole through s and fails the test at
// the first whose bytes are not mem's; when says which read it was.
func readAllRight(t *testing.T, s *Source, mem *memory.Backend, objs []backend.Object, when string) {
	t.Helper()
	for _, o := range objs {
		if got := readAll(t, s, o); !bytes.Equal(got, mem.Data(o.Key)) {
			t.Fatalf("%s: wrong bytes %s", o.Key, when)
		}
	}
}

// readAllCached is readAllRight wanting no backend read: every byte comes
// from the cache.
func readAllCached(t *testing.T, s *Source, mem *memory.Backend, objs []backend.Object, when string) {
	t.Helper()
	before := mem.Reads.Load()
	readAllRight(t, s, mem, objs, when)
	if n := mem.Reads.Load() - before; n != 0 {
		t.Fatalf("%d backend reads %s; want 0", n, when)
	}
}

func TestReadsMatchAndPersistAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	mem := memory.New()
	r := rand.New(rand.NewPCG(1, 2))
	var objs []backend.Object
	for i, size := range []int{0, 1, 4095, 4096, 64 << 10, 300<<10 + 17} {
		objs = append(objs, mem.Put(fmt.Sprintf("o%d", i), randBytes(r, size)))
	}
	c := openCache(t, dir, Options{ChunkSize: 64 << 10})
	s := c.Source(mem)
	readAllRight(t, s, mem, objs, "on the first read")
	// Unaligned reads across chunk boundaries.
	big := objs[len(objs)-1]
	for _, off := range []int64{0, 1, 64<<10 - 3, 128 << 10, big.Size - 5} {
		buf := make([]byte, 70<<10)
		n, err := s.ReadAt(context.Background(), big, buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:n], mem.Data(big.Key)[off:off+int64(n)]) {
			t.Fatalf("offset %d: bytes differ", off)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c = openCache(t, dir, Options{ChunkSize: 64 << 10})
	defer c.Close()
	readAllCached(t, c.Source(mem), mem, objs, "after reopen")
}

func TestSecondOpenIsInUse(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, dir, Options{})
	defer c.Close()
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open: got %v, want ErrInUse", err)
	}
}

func TestConcurrentMissesFetchOnce(t *testing.T) {
	mem := memory.New()
	obj := mem.Put("x", randBytes(rand.New(rand.NewPCG(3, 4)), 100<<10))
	release := mem.Hold()
	c := openCache(t, t.TempDir(), Options{})
	defer c.Close()
	s := c.Source(mem)
	const readers = 16
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, obj.Size)
			if _, err := s.ReadAt(context.Background(), obj, buf, 0); err != nil && !errors.Is(err, io.EOF) {
				errs <- err
				return
			}
			if !bytes.Equal(buf, mem.Data("x")) {
				errs <- errors.New("bytes differ")
			}
		}()
	}
	// Release the fetch only once every reader waits on the flight.
	for c.Stats().Waiting < readers {
		runtime.Gosched()
	}
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := mem.Reads.Load(); n != 1 {
		t.Fatalf("%d backend reads for %d concurrent readers, want 1", n, readers)
	}
}

func TestCorruptChunkIsRefetched(t *testing.T) {
	dir, mem, obj := cacheOne(t, Options{ChunkSize: 64 << 10}, 5, 200<<10)

	// Flip a byte in the middle of the cached file, as a torn write or bad
	// disk would.
	meta := metaOf(mem.ID(), obj, 64<<10)
	id := ObjectID(meta.ID())
	path := filepath.Join(dir, "data", id.String()[:2], id.String())
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{^mem.Data("x")[100<<10]}, 100<<10)
	f.Close()

	refetchesOnce(t, dir, Options{ChunkSize: 64 << 10}, mem, obj)
}

// refetchesOnce opens the cache in dir, whose copy of obj has a flipped
// byte, and checks that a read gets the right bytes: the chunk fails its
// checksum once and is fetched again once.
// openOne puts an object of size random bytes (seeded by seed) under key
// in a new store and reads it whole through a cache in a new dir: the
// cache is left open, s is the source it was read through.
func openOne(t *testing.T, opts Options, key string, seed uint64, size int) (dir string, mem *memory.Backend, obj backend.Object, c *Cache, s *Source) {
	t.Helper()
	dir = t.TempDir()
	mem = memory.New()
	obj = mem.Put(key, randBytes(rand.New(rand.NewPCG(seed, seed+1)), size))
	c = openCache(t, dir, opts)
	s = c.Source(mem)
	readAll(t, s, obj)
	return dir, mem, obj, c, s
}

// cacheOne is openOne of an object "x", the cache closed after: a cache
// dir as a restart finds it.
func cacheOne(t *testing.T, opts Options, seed uint64, size int) (string, *memory.Backend, backend.Object) {
	t.Helper()
	dir, mem, obj, c, _ := openOne(t, opts, "x", seed, size)
	c.Close()
	return dir, mem, obj
}

func refetchesOnce(t *testing.T, dir string, opts Options, mem *memory.Backend, obj backend.Object) {
	t.Helper()
	c := openCache(t, dir, opts)
	defer c.Close()
	before := mem.Reads.Load()
	if got := readAll(t, c.Source(mem), obj); !bytes.Equal(got, mem.Data(obj.Key)) {
		t.Fatal("served corrupt bytes")
	}
	if c.Stats().VerifyFailures != 1 || mem.Reads.Load()-before != 1 {
		t.Fatalf("verify failures %d, refetches %d; want 1 and 1", c.Stats().VerifyFailures, mem.Reads.Load()-before)
	}
}

func TestChangedObjectNeverMixes(t *testing.T) {
	mem := memory.New()
	r := rand.New(rand.NewPCG(7, 8))
	old := mem.Put("x", randBytes(r, 256<<10))
	oldBytes := mem.Data("x")
	c := openCache(t, t.TempDir(), Options{ChunkSize: 64 << 10})
	defer c.Close()
	s := c.Source(mem)
	buf := make([]byte, 64<<10)
	if _, err := s.ReadAt(context.Background(), old, buf, 0); err != nil {
		t.Fatal(err)
	}
	newer := mem.Put("x", randBytes(r, 256<<10))
	// The old version: cached chunk still served, missing ones fail.
	if _, err := s.ReadAt(context.Background(), old, buf, 64<<10); !errors.Is(err, backend.ErrChanged) {
		t.Fatalf("read of uncached chunk of old version: %v, want ErrChanged", err)
	}
	if _, err := s.ReadAt(context.Background(), old, buf, 0); err != nil || !bytes.Equal(buf, oldBytes[:64<<10]) {
		t.Fatalf("cached chunk of old version: err %v or wrong bytes", err)
	}
	// The new version is another object: never the old bytes.
	if got := readAll(t, s, newer); !bytes.Equal(got, mem.Data("x")) {
		t.Fatal("new version: wrong bytes")
	}
}

// hitRate runs epochs over n single-chunk objects in a fresh shuffled order
// each time, with a cache holding frac of them, and returns the chunk hit
// rate of each epoch after the first.
func hitRate(t *testing.T, policy Policy, n int, frac float64, epochs int) []float64 {
	mem := memory.New()
	const size = 4 << 10
	r := rand.New(rand.NewPCG(9, 10))
	objs := putRandom(mem, r, "f%05d", n, size)
	c := openCache(t, t.TempDir(), Options{ChunkSize: 64 << 10, Capacity: int64(frac * float64(n*size)), Policy: policy})
	defer c.Close()
	s := c.Source(mem)
	var rates []float64
	buf := make([]byte, size)
	for e := range epochs {
		before := c.Stats()
		for _, i := range r.Perm(n) {
			if _, err := s.ReadAt(context.Background(), objs[i], buf, 0); err != nil {
				t.Fatal(err)
			}
			c.Settle()
		}
		after := c.Stats()
		if e > 0 {
			rates = append(rates, float64(after.Hits-before.Hits)/float64(n))
		}
	}
	return rates
}

func TestFillAndHoldHitsCachedFractionUnderShuffle(t *testing.T) {
	for _, frac := range []float64{0.25, 0.5, 0.75} {
		for e, rate := range hitRate(t, NewFillAndHold(), 2000, frac, 4) {
			if rate < 0.97*frac {
				t.Errorf("fill-and-hold, cache %.0f%%: epoch %d hit rate %.3f, want >= %.3f", frac*100, e+1, rate, 0.97*frac)
			}
		}
	}
}

func TestLRUThrashesUnderShuffle(t *testing.T) {
	// The reason fill-and-hold is the default: under shuffled epochs LRU
	// at half capacity evicts each item just before its next use and
	// hits far below the cached fraction. This pins the comparison.
	for e, rate := range hitRate(t, NewLRU(), 2000, 0.5, 3) {
		if rate > 0.3 {
			t.Errorf("lru epoch %d hit rate %.3f; expected thrashing (< 0.3)", e+1, rate)
		}
	}
}

func TestListingRoundTrip(t *testing.T) {
	c := openCache(t, t.TempDir(), Options{})
	defer c.Close()
	if _, _, ok, err := c.LoadListing("src"); ok || err != nil {
		t.Fatalf("empty cache: ok=%v err=%v", ok, err)
	}
	var objs []backend.Object
	for i := range 45000 { // more than two pages
		objs = append(objs, backend.Object{Key: fmt.Sprintf("d/ü %d", i), Size: int64(i), Version: fmt.Sprint(i * 7), ModTime: time.Unix(int64(i), 5)})
	}
	// Long keys that don't compress: 20,000 of them encode to 20 MB, over
	// what one index value may hold.
	r := rand.New(rand.NewPCG(61, 62))
	var long []backend.Object
	for i := range 20000 {
		key := make([]byte, 1000)
		for j := range key {
			key[j] = 'a' + byte(r.IntN(26))
		}
		long = append(long, backend.Object{Key: fmt.Sprintf("%05d/%s", i, key), Size: 1, Version: "v", ModTime: time.Unix(int64(i), 0)})
	}
	for _, want := range [][]backend.Object{objs, long, objs[:3], nil} {
		if err := c.SaveListing("src", backend.NewListing(want)); err != nil {
			t.Fatal(err)
		}
		got, _, ok, err := c.LoadListing("src")
		if err != nil || !ok || got.Len() != len(want) {
			t.Fatalf("load: ok=%v err=%v len %d want %d", ok, err, got.Len(), len(want))
		}
		for i := range want {
			if g := got.At(i); g.Key != want[i].Key || g.Size != want[i].Size || g.Version != want[i].Version || !g.ModTime.Equal(want[i].ModTime) {
				t.Fatalf("entry %d: %+v != %+v", i, g, want[i])
			}
		}
	}
}

func TestEvictStaleDropsOldVersions(t *testing.T) {
	mem := memory.New()
	r := rand.New(rand.NewPCG(11, 12))
	keep := mem.Put("keep", randBytes(r, 10<<10))
	old := mem.Put("changes", randBytes(r, 10<<10))
	gone := mem.Put("gone", randBytes(r, 10<<10))
	c := openCache(t, t.TempDir(), Options{})
	defer c.Close()
	s := c.Source(mem)
	for _, o := range []backend.Object{keep, old, gone} {
		readAll(t, s, o)
	}
	newer := mem.Put("changes", randBytes(r, 10<<10))
	if n := c.EvictStale(mem.ID(), backend.NewListing([]backend.Object{keep, newer})); n != 2 {
		t.Fatalf("evicted %d, want 2 (old version and vanished object)", n)
	}
	if c.Used() != keep.Size {
		t.Fatalf("used %d after evicting stale, want %d", c.Used(), keep.Size)
	}
	before := mem.Reads.Load()
	readAll(t, s, keep)
	if mem.Reads.Load() != before {
		t.Fatal("current object was evicted")
	}
}

func TestWarmFillsUpToCapacityWithoutEvicting(t *testing.T) {
	mem := memory.New()
	objs := putRandom(mem, rand.New(rand.NewPCG(13, 14)), "w%d", 4, 10<<10)
	c := openCache(t, t.TempDir(), Options{Capacity: 25 << 10, Policy: NewLRU()})
	defer c.Close()
	s := c.Source(mem)
	want := []WarmOutcome{WarmFetched, WarmFetched}
	for i, o := range objs[:2] {
		got, err := s.Warm(context.Background(), o, 0, Foreground, nil)
		if err != nil || got != want[i] {
			t.Fatalf("warm %d: %v, %v; want %v", i, got, err, want[i])
		}
	}
	if _, err := s.Warm(context.Background(), objs[2], 0, Foreground, nil); !errors.Is(err, ErrFull) {
		t.Fatalf("warm past capacity: %v, want ErrFull", err)
	}
	if got, err := s.Warm(context.Background(), objs[0], 0, Foreground, nil); err != nil || got != WarmAlreadyCached {
		t.Fatalf("warm again: %v, %v", got, err)
	}
	if n, _ := s.CachedBytes(objs[0]); n != objs[0].Size {
		t.Fatalf("cached bytes %d, want %d", n, objs[0].Size)
	}
	if n, _ := s.CachedBytes(objs[3]); n != 0 {
		t.Fatalf("cached bytes of unwarmed object %d", n)
	}
	if c.Stats().Evictions != 0 || mem.Reads.Load() != 2 {
		t.Fatalf("evictions %d, backend reads %d; want 0 and 2", c.Stats().Evictions, mem.Reads.Load())
	}
}

func TestEvictingObjectWithManyChunksIsDurable(t *testing.T) {
	// 30,000 chunk records exceed what one badger transaction holds.
	dir := t.TempDir()
	mem := memory.New()
	obj := mem.Put("big", make([]byte, 30000*4096))
	c := openCache(t, dir, Options{ChunkSize: 4096})
	buf := make([]byte, 1<<20)
	s := c.Source(mem)
	for off := int64(0); off < obj.Size; off += int64(len(buf)) {
		if _, err := s.ReadAt(context.Background(), obj, buf, off); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
	}
	if n := c.EvictStale(mem.ID(), &backend.Listing{}); n != 1 {
		t.Fatalf("evicted %d, want 1", n)
	}
	c.Close()
	c = openCache(t, dir, Options{ChunkSize: 4096})
	defer c.Close()
	if c.Used() != 0 {
		t.Fatalf("after evicting and reopening, used = %d, want 0", c.Used())
	}
}

func TestUseAfterCloseDoesNotPanic(t *testing.T) {
	dir, _, obj, c, s := openOne(t, Options{}, "x", 15, 8<<10)
	c.Close()
	os.RemoveAll(filepath.Join(dir, "data"))
	// The fast path fails to read the file and drops the chunk, which
	// queues an index op on a closed committer: dropped, not a panic.
	buf := make([]byte, obj.Size)
	if _, err := s.ReadAt(context.Background(), obj, buf, 0); err == nil {
		t.Fatal("read after Close succeeded")
	}
}

// TestSourceCloseCancelsItsFlights: Source.Close doesn't wait for a backend
// that hangs (an unmount must not), leaves nothing started through that
// source running, and refuses new fetches; a reader from another source
// over the same store that had joined the cancelled flight fetches again
// and gets the right bytes.
func TestSourceCloseCancelsItsFlights(t *testing.T) {
	mem := memory.New()
	obj := mem.Put("x", randBytes(rand.New(rand.NewPCG(5, 6)), 100<<10))
	release := mem.Hold()
	defer release()
	c := openCache(t, t.TempDir(), Options{})
	defer c.Close()
	closing, other := c.Source(mem), c.Source(mem)
	closing.Prefetch(obj, 0)
	for c.Stats().FetchesInFlight == 0 {
		runtime.Gosched()
	}
	type result struct {
		data []byte
		err  error
	}
	got := make(chan result, 1)
	go func() {
		buf := make([]byte, obj.Size)
		_, err := other.ReadAt(context.Background(), obj, buf, 0)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		got <- result{buf, err}
	}()
	for c.Stats().Waiting < 2 { // the prefetch and the other source's read, on one flight
		runtime.Gosched()
	}
	closing.Close() // returns although the backend read never ends by itself
	if err := closing.Fetch(context.Background(), obj, 0, Foreground, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Fetch through a closed source: %v, want ErrClosed", err)
	}
	release()
	r := <-got
	if r.err != nil {
		t.Fatalf("a read from another source failed when the first one closed: %v", r.err)
	}
	if !bytes.Equal(r.data, mem.Data("x")) {
		t.Fatal("the other source read wrong bytes")
	}
	if n := mem.Reads.Load(); n != 2 {
		t.Errorf("%d backend reads, want 2 (the cancelled one, then the other source's own)", n)
	}
}

// TestWarmReportsFetched: Warm's fetched callback runs once, when the
// bytes are in and counted against the capacity (a warm frees its fetch
// slot and its reservation then; when exactly, relative to the write, is up
// to the scheduler), and Warm returns only once the chunk is stored.
func TestWarmReportsFetched(t *testing.T) {
	mem := memory.New()
	obj := mem.Put("x", randBytes(rand.New(rand.NewPCG(31, 32)), 100<<10))
	c := openCache(t, t.TempDir(), Options{Capacity: 1 << 30})
	defer c.Close()
	s := c.Source(mem)
	calls := 0
	var usedAtFetched int64
	outcome, err := s.Warm(context.Background(), obj, 0, Foreground, func() { calls++; usedAtFetched = c.Used() })
	if err != nil || outcome != WarmFetched {
		t.Fatalf("Warm = %v, %v", outcome, err)
	}
	if calls != 1 {
		t.Fatalf("fetched called %d times, want 1", calls)
	}
	if usedAtFetched < obj.Size {
		// A warm giving its reservation back then would let another
		// chunk take the room.
		t.Errorf("fetched called with %d bytes used: before the chunk was counted against the capacity", usedAtFetched)
	}
	if !s.ChunkCached(obj, 0) {
		t.Error("Warm returned before the chunk was stored")
	}
	calls = 0
	if outcome, err := s.Warm(context.Background(), obj, 0, Foreground, func() { calls++ }); err != nil || outcome != WarmAlreadyCached || calls != 0 {
		t.Fatalf("Warm of a cached chunk = %v, %v, fetched called %d times; want already cached, no fetch", outcome, err, calls)
	}
}

// progressBackend reports each read's bytes in 4 KiB pieces through
// backend.ProgressOf, as backend/s3 does with a response body.
type progressBackend struct{ backend.Backend }

func (b progressBackend) ReadAt(ctx context.Context, obj backend.Object, p []byte, off int64) (int, error) {
	n, err := b.Backend.ReadAt(ctx, obj, p, off)
	if fn := backend.ProgressOf(ctx); fn != nil {
		for i := 0; i < n; i += 4096 {
			fn(min(4096, n-i))
		}
	}
	return n, err
}

// TestPrefetchWatchedReportsArrivalsAndEndsOnce: a watched prefetch that
// fetches hears of every byte from the backend, then ends once, with the
// chunk stored; one of a cached chunk, or of a chunk out of range, hears
// of no bytes and still ends once.
func TestPrefetchWatchedReportsArrivalsAndEndsOnce(t *testing.T) {
	mem := memory.New()
	obj := mem.Put("x", randBytes(rand.New(rand.NewPCG(41, 42)), 100<<10))
	c := openCache(t, t.TempDir(), Options{Capacity: 1 << 30})
	defer c.Close()
	s := c.Source(progressBackend{mem})
	watch := func(idx int) (arrived int64, ends int) {
		t.Helper()
		var mu sync.Mutex
		done := make(chan struct{}, 2)
		s.PrefetchWatched(obj, idx, func(n int) {
			mu.Lock()
			arrived += int64(n)
			mu.Unlock()
		}, func() { done <- struct{}{} })
		<-done
		mu.Lock()
		defer mu.Unlock()
		return arrived, 1 + len(done)
	}
	if arrived, ends := watch(0); arrived != obj.Size || ends != 1 {
		t.Fatalf("watched prefetch of a new chunk: %d bytes arrived, ended %d times; want %d, once", arrived, ends, obj.Size)
	}
	if !s.ChunkCached(obj, 0) {
		t.Fatal("the watched prefetch ended before its chunk was stored")
	}
	if arrived, ends := watch(0); arrived != 0 || ends != 1 {
		t.Fatalf("watched prefetch of a cached chunk: %d bytes arrived, ended %d times; want 0, once", arrived, ends)
	}
	if arrived, ends := watch(5); arrived != 0 || ends != 1 {
		t.Fatalf("watched prefetch out of range: %d bytes arrived, ended %d times; want 0, once", arrived, ends)
	}
	if n := mem.Reads.Load(); n != 1 {
		t.Errorf("%d backend reads, want 1", n)
	}
}
