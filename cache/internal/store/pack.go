package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Small objects (one chunk) live in pack files: each gets a slot, aligned
// to Align, in the pack being filled, written with O_DIRECT: a file per
// object costs an inode, a directory entry and a journal commit, several
// times what a slot in a preallocated pack costs. Objects of several
// chunks keep a file of their own, since FUSE passthrough hands a whole
// file to the kernel at the object's own offsets.
//
// Invariants:
//   - A slot is written once. Offsets in a pack only grow, and a pack's name
//     is a random 64-bit number never reused (O_EXCL), so an index record
//     naming (pack, offset) can't come to point at another object's bytes:
//     a record that outlived its slot finds a hole (zeros) or no file, which
//     its CRC32C or the failed read turns into a refetch.
//   - live counts a pack's slots that are allocated and not freed. A pack
//     with none, other than the one being filled, is deleted: nobody reads
//     it (every object in it is dead) and nobody writes it (writes go to the
//     pack being filled).
//   - Freeing a slot punches a hole over it, giving the space back at once.
//
// Locking: PackStore.mu guards cur, next, allocated, packs and each pack's
// writing and retired; a pack's fds are opened under its own once and
// closed only by delete (under PackStore.mu) or Close.

const (
	// packMaxSize is where a pack stops taking slots and a new one starts.
	packMaxSize = 1 << 30
	// packGrow is how much of a pack is preallocated at a time: O_DIRECT
	// writes into preallocated space skip the block allocation that an
	// extending write does under the inode's lock.
	packGrow = 64 << 20
)

// Pack is one pack file.
type Pack struct {
	id   uint64
	path string

	openOnce sync.Once
	f        *os.File // read, sync and punch; opened on first use
	openErr  error

	// df reads slots with O_DIRECT (nil where the filesystem refuses
	// it); opened on first use.
	directOnce sync.Once
	df         *os.File

	// wf writes slots, with O_DIRECT where the filesystem allows it
	// (direct); open while the pack is filled or written to.
	wf     *os.File
	direct bool

	live atomic.Int64
	// created: the pack's directory entry is not known to be durable.
	created atomic.Bool

	writing int  // slots allocated and not yet written; PackStore.mu
	retired bool // no longer takes slots; PackStore.mu
	deleted bool // PackStore.mu
}

// Slot is where a packed object's bytes are: at Off in Pack.
type Slot struct {
	Pack *Pack
	Off  int64
}

// ID is the pack's name, as object records hold it.
func (p *Pack) ID() uint64 { return p.id }

// Path is the pack file's path.
func (p *Pack) Path() string { return p.path }

// AddLive counts n more live slots in p: the start-up scan's count of the
// records naming it.
func (p *Pack) AddLive(n int64) { p.live.Add(n) }

type PackStore struct {
	dir string
	log *slog.Logger
	// maxSize and grow are packMaxSize and packGrow (smaller in tests).
	maxSize, grow int64

	mu         sync.Mutex
	cur        *Pack // the pack being filled; nil until the first Slot
	next       int64 // next free offset in cur
	allocated  int64 // bytes of cur preallocated
	noPrealloc bool  // the filesystem refuses fallocate
	noPunch    bool  // the filesystem refuses to punch holes
	packs      map[uint64]*Pack

	// writes hands slot writes to the writer goroutine (write.go).
	// Unbuffered: a send succeeds only into the writer's hands, so none
	// is left unanswered when it stops.
	writes chan *packWrite
	quit   chan struct{}
	wg     sync.WaitGroup
	// inFlight, if set, is how many chunk fetches are running, the ones
	// whose writes are queued included: the writer lingers for more
	// slots only while it exceeds the batch at hand.
	inFlight func() int64
}

func OpenPackStore(dir string, log *slog.Logger, inFlight func() int64) (*PackStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create cache pack dir: %w", err)
	}
	s := &PackStore{dir: dir, log: log, maxSize: packMaxSize, grow: packGrow, packs: make(map[uint64]*Pack),
		writes: make(chan *packWrite), quit: make(chan struct{}), inFlight: inFlight}
	s.wg.Add(1)
	go s.runWriter()
	return s, nil
}

func packName(id uint64) string { return fmt.Sprintf("%016x", id) }

// Known returns the pack named id, registering it (unopened) if new: index
// records name packs made by earlier processes.
func (s *PackStore) Known(id uint64) *Pack {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.packs[id]
	if p == nil {
		p = &Pack{id: id, path: filepath.Join(s.dir, packName(id)), retired: true}
		s.packs[id] = p
	}
	return p
}

// RemoveUnused deletes the pack files that no live slot refers to: packs
// left by a crash before their records were committed, or emptied by
// evictions whose deletion was interrupted. Called once at Open, after the
// index is loaded.
func (s *PackStore) RemoveUnused() {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		s.log.Warn("cache: listing pack files", "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range ents {
		id, err := strconv.ParseUint(e.Name(), 16, 64)
		if err != nil || len(e.Name()) != 16 {
			continue
		}
		if p := s.packs[id]; p != nil && p.live.Load() > 0 {
			continue
		}
		if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil {
			s.log.Warn("cache: removing an unused pack file", "pack", e.Name(), "err", err)
		}
		delete(s.packs, id)
	}
}

