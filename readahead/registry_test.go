package readahead

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
	"github.com/dsmount/dsmount/cache"
)

// TestConcurrentJobsReadAndPrefetch runs two jobs on two mounts of one
// dataset through a small cache (so the order policy evicts) with real
// prefetching, four readers per job reading their order out of order, and
// redeclarations on the way: every read returns the right bytes, each job's
// frontier reaches the end, and (under -race) nothing races.
func TestConcurrentJobsReadAndPrefetch(t *testing.T) {
	const n, size = 600, 4 << 10
	mem := memory.New()
	objs := make([]backend.Object, n)
	for i := range objs {
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(i + j)
		}
		objs[i] = mem.Put(fmt.Sprintf("d/%04d", i), data)
	}
	reg := New(Config{Parallel: 8, PolicyInstalled: true})
	defer reg.Close()
	c, err := cache.Open(t.TempDir(), cache.Options{ChunkSize: 64 << 10, Capacity: n * size / 3, Policy: reg.Policy()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src := c.Source(mem)
	items := func(perm []int) []Item {
		out := make([]Item, len(perm))
		for k, i := range perm {
			out[k] = Item{Ref: uint32(i), ID: src.ObjectID(objs[i])}
		}
		return out
	}
	var wg sync.WaitGroup
	mounts := make([]*Mount, 2)
	for j := range mounts {
		m := reg.Mount(fmt.Sprintf("m%d", j), src)
		mounts[j] = m
		rng := rand.New(rand.NewPCG(uint64(j), 7))
		order := rng.Perm(n)
		if _, err := m.Declare(Declaration{Job: "job", Epoch: 0, Current: items(order), Next: items(rng.Perm(n)), Objects: objList(objs)}); err != nil {
			t.Fatal(err)
		}
		var next sync.Mutex
		pos := 0
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, size)
				for {
					next.Lock()
					if pos == n {
						next.Unlock()
						return
					}
					i := order[pos]
					pos++
					next.Unlock()
					m.Observe(objs[i], src.ObjectID(objs[i]), 0, 0)
					if _, err := src.ReadAt(context.Background(), objs[i], buf, 0); err != nil {
						t.Error(err)
						return
					}
					for k, b := range buf {
						if b != byte(i+k) {
							t.Errorf("%s: byte %d is %d, want %d", objs[i].Key, k, b, byte(i+k))
							return
						}
					}
				}
			}()
		}
	}
	wg.Wait()
	for j, m := range mounts {
		js := m.Jobs()
		if len(js) != 1 || js[0].Read != n || js[0].Frontier != n || js[0].TotalReads != n {
			t.Errorf("mount %d after reading its whole order: jobs %+v; want one job with read = frontier = total_reads = %d", j, js, n)
		}
	}
	if js := reg.Mount("other", src).Jobs(); len(js) != 0 {
		t.Errorf("a new mount handle sees jobs: %+v", js)
	}
}
