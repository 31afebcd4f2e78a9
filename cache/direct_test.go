package cache

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dsmount/dsmount/backend/memory"
	"github.com/dsmount/dsmount/cache/internal/store"
)

// residentPages reports, per page of path, whether it is in the page cache.
func residentPages(path string) ([]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	defer unix.Munmap(m)
	if os.Getpagesize() != store.Align {
		return nil, fmt.Errorf("page size %d: the test assumes %d", os.Getpagesize(), store.Align)
	}
	vec := make([]byte, (len(m)+store.Align-1)/store.Align)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return nil, errno
	}
	resident := make([]bool, len(vec))
	for i, v := range vec {
		resident[i] = v&1 != 0
	}
	return resident, nil
}

// TestChunkFileReadsSkipThePageCache: a cached chunk of a large object is
// read from its chunk file with O_DIRECT, as packed objects' slots are, so
// that the bytes a mount serves sit in the page cache once (the mount's
// pages), not also as the chunk file's.
func TestChunkFileReadsSkipThePageCache(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, dir, Options{ChunkSize: 1 << 20})
	defer c.Close()
	mem := memory.New()
	s := c.Source(mem)
	rng := rand.New(rand.NewPCG(61, 62))
	want := randBytes(rng, 2<<20+12345)
	obj := mem.Put("large", want)
	readAll(t, s, obj) // fetched and stored
	c.disk.commits.barrier()
	o, err := c.existing(metaOf(s.id, obj, c.chunkSize))
	if err != nil || o == nil || o.meta.Packed() {
		t.Fatalf("the object is not cached in a chunk file (%v)", err)
	}
	f, err := os.Open(string(o.file))
	if err != nil {
		t.Fatal(err)
	}
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	f.Close()
	if got := readAll(t, s, obj); !bytes.Equal(got, want) {
		t.Fatal("the cached object reads back wrong")
	}
	resident, err := residentPages(string(o.file))
	if err != nil {
		t.Fatal(err)
	}
	if _, direct, err := store.OpenDirect(string(o.file), os.O_RDONLY, 0); err != nil || !direct {
		t.Logf("%s has no O_DIRECT (%v): only the bytes are checked", dir, err)
		return
	}
	n := 0
	for _, r := range resident[:len(want)/store.Align] { // the unaligned tail may be resident
		if r {
			n++
		}
	}
	if n > 0 {
		t.Errorf("%d pages of the chunk file are in the page cache after reading it from the cache; want none", n)
	}
}
