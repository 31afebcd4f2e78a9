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
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
)

// tmpfs mounts a tmpfs of size on a temporary directory (the suite runs as
// root): a filesystem the test may fill.
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatalf("mount a tmpfs of %s (run as root): %v", size, err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill takes every free block of dir's filesystem.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for err == nil {
		_, err = f.Write(buf)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling %s: %v", dir, err)
	}
}

// TestIndexSurvivesAFullDisk: with its filesystem full and before the
// space guard has noticed, the cache keeps storing into room it holds (a
// pack's preallocated space) and committing index records; another writer
// then takes the room the reserve gave back too. The index writes its log
// and tables through memory maps, where a page written with no block left
// is a SIGBUS that would kill this test process: its log must have been
// allocated beforehand, and no flush may start without room (Close then
// leaves the index for its log to be replayed at the next start, which the
// crash tests under test/ cover).
func TestIndexSurvivesAFullDisk(t *testing.T) {
	dir := tmpfs(t, "160m")
	mem := memory.New()
	r := rand.New(rand.NewPCG(43, 44))
	var objs []backend.Object
	for i := range 2000 {
		objs = append(objs, mem.Put(fmt.Sprintf("o%04d", i), randBytes(r, 4<<10)))
	}
	c := openCache(t, filepath.Join(dir, "cache"), Options{spaceCheckEvery: time.Hour})
	s := c.Source(mem)
	readAll(t, s, objs[0]) // a pack, with room preallocated for the rest
	fill(t, dir)
	for i, o := range objs[1:] {
		if i == 100 {
			// The first commits gave the reserve back: take that too.
			c.Settle()
			c.commits.barrier()
			fill(t, dir)
		}
		if got := readAll(t, s, o); !bytes.Equal(got, mem.Data(o.Key)) {
			t.Fatalf("%s: wrong bytes", o.Key)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}
