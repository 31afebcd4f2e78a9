package cache

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
)

// TestBatchReadsAreChecked: a Batch returns each cached small object's
// bytes, checked: a slot whose bytes were changed on disk comes back as
// not cached, and its chunk is dropped (so the next read fetches it),
// while the other reads of the same batch are served. Objects not cached
// are refused at Add.
func TestBatchReadsAreChecked(t *testing.T) {
	dir := t.TempDir()
	mem := memory.New()
	rng := rand.New(rand.NewPCG(41, 42))
	c := openCache(t, dir, Options{})
	defer c.Close()
	s := c.Source(mem)
	var objs []backend.Object
	for i := range 40 {
		obj := mem.Put(fmt.Sprintf("f%02d", i), randBytes(rng, 1+rng.IntN(200<<10)))
		readAll(t, s, obj)
		objs = append(objs, obj)
	}
	c.commits.barrier()
	uncached := mem.Put("uncached", randBytes(rng, 5000))

	const bad = 7
	o, err := c.existing(metaOf(s.id, objs[bad], c.chunkSize))
	if err != nil || o == nil || o.loc.Load() == nil {
		t.Fatalf("object %d is not packed in the cache (%v)", bad, err)
	}
	sl := o.loc.Load()
	flipByte(t, sl.p.path, sl.off+objs[bad].Size/2)

	b, err := s.NewBatch(8, 256<<10)
	if err != nil {
		t.Fatalf("NewBatch: %v", err)
	}
	defer b.Close()
	if ok, err := b.Add(uncached, -1); ok || err != nil {
		t.Fatalf("Add of an object not cached: %v, %v; want false, nil", ok, err)
	}
	got := make(map[int][]byte)
	var failed []int
	collect := func() {
		done, err := b.Wait()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range done {
			i := d.Tag.(int)
			if d.Err != nil {
				failed = append(failed, i)
			} else {
				got[i] = bytes.Clone(d.Data)
			}
			b.Release(d)
		}
	}
	for i, obj := range objs {
		for b.Room() == 0 {
			collect()
		}
		if ok, err := b.Add(obj, i); !ok || err != nil {
			t.Fatalf("Add of cached object %d: %v, %v", i, ok, err)
		}
	}
	for b.InFlight() > 0 {
		collect()
	}
	if len(failed) != 1 || failed[0] != bad {
		t.Fatalf("reads that failed: %v, want only %d (its slot was changed)", failed, bad)
	}
	for i, obj := range objs {
		if i == bad {
			continue
		}
		if !bytes.Equal(got[i], mem.Data(obj.Key)) {
			t.Errorf("object %d: %d bytes read, not the object's %d", i, len(got[i]), obj.Size)
		}
	}
	if s.Cached(objs[bad]) {
		t.Error("the object that failed its check is still cached")
	}
	if n := c.stats.verifyFailures.Load(); n != 1 {
		t.Errorf("%d verify failures counted, want 1", n)
	}
	if !bytes.Equal(readAll(t, s, objs[bad]), mem.Data(objs[bad].Key)) {
		t.Error("the dropped object reads wrong after a refetch")
	}
}
