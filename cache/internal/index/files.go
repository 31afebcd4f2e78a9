package index

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dsmount/dsmount/cache/internal/store"
)

// Files keeps the index's memory-mapped log files allocated on disk.
// Badger sizes its write-ahead logs (.mem) and value logs (.vlog) when it
// creates them, sparse, and writes them through a mapping: a page written
// where the filesystem has no block left is a SIGBUS, which no reserve
// guards against once another writer has taken the space. So before each
// write, Prepare allocates whatever of those files is not yet; with their
// blocks allocated, writes into them can't fault. What stays exposed: a
// table badger writes when it flushes a memtable or compacts, whose space
// the cache's reserve (store.SpaceGuard) is there for.
type Files struct {
	dir     string
	noSpace func(error) // gives up the reserve; may be nil

	mu   sync.Mutex       // serialises Prepare
	done map[string]int64 // file name → size allocated; mu
}

func newFiles(dir string, noSpace func(error)) *Files {
	return &Files{dir: dir, noSpace: noSpace, done: map[string]int64{}}
}

// Prepare gets the index ready for a write: room for the memtable flush a
// write may start (the reserve goes if there isn't), and the log files'
// holes allocated. False if there is no room even after the reserve went:
// the caller must not write to the index then.
func (x *Files) Prepare() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if free, err := store.FreeBytes(x.dir); err == nil && free < FlushRoom {
		x.full(fmt.Errorf("%d MiB free, and an index flush may need %d", free>>20, FlushRoom>>20))
		if free, err = store.FreeBytes(x.dir); err == nil && free < FlushRoom {
			return false
		}
	}
	ents, err := os.ReadDir(x.dir)
	if err != nil {
		return true // nothing known to be at risk
	}
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !(strings.HasSuffix(name, ".mem") || strings.HasSuffix(name, ".vlog")) {
			continue
		}
		info, err := e.Info()
		if err != nil || x.done[name] == info.Size() {
			continue
		}
		err = allocate(filepath.Join(x.dir, name), info.Size())
		if errors.Is(err, syscall.ENOSPC) {
			x.full(err)
			err = allocate(filepath.Join(x.dir, name), info.Size())
		}
		if errors.Is(err, syscall.ENOSPC) {
			return false
		}
		// Other failures (no fallocate here): nothing to do about them.
		x.done[name] = info.Size()
	}
	return true
}

func (x *Files) full(err error) {
	if x.noSpace != nil {
		x.noSpace(err)
	}
}

// allocate gives every block of path's first size bytes a place on disk.
func allocate(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fallocate(int(f.Fd()), 0, 0, size)
}
