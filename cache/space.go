package cache

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// spaceGuard keeps the cache working when its filesystem fills up, whoever
// fills it. The index (badger) writes its memtables, logs and tables
// through memory-mapped files that it extends with ftruncate: with no free
// block left, such a write is a SIGBUS that kills the daemon and every
// mount it serves. So the guard holds a reserve file of reserveSize
// bytes. When free space drops below half the reserve, or a write of
// cached data fails for want of space, it deletes the reserve (giving the
// index room to commit and close) and stops the cache from taking new
// data: reads are streamed, and the daemon says so once. When free space
// is back above twice the reserve, it takes the reserve again and the
// cache fills again.
//
// Invariant: full is true exactly while the reserve file is not held.
// mu serialises the transitions; full is read without it.
type spaceGuard struct {
	dir     string // the cache dir, on the guarded filesystem
	reserve string // the reserve file's path
	size    int64
	log     *slog.Logger
	every   time.Duration

	mu   sync.Mutex
	full atomic.Bool

	quit chan struct{}
	wg   sync.WaitGroup
}

// flushRoom is the free space one write to the index may take, or closing
// it: a write that fills the memtable rotates it, creating a new log of
// twice the memtable's size (badger sizes its .mem files so, sparse, and
// writes into it in the same call, before any prepare could allocate it),
// and flushes the old one to a table of up to the memtable's size; a value
// log rotation adds 4 MiB. 4 memtables cover them all.
const flushRoom = 4 * memTableSize

// KeepFree is the free space, in bytes, below which the cache stops taking
// new data: what an index write may need. A capacity chosen from the free
// space must leave it.
const KeepFree = flushRoom

const (
	// reserveSize is what the index needs for a write and a while of
	// compaction after the cache stops taking data: twice the room a
	// write needs.
	reserveSize = 2 * flushRoom
	// spaceCheckEvery paces the free-space check.
	spaceCheckEvery = 500 * time.Millisecond
)

// ErrNoSpace is returned by Open when the cache's filesystem hasn't the
// room for the cache to start.
var ErrNoSpace = errors.New("not enough free space for the cache")

// startSpaceGuard takes the reserve and starts watching free space.
func startSpaceGuard(dir string, size int64, every time.Duration, log *slog.Logger) (*spaceGuard, error) {
	g := &spaceGuard{dir: dir, reserve: filepath.Join(dir, "reserve"), size: size, log: log, every: every, quit: make(chan struct{})}
	if err := g.take(); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return nil, fmt.Errorf("%s: %w (%d MiB are kept free for the index, and the filesystem hasn't them): %v", dir, ErrNoSpace, size>>20, err)
		}
		return nil, fmt.Errorf("cache reserve file: %w", err)
	}
	g.wg.Add(1)
	go g.run()
	return g, nil
}

// take allocates the reserve file.
func (g *spaceGuard) take() error {
	f, err := os.OpenFile(g.reserve, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return linkErr(err)
	}
	defer f.Close()
	err = unix.Fallocate(int(f.Fd()), 0, 0, g.size)
	if errors.Is(err, unix.EOPNOTSUPP) {
		// No fallocate (an old or unusual filesystem): write it out.
		err = writeZeros(f, g.size)
	}
	if err != nil {
		os.Remove(g.reserve)
		return err
	}
	return f.Sync()
}

func writeZeros(f *os.File, n int64) error {
	buf := make([]byte, 1<<20)
	for off := int64(0); off < n; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf[:min(int64(len(buf)), n-off)], off); err != nil {
			return err
		}
	}
	return nil
}

func (g *spaceGuard) run() {
	defer g.wg.Done()
	t := time.NewTicker(g.every)
	defer t.Stop()
	for {
		select {
		case <-g.quit:
			return
		case <-t.C:
			g.check()
		}
	}
}

// check compares free space with the reserve and moves to or from the
// full state.
func (g *spaceGuard) check() {
	free, err := freeBytes(g.dir)
	if err != nil {
		return
	}
	switch {
	case !g.full.Load() && free < g.size/2: // KeepFree
		g.fill(fmt.Sprintf("%d MiB free", free>>20))
	case g.full.Load() && free > 2*g.size:
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.full.Load() {
			return
		}
		if err := g.take(); err != nil {
			return // still short; try again later
		}
		g.full.Store(false)
		g.log.Warn("cache: the cache filesystem has room again; caching resumes", "dir", g.dir, "free_mib", free>>20)
	}
}

// noSpace is told of a write that failed for want of space.
func (g *spaceGuard) noSpace(err error) {
	if !g.full.Load() {
		g.fill(err.Error())
	}
}

// fill enters the full state: the reserve goes, the cache stops taking
// data.
func (g *spaceGuard) fill(why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.full.Load() {
		return
	}
	g.full.Store(true)
	if err := os.Remove(g.reserve); err != nil && !errors.Is(err, os.ErrNotExist) {
		g.log.Warn("cache: removing the reserve file", "path", g.reserve, "err", err)
	}
	g.log.Warn("cache: the cache filesystem is full; reads are served without caching until it has room again",
		"dir", g.dir, "why", why)
}

// isFull reports whether the cache must not take new data.
func (g *spaceGuard) isFull() bool { return g != nil && g.full.Load() }

func (g *spaceGuard) close() {
	if g == nil {
		return
	}
	close(g.quit)
	g.wg.Wait()
}

// freeBytes is the space available to the cache's user on dir's
// filesystem.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// indexFiles keeps the index's memory-mapped log files allocated on disk.
// Badger sizes its write-ahead logs (.mem) and value logs (.vlog) when it
// creates them, sparse, and writes them through a mapping: a page written
// where the filesystem has no block left is a SIGBUS, which no reserve
// guards against once another writer has taken the space. So before each
// commit the committer allocates whatever of those files is not yet
// (prepare); with their blocks allocated, writes into them can't fault.
// What stays exposed: a table badger writes when it flushes a memtable or
// compacts, whose space the reserve is there for.
type indexFiles struct {
	dir   string
	space *spaceGuard

	mu   sync.Mutex       // serialises prepare: the committer, Close, listings and GC call it
	done map[string]int64 // file name → size allocated; mu
}

// prepare gets the index ready for a write: room for the memtable flush a
// write may start (the reserve goes if there isn't), and the log files'
// holes allocated. False if there is no room even after the reserve went:
// the caller must not write to the index then.
func (x *indexFiles) prepare() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if free, err := freeBytes(x.dir); err == nil && free < flushRoom {
		x.space.noSpace(fmt.Errorf("%d MiB free, and an index flush may need %d", free>>20, flushRoom>>20))
		if free, err = freeBytes(x.dir); err == nil && free < flushRoom {
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
			x.space.noSpace(err)
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

// allocate gives every block of path's first size bytes a place on disk.
func allocate(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fallocate(int(f.Fd()), 0, 0, size)
}
