package cache

import (
	"crypto/rand"
	"encoding/binary"
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
// to directAlign, in the pack being filled, written with O_DIRECT. Creating
// a file per object cost 180–350 µs of CPU per 110 KB object here (inode
// and directory entry allocation, journal), a slot in a preallocated pack
// 35–40 µs (write, extent conversion): the difference is most of what a
// cold epoch of small files spends on keeping its data. Objects of several
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
// Locking: packStore.mu guards cur, next, allocated, packs and each pack's
// writing and retired; a pack's fds are opened under its own once and
// closed only by delete (under packStore.mu) or Close.

const (
	// packMaxSize is where a pack stops taking slots and a new one starts.
	packMaxSize = 1 << 30
	// packGrow is how much of a pack is preallocated at a time: O_DIRECT
	// writes into preallocated space skip the block allocation that an
	// extending write does under the inode's lock (100–120 µs of CPU per
	// object without it, 35–40 µs with it).
	packGrow = 64 << 20
)

// pack is one pack file.
type pack struct {
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

	writing int  // slots allocated and not yet written; packStore.mu
	retired bool // no longer takes slots; packStore.mu
	deleted bool // packStore.mu
}

// slot is where a packed object's bytes are: off in pack p, n bytes.
type slot struct {
	p   *pack
	off int64
}

type packStore struct {
	dir string
	log *slog.Logger
	// maxSize and grow are packMaxSize and packGrow (smaller in tests).
	maxSize, grow int64

	mu         sync.Mutex
	cur        *pack // the pack being filled; nil until the first slot
	next       int64 // next free offset in cur
	allocated  int64 // bytes of cur preallocated
	noPrealloc bool  // the filesystem refuses fallocate
	noPunch    bool  // the filesystem refuses to punch holes
	packs      map[uint64]*pack

	// writes hands slot writes to the writer goroutine (packwrite.go).
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

func openPackStore(dir string, log *slog.Logger, inFlight func() int64) (*packStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create cache pack dir: %w", err)
	}
	s := &packStore{dir: dir, log: log, maxSize: packMaxSize, grow: packGrow, packs: make(map[uint64]*pack),
		writes: make(chan *packWrite), quit: make(chan struct{}), inFlight: inFlight}
	s.wg.Add(1)
	go s.runWriter()
	return s, nil
}

func packName(id uint64) string { return fmt.Sprintf("%016x", id) }

// known returns the pack named id, registering it (unopened) if new: index
// records name packs made by earlier processes.
func (s *packStore) known(id uint64) *pack {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.packs[id]
	if p == nil {
		p = &pack{id: id, path: filepath.Join(s.dir, packName(id)), retired: true}
		s.packs[id] = p
	}
	return p
}

// removeUnused deletes the pack files that no live slot refers to: packs
// left by a crash before their records were committed, or emptied by
// evictions whose deletion was interrupted. Called once at Open, after the
// index is loaded.
func (s *packStore) removeUnused() {
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

// alloc reserves a slot of n bytes (rounded up to directAlign) in the pack
// being filled, starting a new pack when it is full. The caller writes it,
// then calls written.
func (s *packStore) alloc(n int64) (slot, error) {
	size := alignUp(n)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.next+size > s.maxSize {
		if err := s.startPack(); err != nil {
			return slot{}, err
		}
	}
	p, off := s.cur, s.next
	if end := off + size; end > s.allocated && !s.noPrealloc {
		need := alignUp(end - s.allocated)
		grow := max(s.grow, need)
		err := withFd(p.wf, func(fd int) error { return unix.Fallocate(fd, 0, s.allocated, grow) })
		if errors.Is(err, unix.ENOSPC) && grow > need {
			// Too little room for a whole step: just this slot.
			grow = need
			err = withFd(p.wf, func(fd int) error { return unix.Fallocate(fd, 0, s.allocated, grow) })
		}
		switch {
		case err == nil:
			s.allocated += grow
		case errors.Is(err, unix.EOPNOTSUPP):
			s.noPrealloc = true
		default:
			// Most likely a full disk: the slot can't be written either.
			return slot{}, fmt.Errorf("preallocate pack %s: %w", p.path, err)
		}
	}
	s.next = off + size
	p.writing++
	p.live.Add(1)
	return slot{p: p, off: off}, nil
}

// startPack retires the pack being filled and creates a new one; s.mu is
// held.
func (s *packStore) startPack() error {
	for attempt := 0; ; attempt++ {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("pack name: %w", err)
		}
		id := binary.BigEndian.Uint64(b[:])
		if _, taken := s.packs[id]; taken || id == 0 {
			continue
		}
		path := filepath.Join(s.dir, packName(id))
		wf, direct, err := openDirect(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if errors.Is(err, os.ErrExist) && attempt < 3 {
			continue
		}
		if err != nil {
			return fmt.Errorf("create pack: %w", err)
		}
		p := &pack{id: id, path: path, wf: wf, direct: direct}
		p.created.Store(true)
		if old := s.cur; old != nil {
			old.retired = true
			s.closeWriterIfIdle(old)
			s.deleteIfEmpty(old)
		}
		s.packs[id] = p
		s.cur, s.next, s.allocated = p, 0, 0
		return nil
	}
}

// written ends a write of a slot of p (whether it succeeded or not).
func (s *packStore) written(p *pack) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.writing--
	s.closeWriterIfIdle(p)
}

// closeWriterIfIdle closes a retired pack's write fd once no slot is being
// written; s.mu is held.
func (s *packStore) closeWriterIfIdle(p *pack) {
	if p.retired && p.writing == 0 && p.wf != nil {
		p.wf.Close()
		p.wf = nil
	}
}

// free gives a slot of n bytes back: its space is returned to the
// filesystem at once, and its pack is deleted when nothing else lives in
// it. Nobody may read or write the slot any more.
func (s *packStore) free(sl slot, n int64) {
	p := sl.p
	if f, err := p.file(); err == nil && !s.punchRefused() {
		err := withFd(f, func(fd int) error {
			return unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, sl.off, alignUp(n))
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
func (s *packStore) refusePunch() (first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first = !s.noPunch
	s.noPunch = true
	return first
}

func (s *packStore) punchRefused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.noPunch
}

// deleteIfEmpty removes a retired pack with no live slot; s.mu is held.
func (s *packStore) deleteIfEmpty(p *pack) {
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
func (p *pack) closeFiles() {
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

// file is the pack's read fd, opened on first use. A pack named by a
// record but missing on disk fails here, and the chunk is refetched.
func (p *pack) file() (*os.File, error) {
	p.openOnce.Do(func() {
		p.f, p.openErr = os.OpenFile(p.path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	})
	return p.f, p.openErr
}

// directFile is the pack's O_DIRECT read fd, nil where the filesystem
// refuses O_DIRECT.
func (p *pack) directFile() *os.File {
	p.directOnce.Do(func() {
		f, err := os.OpenFile(p.path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_DIRECT, 0)
		if err == nil {
			p.df = f
		}
	})
	return p.df
}

// readDirect reads the n bytes of the slot at off within it into buf, a
// page-aligned buffer of at least alignUp(n) bytes, with O_DIRECT: the
// bytes come from the disk into buf, with no copy in the page cache
// (where the mount's own pages of the file would keep a second one) and
// no readahead of the slots around it. off must be aligned. False where
// the pack can't be read that way (the filesystem refuses O_DIRECT, or
// the pack is missing): the caller reads it buffered, which reports a
// missing pack.
func (sl slot) readDirect(buf []byte, off int64, n int) (bool, error) {
	if !directReadable(buf, off, n) {
		return false, nil
	}
	f := sl.p.directFile()
	if f == nil {
		return false, nil
	}
	// The slot's padding may run past the pack's end.
	return true, readDirectAt(f, buf, sl.off+off, n)
}

// readAt reads len(dst) bytes of the slot at off within it.
func (sl slot) readAt(dst []byte, off int64) error {
	f, err := sl.p.file()
	if err != nil {
		return err
	}
	_, err = f.ReadAt(dst, sl.off+off)
	return err
}

// sync makes the pack's written slots durable, and its directory entry if
// the pack is new.
func (s *packStore) sync(p *pack) bool {
	f, err := p.file()
	if err != nil || withFd(f, unix.Fdatasync) != nil {
		return false
	}
	if p.created.Load() {
		if !syncPath(s.dir, false) {
			return false
		}
		p.created.Store(false)
	}
	return true
}

// close stops the writer and closes every pack's fds; the store is not
// used after it.
func (s *packStore) close() {
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

// withFd runs fn on f's descriptor, holding it open meanwhile: a pack's
// fds may be closed by another goroutine (deleteIfEmpty, close), and a raw
// fd number used after its close could name another file by then. After
// f's close it fails without calling fn.
func withFd(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

func alignUp(n int64) int64 { return (n + directAlign - 1) &^ (directAlign - 1) }