// Free gives a slot of n bytes back: its space is returned to the
// filesystem at once, and its pack is deleted when nothing else lives in
// it. Nobody may read or write the slot any more.
func (s *PackStore) Free(sl Slot, n int64) {
	p := sl.Pack
	if f, err := p.File(); err == nil && !s.punchRefused() {
		err := withFd(f, func(fd int) error {
			return unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, sl.Off, AlignUp(n))
		})
		if errors.Is(err, unix.EOPNOTSUPP) && s.refusePunch() {
			s.log.Warn("cache: this filesystem can't punch holes; evicted small objects keep their disk space until their whole pack is evicted", "dir", s.dir)
		}
	}
	if p.live.Add(-1) == 0 {
		s.mu.Lock()
		s.deleteIfEmpty(p)
		s.mu.Unlock()
	}
}

// refusePunch records that the filesystem can't punch holes; true the
// first time, so that is said once.
func (s *PackStore) refusePunch() (first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first = !s.noPunch
	s.noPunch = true
	return first
}

func (s *PackStore) punchRefused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.noPunch
}

// deleteIfEmpty removes a retired pack with no live slot; s.mu is held.
func (s *PackStore) deleteIfEmpty(p *Pack) {
	if !p.retired || p.deleted || p.live.Load() != 0 || p.writing != 0 {
		return
	}
	p.deleted = true
	delete(s.packs, p.id)
	if err := os.Remove(p.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("cache: removing an emptied pack file", "pack", p.path, "err", err)
	}
	p.closeFiles()
}

// closeFiles closes p's fds; s.mu is held. A later file() fails.
func (p *Pack) closeFiles() {
	// Settles p.f: opened before (and closed here) or never.
	p.openOnce.Do(func() { p.openErr = os.ErrClosed })
	if p.f != nil {
		p.f.Close()
	}
	p.directOnce.Do(func() {})
	if p.df != nil {
		p.df.Close()
	}
	if p.wf != nil {
		p.wf.Close()
		p.wf = nil
	}
}

// File is the pack's read fd, opened on first use. A pack named by a
// record but missing on disk fails here, and the chunk is refetched.
func (p *Pack) File() (*os.File, error) {
	p.openOnce.Do(func() {
		p.f, p.openErr = os.OpenFile(p.path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	})
	return p.f, p.openErr
}

// DirectFile is the pack's O_DIRECT read fd, nil where the filesystem
// refuses O_DIRECT.
func (p *Pack) DirectFile() *os.File {
	p.directOnce.Do(func() {
		f, err := os.OpenFile(p.path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_DIRECT, 0)
		if err == nil {
			p.df = f
		}
	})
	return p.df
}

// ReadDirect reads the n bytes of the slot at off within it into buf, a
// page-aligned buffer of at least AlignUp(n) bytes, with O_DIRECT: the
// bytes come from the disk into buf, with no copy in the page cache
// (where the mount's own pages of the file would keep a second one) and
// no readahead of the slots around it. off must be aligned. False where
// the pack can't be read that way (the filesystem refuses O_DIRECT, or
// the pack is missing): the caller reads it buffered, which reports a
// missing pack.
func (sl Slot) ReadDirect(buf []byte, off int64, n int) (bool, error) {
	if !directReadable(buf, off, n) {
		return false, nil
	}
	f := sl.Pack.DirectFile()
	if f == nil {
		return false, nil
	}
	// The slot's padding may run past the pack's end.
	return true, readDirectAt(f, buf, sl.Off+off, n)
}

// ReadAt reads len(dst) bytes of the slot at off within it.
func (sl Slot) ReadAt(dst []byte, off int64) error {
	f, err := sl.Pack.File()
	if err != nil {
		return err
	}
	_, err = f.ReadAt(dst, sl.Off+off)
	return err
}

// Sync makes the pack's written slots durable, and its directory entry if
// the pack is new.
func (s *PackStore) Sync(p *Pack) bool {
	f, err := p.File()
	if err != nil || withFd(f, unix.Fdatasync) != nil {
		return false
	}
	if p.created.Load() {
		if !SyncPath(s.dir, false) {
			return false
		}
		p.created.Store(false)
	}
	return true
}

// Close stops the writer and closes every pack's fds; the store is not
// used after it.
func (s *PackStore) Close() {
	close(s.quit)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.cur; p != nil && !p.deleted && p.wf != nil && s.allocated > s.next {
		// The next process starts a pack of its own: the room preallocated
		// past the last slot (up to packGrow) would stay taken, uncounted,
		// until every slot of this pack was evicted.
		if err := p.wf.Truncate(s.next); err != nil {
			s.log.Warn("cache: trimming the last pack file", "pack", p.path, "err", err)
		}
	}
	for _, p := range s.packs {
		p.closeFiles()
	}
}

// SetSizes sets where a pack stops taking slots and how much of it is
// preallocated at a time, for tests that want many packs from few slots.
// Call it before the first Put.
func (s *PackStore) SetSizes(maxSize, grow int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxSize, s.grow = maxSize, grow
}
