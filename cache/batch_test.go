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
	c.disk.commits.barrier()
	uncached := mem.Put("uncached", randBytes(rng, 5000))

	const bad = 7
	o, err := c.existing(metaOf(s.id, objs[bad], c.chunkSize))
	if err != nil || o == nil || o.loc.Load() == nil {
		t.Fatalf("object %d is not packed in the cache (%v)", bad, err)
	}
	sl := o.loc.Load()
	flipByte(t, sl.Pack.Path(), sl.Off+objs[bad].Size/2)

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

// TestBatchAbortReturnsWhatItHeld: Abort hands back the tag of every read
// added and not returned by Wait (queued, and on the disk), none that was
// returned and released, and closes the batch.
func TestBatchAbortReturnsWhatItHeld(t *testing.T) {
	c := openCache(t, t.TempDir(), Options{})
	defer c.Close()
	mem := memory.New()
	s := c.Source(mem)
	rng := rand.New(rand.NewPCG(43, 44))
	var objs []backend.Object
	for i := range 6 {
		obj := mem.Put(fmt.Sprintf("a%d", i), randBytes(rng, 1000+i))
		readAll(t, s, obj)
		objs = append(objs, obj)
	}
	c.disk.commits.barrier()
	b, err := s.NewBatch(8, 64<<10)
	if err != nil {
		t.Fatalf("NewBatch: %v", err)
	}
	defer b.Close()
	for i := range 3 {
		if ok, err := b.Add(objs[i], i); !ok || err != nil {
			t.Fatalf("Add %d: %v, %v", i, ok, err)
		}
	}
	returned := map[int]bool{}
	for len(returned) == 0 {
		done, err := b.Wait() // submits the three
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range done {
			returned[d.Tag.(int)] = true
			b.Release(d)
		}
	}
	for i := 3; i < 6; i++ { // queued, not submitted
		if ok, err := b.Add(objs[i], i); !ok || err != nil {
			t.Fatalf("Add %d: %v, %v", i, ok, err)
		}
	}
	tags := map[int]bool{}
	for _, tag := range b.Abort() {
		tags[tag.(int)] = true
	}
	for i := range 6 {
		if tags[i] == returned[i] {
			t.Errorf("read %d: returned by Wait %v, handed back by Abort %v; want exactly one", i, returned[i], tags[i])
		}
	}
	if _, err := b.Wait(); err == nil {
		t.Error("Wait after Abort: no error; want the batch closed")
	}
}
