package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SpaceGuard keeps the cache working when its filesystem fills up, whoever
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
type SpaceGuard struct {
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

// ErrNoSpace is returned by Open when the cache's filesystem hasn't the
// room for the cache to start.
var ErrNoSpace = errors.New("not enough free space for the cache")

// StartSpaceGuard takes the reserve and starts watching free space.
func StartSpaceGuard(dir string, size int64, every time.Duration, log *slog.Logger) (*SpaceGuard, error) {
	g := &SpaceGuard{dir: dir, reserve: filepath.Join(dir, "reserve"), size: size, log: log, every: every, quit: make(chan struct{})}
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
func (g *SpaceGuard) take() error {
	f, err := os.OpenFile(g.reserve, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return LinkErr(err)
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

func (g *SpaceGuard) run() {
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
func (g *SpaceGuard) check() {
	free, err := FreeBytes(g.dir)
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

// NoSpace is told of a write that failed for want of space.
func (g *SpaceGuard) NoSpace(err error) {
	if !g.full.Load() {
		g.fill(err.Error())
	}
}

// fill enters the full state: the reserve goes, the cache stops taking
// data.
func (g *SpaceGuard) fill(why string) {
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

// IsFull reports whether the cache must not take new data.
func (g *SpaceGuard) IsFull() bool { return g != nil && g.full.Load() }

func (g *SpaceGuard) Close() {
	if g == nil {
		return
	}
	close(g.quit)
	g.wg.Wait()
}

// FreeBytes is the space available to the cache's user on dir's
// filesystem.
func FreeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}
