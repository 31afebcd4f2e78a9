package cache

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
	"github.com/dsmount/dsmount/cache/internal/index"
	"github.com/dsmount/dsmount/cache/internal/record"
	"github.com/dsmount/dsmount/cache/internal/store"
)

// packFiles lists the pack files of a cache dir.
func packFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "packs"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, filepath.Join(dir, "packs", e.Name()))
	}
	return names
}

// dataFiles counts the per-object files under a cache dir's data/.
func dataFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(dir, "data"), func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPackedObjectsSurviveReopen: objects of one chunk, of sizes that are
// and aren't block multiples, from buffers pooled and not, go to pack
// files (no file per object) and read back byte for byte after a reopen
// without a backend read.
func TestPackedObjectsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	mem := memory.New()
	r := rand.New(rand.NewPCG(21, 22))
	var objs []backend.Object
	for i := range 300 {
		size := 1 + r.IntN(60<<10)
		if i%10 == 0 {
			size = (1 + r.IntN(15)) << 12 // a whole number of blocks
		}
		objs = append(objs, mem.Put(fmt.Sprintf("o%03d", i), randBytes(r, size)))
	}
	c := openCache(t, dir, Options{ChunkSize: 64 << 10})
	readAllRight(t, c.Source(mem), mem, objs, "on the first read")
	c.Close()
	if n := dataFiles(t, dir); n != 0 {
		t.Fatalf("%d per-object files for objects of one chunk; want none (packed)", n)
	}
	packs := packFiles(t, dir)
	if len(packs) != 1 {
		t.Fatalf("%d pack files, want 1", len(packs))
	}
	// Close trims the room preallocated past the last slot: the next
	// process fills a pack of its own.
	var slots int64
	for _, o := range objs {
		slots += store.AlignUp(o.Size)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(packs[0], &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != slots || st.Blocks*512 > slots {
		t.Fatalf("pack after close: %d bytes, %d allocated; want %d of slots", st.Size, st.Blocks*512, slots)
	}

	c = openCache(t, dir, Options{ChunkSize: 64 << 10})
	defer c.Close()
	readAllCached(t, c.Source(mem), mem, objs, "after reopen")
	if f := c.Stats().VerifyFailures; f != 0 {
		t.Fatalf("%d verify failures", f)
	}
}

// TestCorruptPackedChunkIsRefetched: a flipped byte in a pack slot fails
// the chunk's CRC32C on the first read after a restart; the right bytes are
// fetched again.
func TestCorruptPackedChunkIsRefetched(t *testing.T) {
	dir, mem, obj := cacheOne(t, Options{}, 23, 50<<10)

	packs := packFiles(t, dir)
	if len(packs) != 1 {
		t.Fatalf("%d pack files, want 1", len(packs))
	}
	f, err := os.OpenFile(packs[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The only slot starts the pack.
	f.WriteAt([]byte{^mem.Data("x")[100]}, 100)
	f.Close()

	refetchesOnce(t, dir, Options{}, mem, obj)
}

// TestMissingPackIsRefetched: records naming a pack that is gone (deleted
// by hand, lost with a disk) cost a refetch, not an error.
func TestMissingPackIsRefetched(t *testing.T) {
	dir, mem, obj := cacheOne(t, Options{}, 25, 30<<10)
	for _, p := range packFiles(t, dir) {
		os.Remove(p)
	}
	c := openCache(t, dir, Options{})
	defer c.Close()
	before := mem.Reads.Load()
	if got := readAll(t, c.Source(mem), obj); !bytes.Equal(got, mem.Data("x")) {
		t.Fatal("wrong bytes after the pack was lost")
	}
	if n := mem.Reads.Load() - before; n != 1 {
		t.Fatalf("%d backend reads, want 1", n)
	}
	// Fetched again into a new pack, and cached from there.
	if got := readAll(t, c.Source(mem), obj); !bytes.Equal(got, mem.Data("x")) || mem.Reads.Load()-before != 1 {
		t.Fatal("the refetched object was not cached again")
	}
}

// TestEvictionFreesPackSpace: evicting packed objects gives their disk
// space back (holes), and a pack left with no live slot is deleted, so the
// disk holds about what the capacity allows however many objects passed
// through.
func TestEvictionFreesPackSpace(t *testing.T) {
	dir := t.TempDir()
	mem := memory.New()
	r := rand.New(rand.NewPCG(27, 28))
	const objSize, capacity = 40_000, 400_000
	c := openCache(t, dir, Options{Capacity: capacity, Policy: NewLRU()})
	defer c.Close()
	c.disk.packs.SetSizes(256<<10, 64<<10)
	s := c.Source(mem)
	objs := putRandom(mem, r, "o%03d", 200, objSize)
	readAllRight(t, s, mem, objs, "on the first read")
	if c.Stats().Evictions == 0 {
		t.Fatal("nothing was evicted; the test needs a full cache")
	}
	// 200 objects went through 256 KiB packs of six slots: ~34 packs. What
	// is live (ten objects) spans at most ten of them, plus the current one.
	packs := packFiles(t, dir)
	if len(packs) > 11 {
		t.Fatalf("%d pack files left for %d live bytes; emptied packs are not deleted", len(packs), c.Used())
	}
	var disk int64
	for _, p := range packs {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		disk += st.Blocks * 512
	}
	// Live slots, a partly preallocated current pack, and a block of
	// padding per object.
	if limit := int64(capacity + 64<<10 + 10*4096); disk > limit {
		t.Fatalf("packs take %d bytes on disk for a %d-byte capacity; want at most %d", disk, capacity, limit)
	}
	// The survivors still read back right, without a backend read.
	readAllCached(t, s, mem, objs[len(objs)-5:], "after evictions")
}

// TestOpenRemovesUnusedPacks: a pack file no record names (a crash before
// its records were committed) is deleted after Open, by the start-up scan; packs in use and files
// that aren't packs are left alone.
func TestOpenRemovesUnusedPacks(t *testing.T) {
	dir, mem, obj := cacheOne(t, Options{}, 29, 20<<10)
	stray := filepath.Join(dir, "packs", "00000000000000aa")
	other := filepath.Join(dir, "packs", "notes.txt")
	for _, p := range []string{stray, other} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := openCache(t, dir, Options{})
	defer c.Close()
	c.awaitIndex() // unused packs go at the end of the start-up scan
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatalf("unused pack survived Open: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a file that is not a pack was touched: %v", err)
	}
	before := mem.Reads.Load()
	if got := readAll(t, c.Source(mem), obj); !bytes.Equal(got, mem.Data("x")) || mem.Reads.Load() != before {
		t.Fatal("the pack in use was not kept")
	}
}

// TestObjectCachedBeforePacksLosesItsFile: a one-chunk object recorded by a
// version 1 record keeps its bytes in a file of its own. Dropping its
// chunk (a failed checksum) removes that file: once the chunk is refetched
// into a slot, nothing else would, and its space would be lost to the
// capacity's count.
func TestObjectCachedBeforePacksLosesItsFile(t *testing.T) {
	dir, mem, obj, c, s := openOne(t, Options{}, "old", 51, 50<<10)
	o, err := c.existing(metaOf(s.id, obj, c.chunkSize))
	if err != nil || o == nil || o.loc.Load() == nil {
		t.Fatalf("object not packed after a read: %v", err)
	}
	id, path := o.id, string(o.file)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// Rewrite the object as version 1 left it: its bytes in its own file,
	// a record without a location.
	if err := os.WriteFile(path, mem.Data(obj.Key), 0o600); err != nil {
		t.Fatal(err)
	}
	x := openIndex(t, dir)
	rec, found, err := x.Object(record.ID(id))
	if err != nil || !found {
		t.Fatalf("object record: found %v, %v", found, err)
	}
	rec.Pack, rec.PackOff = 0, 0
	b := rec.Marshal()
	b[0] = 1
	err = x.Update(func(w index.Writer) error { return w.SetObjectBytes(record.ID(id), b[:len(b)-2]) })
	if _, cerr := x.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	c = openCache(t, dir, Options{})
	defer c.Close()
	s = c.Source(mem)
	if got := readAll(t, s, obj); !bytes.Equal(got, mem.Data(obj.Key)) {
		t.Fatal("wrong bytes from the version 1 file")
	}
	o, _ = c.existing(metaOf(s.id, obj, c.chunkSize))
	if o.loc.Load() != nil {
		t.Fatal("a version 1 object has a slot")
	}
	c.dropChunk(o, 0)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dropped chunk's own file: stat = %v, want gone", err)
	}
	readAll(t, s, obj) // refetched, into a slot
	if o.loc.Load() == nil {
		t.Fatal("refetched chunk has no slot")
	}
	if got := readAll(t, s, obj); !bytes.Equal(got, mem.Data(obj.Key)) {
		t.Fatal("wrong bytes from the slot")
	}
}
