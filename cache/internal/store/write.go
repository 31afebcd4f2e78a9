package store

import (
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
	"unsafe"

	"github.com/dsmount/dsmount/cache/internal/record"
	"golang.org/x/sys/unix"
)

// How chunk bytes get to disk: a chunk of an object's own file (File.Write)
// or a pack slot (PackStore.Put, through the slot writer), with O_DIRECT
// where the filesystem allows it.
//
// A chunk reaches its reader from memory (the flight, or the staging area),
// and the kernel keeps its own copy in the FUSE file's page cache; copying it
// into the cache file's page cache as well would hold it twice and pay for
// it twice: filling fresh page-cache pages is most of what a buffered write
// costs where the host reclaims the guest's free memory
// (docs/benchmarks-history.md, "cache"). Data written this way is durable
// only after the same syncfs or fdatasync as buffered data: the committer's
// protocol is unchanged.

// Align is the alignment O_DIRECT needs of buffers, offsets and lengths:
// the page size covers every logical block size in use.
const Align = record.SlotAlign

// Write writes p at off, creating the file if need be. A file it creates
// is sized to size at once (sparse until complete) when size > 0: a
// single chunk's write sets the size itself, and a file left short by a
// crash is still right, since only chunks written and recorded are ever
// read. created reports that this call made a new directory entry (even
// if the write then failed): its directory must be synced before any
// chunk of it is recorded, and chunks the caller thought present in it
// were in a file that is gone. Concurrent writers race harmlessly:
// O_CREATE and truncating to the same size are idempotent.
//
// The block-aligned prefix of p is written with O_DIRECT where the
// filesystem allows it, the unaligned tail through the page
// cache, which is the only way to write it.
func (path File) Write(p []byte, off, size int64) (created bool, err error) {
	// One open in the common case of a new file (small objects: every
	// chunk is a first chunk); an existing file costs a second.
	f, direct, err := OpenDirect(string(path), os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	switch {
	case err == nil:
		created = true
		if size > 0 {
			if err := f.Truncate(size); err != nil {
				f.Close()
				return true, err
			}
		}
	case errors.Is(err, os.ErrExist):
		if f, direct, err = OpenDirect(string(path), os.O_RDWR|unix.O_NOFOLLOW, 0); err != nil {
			return false, err
		}
	default:
		return false, err
	}
	err = writeChunk(f, direct, p, off)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return created, err
}

// writeChunk writes p at off to f, whose descriptor has O_DIRECT set when
// direct is true: the aligned prefix goes straight to disk, then O_DIRECT
// is cleared (the descriptor is the caller's alone) and the unaligned tail
// goes through the page cache, which is the only way to write it.
func writeChunk(f *os.File, direct bool, p []byte, off int64) error {
	if direct {
		if n := directLen(p, off); n > 0 {
			if _, err := f.WriteAt(p[:n], off); err != nil {
				return err
			}
			p, off = p[n:], off+int64(n)
		}
		if len(p) == 0 {
			return nil
		}
		if err := clearDirect(f); err != nil {
			return err
		}
	}
	_, err := f.WriteAt(p, off)
	return err
}

func clearDirect(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	err = rc.Control(func(fd uintptr) {
		var flags int
		if flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0); ferr == nil {
			_, ferr = unix.FcntlInt(fd, unix.F_SETFL, flags&^unix.O_DIRECT)
		}
	})
	if err != nil {
		return err
	}
	return ferr
}

// OpenDirect opens path with flags plus O_DIRECT. direct is false when the
// filesystem refuses O_DIRECT (tmpfs before Linux 6.6, some FUSE and network
// filesystems): the file is then open without it.
func OpenDirect(path string, flags int, perm os.FileMode) (f *os.File, direct bool, err error) {
	f, err = os.OpenFile(path, flags|unix.O_DIRECT, perm)
	if errors.Is(err, unix.EINVAL) {
		// Linux refuses O_DIRECT only once it has created the file, so an
		// exclusive create would now fail with EEXIST. The call above
		// proved the name was free (it would have failed with EEXIST
		// first): opening what it created is still ours alone.
		f, err = os.OpenFile(path, flags&^os.O_EXCL, perm)
		return f, false, err
	}
	return f, err == nil, err
}

// directLen is how much of p, written at off, can go out with O_DIRECT: the
// longest block-aligned prefix, or 0 when p or off are unaligned.
func directLen(p []byte, off int64) int {
	n := len(p) &^ (Align - 1)
	if n == 0 || off%Align != 0 || uintptr(unsafe.Pointer(&p[0]))%Align != 0 {
		return 0
	}
	return n
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

// AlignUp rounds n up to Align.
func AlignUp(n int64) int64 { return (n + Align - 1) &^ (Align - 1) }

// Slot writes go through one writer goroutine that gathers whatever writes
// are queued and issues one vectored O_DIRECT write (pwritev) per run of
// contiguous slots: slots are allocated one after another, so concurrent
// stores fill runs. Each O_DIRECT write costs a system call, pinning its
// pages and a request to the device (a VM exit where the disk is virtio),
// which a run pays once.

const (
	maxWriteBatch = 64      // slots per pwritev, well under IOV_MAX
	maxWriteBytes = 8 << 20 // bytes per pwritev
	// writeLinger is how long the writer waits for more slots after the
	// first of a batch while other fetches are in flight (PackStore.
	// inFlight): they will bring more. Nobody reading waits for a write
	// (readers take the bytes from the flight), and warm frees its fetch
	// slot before it, so a write may wait: gathering only what was queued
	// made batches of one or two. A lone fetch's write goes at once.
	writeLinger = 2 * time.Millisecond
)

// packWrite is one slot write waiting for the writer.
type packWrite struct {
	sl   Slot
	data []byte // the Slot's bytes padded to its aligned length
	done chan error
}

// Put stores data in a new slot and returns it once written. data must be
// from the cache's buffer pool (aligned, with room to the slot's aligned
// end), or any buffer on a filesystem without O_DIRECT; its padding is
// zeroed.
func (s *PackStore) Put(data []byte) (Slot, error) {
	sl, err := s.alloc(int64(len(data)))
	if err != nil {
		return Slot{}, err
	}
	n := AlignUp(int64(len(data)))
	direct := sl.Pack.direct && int64(cap(data)) >= n && directLen(data[:n], sl.Off) == int(n)
	if !direct {
		err = s.writeBuffered(sl, data)
	} else {
		full := data[:n]
		clear(full[len(data):])
		w := &packWrite{sl: sl, data: full, done: make(chan error, 1)}
		select {
		case s.writes <- w:
			err = <-w.done
		case <-s.quit:
			err = ErrClosed
		}
	}
	s.written(sl.Pack)
	if err != nil {
		s.Free(sl, int64(len(data)))
		return Slot{}, err
	}
	return sl, nil
}

// writeBuffered writes a slot through the page cache: the filesystem
// refuses O_DIRECT, or data is a buffer not fit for it.
func (s *PackStore) writeBuffered(sl Slot, data []byte) error {
	f, err := sl.Pack.File()
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, sl.Off)
	return err
}

