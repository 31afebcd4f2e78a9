package cache

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
)

// cachedSum is the bytes of objs that s says are cached, chunk by chunk.
func cachedSum(s *Source, objs []backend.Object) int64 {
	var sum int64
	for _, o := range objs {
		meta := metaOf(s.id, o, s.c.chunkSize)
		for idx := range meta.NumChunks() {
			if s.ChunkCached(o, idx) {
				sum += meta.ChunkLen(idx)
			}
		}
	}
	return sum
}

func inMemory(c *Cache) int {
	c.table.mu.Lock()
	defer c.table.mu.Unlock()
	return len(c.table.objects)
}

// TestRestartMakesObjectsOnFirstUse: after a restart no object is held in
// memory until it is asked for, yet the byte count is whole, cached objects
// read without a fetch, and evicting objects never touched since the
// restart frees their space (and their records: the count survives another
// restart).
func TestRestartMakesObjectsOnFirstUse(t *testing.T) {
	dir := t.TempDir()
	mem := memory.New()
	r := rand.New(rand.NewPCG(41, 42))
	const chunk = 16 << 10
	var objs []backend.Object
	for i := range 12 {
		size := 5<<10 + i*100
		if i%4 == 3 {
			size = 3*chunk + 100 // a file of its own, several chunks
		}
		objs = append(objs, mem.Put(fmt.Sprintf("o%02d", i), randBytes(r, size)))
	}
	var total int64
	for _, o := range objs[:8] {
		total += o.Size
	}
	opts := Options{ChunkSize: chunk, Capacity: total, Policy: NewLRU()}
	c := openCache(t, dir, opts)
	s := c.Source(mem)
	for _, o := range objs[:8] {
		readAll(t, s, o)
	}
	if got := c.Used(); got != total {
		t.Fatalf("used %d after caching, want %d", got, total)
	}
	c.Close()

	c = openCache(t, dir, opts)
	s = c.Source(mem)
	if got := c.Used(); got != total {
		t.Fatalf("used %d after restart, want %d", got, total)
	}
	if n := inMemory(c); n != 0 {
		t.Fatalf("%d objects in memory after restart, want 0 until used", n)
	}
	readAllCached(t, s, mem, objs[2:3], "after restart")
	if n := inMemory(c); n != 1 {
		t.Fatalf("%d objects in memory after reading one, want 1", n)
	}
	// New objects evict the least recent ones, untouched since the restart.
	readAllRight(t, s, mem, objs[8:], "of a new object")
	if c.Stats().Evictions == 0 {
		t.Fatal("nothing evicted: the test doesn't test eviction")
	}
	used := c.Used()
	if used > total {
		t.Fatalf("used %d over capacity %d", used, total)
	}
	if got := cachedSum(s, objs); got != used {
		t.Fatalf("objects said cached hold %d bytes, used says %d", got, used)
	}
	c.Close()

	c = openCache(t, dir, opts)
	defer c.Close()
	s = c.Source(mem)
	if got := c.Used(); got != used {
		t.Fatalf("used %d after a second restart, want %d", got, used)
	}
	if got := cachedSum(s, objs); got != used {
		t.Fatalf("after a second restart objects said cached hold %d bytes, used says %d", got, used)
	}
	readAllRight(t, s, mem, objs, "after a second restart")
}

// TestEvictedObjectStaysGone: an object evicted right after a restart,
// before the delete of its records is committed, is not made again from
// those records.
func TestEvictedObjectStaysGone(t *testing.T) {
	dir := t.TempDir()
	mem := memory.New()
	r := rand.New(rand.NewPCG(43, 44))
	objs := putRandom(mem, r, "g%d", 20, 3000)
	c := openCache(t, dir, Options{})
	s := c.Source(mem)
	for _, o := range objs {
		readAll(t, s, o)
	}
	c.Close()

	c = openCache(t, dir, Options{})
	defer c.Close()
	s = c.Source(mem)
	keep := backend.NewListing(objs[:5])
	if n := c.EvictStale(mem.ID(), keep); n != 15 {
		t.Fatalf("evicted %d, want 15", n)
	}
	for _, o := range objs[5:] {
		if s.ChunkCached(o, 0) {
			t.Fatalf("%s: evicted, yet said cached", o.Key)
		}
	}
	if got, want := c.Used(), cachedSum(s, objs); got != want || got != 5*3000 {
		t.Fatalf("used %d, cached objects hold %d, want %d", got, want, 5*3000)
	}
	before := mem.Reads.Load()
	readAll(t, s, objs[7])
	if mem.Reads.Load() == before {
		t.Fatal("an evicted object was served from the cache")
	}
}

// TestCapacityFromUsed: nothing counts the cached bytes until asked (a
// daemon asks once its mounts are up); the capacity made from them waits
// for the count.
func TestCapacityFromUsed(t *testing.T) {
	dir := t.TempDir()
	mem := memory.New()
	objs := putRandom(mem, rand.New(rand.NewPCG(45, 46)), "c%d", 4, 2000)
	c := openCache(t, dir, Options{})
	s := c.Source(mem)
	for _, o := range objs {
		readAll(t, s, o)
	}
	c.Close()

	c = openCache(t, dir, Options{CapacityFromUsed: func(used int64) int64 { return used + 5000 }})
	defer c.Close()
	if _, ok := c.UsedIfCounted(); ok {
		t.Fatal("the records were counted before anything asked")
	}
	if got := c.Capacity(); got != 4*2000+5000 {
		t.Fatalf("capacity %d, want %d", got, 4*2000+5000)
	}
	if used, ok := c.UsedIfCounted(); !ok || used != 4*2000 {
		t.Fatalf("after Capacity: used %d, counted %v; want %d, true", used, ok, 4*2000)
	}
}

// TestIDFilter: every ID added is found; few that weren't are.
func TestIDFilter(t *testing.T) {
	r := rand.New(rand.NewPCG(47, 48))
	randID := func() (id ObjectID) {
		for i := range id {
			id[i] = byte(r.Uint32())
		}
		return id
	}
	ids := make([]ObjectID, 20000)
	for i := range ids {
		ids[i] = randID()
	}
	f := newIDFilter(ids)
	for _, id := range ids {
		if !f.mayHave(id) {
			t.Fatalf("%v added but not found", id)
		}
	}
	fp := 0
	for range 20000 {
		if f.mayHave(randID()) {
			fp++
		}
	}
	if fp > 600 {
		t.Fatalf("%d of 20000 IDs never added were found: want about 1%%", fp)
	}
	if newIDFilter(nil).mayHave(randID()) {
		t.Fatal("an empty filter found an ID")
	}
}