// runWriter is the writer goroutine (owned by the PackStore, stopped by
// close).
func (s *PackStore) runWriter() {
	defer s.wg.Done()
	var batch []*packWrite
	linger := time.NewTimer(writeLinger)
	linger.Stop()
	for {
		select {
		case w := <-s.writes:
			batch = append(batch[:0], w)
		case <-s.quit:
			return
		}
		bytes := len(batch[0].data)
		linger.Reset(writeLinger)
	gather:
		for len(batch) < maxWriteBatch && bytes < maxWriteBytes {
			if s.inFlight == nil || s.inFlight() <= int64(len(batch)) {
				// Nothing else coming soon: take only what is queued.
				select {
				case w := <-s.writes:
					batch = append(batch, w)
					bytes += len(w.data)
					continue
				default:
					break gather
				}
			}
			select {
			case w := <-s.writes:
				batch = append(batch, w)
				bytes += len(w.data)
			case <-linger.C:
				break gather
			case <-s.quit:
				// Close comes after every store has returned: nothing
				// is queued behind this batch.
				break gather
			}
		}
		linger.Stop()
		s.writeBatch(batch)
	}
}

// writeBatch writes a batch as runs of contiguous slots of one pack, one
// pwritev each, and tells every caller how its slot fared.
func (s *PackStore) writeBatch(batch []*packWrite) {
	slices.SortFunc(batch, func(a, b *packWrite) int {
		if a.sl.Pack != b.sl.Pack {
			return cmp.Compare(a.sl.Pack.id, b.sl.Pack.id)
		}
		return cmp.Compare(a.sl.Off, b.sl.Off)
	})
	iov := make([][]byte, 0, len(batch))
	for start := 0; start < len(batch); {
		end := start + 1
		next := batch[start].sl.Off + int64(len(batch[start].data))
		for end < len(batch) && batch[end].sl.Pack == batch[start].sl.Pack && batch[end].sl.Off == next {
			next += int64(len(batch[end].data))
			end++
		}
		run := batch[start:end]
		iov = iov[:0]
		var want int
		for _, w := range run {
			iov = append(iov, w.data)
			want += len(w.data)
		}
		// Writers hold a count on the pack (writing), so its write fd
		// stays open until they are answered.
		p := run[0].sl.Pack
		var n int
		err := withFd(p.wf, func(fd int) (err error) {
			n, err = unix.Pwritev(fd, iov, run[0].sl.Off)
			return err
		})
		switch {
		case err != nil:
			err = fmt.Errorf("write pack %s: %w", p.path, err)
		case n != want:
			err = fmt.Errorf("write pack %s: %d of %d bytes written", p.path, n, want)
		}
		for _, w := range run {
			w.done <- err
		}
		start = end
	}
}

// alloc reserves a slot of n bytes (rounded up to Align) in the pack
// being filled, starting a new pack when it is full. The caller writes it,
// then calls written.
func (s *PackStore) alloc(n int64) (Slot, error) {
	size := AlignUp(n)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.next+size > s.maxSize {
		if err := s.startPack(); err != nil {
			return Slot{}, err
		}
	}
	p, off := s.cur, s.next
	if end := off + size; end > s.allocated && !s.noPrealloc {
		need := AlignUp(end - s.allocated)
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
			return Slot{}, fmt.Errorf("preallocate pack %s: %w", p.path, err)
		}
	}
	s.next = off + size
	p.writing++
	p.live.Add(1)
	return Slot{Pack: p, Off: off}, nil
}

// startPack retires the pack being filled and creates a new one; s.mu is
// held.
func (s *PackStore) startPack() error {
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
		wf, direct, err := OpenDirect(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if errors.Is(err, os.ErrExist) && attempt < 3 {
			continue
		}
		if err != nil {
			return fmt.Errorf("create pack: %w", err)
		}
		p := &Pack{id: id, path: path, wf: wf, direct: direct}
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
func (s *PackStore) written(p *Pack) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.writing--
	s.closeWriterIfIdle(p)
}

// closeWriterIfIdle closes a retired pack's write fd once no slot is being
// written; s.mu is held.
func (s *PackStore) closeWriterIfIdle(p *Pack) {
	if p.retired && p.writing == 0 && p.wf != nil {
		p.wf.Close()
		p.wf = nil
	}
}
